#pragma once
// When to stop taking timing samples: stop on noise, not on a fixed count. CPU only.
//
// Rules, checked in this order after every sample:
//   converged  - n >= min_samples, measured GPU time >= min_gpu_time_s and the relative standard error of
//                the mean (stderr / mean) or of the median (robust_rel_stderr, from the IQR, updated at
//                window ends) <= max_rel_stderr.
//   plateau    - the same minimums, and more samples stopped paying off. Judged every plateau_window
//                samples (a window), from the 4th window on, at window k against window j = ceil(k/2):
//                (a) the relative stderr shrank by at most plateau_tolerance per window on average:
//                    rse_k >= rse_j * (1 - plateau_tolerance)^(k - j), and
//                (b) the mean of the last window sits within max(plateau_tolerance * mean,
//                    3 * stddev / sqrt(plateau_window)) of the overall mean: no drift or step in progress
//                    (a kernel whose clock just changed must not stop mid-transition).
//                I.i.d. noise cuts its stderr by sqrt(2) per doubling of n, so (a) holds
//                from n ~ plateau_window * ln 2 / plateau_tolerance (~8900 by default): noisy kernels that
//                would need more samples to converge stop there with the precision they reached, and
//                noise that never gets quieter (heavy tails, slow regime switches) stops much sooner.
//   time_cap   - the caller's elapsed wall time >= max_wall_time_s (no minimums).
//   sample_cap - n >= max_samples (no minimums).
#include <cstddef>
#include <deque>
#include <limits>
#include <string_view>
#include <vector>

namespace d2k::timing {

enum class StopReason { none, converged, plateau, time_cap, sample_cap };

std::string_view stop_reason_name(StopReason r);  // "none", "converged", "plateau", "time_cap", "sample_cap"

struct CriterionConfig {
  double max_rel_stderr = 0.005;
  std::size_t min_samples = 10;
  double min_gpu_time_s = 0.025;  // sum of the samples, before converged/plateau may stop
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
  // The standard error of the median from the IQR (1.2533 * IQR / 1.349 / sqrt(n)) over the median, as of the
  // last window end: rare outliers (a preemption, a late interrupt) leave it alone, where they keep the mean's
  // stderr high forever. Infinity before the first window or when the median is 0.
  double robust_rel_stderr() const { return robust_rse_; }
  const CriterionConfig& config() const { return cfg_; }

 private:
  bool plateaued() const;
  void update_robust();

  CriterionConfig cfg_;
  std::size_t n_ = 0;
  double mean_ = 0, m2_ = 0, sum_ms_ = 0;  // Welford running mean and sum of squared deviations
  double wall_s_ = 0;
  std::deque<double> window_;       // last plateau_window samples
  std::vector<double> rse_marks_;  // rel_stderr at n = plateau_window, 2 * plateau_window, ...
  std::vector<double> all_;         // every sample, for the robust estimate
  double robust_rse_ = std::numeric_limits<double>::infinity();
};

}  // namespace d2k::timing
