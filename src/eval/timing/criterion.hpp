#pragma once
// When to stop taking timing samples: stop on noise, not on a fixed count. CPU only.
//
// Rules, checked in this order after every sample:
//   converged  - n >= min_samples, measured GPU time >= min_gpu_time_s and the relative standard error of
//                the mean (stderr / mean) <= max_rel_stderr.
//   plateau    - the same minimums, n >= 2 * plateau_window, and more samples stopped paying off:
//                (a) the relative stderr improved by at most plateau_tolerance (a fraction of its value)
//                    over the last plateau_window samples, and
//                (b) the mean of the last window sits within max(plateau_tolerance * mean,
//                    3 * stddev / sqrt(plateau_window)) of the overall mean, i.e. no drift or step in
//                    progress (a kernel whose clock just changed must not stop mid-transition).
//                For i.i.d. noise the stderr shrinks by about window / (2n) per window, so (a) alone holds
//                from n ~ window / (2 * tolerance) (6400 by default): noisy kernels that would need more
//                samples than that to converge stop there, with the precision they reached.
//   time_cap   - the caller's elapsed wall time >= max_wall_time_s (no minimums).
//   sample_cap - n >= max_samples (no minimums).
#include <cstddef>
#include <deque>
#include <string_view>

namespace d2k::timing {

enum class StopReason { none, converged, plateau, time_cap, sample_cap };

std::string_view stop_reason_name(StopReason r);  // "none", "converged", "plateau", "time_cap", "sample_cap"

struct CriterionConfig {
  double max_rel_stderr = 0.005;
  std::size_t min_samples = 10;
  double min_gpu_time_s = 0.1;  // sum of the samples, before converged/plateau may stop
  double max_wall_time_s = 10;
  std::size_t plateau_window = 32;
  double plateau_tolerance = 0.0025;
  std::size_t max_samples = 100000;
};

// Throws std::invalid_argument naming the first bad field.
void validate(const CriterionConfig& cfg);

class StopCriterion {
 public:
  explicit StopCriterion(const CriterionConfig& cfg = {});

  // Adds one sample in milliseconds; throws std::invalid_argument if it is negative or not finite.
  void add(double sample_ms);
  // Elapsed wall time of the whole measurement, seconds since it began.
  void set_wall_time(double elapsed_s) { wall_s_ = elapsed_s; }
  // Forgets every sample (the wall time stays): used when earlier samples are discarded after the fact.
  void reset();

  StopReason reason() const;
  bool done() const { return reason() != StopReason::none; }

  std::size_t count() const { return n_; }
  double mean_ms() const { return mean_; }
  double gpu_time_s() const { return sum_ms_ * 1e-3; }
  double rel_stderr() const;  // infinity while n < 2 or the mean is 0
  const CriterionConfig& config() const { return cfg_; }

 private:
  bool plateaued() const;

  CriterionConfig cfg_;
  std::size_t n_ = 0;
  double mean_ = 0, m2_ = 0, sum_ms_ = 0;  // Welford running mean and sum of squared deviations
  double wall_s_ = 0;
  std::deque<double> window_;       // last plateau_window samples
  std::deque<double> rse_history_;  // rel_stderr after each of the last plateau_window + 1 samples
};

}  // namespace d2k::timing
