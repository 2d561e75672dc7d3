// Benchmark: score and report a stored synthetic campaign (default 5 models x 26 tasks x 4 conditions).
// Prints the time to write the campaign (not part of the target) and, per iteration, the time to open the store,
// load the campaign, score it and render report.md and report.html. Target: under 2 s.
//   d2k_bench_score_report [--models N] [--tasks N] [--conditions N] [--iterations N] [--keep DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "report/report.hpp"
#include "score/score.hpp"
#include "store/store.hpp"
#include "store/synth.hpp"

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
  d2k::store::SynthOptions so;
  int iterations = 5;
  std::string keep;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--models") so.models = v;
    else if (a == "--tasks") so.tasks = v;
    else if (a == "--conditions") so.conditions = v;
    else if (a == "--iterations") iterations = std::max(1, v);
    else if (a == "--keep") keep = argv[i + 1];
    else {
      fmt::print(stderr, "unknown option {}\n", a);
      return 2;
    }
  }
  std::random_device rd;
  fs::path dir = keep.empty() ? fs::temp_directory_path() / fmt::format("d2k-bench-{:08x}", rd()) : fs::path(keep);
  fs::create_directories(dir);
  auto db = dir / "campaign.sqlite";
  fs::remove(db);
  auto t0 = clk::now();
  {
    auto st = d2k::store::Store::open(db);
    d2k::store::synthesize(st, so);
  }
  double write_s = std::chrono::duration<double>(clk::now() - t0).count();
  std::vector<double> times;
  size_t html_bytes = 0, runs = 0;
  for (int it = 0; it < iterations; ++it) {
    auto t = clk::now();
    auto st = d2k::store::Store::open(db, {.create = false});
    auto c = st.resolve_campaign("");
    auto data = st.load(c.id);
    runs = data.runs.size();
    auto scores = d2k::score::compute_scores(data, {});
    d2k::report::ReportInput in{c.name, db.string(), &scores};
    auto md = d2k::report::render_markdown(in);
    auto html = d2k::report::render_html(in);
    std::ofstream(dir / "report.md") << md;
    std::ofstream(dir / "report.html") << html;
    html_bytes = html.size();
    times.push_back(std::chrono::duration<double>(clk::now() - t).count());
  }
  std::sort(times.begin(), times.end());
  fmt::print("campaign: {} models x {} tasks x {} conditions = {} runs (written in {:.2f} s, {:.1f} MB)\n", so.models,
             so.tasks, so.conditions, runs, write_s, static_cast<double>(fs::file_size(db)) / 1e6);
  fmt::print("score + report (open, load, score, render md + html, write): median {:.3f} s, max {:.3f} s over {} "
             "iterations; report.html {} kB\n", times[times.size() / 2], times.back(), times.size(), html_bytes / 1024);
  bool ok = times[times.size() / 2] < 2.0;
  fmt::print("target < 2 s: {}\n", ok ? "met" : "MISSED");
  if (keep.empty()) fs::remove_all(dir);
  return ok ? 0 : 1;
}
