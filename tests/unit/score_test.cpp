// Scores of the tiny campaign (store_test_support.hpp), against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "score/score.hpp"
#include "store_test_support.hpp"

using namespace d2k::score;

namespace {

constexpr double kTol = 1e-9;

const GroupScore& G(const Scores& s, const std::string& m, const std::string& c) {
  auto* g = s.group(m, c);
  if (!g) throw std::runtime_error("no group " + m + " " + c);
  return *g;
}

TEST(ScoreStats, GeomeanRanksSpearman) {
  EXPECT_NEAR(geomean({2, 8}), 4.0, kTol);
  EXPECT_NEAR(geomean({0.5, 2, 1}), 1.0, kTol);
  EXPECT_EQ(geomean({}), 0.0);
  auto r = average_ranks({10, 20, 10, 30});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_DOUBLE_EQ(r[0], 1.5);
  EXPECT_DOUBLE_EQ(r[1], 3.0);
  EXPECT_DOUBLE_EQ(r[2], 1.5);
  EXPECT_DOUBLE_EQ(r[3], 4.0);
  EXPECT_NEAR(*spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, kTol);
  EXPECT_NEAR(*spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, kTol);
  // Monotone but not linear: still 1.
  EXPECT_NEAR(*spearman({1, 2, 3, 4, 5}, {1, 4, 9, 100, 1000}), 1.0, kTol);
  EXPECT_FALSE(spearman({1, 2}, {1, 2}).has_value());
  EXPECT_FALSE(spearman({1, 1, 1}, {1, 2, 3}).has_value());
}

TEST(ScoreConditions, CanonicalNamesAndOrder) {
  EXPECT_EQ(canonical_condition("unguided"), "none");
  EXPECT_EQ(canonical_condition("guided"), "all");
  EXPECT_EQ(canonical_condition("L1,L2,L3"), "all");
  EXPECT_EQ(canonical_condition("l1,l2"), "L1+L2");
  EXPECT_EQ(canonical_condition("L1"), "L1");
  EXPECT_EQ(canonical_condition("weird"), "weird");
  EXPECT_LT(condition_order("none"), condition_order("L1"));
  EXPECT_LT(condition_order("L1+L2"), condition_order("all"));
  EXPECT_EQ(condition_label("none"), "unguided");
  EXPECT_EQ(condition_label("all"), "guided");
}

TEST(ScoreBaseline, Parse) {
  std::string err;
  EXPECT_EQ(parse_baseline("eager", err)->kind, BaselineKind::eager);
  EXPECT_EQ(parse_baseline("compile", err)->kind, BaselineKind::compile);
  auto fc = parse_baseline("first-correct:model-x", err);
  ASSERT_TRUE(fc);
  EXPECT_EQ(fc->kind, BaselineKind::first_correct);
  EXPECT_EQ(fc->model, "model-x");
  EXPECT_FALSE(parse_baseline("first-correct:", err));
  EXPECT_FALSE(parse_baseline("fastest", err));
  EXPECT_NE(err.find("fastest"), std::string::npos);
}

TEST(ScoreTiny, EagerBaselineMatchesHandComputedValues) {
  auto s = compute_scores(d2k::testing::tiny_campaign(), {});
  ASSERT_EQ(s.models, (std::vector<std::string>{"A", "B"}));
  ASSERT_EQ(s.tasks, (std::vector<std::string>{"t1", "t2"}));
  ASSERT_EQ(s.conditions, (std::vector<std::string>{"none", "all"}));
  EXPECT_TRUE(s.warnings.empty());

  // Per task: geomean over the timed workloads of eager / solution.
  const auto& an = G(s, "A", "none");
  EXPECT_NEAR(an.tasks[0].speedup, std::sqrt(2.0 * 3.0), kTol);  // 4/2, 9/3
  EXPECT_NEAR(an.tasks[1].speedup, std::sqrt(1.0 * 2.0), kTol);  // 8/8, 2/1
  EXPECT_NEAR(*an.s_perf, std::pow(12.0, 0.25), kTol);
  EXPECT_NEAR(*an.s_perf, 1.8612097182041991, kTol);
  EXPECT_DOUBLE_EQ(an.correctness, 1.0);
  EXPECT_DOUBLE_EQ(an.fast_p[0], 1.0);  // both > 1
  EXPECT_DOUBLE_EQ(an.fast_p[1], 0.5);  // 2.449 > 1.5, 1.414 is not
  EXPECT_DOUBLE_EQ(an.fast_p[2], 0.5);
  EXPECT_NEAR(*an.geomean_speedup, 1.8612097182041991, kTol);
  EXPECT_NEAR(*an.pct_sol, 20.0, kTol);  // (25 + 15) / 2

  const auto& aa = G(s, "A", "all");
  EXPECT_NEAR(aa.tasks[0].speedup, 6.0, kTol);
  EXPECT_NEAR(aa.tasks[1].speedup, 4.0, kTol);
  EXPECT_NEAR(*aa.s_perf, std::sqrt(24.0), kTol);
  EXPECT_DOUBLE_EQ(aa.fast_p[2], 1.0);

  // B unguided: t1 incorrect scores 0.5 in S_perf; t2 is slower than eager on w0.
  const auto& bn = G(s, "B", "none");
  EXPECT_FALSE(bn.tasks[0].correct);
  EXPECT_DOUBLE_EQ(bn.tasks[0].score, 0.5);
  EXPECT_NEAR(bn.tasks[1].speedup, std::sqrt(0.5), kTol);
  EXPECT_NEAR(*bn.s_perf, std::sqrt(0.5 * std::sqrt(0.5)), kTol);
  EXPECT_NEAR(*bn.s_perf, 0.5946035575013605, kTol);
  EXPECT_DOUBLE_EQ(bn.correctness, 0.5);
  EXPECT_DOUBLE_EQ(bn.fast_p[0], 0.0);
  EXPECT_FALSE(bn.geomean_speedup.has_value());  // not correct everywhere

  const auto& ba = G(s, "B", "all");
  EXPECT_NEAR(*ba.s_perf, 2.2133638394006434, kTol);

  // Correctness pooled over pairs; S_perf averaged over models.
  ASSERT_EQ(s.summary.size(), 2u);
  EXPECT_EQ(s.summary[0].condition, "none");
  EXPECT_EQ(s.summary[0].pairs, 4);
  EXPECT_EQ(s.summary[0].correct, 3);
  EXPECT_DOUBLE_EQ(s.summary[0].correctness, 0.75);
  EXPECT_NEAR(*s.summary[0].s_perf_mean, 1.2279066378527799, kTol);
  EXPECT_NEAR(*s.summary[1].s_perf_mean, 3.5561716624834996, kTol);

  // Table 4: only A is correct on every task in both paired conditions.
  EXPECT_EQ(s.eligible_models, (std::vector<std::string>{"A"}));
  EXPECT_NEAR(*s.summary[0].geomean_speedup_eligible, 1.8612097182041991, kTol);
  EXPECT_NEAR(*s.summary[1].geomean_speedup_eligible, std::sqrt(24.0), kTol);
  // Tasks every model gets right in both conditions: t2 only.
  EXPECT_EQ(s.common_tasks, (std::vector<std::string>{"t2"}));
  EXPECT_NEAR(*an.geomean_speedup_common, std::sqrt(2.0), kTol);
  EXPECT_NEAR(*bn.geomean_speedup_common, std::sqrt(0.5), kTol);
  EXPECT_NEAR(*ba.geomean_speedup_common, std::sqrt(8.0), kTol);

  // Tokens and cost are sums over the group's runs.
  EXPECT_EQ(an.input_tokens, 3000);
  EXPECT_EQ(an.cached_tokens, 900);
  EXPECT_EQ(an.output_tokens, 300);
  EXPECT_NEAR(an.cost_usd, 3.0, kTol);
  EXPECT_NEAR(s.summary[1].cost_usd, 3.0 + 4.0 + 1.25 + 1.5, kTol);
}

TEST(ScoreTiny, JudgeScoresPerLevelAndSpearman) {
  auto s = compute_scores(d2k::testing::tiny_campaign(), {});
  const auto& an = G(s, "A", "none");
  // t2: L2 judged twice (50, 100) -> 75; L3 invalid -> 0.
  EXPECT_NEAR(*an.tasks[1].js_level[1], 75.0, kTol);
  EXPECT_NEAR(*an.tasks[1].js_level[2], 0.0, kTol);
  EXPECT_NEAR(*an.tasks[1].js_impl, 50.0, kTol);
  EXPECT_NEAR(*an.js_level[0], 62.5, kTol);
  EXPECT_NEAR(*an.js_level[1], 50.0, kTol);
  EXPECT_NEAR(*an.js_level[2], 0.0, kTol);
  EXPECT_NEAR(*an.js_impl, 37.5, kTol);
  // Seven judged, correct, timed runs; ranks computed by hand give rho = 22 / sqrt(27 * 28).
  ASSERT_EQ(s.correlations[0].what, "JS_impl");
  EXPECT_EQ(s.correlations[0].n, 7);
  EXPECT_NEAR(*s.correlations[0].rho, 22.0 / std::sqrt(27.0 * 28.0), kTol);
}

TEST(ScoreTiny, CompileBaselineFallsBackToEagerWhereAbsent) {
  auto s = compute_scores(d2k::testing::tiny_campaign(), {BaselineKind::compile, {}});
  const auto& an = G(s, "A", "none");
  EXPECT_EQ(an.tasks[0].baseline_fallbacks, 1);  // t1 w1 has no torch.compile time
  EXPECT_NEAR(an.tasks[0].speedup, std::sqrt(1.0 * 3.0), kTol);  // 2/2, 9/3 (eager)
  EXPECT_NEAR(an.tasks[1].speedup, std::sqrt(0.5 * 1.0), kTol);  // 4/8, 1/1
  EXPECT_NEAR(*an.s_perf, 1.1066819197003217, kTol);
}

TEST(ScoreTiny, FirstCorrectProtocolBaseline) {
  auto s = compute_scores(d2k::testing::tiny_campaign(), {BaselineKind::first_correct, "A"});
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  // Baselines: A's unguided t1 -> seq 1 (seq 0 was incorrect): (2, 3); t2 -> seq 0: (16, 2).
  const auto& an = G(s, "A", "none");
  EXPECT_NEAR(an.tasks[0].speedup, 1.0, kTol);
  EXPECT_NEAR(an.tasks[1].speedup, 2.0, kTol);
  EXPECT_NEAR(*an.s_perf, std::sqrt(2.0), kTol);
  EXPECT_NEAR(*G(s, "A", "all").s_perf, 3.7224194364083982, kTol);
  EXPECT_NEAR(*G(s, "B", "all").s_perf, 1.6817928305074292, kTol);
  EXPECT_EQ(an.tasks[0].baseline_fallbacks, 0);

  auto missing = compute_scores(d2k::testing::tiny_campaign(), {BaselineKind::first_correct, "nobody"});
  ASSERT_FALSE(missing.warnings.empty());
  EXPECT_NE(missing.warnings[0].find("nobody"), std::string::npos);
  // Falls back to eager everywhere: the eager S_perf.
  EXPECT_NEAR(*G(missing, "A", "none").s_perf, 1.8612097182041991, kTol);
}

TEST(ScoreTiny, MissingRunsCountAsIncorrectAndWarn) {
  auto d = d2k::testing::tiny_campaign();
  d.runs.pop_back();  // B t2 all
  auto s = compute_scores(d, {});
  const auto& ba = G(s, "B", "all");
  EXPECT_EQ(ba.pairs, 2);
  EXPECT_EQ(ba.correct, 1);
  EXPECT_FALSE(ba.tasks[1].has_run);
  EXPECT_NEAR(*ba.s_perf, std::sqrt(std::sqrt(3.0) * 0.5), kTol);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("1 (model, task, condition)"), std::string::npos);
}

