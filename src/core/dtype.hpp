#pragma once
// Element types of task tensors and params; the numbering matches include/d2k/solution.h.
#include <cstdint>
#include <optional>
#include <string_view>

namespace d2k {

enum class DType : int32_t {
  float64 = 0,
  float32 = 1,
  float16 = 2,
  bfloat16 = 3,
  float8_e4m3fn = 4,
  float8_e5m2 = 5,
  int64 = 6,
  int32 = 7,
  int16 = 8,
  int8 = 9,
  uint8 = 10,
  boolean = 11,
};

std::optional<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType t);
std::size_t dtype_size(DType t);
bool dtype_is_float(DType t);
// Types a scalar param may have.
bool dtype_is_param_type(DType t);
// All names, for error messages.
std::string_view dtype_names_list();

}  // namespace d2k
