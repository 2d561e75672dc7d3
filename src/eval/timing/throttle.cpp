#include "eval/timing/throttle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace d2k::timing {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

void validate(const ThrottleConfig& cfg) {
  if (!(cfg.min_fraction > 0 && cfg.min_fraction <= 1))
    throw std::invalid_argument(fmt::format("throttle: min_fraction must be in (0, 1], got {}", cfg.min_fraction));
  if (!(cfg.nominal_mhz >= 0 && std::isfinite(cfg.nominal_mhz)))
    throw std::invalid_argument(fmt::format("throttle: nominal_mhz must be finite and >= 0, got {}", cfg.nominal_mhz));
}

double reference_clock_mhz(std::span<const double> clocks_mhz, const ThrottleConfig& cfg) {
  if (cfg.nominal_mhz > 0) return cfg.nominal_mhz;
  double ref = kNaN;
  for (double c : clocks_mhz)
    if (std::isfinite(c) && !(c <= ref)) ref = c;  // !(c <= NaN) takes the first finite clock
  return ref;
}

std::vector<bool> flag_throttled(std::span<const double> clocks_mhz, const ThrottleConfig& cfg) {
  validate(cfg);
  const double threshold = cfg.min_fraction * reference_clock_mhz(clocks_mhz, cfg);
  std::vector<bool> flags(clocks_mhz.size(), false);
  for (std::size_t i = 0; i < clocks_mhz.size(); ++i)
    flags[i] = std::isfinite(clocks_mhz[i]) && clocks_mhz[i] < threshold;
  return flags;
}

ThrottleFilter::ThrottleFilter(const ThrottleConfig& cfg)
    : cfg_(cfg), reference_(cfg.nominal_mhz > 0 ? cfg.nominal_mhz : kNaN), min_kept_mhz_(kInf) {
  validate(cfg_);
}

bool ThrottleFilter::throttled(double mhz) const {
  return std::isfinite(mhz) && mhz < cfg_.min_fraction * reference_;  // false while reference_ is NaN
}

ThrottleFilter::Verdict ThrottleFilter::add(double sample_ms, double clock_mhz) {
  bool raised = false;
  if (cfg_.nominal_mhz <= 0 && std::isfinite(clock_mhz) && !(clock_mhz <= reference_)) {
    reference_ = clock_mhz;
    raised = true;
  }
  const bool keep = !throttled(clock_mhz);
  if (keep) {
    kept_ms_.push_back(sample_ms);
    kept_mhz_.push_back(clock_mhz);
    if (std::isfinite(clock_mhz)) min_kept_mhz_ = std::min(min_kept_mhz_, clock_mhz);
  } else {
    ++discarded_;
  }
  if (!raised || !throttled(min_kept_mhz_)) return keep ? Verdict::kept : Verdict::discarded;

  std::size_t out = 0;
  min_kept_mhz_ = kInf;
  for (std::size_t i = 0; i < kept_ms_.size(); ++i) {
    if (throttled(kept_mhz_[i])) {
      ++discarded_;
      continue;
    }
    kept_ms_[out] = kept_ms_[i];
    kept_mhz_[out] = kept_mhz_[i];
    if (std::isfinite(kept_mhz_[out])) min_kept_mhz_ = std::min(min_kept_mhz_, kept_mhz_[out]);
    ++out;
  }
  kept_ms_.resize(out);
  kept_mhz_.resize(out);
  return Verdict::refiltered;
}

}  // namespace d2k::timing