TEST(ScoreTiny, CorrectButUntimedIsLeftOutOfSperf) {
  auto d = d2k::testing::tiny_campaign();
  // A none t1's final evaluation from a machine without a GPU: passed, no times.
  for (auto& r : d.runs)
    if (r.model == "A" && r.task == "t1" && r.condition == "none")
      for (auto& w : r.submissions.back().evaluation->workloads) w.median_ms.reset();
  auto s = compute_scores(d, {});
  const auto& an = G(s, "A", "none");
  EXPECT_TRUE(an.tasks[0].correct);
  EXPECT_FALSE(an.tasks[0].timed);
  EXPECT_EQ(an.untimed_correct, 1);
  EXPECT_DOUBLE_EQ(an.correctness, 1.0);
  EXPECT_NEAR(*an.s_perf, std::sqrt(2.0), kTol);  // t2 alone
  EXPECT_FALSE(an.geomean_speedup.has_value());
}

TEST(ScoreTiny, JsonCarriesTheFigures) {
  auto j = to_json(compute_scores(d2k::testing::tiny_campaign(), {}));
  EXPECT_EQ(j["baseline"], "eager");
  ASSERT_EQ(j["groups"].size(), 4u);
  EXPECT_EQ(j["groups"][0]["model"], "A");
  EXPECT_EQ(j["groups"][0]["condition"], "none");
  EXPECT_NEAR(j["groups"][0]["s_perf"].get<double>(), 1.8612097182041991, kTol);
  EXPECT_DOUBLE_EQ(j["groups"][0]["fast_p"]["fast_1.5"].get<double>(), 0.5);
  EXPECT_TRUE(j["groups"][2]["tasks"][0]["speedup"].is_null());  // B none t1: incorrect
  EXPECT_EQ(j["correlations"][0]["n"], 7);
}

}  // namespace
