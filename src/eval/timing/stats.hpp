#pragma once
// Summary statistics over timing samples (milliseconds). CPU only.
#include <cstddef>
#include <span>

namespace d2k::timing {

struct Stats {
  std::size_t count = 0;
  double mean = 0, median = 0;
  double q1 = 0, q3 = 0, iqr = 0;  // quartiles by linear interpolation between order statistics
  double min = 0, max = 0;
  double stddev = 0;      // sample standard deviation (n - 1)
  double rel_stderr = 0;  // (stddev / sqrt(n)) / |mean|
};

// Empty input: count 0 and every other field NaN. One sample: stddev and rel_stderr NaN (undefined),
// the rest equal to the sample. A mean of 0 gives rel_stderr NaN.
// Precondition: every sample is finite. Callers reject NaN/Inf before storing a sample; a non-finite
// sample here throws std::invalid_argument rather than poisoning every statistic.
Stats compute_stats(std::span<const double> samples);

// Quantile p in [0, 1] of an ascending sorted range, interpolating linearly between order statistics
// (numpy's default, Hyndman-Fan type 7). NaN for an empty range.
double sorted_quantile(std::span<const double> sorted, double p);

}  // namespace d2k::timing
