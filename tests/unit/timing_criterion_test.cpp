#include "eval/timing/criterion.hpp"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

namespace d2k::timing {
namespace {

// Deterministic on every platform: std::mt19937_64's output is specified, the standard distributions
// are not, so the transforms are written out here.
class Noise {
 public:
  explicit Noise(std::uint64_t seed) : rng_(seed) {}
  double uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double normal() {
    return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform());
  }
  double lognormal(double sigma) { return std::exp(sigma * normal()); }
  double pareto(double alpha) { return std::pow(uniform(), -1 / alpha); }  // x_min = 1

 private:
  std::mt19937_64 rng_;
};

// Feeds samples until done(), advancing a fake wall clock by `wall_per_sample_s` each time.
template <class Source>
StopReason run(StopCriterion& c, Source&& next, double wall_per_sample_s = 0) {
  double wall = 0;
  for (std::size_t i = 0; i < 10'000'000 && !c.done(); ++i) {
    c.add(next(i));
    wall += wall_per_sample_s;
    c.set_wall_time(wall);
  }
  return c.reason();
}

TEST(TimingCriterion, NameOfEveryReason) {
  EXPECT_EQ(stop_reason_name(StopReason::none), "none");
  EXPECT_EQ(stop_reason_name(StopReason::converged), "converged");
  EXPECT_EQ(stop_reason_name(StopReason::plateau), "plateau");
  EXPECT_EQ(stop_reason_name(StopReason::time_cap), "time_cap");
  EXPECT_EQ(stop_reason_name(StopReason::sample_cap), "sample_cap");
}

TEST(TimingCriterion, QuietKernelStopsOnceMinimumGpuTimeIsReached) {
  // 1 ms +- 2%: the stderr is below 0.5% from a handful of samples, so the 0.025 s of GPU time decides.
  Noise noise(1);
  StopCriterion c;
  EXPECT_EQ(run(c, [&](std::size_t) { return 1.0 + 0.02 * noise.normal(); }), StopReason::converged);
  EXPECT_GE(c.count(), 24u);
  EXPECT_LE(c.count(), 27u);
  EXPECT_GE(c.gpu_time_s(), 0.025);
  EXPECT_LE(c.rel_stderr(), 0.005);
  EXPECT_NEAR(c.mean_ms(), 1.0, 0.02);
}

TEST(TimingCriterion, RareOutliersDoNotKeepAShortKernelRunning) {
  // 6 us +- 1%, and one sample in 100 is a 2 ms preemption: the mean's stderr stays near 3% forever, the
  // median's (from the IQR) is tiny, so the run converges on the robust estimate at the first window ends.
  Noise noise(7);
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  StopCriterion c(cfg);
  EXPECT_EQ(run(c, [&](std::size_t i) { return i % 100 == 3 ? 2.0 : 0.006 * (1.0 + 0.01 * noise.normal()); }),
            StopReason::converged);
  EXPECT_GT(c.rel_stderr(), 0.005);  // the mean alone would not have stopped
  EXPECT_LE(c.robust_rel_stderr(), 0.005);
  EXPECT_LE(c.count(), 200u);
}

TEST(TimingCriterion, NoisyKernelConvergesAfterAboutCvOverThresholdSquaredSamples) {
  // cv 10% needs (0.10 / 0.005)^2 = 400 samples for a 0.5% standard error.
  Noise noise(2);
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  StopCriterion c(cfg);
  EXPECT_EQ(run(c, [&](std::size_t) { return 0.01 * (1.0 + 0.1 * noise.normal()); }), StopReason::converged);
  EXPECT_GE(c.count(), 300u);
  EXPECT_LE(c.count(), 550u);
  EXPECT_LE(c.rel_stderr(), 0.005);
  EXPECT_NEAR(c.mean_ms(), 0.01, 0.0002);
}

TEST(TimingCriterion, ConstantSamplesConvergeAtTheMinimums) {
  CriterionConfig cfg;
  cfg.min_samples = 10;
  cfg.min_gpu_time_s = 0.05;
  StopCriterion c(cfg);
  EXPECT_EQ(run(c, [](std::size_t) { return 1.0; }), StopReason::converged);
  EXPECT_GE(c.count(), 50u);
  EXPECT_LE(c.count(), 51u);

  cfg.min_gpu_time_s = 0;
  StopCriterion few(cfg);
  EXPECT_EQ(run(few, [](std::size_t) { return 1.0; }), StopReason::converged);
  EXPECT_EQ(few.count(), 10u);
}

TEST(TimingCriterion, NeverQuieterNoiseEndsByPlateau) {
  // Pareto(1.5) has infinite variance: outliers keep arriving and the standard error never settles,
  // so the 0.5% threshold is out of reach; the run must still end well before the sample cap.
  Noise noise(3);
  StopCriterion c;
  EXPECT_EQ(run(c, [&](std::size_t) { return 0.005 * noise.pareto(1.5); }, 1e-5), StopReason::plateau);
  EXPECT_GE(c.count(), 128u);  // never before the 4th window
  EXPECT_LE(c.count(), 30000u);
  EXPECT_GT(c.rel_stderr(), 0.005);
}

TEST(TimingCriterion, VeryNoisyKernelStopsByPlateauNotAtTheCaps) {
  // cv ~59% (lognormal, sigma 0.55) would need ~14000 samples to converge; the plateau rule stops it
  // once the stderr shrinks by <= 0.25% per window of 32, around n = 32 * ln 2 / 0.0025 ~ 8900.
  Noise noise(4);
  StopCriterion c;
  EXPECT_EQ(run(c, [&](std::size_t) { return 0.02 * noise.lognormal(0.55); }, 1e-5), StopReason::plateau);
  EXPECT_GE(c.count(), 6000u);
  EXPECT_LE(c.count(), 12000u);
  EXPECT_EQ(c.count() % 32, 0u);  // judged at window ends
  EXPECT_GT(c.rel_stderr(), 0.005);
  EXPECT_LT(c.rel_stderr(), 0.008);
}

TEST(TimingCriterion, DriftBlocksThePlateau) {
  // A steadily rising time (e.g. a clock sliding down) keeps the relative stderr flat near 0.6%, which
  // alone would look like a plateau; the last window's mean stays far from the overall mean, so the run
  // continues to the cap. The same config stops by plateau on stationary noise of similar size.
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  cfg.max_rel_stderr = 0.001;
  cfg.plateau_tolerance = 0.01;  // plateau from ~2200 stationary samples
  cfg.max_samples = 8000;
  Noise noise(5);
  StopCriterion drift(cfg);
  EXPECT_EQ(run(drift, [&](std::size_t i) { return 1.0 + 1e-3 * double(i) + 0.01 * noise.normal(); }),
            StopReason::sample_cap);
  EXPECT_EQ(drift.count(), 8000u);

  StopCriterion flat(cfg);
  EXPECT_EQ(run(flat, [&](std::size_t) { return 1.0 + 0.15 * noise.normal(); }), StopReason::plateau);
  EXPECT_LT(flat.count(), 8000u);
}

TEST(TimingCriterion, StepChangeDoesNotStopInsideTheTransition) {
  // Stationary at 1.0 ms until a plateau is near, then a step to 1.5 ms: the stderr stops improving,
  // but the windows straddling the step must not be taken for a plateau.
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  cfg.max_rel_stderr = 1e-6;
  cfg.plateau_tolerance = 0.01;
  Noise noise(6);
  StopCriterion c(cfg);
  for (int i = 0; i < 1000; ++i) c.add(1.0 + 0.05 * noise.normal());
  ASSERT_EQ(c.reason(), StopReason::none);
  for (std::size_t i = 0; i < cfg.plateau_window; ++i) {
    c.add(1.5 + 0.05 * noise.normal());
    EXPECT_NE(c.reason(), StopReason::plateau) << "after " << i + 1 << " samples past the step";
  }
}

TEST(TimingCriterion, TimeCapIgnoresTheMinimums) {
  CriterionConfig cfg;
  cfg.max_wall_time_s = 1.0;
  cfg.min_gpu_time_s = 1000;  // neither converged nor plateau can happen
  Noise noise(7);
  StopCriterion c(cfg);
  EXPECT_EQ(run(c, [&](std::size_t) { return 1.0 + 0.5 * noise.normal() * 0.1; }, 0.015625), StopReason::time_cap);
  EXPECT_EQ(c.count(), 64u);  // 64 * 1/64 s = 1 s exactly

  cfg.min_samples = 1000;
  StopCriterion early(cfg);
  early.add(1.0);
  early.set_wall_time(2.0);
  EXPECT_EQ(early.reason(), StopReason::time_cap);
}

TEST(TimingCriterion, SampleCap) {
  CriterionConfig cfg;
  cfg.max_samples = 50;
  cfg.min_gpu_time_s = 1000;
  StopCriterion c(cfg);
  EXPECT_EQ(run(c, [](std::size_t i) { return double(i % 7); }), StopReason::sample_cap);
  EXPECT_EQ(c.count(), 50u);
}

TEST(TimingCriterion, NotDoneBeforeMinimumSamples) {
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  cfg.min_samples = 10;
  StopCriterion c(cfg);
  for (int i = 0; i < 9; ++i) c.add(1.0);
  EXPECT_FALSE(c.done());
  c.add(1.0);
  EXPECT_EQ(c.reason(), StopReason::converged);
}

TEST(TimingCriterion, ResetForgetsSamplesButKeepsWallTime) {
  CriterionConfig cfg;
  cfg.min_gpu_time_s = 0;
  cfg.max_wall_time_s = 5;
  StopCriterion c(cfg);
  for (int i = 0; i < 20; ++i) c.add(1.0);
  c.set_wall_time(1.0);
  EXPECT_TRUE(c.done());
  c.reset();
  EXPECT_EQ(c.count(), 0u);
  EXPECT_FALSE(c.done());
  EXPECT_TRUE(std::isinf(c.rel_stderr()));
  c.set_wall_time(5.0);
  EXPECT_EQ(c.reason(), StopReason::time_cap);
}

TEST(TimingCriterion, RejectsBadSamplesAndConfigs) {
  StopCriterion c;
  EXPECT_THROW(c.add(std::nan("")), std::invalid_argument);
  EXPECT_THROW(c.add(-1), std::invalid_argument);
  EXPECT_THROW(c.add(INFINITY), std::invalid_argument);
  EXPECT_EQ(c.count(), 0u);

  CriterionConfig bad;
  bad.plateau_window = 1;
  EXPECT_THROW(StopCriterion{bad}, std::invalid_argument);
  bad = {};
  bad.max_wall_time_s = 0;
  EXPECT_THROW(StopCriterion{bad}, std::invalid_argument);
  bad = {};
  bad.plateau_tolerance = std::nan("");
  EXPECT_THROW(StopCriterion{bad}, std::invalid_argument);
}

}  // namespace
}  // namespace d2k::timing
