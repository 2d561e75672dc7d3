#include "eval/timing/criterion.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace d2k::timing {

namespace {
// How far (in standard errors of a window mean) the last window may sit from the overall mean and
// still count as "no drift": 3 keeps stationary noise from blocking the plateau (0.3% false alarms).
constexpr double kPlateauMeanZ = 3.0;
// No plateau before this many windows: with fewer samples the stddev estimate is too rough to tell.
constexpr std::size_t kPlateauMinWindows = 4;
}  // namespace

std::string_view stop_reason_name(StopReason r) {
  static constexpr std::array<std::string_view, 5> names{"none", "converged", "plateau", "time_cap",
                                                         "sample_cap"};
  return names.at(static_cast<std::size_t>(r));
}

void validate(const CriterionConfig& c) {
  auto bad = [](const char* field, double v) {
    throw std::invalid_argument(fmt::format("timing criterion: bad {} ({})", field, v));
  };
  if (!(c.max_rel_stderr >= 0)) bad("max_rel_stderr", c.max_rel_stderr);
  if (!(c.min_gpu_time_s >= 0)) bad("min_gpu_time_s", c.min_gpu_time_s);
  if (!(c.max_wall_time_s > 0)) bad("max_wall_time_s", c.max_wall_time_s);
  if (c.plateau_window < 2) bad("plateau_window", static_cast<double>(c.plateau_window));
  if (!(c.plateau_tolerance >= 0 && c.plateau_tolerance < 1)) bad("plateau_tolerance", c.plateau_tolerance);
  if (c.max_samples < 1) bad("max_samples", static_cast<double>(c.max_samples));
}

StopCriterion::StopCriterion(const CriterionConfig& cfg) : cfg_(cfg) { validate(cfg_); }

void StopCriterion::reset() {
  n_ = 0;
  mean_ = m2_ = sum_ms_ = 0;
  window_.clear();
  rse_marks_.clear();
  all_.clear();
  robust_rse_ = std::numeric_limits<double>::infinity();
}

void StopCriterion::add(double sample_ms) {
  if (!std::isfinite(sample_ms) || sample_ms < 0)
    throw std::invalid_argument(fmt::format("timing sample must be finite and >= 0, got {}", sample_ms));
  ++n_;
  sum_ms_ += sample_ms;
  const double delta = sample_ms - mean_;
  mean_ += delta / static_cast<double>(n_);
  m2_ += delta * (sample_ms - mean_);

  window_.push_back(sample_ms);
  if (window_.size() > cfg_.plateau_window) window_.pop_front();
  all_.push_back(sample_ms);
  if (n_ % cfg_.plateau_window == 0) {
    rse_marks_.push_back(rel_stderr());
    update_robust();
  }
}

void StopCriterion::update_robust() {
  std::vector<double> v = all_;
  auto at = [&](double q) {
    auto k = static_cast<std::ptrdiff_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + k, v.end());
    return v[static_cast<std::size_t>(k)];
  };
  const double med = at(0.5), q1 = at(0.25), q3 = at(0.75);
  robust_rse_ = med > 0 ? 1.2533 * ((q3 - q1) / 1.349) / std::sqrt(static_cast<double>(v.size())) / med
                        : std::numeric_limits<double>::infinity();
}

double StopCriterion::rel_stderr() const {
  if (n_ < 2 || mean_ == 0) return std::numeric_limits<double>::infinity();
  const auto n = static_cast<double>(n_);
  return std::sqrt(m2_ / (n - 1)) / std::sqrt(n) / std::abs(mean_);
}

bool StopCriterion::plateaued() const {
  // Judged at window ends, against the mark half the run ago: a span that long averages out the
  // wobble of the stddev estimate, which over a single window is as large as the progress sought.
  const std::size_t k = rse_marks_.size();
  if (k < kPlateauMinWindows) return false;
  const std::size_t j = (k + 1) / 2;
  const double then = rse_marks_[j - 1], now = rse_marks_[k - 1];
  if (!std::isfinite(then) || !std::isfinite(now)) return false;
  if (now < then * std::pow(1 - cfg_.plateau_tolerance, static_cast<double>(k - j))) return false;

  double window_sum = 0;
  for (double x : window_) window_sum += x;
  const double window_mean = window_sum / static_cast<double>(window_.size());
  const double stddev = std::sqrt(m2_ / static_cast<double>(n_ - 1));
  const double allowed = std::max(cfg_.plateau_tolerance * std::abs(mean_),
                                  kPlateauMeanZ * stddev / std::sqrt(static_cast<double>(window_.size())));
  return std::abs(window_mean - mean_) <= allowed;
}

StopReason StopCriterion::reason() const {
  const bool minimums = n_ >= cfg_.min_samples && gpu_time_s() >= cfg_.min_gpu_time_s;
  if (minimums && std::min(rel_stderr(), robust_rse_) <= cfg_.max_rel_stderr) return StopReason::converged;
  if (minimums && plateaued()) return StopReason::plateau;
  if (wall_s_ >= cfg_.max_wall_time_s) return StopReason::time_cap;
  if (n_ >= cfg_.max_samples) return StopReason::sample_cap;
  return StopReason::none;
}

}  // namespace d2k::timing
