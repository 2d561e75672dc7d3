#pragma once
// Submissions as `d2k mcp` records them (docs/MCP.md): RECORDS/NNN/ holds evaluation.json (the evaluator's
// result) and a copy of the solution file. The built-in loop and external agents write the same layout, and
// the final-submission policy reads it back, so both are scored the same way.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace d2k::agent {

struct SubmissionRecord {
  int number = 0;
  std::filesystem::path dir;
  std::filesystem::path solution;  // the copy of the submitted file
  bool correct = false;            // every workload that ran passed, and at least one ran
  std::optional<double> geomean_ms;  // geometric mean of the solution's median over timed workloads
  int workloads = 0, passed = 0, skipped = 0;
  std::string error;  // non-empty: the record could not be read (counts as incorrect)
  nlohmann::json to_json() const;
};

// Records an evaluation: the next free RECORDS/NNN (created), the solution copied in, evaluation.json written
// atomically. Returns the number. Throws std::runtime_error on I/O failure.
int record_submission(const std::filesystem::path& records, const std::filesystem::path& solution_file,
                      const nlohmann::json& evaluation);

// Every RECORDS/NNN, in number order (none when the folder is missing).
std::vector<SubmissionRecord> list_submissions(const std::filesystem::path& records);

// Which submission counts: the last correct one (`last`, the default) or the fastest correct one (`best`:
// least geometric-mean time; the last correct one when none was timed, e.g. on a CPU machine).
enum class FinalPolicy { last, best };
std::optional<FinalPolicy> parse_final_policy(std::string_view s);
std::string_view final_policy_name(FinalPolicy p);
std::optional<SubmissionRecord> choose_final(const std::vector<SubmissionRecord>& subs, FinalPolicy policy);

// The workspace's solution file (solution.py or solution.cu at the root), if exactly one exists.
std::optional<std::filesystem::path> workspace_solution(const std::filesystem::path& workspace);

// True when `solution` differs from the file submitted last (or nothing was submitted): worth auto-submitting.
bool differs_from_last_submission(const std::filesystem::path& solution, const std::vector<SubmissionRecord>& subs);

}  // namespace d2k::agent
