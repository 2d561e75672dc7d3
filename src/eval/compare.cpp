#include "eval/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "core/parallel.hpp"

namespace d2k {

namespace {

// Outputs of the large workloads hold hundreds of millions of elements: the verdict runs over fixed chunks on
// several threads (fixed chunks, combined in order, so the result does not depend on the thread count), and
// converts elements to double a block at a time instead of dispatching on the dtype per element.
constexpr std::size_t kChunk = std::size_t(1) << 20;
constexpr std::size_t kBlock = 4096;

void load_doubles(const HostTensor& t, std::size_t begin, std::size_t count, double* out) {
  const std::byte* p = t.data.data();
  switch (t.dtype) {
    case DType::float64: std::memcpy(out, p + begin * 8, count * 8); return;
    case DType::float32:
      for (std::size_t i = 0; i < count; ++i) {
        float f;
        std::memcpy(&f, p + (begin + i) * 4, 4);
        out[i] = f;
      }
      return;
    default:
      for (std::size_t i = 0; i < count; ++i) out[i] = t.at(begin + i);
  }
}

// Runs body(chunk, begin, end) for every chunk of [0, n), on up to 16 threads.
template <class Body>
void for_chunks(std::size_t n, Body body) {
  d2k::for_chunks(n, kChunk, std::min(16u, std::max(1u, std::thread::hardware_concurrency())), body);
}

struct ChunkStats {
  std::size_t mismatched = 0, nonfinite = 0, first_bad = std::numeric_limits<std::size_t>::max();
  double max_abs = 0, max_rel = 0;
};

}  // namespace

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
  const std::size_t chunks = (r.numel + kChunk - 1) / kChunk;

  std::vector<double> sumsq(chunks, 0.0);
  for_chunks(r.numel, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::array<double, kBlock> ev;
    double s = 0;
    for (std::size_t i = b; i < e; i += kBlock) {
      std::size_t m = std::min(kBlock, e - i);
      load_doubles(expected, i, m, ev.data());
      for (std::size_t k = 0; k < m; ++k)
        if (std::isfinite(ev[k])) s += ev[k] * ev[k];
    }
    sumsq[c] = s;
  });
  double total = 0;
  for (double s : sumsq) total += s;
  double rms = r.numel ? std::sqrt(total / static_cast<double>(r.numel)) : 0;
  r.atol_used = spec.tol.atol + spec.tol.atol_norm * rms;

  std::vector<ChunkStats> stats(chunks);
  const double atol = r.atol_used, rtol = spec.tol.rtol;
  for_chunks(r.numel, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::array<double, kBlock> ev, gv;
    ChunkStats st;
    for (std::size_t i = b; i < e; i += kBlock) {
      std::size_t m = std::min(kBlock, e - i);
      load_doubles(expected, i, m, ev.data());
      load_doubles(got, i, m, gv.data());
      for (std::size_t k = 0; k < m; ++k) {
        double g = gv[k], x = ev[k];
        bool ok;
        if (std::isnan(x)) {
          ok = std::isnan(g);  // the reference says NaN: only NaN matches
        } else if (std::isinf(x)) {
          ok = g == x;
        } else if (!std::isfinite(g)) {
          ok = false;
          ++st.nonfinite;
        } else {
          double abs_err = std::fabs(g - x);
          double rel_err = abs_err / std::max(std::fabs(x), 1e-30);
          st.max_abs = std::max(st.max_abs, abs_err);
          if (std::fabs(x) > atol) st.max_rel = std::max(st.max_rel, rel_err);
          ok = abs_err <= atol + rtol * std::fabs(x);  // NaN comparisons are false: never pass
        }
        if (!ok) {
          ++st.mismatched;
          if (st.first_bad == std::numeric_limits<std::size_t>::max()) st.first_bad = i + k;
        }
      }
    }
    stats[c] = st;
  });
  std::size_t first_bad = r.numel;
  for (const auto& st : stats) {
    r.mismatched += st.mismatched;
    r.nonfinite += st.nonfinite;
    r.max_abs_err = std::max(r.max_abs_err, st.max_abs);
    r.max_rel_err = std::max(r.max_rel_err, st.max_rel);
    if (first_bad == r.numel && st.first_bad != std::numeric_limits<std::size_t>::max()) first_bad = st.first_bad;
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
