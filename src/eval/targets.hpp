#pragma once
// The suite's targets for an expert solution (issue 8), judged from one evaluation on a GPU: every workload
// passed; the geometric-mean speedup over eager reaches the task's target_speedup; the largest workload reaches
// target_sol of speed-of-light; and whether torch.compile comes within 10% on every workload (then the task's
// guidance adds little beyond fusion and is flagged). Beating the naive kernel needs two evaluations:
// bench/suite_targets.py.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eval/evaluator.hpp"
#include "task/manifest.hpp"

namespace d2k {

struct TargetVerdict {
  bool measured = false;        // timed workloads with timings (a GPU)
  bool all_passed = false;
  double geomean = 0, target_speedup = 0;
  bool speedup_met = false;
  std::string largest;          // the workload with the most bytes (memory-bound) or flops (compute-bound)
  double largest_pct_sol = 0, target_pct_sol = 0;  // 0: no calibration
  bool sol_met = false;
  std::optional<double> vs_compile_geomean;  // torch.compile median / solution median, where it compiled
  bool compile_within_10pct = false;         // on every workload that has a torch.compile time
  bool met() const { return measured && all_passed && speedup_met && sol_met; }
};

TargetVerdict judge_targets(const Task& task, const EvalResult& ev);

// One line per target, "met" or "MISSED", for the end of `d2k eval --solutions expert`.
std::string format_targets(const TargetVerdict& v);

// The expert against the naive kernel, per timed workload the expert passed: naive median / expert median. A
// workload where the naive kernel failed or has no time counts as beaten (and says so).
struct VersusNaive {
  std::vector<std::pair<std::string, std::optional<double>>> ratios;  // workload, naive/expert (nullopt: naive failed)
  bool beats_everywhere = false;
  std::optional<double> geomean;
};
VersusNaive versus_naive(const EvalResult& expert, const EvalResult& naive);
std::string format_versus_naive(const VersusNaive& v);

}  // namespace d2k
