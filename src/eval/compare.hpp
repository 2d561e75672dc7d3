#pragma once
// The supervisor's correctness verdict for one output: shape, dtype, then element-wise tolerance.
#include <string>
#include <vector>

#include "core/status.hpp"
#include "eval/tensor_file.hpp"
#include "task/manifest.hpp"

namespace d2k {

struct OutputCheck {
  std::string name;
  Status status = Status::passed;
  std::string message;           // why it failed, naming the first bad element
  std::size_t numel = 0;
  std::size_t mismatched = 0;    // elements outside tolerance (NaN/Inf included)
  std::size_t nonfinite = 0;     // NaN or Inf where the expected value is finite
  double matched_ratio = 1.0;
  double max_abs_err = 0;
  double max_rel_err = 0;
  double atol_used = 0;          // atol plus atol_norm * rms(expected)
};

// `expected` is the high-precision reference; `expected_shape` comes from the manifest.
OutputCheck compare_output(const OutputSpec& spec, const HostTensor& got, const HostTensor& expected,
                           const std::vector<int64_t>& expected_shape);

}  // namespace d2k
