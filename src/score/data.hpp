#pragma once
// What scoring reads: a campaign's runs, their submissions with the evaluations' per-workload figures, and the
// judges' scores. Plain values, filled from the store (store/store.hpp) or by hand in tests; no I/O here.
#include <optional>
#include <string>
#include <vector>

namespace d2k::score {

// One workload of one evaluation, as the evaluator's trace records it (docs/EVALUATOR.md).
struct WorkloadResult {
  std::string workload;
  bool timed = false;
  std::string status;                 // "passed", "incorrect_numerics", ..., "skipped" (no GPU)
  std::optional<double> median_ms;    // the solution's median; absent when not timed
  std::optional<double> eager_ms;     // PyTorch eager baseline median
  std::optional<double> compile_ms;   // torch.compile baseline median (absent when it failed or timed out)
  std::optional<double> pct_sol;      // % of speed-of-light of the solution
};

struct Evaluation {
  std::string status;  // overall: "passed" when every workload passed, else the first failing status
  bool correct = false;
  std::vector<WorkloadResult> workloads;
};

struct Submission {
  int seq = 0;            // order within the run, from 0
  bool final = false;     // the run's final submission (the agent loop's final-submission policy)
  std::optional<Evaluation> evaluation;  // the latest official evaluation of it
};

struct Judgment {
  std::string kind = "impl";  // "impl" (JS_impl, of the final submission) or "design" (JS_design)
  std::string level;          // "L1", "L2", "L3"
  double score = 0;           // 0..100; an invalid judgment was recorded as 0 and flagged
  bool valid = true;
};

struct Run {
  std::string model, task, condition;  // condition as stored; canonical_condition() normalizes it
  int repeat = 0;
  std::string status;  // "finished", "failed", "interrupted", "running", "pending"
  long long input_tokens = 0, cached_tokens = 0, cache_write_tokens = 0, output_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0, wall_s = 0;
  int turns = 0;
  std::vector<Submission> submissions;  // by seq
  std::vector<Judgment> judgments;

  const Submission* final_submission() const {
    for (const auto& s : submissions)
      if (s.final) return &s;
    return nullptr;
  }
};

struct CampaignData {
  std::string name;
  std::vector<Run> runs;
};

}  // namespace d2k::score
