#include "core/dtype.hpp"

#include <array>


namespace d2k {
namespace {
struct Info {
  DType type;
  std::string_view name;
  std::size_t size;
  bool is_float;
};
constexpr std::array<Info, 12> kInfo{{
    {DType::float64, "float64", 8, true},
    {DType::float32, "float32", 4, true},
    {DType::float16, "float16", 2, true},
    {DType::bfloat16, "bfloat16", 2, true},
    {DType::float8_e4m3fn, "float8_e4m3fn", 1, true},
    {DType::float8_e5m2, "float8_e5m2", 1, true},
    {DType::int64, "int64", 8, false},
    {DType::int32, "int32", 4, false},
    {DType::int16, "int16", 2, false},
    {DType::int8, "int8", 1, false},
    {DType::uint8, "uint8", 1, false},
    {DType::boolean, "bool", 1, false},
}};
const Info& info(DType t) { return kInfo.at(static_cast<std::size_t>(t)); }
}  // namespace

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}
std::string_view dtype_name(DType t) { return info(t).name; }
std::size_t dtype_size(DType t) { return info(t).size; }
bool dtype_is_float(DType t) { return info(t).is_float; }
bool dtype_is_param_type(DType t) {
  return t == DType::float64 || t == DType::float32 || t == DType::int64 || t == DType::int32 ||
         t == DType::boolean;
}
std::string_view dtype_names_list() {
  return "float64 float32 float16 bfloat16 float8_e4m3fn float8_e5m2 int64 int32 int16 int8 uint8 bool";
}

}  // namespace d2k
