#pragma once
// Throttle detection: a sample whose SM clock estimate fell below a fraction of the reference clock
// measured a slowed-down GPU, so the timing loop discards it and counts it. CPU only.
#include <cstddef>
#include <span>
#include <vector>

namespace d2k::timing {

struct ThrottleConfig {
  double min_fraction = 0.9;  // flag clocks below min_fraction * reference
  double nominal_mhz = 0;     // reference clock; 0 = the highest clock observed in the run
};

// Throws std::invalid_argument naming the first bad field.
void validate(const ThrottleConfig& cfg);

// nominal_mhz when set, else the largest finite clock; NaN when there is none.
double reference_clock_mhz(std::span<const double> clocks_mhz, const ThrottleConfig& cfg);

// One flag per clock: true when clock < min_fraction * reference. A non-finite clock (probe off or
// failed) is never flagged: an unknown clock is no evidence of throttling.
std::vector<bool> flag_throttled(std::span<const double> clocks_mhz, const ThrottleConfig& cfg);

// The same rule applied online. With no nominal clock the reference is the running maximum, so a
// higher clock seen later can condemn samples kept earlier (e.g. taken while the GPU was still ramping
// up from idle): add() then drops them and answers `refiltered`, and the caller rebuilds whatever it
// derived from kept_ms().
class ThrottleFilter {
 public:
  enum class Verdict { kept, discarded, refiltered };

  explicit ThrottleFilter(const ThrottleConfig& cfg = {});

  Verdict add(double sample_ms, double clock_mhz);

  const std::vector<double>& kept_ms() const { return kept_ms_; }
  const std::vector<double>& kept_mhz() const { return kept_mhz_; }
  std::size_t discarded() const { return discarded_; }
  double reference_mhz() const { return reference_; }  // NaN until a finite clock was seen

 private:
  bool throttled(double mhz) const;

  ThrottleConfig cfg_;
  double reference_;
  double min_kept_mhz_;  // lowest finite clock among the kept samples, +inf if none
  std::vector<double> kept_ms_, kept_mhz_;
  std::size_t discarded_ = 0;
};

}  // namespace d2k::timing
