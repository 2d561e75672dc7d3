#include "eval/timing/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace d2k::timing {

double sorted_quantile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  p = std::clamp(p, 0.0, 1.0);
  const double h = p * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Stats compute_stats(std::span<const double> samples) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  Stats s;
  s.count = samples.size();
  if (samples.empty()) {
    s.mean = s.median = s.q1 = s.q3 = s.iqr = s.min = s.max = s.stddev = s.rel_stderr = nan;
    return s;
  }
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (!std::isfinite(samples[i]))
      throw std::invalid_argument(fmt::format("timing sample {} is not finite ({})", i, samples[i]));

  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = sorted_quantile(sorted, 0.5);
  s.q1 = sorted_quantile(sorted, 0.25);
  s.q3 = sorted_quantile(sorted, 0.75);
  s.iqr = s.q3 - s.q1;

  // Two passes: the samples are close to each other, so sum of squares around the mean keeps precision.
  double sum = 0;
  for (double x : sorted) sum += x;
  const auto n = static_cast<double>(s.count);
  s.mean = sum / n;
  if (s.count < 2) {
    s.stddev = s.rel_stderr = nan;
    return s;
  }
  double ss = 0;
  for (double x : sorted) ss += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(ss / (n - 1));
  s.rel_stderr = s.mean == 0 ? nan : s.stddev / std::sqrt(n) / std::abs(s.mean);
  return s;
}

}  // namespace d2k::timing
