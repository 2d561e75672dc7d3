#include "agent/loop/submissions.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "core/files.hpp"

namespace d2k::agent {

namespace fs = std::filesystem;
using nlohmann::json;

json SubmissionRecord::to_json() const {
  json j{{"number", number},          {"dir", dir.string()},    {"solution", solution.string()},
         {"correct", correct},        {"workloads", workloads}, {"passed", passed},
         {"skipped", skipped},        {"geomean_ms", geomean_ms ? json(*geomean_ms) : json(nullptr)}};
  if (!error.empty()) j["error"] = error;
  return j;
}

int record_submission(const fs::path& records, const fs::path& solution_file, const json& evaluation) {
  fs::create_directories(records);
  // create_directory is the claim: two writers never get the same number.
  for (int n = 1; n < 100000; ++n) {
    fs::path dir = records / fmt::format("{:03}", n);
    if (fs::exists(dir)) continue;
    if (!fs::create_directory(dir)) continue;
    fs::copy_file(solution_file, dir / solution_file.filename());
    write_file_atomic(dir / "evaluation.json", evaluation.dump(2));
    return n;
  }
  throw std::runtime_error("no free submission number under " + records.string());
}

namespace {

SubmissionRecord read_record(const fs::path& dir, int number) {
  SubmissionRecord r;
  r.number = number;
  r.dir = dir;
  for (const char* name : {"solution.py", "solution.cu"})
    if (fs::exists(dir / name)) r.solution = dir / name;
  auto text = read_file(dir / "evaluation.json");
  if (!text) {
    r.error = "no evaluation.json";
    return r;
  }
  auto j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("traces") || !j["traces"].is_array()) {
    r.error = "evaluation.json is not an evaluation";
    return r;
  }
  double logsum = 0;
  int timed = 0;
  bool all_passed = true;
  for (const auto& t : j["traces"]) {
    ++r.workloads;
    if (t.value("skipped", std::string()).size() > 0) {
      ++r.skipped;
      continue;
    }
    bool ok = t.value("status", json()).is_string() && t["status"] == "passed";
    if (!ok) {
      all_passed = false;
      continue;
    }
    ++r.passed;
    if (t.value("timed", false)) {
      const json* perf = t.contains("performance") ? &t["performance"] : nullptr;
      if (perf && perf->contains("solution")) {
        double ms = (*perf)["solution"].value("median_ms", 0.0);
        if (ms > 0) {
          logsum += std::log(ms);
          ++timed;
        }
      }
    }
  }
  r.correct = all_passed && r.passed > 0;
  if (r.correct && timed > 0) r.geomean_ms = std::exp(logsum / timed);
  return r;
}

}  // namespace

std::vector<SubmissionRecord> list_submissions(const fs::path& records) {
  std::vector<SubmissionRecord> out;
  std::error_code ec;
  if (!fs::is_directory(records, ec)) return out;
  for (const auto& e : fs::directory_iterator(records, ec)) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(read_record(e.path(), std::stoi(name)));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  return out;
}

std::optional<FinalPolicy> parse_final_policy(std::string_view s) {
  if (s == "last") return FinalPolicy::last;
  if (s == "best") return FinalPolicy::best;
  return std::nullopt;
}

std::string_view final_policy_name(FinalPolicy p) { return p == FinalPolicy::best ? "best" : "last"; }

std::optional<SubmissionRecord> choose_final(const std::vector<SubmissionRecord>& subs, FinalPolicy policy) {
  std::optional<SubmissionRecord> last, best;
  for (const auto& s : subs) {
    if (!s.correct) continue;
    last = s;
    // Ties keep the earlier one: a resubmission of the same code is no improvement.
    if (s.geomean_ms && (!best || !best->geomean_ms || *s.geomean_ms < *best->geomean_ms)) best = s;
  }
  if (policy == FinalPolicy::best && best) return best;
  return last;
}

std::optional<fs::path> workspace_solution(const fs::path& workspace) {
  std::optional<fs::path> found;
  for (const char* name : {"solution.py", "solution.cu"}) {
    if (fs::is_regular_file(workspace / name)) {
      if (found) return std::nullopt;
      found = workspace / name;
    }
  }
  return found;
}

bool differs_from_last_submission(const fs::path& solution, const std::vector<SubmissionRecord>& subs) {
  if (subs.empty() || subs.back().solution.empty()) return true;
  if (subs.back().solution.filename() != solution.filename()) return true;
  auto a = read_file(solution), b = read_file(subs.back().solution);
  return !a || !b || *a != *b;
}

}  // namespace d2k::agent
