// The suite's targets (issue 8) read from task.toml and judged from an evaluation: every workload passed, the
// geometric-mean speedup over eager, % of speed-of-light on the largest workload, the torch.compile flag.
#include "eval/targets.hpp"

#include <gtest/gtest.h>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

TEST(Targets, ReadFromTheManifestWithDefaults) {
  Diagnostics d;
  auto toy = load_task(test::base_task(), d);
  ASSERT_TRUE(toy);
  EXPECT_DOUBLE_EQ(toy->performance.target_speedup, 3.0);
  EXPECT_DOUBLE_EQ(toy->performance.target_sol, 0.4);
  auto muon = load_task(fs::path(D2K_TASKS_DIR) / "008_muon_newton_schulz", d);
  ASSERT_TRUE(muon) << (d.empty() ? "" : d.items()[0].to_string());
  EXPECT_DOUBLE_EQ(muon->performance.target_speedup, 1.3);

  test::TempDir tmp;
  auto dir = tmp.path() / "001_toy_scale";
  fs::copy(test::base_task(), dir, fs::copy_options::recursive);
  auto text = *read_file(dir / "task.toml");
  auto at = text.find("[performance]\n");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 14, "target_speedup = -1\ntarget_sol = 1.5\n");
  write_file_atomic(dir / "task.toml", text);
  Diagnostics bad;
  EXPECT_FALSE(load_task(dir, bad));
  std::string all;
  for (const auto& i : bad.items()) all += i.to_string() + "\n";
  EXPECT_NE(all.find("target_speedup"), std::string::npos) << all;
  EXPECT_NE(all.find("target_sol"), std::string::npos) << all;
}

WorkloadTrace timed(const std::string& name, double ms, double eager_ms, std::optional<double> compiled_ms,
                    double bytes) {
  WorkloadTrace t;
  t.workload = name;
  t.timed = true;
  t.timing = Timing{};
  t.timing->median_ms = ms;
  t.eager = Timing{};
  t.eager->median_ms = eager_ms;
  if (compiled_ms) {
    t.compiled = Timing{};
    t.compiled->median_ms = *compiled_ms;
  }
  t.bytes = bytes;
  t.bound = "memory";
  t.ceiling = 4000;  // GB/s
  return t;
}

TEST(Targets, JudgedFromTheTraces) {
  Task task;
  task.performance.target_speedup = 3.0;
  task.performance.target_sol = 0.4;
  EvalResult ev;
  // 4x and 9x over eager: geomean 6x. Largest workload: 2e9 bytes in 1 ms = 2000 GB/s = 50% of 4000.
  ev.traces.push_back(timed("small", 0.1, 0.4, 0.3, 1e8));
  ev.traces.push_back(timed("large", 1.0, 9.0, 1.05, 2e9));
  WorkloadTrace ragged;
  ragged.workload = "ragged";
  ev.traces.push_back(ragged);
  auto v = judge_targets(task, ev);
  EXPECT_TRUE(v.measured);
  EXPECT_TRUE(v.all_passed);
  EXPECT_NEAR(v.geomean, 6.0, 1e-9);
  EXPECT_TRUE(v.speedup_met);
  EXPECT_EQ(v.largest, "large");
  EXPECT_NEAR(v.largest_pct_sol, 50.0, 1e-9);
  EXPECT_TRUE(v.sol_met);
  ASSERT_TRUE(v.vs_compile_geomean);
  EXPECT_NEAR(*v.vs_compile_geomean, std::sqrt(3.0 * 1.05), 1e-9);
  EXPECT_FALSE(v.compile_within_10pct);  // 3x on the small one
  EXPECT_TRUE(v.met());
  auto text = format_targets(v);
  EXPECT_NE(text.find("6.00x (target 3.00x): met"), std::string::npos) << text;
  EXPECT_NE(text.find("50% of speed-of-light on the largest workload, large (target 40%): met"), std::string::npos)
      << text;

  // torch.compile within 10% everywhere: flagged. A failed workload: not met. Slower than the target: MISSED.
  ev.traces[0].compiled->median_ms = 0.105;
  ev.traces[2].status = Status::incorrect_numerics;
  task.performance.target_speedup = 7.0;
  v = judge_targets(task, ev);
  EXPECT_TRUE(v.compile_within_10pct);
  EXPECT_FALSE(v.all_passed);
  EXPECT_FALSE(v.speedup_met);
  EXPECT_FALSE(v.met());
  text = format_targets(v);
  EXPECT_NE(text.find("FLAG: torch.compile is within 10%"), std::string::npos) << text;
  EXPECT_NE(text.find("every workload passed: MISSED"), std::string::npos) << text;

  for (auto& t : ev.traces) t.eager.reset();  // --no-baselines: no speedup to print, and not met
  v = judge_targets(task, ev);
  EXPECT_FALSE(v.speedup_met);
  text = format_targets(v);
  EXPECT_NE(text.find("speedup vs eager not measured (no eager baseline timed"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.00x"), std::string::npos) << text;

  EvalResult cpu;  // no timings: nothing to judge
  cpu.traces.push_back(ragged);
  EXPECT_FALSE(judge_targets(task, cpu).measured);
  EXPECT_NE(format_targets(judge_targets(task, cpu)).find("not measured"), std::string::npos);
}

TEST(Targets, ExpertAgainstTheNaiveKernel) {
  EvalResult expert, naive;
  expert.traces.push_back(timed("a", 1.0, 4.0, std::nullopt, 1e9));
  expert.traces.push_back(timed("b", 2.0, 8.0, std::nullopt, 1e9));
  expert.traces.push_back(timed("c", 1.0, 4.0, std::nullopt, 1e9));
  naive.traces.push_back(timed("a", 2.0, 4.0, std::nullopt, 1e9));   // 2x
  naive.traces.push_back(timed("b", 16.0, 8.0, std::nullopt, 1e9));  // 8x
  naive.traces.push_back(timed("c", 1.0, 4.0, std::nullopt, 1e9));   // 1x
  naive.traces[2].status = Status::incorrect_numerics;                // ... but wrong: beaten
  auto v = versus_naive(expert, naive);
  ASSERT_EQ(v.ratios.size(), 3u);
  EXPECT_TRUE(v.beats_everywhere);
  EXPECT_NEAR(*v.geomean, 4.0, 1e-9);
  EXPECT_FALSE(v.ratios[2].second);
  auto text = format_versus_naive(v);
  EXPECT_NE(text.find("a 2.00x, b 8.00x, c naive failed"), std::string::npos) << text;
  EXPECT_NE(text.find("met"), std::string::npos) << text;

  naive.traces[2].status = Status::passed;  // a tie is not a win
  v = versus_naive(expert, naive);
  EXPECT_FALSE(v.beats_everywhere);
  EXPECT_NE(format_versus_naive(v).find("MISSED"), std::string::npos);
}

}  // namespace
}  // namespace d2k
