#include "eval/timing/stats.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace d2k::timing {
namespace {

TEST(TimingStats, EvenCountByHand) {
  // Sorted: 1 1 2 3 4 5 6 9. Q1 at position 0.25 * 7 = 1.75 -> 1 + 0.75 * (2 - 1); Q3 at 5.25 -> 5 + 0.25.
  // Sum of squared deviations from 3.875 is 52.875, so stddev = sqrt(52.875 / 7).
  const std::vector<double> x{3, 1, 4, 1, 5, 9, 2, 6};
  const Stats s = compute_stats(x);
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 3.875);
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_DOUBLE_EQ(s.q1, 1.75);
  EXPECT_DOUBLE_EQ(s.q3, 5.25);
  EXPECT_DOUBLE_EQ(s.iqr, 3.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 9);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(52.875 / 7));
  EXPECT_NEAR(s.rel_stderr, std::sqrt(52.875 / 7) / std::sqrt(8.0) / 3.875, 1e-15);
  EXPECT_NEAR(s.rel_stderr, 0.25076069788779337, 1e-12);
}

TEST(TimingStats, OddCountByHand) {
  // Sorted: 2 10 21 23 23 38 38. Q1 at 1.5 -> (10 + 21) / 2; median is the 4th; Q3 at 4.5 -> (23 + 38) / 2.
  const std::vector<double> x{10, 2, 38, 23, 38, 23, 21};
  const Stats s = compute_stats(x);
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.mean, 155.0 / 7);
  EXPECT_DOUBLE_EQ(s.median, 23);
  EXPECT_DOUBLE_EQ(s.q1, 15.5);
  EXPECT_DOUBLE_EQ(s.q3, 30.5);
  EXPECT_DOUBLE_EQ(s.iqr, 15);
  EXPECT_NEAR(s.stddev, 13.284434142114991, 1e-12);
  EXPECT_NEAR(s.rel_stderr, 0.22675683256936738, 1e-12);
}

TEST(TimingStats, OrderDoesNotMatter) {
  const Stats a = compute_stats(std::vector<double>{0.5, 0.25, 1.0, 0.75});
  const Stats b = compute_stats(std::vector<double>{1.0, 0.75, 0.5, 0.25});
  EXPECT_DOUBLE_EQ(a.median, b.median);
  EXPECT_DOUBLE_EQ(a.q1, b.q1);
  EXPECT_DOUBLE_EQ(a.stddev, b.stddev);
  EXPECT_DOUBLE_EQ(a.median, 0.625);
}

TEST(TimingStats, EmptyIsAllNaN) {
  const Stats s = compute_stats({});
  EXPECT_EQ(s.count, 0u);
  for (double v : {s.mean, s.median, s.q1, s.q3, s.iqr, s.min, s.max, s.stddev, s.rel_stderr})
    EXPECT_TRUE(std::isnan(v));
}

TEST(TimingStats, OneSampleHasNoSpread) {
  const Stats s = compute_stats(std::vector<double>{0.125});
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 0.125);
  EXPECT_DOUBLE_EQ(s.median, 0.125);
  EXPECT_DOUBLE_EQ(s.q1, 0.125);
  EXPECT_DOUBLE_EQ(s.q3, 0.125);
  EXPECT_DOUBLE_EQ(s.iqr, 0);
  EXPECT_TRUE(std::isnan(s.stddev));
  EXPECT_TRUE(std::isnan(s.rel_stderr));
}

TEST(TimingStats, ConstantSamplesHaveZeroError) {
  const Stats s = compute_stats(std::vector<double>(100, 0.1));
  EXPECT_NEAR(s.stddev, 0, 1e-15);
  EXPECT_NEAR(s.rel_stderr, 0, 1e-13);
  EXPECT_DOUBLE_EQ(s.iqr, 0);
}

TEST(TimingStats, ZeroMeanGivesNaNRelativeError) {
  const Stats s = compute_stats(std::vector<double>{-1, 1});
  EXPECT_DOUBLE_EQ(s.mean, 0);
  EXPECT_TRUE(std::isnan(s.rel_stderr));
}

TEST(TimingStats, NonFiniteSampleThrows) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(compute_stats(std::vector<double>{1, nan, 2}), std::invalid_argument);
  EXPECT_THROW(compute_stats(std::vector<double>{inf}), std::invalid_argument);
}

TEST(TimingStats, QuantileEndpointsAndClamping) {
  const std::vector<double> s{1, 2, 4};
  EXPECT_DOUBLE_EQ(sorted_quantile(s, 0), 1);
  EXPECT_DOUBLE_EQ(sorted_quantile(s, 1), 4);
  EXPECT_DOUBLE_EQ(sorted_quantile(s, 0.75), 3);
  EXPECT_DOUBLE_EQ(sorted_quantile(s, 2), 4);
  EXPECT_TRUE(std::isnan(sorted_quantile({}, 0.5)));
}

}  // namespace
}  // namespace d2k::timing
