#include "eval/timing/throttle.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace d2k::timing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Verdict = ThrottleFilter::Verdict;

TEST(Throttle, FlagsClocksBelowFractionOfTheHighest) {
  // Reference 1980 MHz, threshold 0.9 * 1980 = 1782.
  const std::vector<double> clocks{1980, 1975, 1700, 1782, 1600, kNaN, 1781.9};
  EXPECT_DOUBLE_EQ(reference_clock_mhz(clocks, {}), 1980);
  const std::vector<bool> want{false, false, true, false, true, false, true};
  EXPECT_EQ(flag_throttled(clocks, {}), want);
}

TEST(Throttle, NominalClockIsTheReferenceWhenGiven) {
  // The whole run sat at 1500 MHz: against itself nothing looks throttled, against a nominal 1980 all does.
  const std::vector<double> clocks{1500, 1510, 1495};
  EXPECT_EQ(flag_throttled(clocks, {}), std::vector<bool>(3, false));
  ThrottleConfig cfg;
  cfg.nominal_mhz = 1980;
  EXPECT_DOUBLE_EQ(reference_clock_mhz(clocks, cfg), 1980);
  EXPECT_EQ(flag_throttled(clocks, cfg), std::vector<bool>(3, true));
  cfg.min_fraction = 0.75;  // threshold 1485
  EXPECT_EQ(flag_throttled(clocks, cfg), std::vector<bool>(3, false));
}

TEST(Throttle, UnknownClocksAreNeverFlagged) {
  const std::vector<double> clocks{kNaN, kNaN};
  EXPECT_TRUE(std::isnan(reference_clock_mhz(clocks, {})));
  EXPECT_EQ(flag_throttled(clocks, {}), std::vector<bool>(2, false));
  EXPECT_TRUE(flag_throttled({}, {}).empty());
}

TEST(Throttle, FilterDropsEarlierSamplesWhenTheClockRampsUp) {
  // A GPU waking from idle: 345 and 800 MHz samples look fine until 1980 MHz shows up.
  ThrottleFilter f;
  EXPECT_EQ(f.add(5.0, 345), Verdict::kept);
  EXPECT_EQ(f.add(2.5, 800), Verdict::refiltered);  // 345 < 720
  EXPECT_EQ(f.kept_ms(), std::vector<double>{2.5});
  EXPECT_EQ(f.add(1.0, 1980), Verdict::refiltered);  // 800 < 1782
  EXPECT_EQ(f.kept_ms(), std::vector<double>{1.0});
  EXPECT_EQ(f.add(1.01, 1970), Verdict::kept);
  EXPECT_EQ(f.add(1.2, 1700), Verdict::discarded);
  EXPECT_EQ(f.add(1.02, kNaN), Verdict::kept);
  EXPECT_EQ(f.add(0.99, 1990), Verdict::kept);  // higher, but condemns nobody (1970 >= 1791)
  EXPECT_EQ(f.kept_ms(), (std::vector<double>{1.0, 1.01, 1.02, 0.99}));
  EXPECT_EQ(f.kept_mhz().size(), 4u);
  EXPECT_EQ(f.discarded(), 3u);
  EXPECT_DOUBLE_EQ(f.reference_mhz(), 1990);
}

TEST(Throttle, FilterWithNominalNeverRefilters) {
  ThrottleConfig cfg;
  cfg.nominal_mhz = 1980;
  ThrottleFilter f(cfg);
  EXPECT_EQ(f.add(1.0, 2100), Verdict::kept);
  EXPECT_EQ(f.add(1.0, 1700), Verdict::discarded);
  EXPECT_EQ(f.add(1.0, 1790), Verdict::kept);
  EXPECT_DOUBLE_EQ(f.reference_mhz(), 1980);
  EXPECT_EQ(f.kept_ms().size(), 2u);
  EXPECT_EQ(f.discarded(), 1u);
}

TEST(Throttle, FilterAgreesWithTheBatchRuleAtTheEnd) {
  const std::vector<double> clocks{1200, 1900, 1850, 1980, 1700, 1960, 1500, 1975};
  ThrottleFilter f;
  for (std::size_t i = 0; i < clocks.size(); ++i) f.add(double(i), clocks[i]);
  const std::vector<bool> flags = flag_throttled(clocks, {});
  std::vector<double> want;
  for (std::size_t i = 0; i < clocks.size(); ++i)
    if (!flags[i]) want.push_back(double(i));
  EXPECT_EQ(f.kept_ms(), want);
  EXPECT_EQ(f.discarded(), clocks.size() - want.size());
}

TEST(Throttle, RejectsBadConfigs) {
  ThrottleConfig cfg;
  cfg.min_fraction = 0;
  EXPECT_THROW(ThrottleFilter{cfg}, std::invalid_argument);
  cfg.min_fraction = 1.5;
  EXPECT_THROW(flag_throttled({}, cfg), std::invalid_argument);
  cfg = {};
  cfg.nominal_mhz = -1;
  EXPECT_THROW(ThrottleFilter{cfg}, std::invalid_argument);
}

}  // namespace
}  // namespace d2k::timing
