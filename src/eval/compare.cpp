#include "eval/compare.hpp"

#include <fmt/format.h>

#include <cmath>

namespace d2k {

OutputCheck compare_output(const OutputSpec& spec, const HostTensor& got, const HostTensor& expected,
                           const std::vector<int64_t>& expected_shape) {
  OutputCheck r;
  r.name = spec.name;
  if (got.shape != expected_shape) {
    r.status = Status::incorrect_shape;
    r.message = fmt::format("{}: shape [{}], expected [{}]", spec.name, fmt::join(got.shape, ", "), fmt::join(expected_shape, ", "));
    return r;
  }
  if (got.dtype != spec.dtype) {
    r.status = Status::incorrect_dtype;
    r.message = fmt::format("{}: dtype {}, expected {}", spec.name, dtype_name(got.dtype), dtype_name(spec.dtype));
    return r;
  }
  if (expected.numel() != got.numel()) {
    r.status = Status::incorrect_shape;
    r.message = fmt::format("{}: the reference produced {} elements, the manifest says {}", spec.name, expected.numel(), got.numel());
    return r;
  }
  r.numel = got.numel();
  double sumsq = 0;
  for (std::size_t i = 0; i < r.numel; ++i) {
    double e = expected.at(i);
    if (std::isfinite(e)) sumsq += e * e;
  }
  double rms = r.numel ? std::sqrt(sumsq / static_cast<double>(r.numel)) : 0;
  r.atol_used = spec.tol.atol + spec.tol.atol_norm * rms;
  std::size_t first_bad = r.numel;
  for (std::size_t i = 0; i < r.numel; ++i) {
    double g = got.at(i), e = expected.at(i);
    bool ok;
    if (std::isnan(e)) {
      ok = std::isnan(g);  // the reference says NaN: only NaN matches
    } else if (std::isinf(e)) {
      ok = g == e;
    } else if (!std::isfinite(g)) {
      ok = false;
      ++r.nonfinite;
    } else {
      double abs_err = std::fabs(g - e);
      double rel_err = abs_err / std::max(std::fabs(e), 1e-30);
      r.max_abs_err = std::max(r.max_abs_err, abs_err);
      if (std::fabs(e) > r.atol_used) r.max_rel_err = std::max(r.max_rel_err, rel_err);
      ok = abs_err <= r.atol_used + spec.tol.rtol * std::fabs(e);  // NaN comparisons are false: never pass
    }
    if (!ok) {
      ++r.mismatched;
      if (first_bad == r.numel) first_bad = i;
    }
  }
  if (r.nonfinite > 0) r.max_abs_err = std::numeric_limits<double>::infinity();
  r.matched_ratio = r.numel ? 1.0 - static_cast<double>(r.mismatched) / static_cast<double>(r.numel) : 1.0;
  if (r.mismatched > 0 && (r.matched_ratio < spec.tol.matched_ratio || r.nonfinite > 0)) {
    r.status = Status::incorrect_numerics;
    r.message = fmt::format("{}: {} of {} elements outside tolerance (matched {:.6f} < {}){}; first at flat index {}: got {}, expected {}",
                            spec.name, r.mismatched, r.numel, r.matched_ratio, spec.tol.matched_ratio,
                            r.nonfinite ? fmt::format(", {} NaN/Inf", r.nonfinite) : "", first_bad,
                            got.at(first_bad), expected.at(first_bad));
  }
  return r;
}

}  // namespace d2k
