#include "eval/targets.hpp"

#include <fmt/format.h>

#include <cmath>

namespace d2k {

TargetVerdict judge_targets(const Task& task, const EvalResult& ev) {
  TargetVerdict v;
  v.target_speedup = task.performance.target_speedup;
  v.target_pct_sol = 100.0 * task.performance.target_sol;
  v.all_passed = !ev.traces.empty();
  double work_max = -1, log_compile = 0;
  int n_compile = 0, n_close = 0;
  for (const auto& t : ev.traces) {
    if (!t.skipped.empty() || t.status != Status::passed) {
      v.all_passed = false;
      continue;
    }
    if (!t.timed || !t.timing || t.timing->median_ms <= 0) continue;
    v.measured = true;
    double work = t.bound == "compute" ? t.flops : t.bytes;
    if (work > work_max) {
      work_max = work;
      v.largest = t.workload;
      v.largest_pct_sol = t.pct_speed_of_light();
    }
    if (t.compiled && t.compiled->median_ms > 0) {
      double r = t.compiled->median_ms / t.timing->median_ms;
      log_compile += std::log(r);
      ++n_compile;
      if (r < 1.1) ++n_close;
    }
  }
  v.geomean = geomean_speedup(ev);
  v.speedup_met = v.geomean >= v.target_speedup;
  v.sol_met = v.largest_pct_sol >= v.target_pct_sol;
  if (n_compile) {
    v.vs_compile_geomean = std::exp(log_compile / n_compile);
    v.compile_within_10pct = n_close == n_compile;
  }
  return v;
}

std::string format_targets(const TargetVerdict& v) {
  if (!v.measured) return "targets: not measured (no timed workload passed on a GPU)\n";
  auto mark = [](bool ok) { return ok ? "met" : "MISSED"; };
  std::string o;
  o += fmt::format("targets: every workload passed: {}\n", v.all_passed ? "met" : "MISSED");
  if (v.geomean > 0)
    o += fmt::format("targets: geometric-mean speedup vs eager {:.2f}x (target {:.2f}x): {}\n", v.geomean,
                     v.target_speedup, mark(v.speedup_met));
  else  // still not met, but say why rather than print 0.00x
    o += fmt::format("targets: geometric-mean speedup vs eager not measured (no eager baseline timed; "
                     "--no-baselines?) (target {:.2f}x): MISSED\n",
                     v.target_speedup);
  if (v.largest_pct_sol > 0)
    o += fmt::format("targets: {:.0f}% of speed-of-light on the largest workload, {} (target {:.0f}%): {}\n",
                     v.largest_pct_sol, v.largest, v.target_pct_sol, mark(v.sol_met));
  else
    o += fmt::format("targets: % of speed-of-light on {} unknown (run `d2k calibrate`): MISSED\n", v.largest);
  if (v.vs_compile_geomean)
    o += fmt::format("targets: vs torch.compile {:.2f}x (geometric mean){}\n", *v.vs_compile_geomean,
                     v.compile_within_10pct ? "; FLAG: torch.compile is within 10% on every workload" : "");
  return o;
}

VersusNaive versus_naive(const EvalResult& expert, const EvalResult& naive) {
  VersusNaive v;
  double logsum = 0;
  int n = 0;
  bool all = true;
  for (const auto& e : expert.traces) {
    if (!e.timed || !e.skipped.empty() || e.status != Status::passed || !e.timing || e.timing->median_ms <= 0)
      continue;
    std::optional<double> r;
    for (const auto& t : naive.traces)
      if (t.workload == e.workload && t.skipped.empty() && t.status == Status::passed && t.timing &&
          t.timing->median_ms > 0)
        r = t.timing->median_ms / e.timing->median_ms;
    if (r) {
      logsum += std::log(*r);
      ++n;
      if (*r <= 1.0) all = false;
    }
    v.ratios.emplace_back(e.workload, r);
  }
  v.beats_everywhere = !v.ratios.empty() && all;
  if (n) v.geomean = std::exp(logsum / n);
  return v;
}

std::string format_versus_naive(const VersusNaive& v) {
  if (v.ratios.empty()) return "targets: expert vs naive: no timed workload to compare\n";
  std::string per;
  for (const auto& [w, r] : v.ratios)
    per += fmt::format("{}{} {}", per.empty() ? "" : ", ", w, r ? fmt::format("{:.2f}x", *r) : "naive failed");
  return fmt::format("targets: expert vs naive kernel ({}){}: {}\n", per,
                     v.geomean ? fmt::format(", {:.2f}x geometric mean", *v.geomean) : "",
                     v.beats_everywhere ? "faster on every workload, met" : "not faster on every workload, MISSED");
}

}  // namespace d2k
