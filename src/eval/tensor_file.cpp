#include "eval/tensor_file.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace d2k {
namespace {
constexpr char kMagic[8] = {'D', '2', 'K', 'T', 1, 0, 0, 0};
constexpr int32_t kMaxDims = 8;

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

double bf16_to_double(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

double fp16_to_double(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(man, -24);
  else if (exp == 31)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(man + 1024, exp - 25);
  return sign ? -v : v;
}

// e4m3fn: bias 7, no infinities, S.1111.111 is NaN.
double fp8_e4m3fn_to_double(uint8_t b) {
  int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 0x7;
  if (exp == 15 && man == 7) return std::numeric_limits<double>::quiet_NaN();
  double v = exp == 0 ? std::ldexp(man, -9) : std::ldexp(man + 8, exp - 10);
  return sign ? -v : v;
}

// e5m2: bias 15, IEEE-like infinities and NaNs.
double fp8_e5m2_to_double(uint8_t b) {
  int sign = b >> 7, exp = (b >> 2) & 0x1f, man = b & 0x3;
  double v;
  if (exp == 0)
    v = std::ldexp(man, -16);
  else if (exp == 31)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(man + 4, exp - 17);
  return sign ? -v : v;
}

std::size_t HostTensor::numel() const {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

double HostTensor::at(std::size_t i) const {
  const std::byte* p = data.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::float64: return load<double>(p);
    case DType::float32: return load<float>(p);
    case DType::float16: return fp16_to_double(load<uint16_t>(p));
    case DType::bfloat16: return bf16_to_double(load<uint16_t>(p));
    case DType::float8_e4m3fn: return fp8_e4m3fn_to_double(load<uint8_t>(p));
    case DType::float8_e5m2: return fp8_e5m2_to_double(load<uint8_t>(p));
    case DType::int64: return static_cast<double>(load<int64_t>(p));
    case DType::int32: return load<int32_t>(p);
    case DType::int16: return load<int16_t>(p);
    case DType::int8: return load<int8_t>(p);
    case DType::uint8: return load<uint8_t>(p);
    case DType::boolean: return load<uint8_t>(p) ? 1.0 : 0.0;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

HostTensor read_tensor_file(const std::filesystem::path& path, std::size_t max_bytes) {
  auto fail = [&](std::string_view why) { return std::runtime_error(fmt::format("{}: {}", path.string(), why)); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail("cannot open");
  char magic[8];
  int32_t dtype = 0, ndim = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) throw fail("not a D2KT tensor file");
  if (!in.read(reinterpret_cast<char*>(&dtype), 4) || !in.read(reinterpret_cast<char*>(&ndim), 4))
    throw fail("truncated header");
  if (dtype < 0 || dtype > static_cast<int32_t>(DType::boolean)) throw fail(fmt::format("unknown dtype code {}", dtype));
  if (ndim < 0 || ndim > kMaxDims) throw fail(fmt::format("ndim {} outside [0, {}]", ndim, kMaxDims));
  HostTensor t;
  t.dtype = static_cast<DType>(dtype);
  t.shape.resize(static_cast<std::size_t>(ndim));
  if (ndim > 0 && !in.read(reinterpret_cast<char*>(t.shape.data()), 8 * ndim)) throw fail("truncated shape");
  std::size_t bytes = dtype_size(t.dtype);
  for (auto d : t.shape) {
    if (d < 0 || d > (int64_t(1) << 40)) throw fail(fmt::format("dimension {} out of range", d));
    if (d != 0 && bytes > max_bytes / static_cast<std::size_t>(d)) throw fail("larger than the size limit");
    bytes *= static_cast<std::size_t>(d);
  }
  t.data.resize(bytes);
  if (bytes > 0 && !in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(bytes)))
    throw fail("truncated data");
  if (in.peek() != std::char_traits<char>::eof()) throw fail("trailing bytes after the data");
  return t;
}

void write_tensor_file(const std::filesystem::path& path, const HostTensor& t) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
  int32_t dtype = static_cast<int32_t>(t.dtype), ndim = static_cast<int32_t>(t.shape.size());
  out.write(kMagic, 8);
  out.write(reinterpret_cast<const char*>(&dtype), 4);
  out.write(reinterpret_cast<const char*>(&ndim), 4);
  out.write(reinterpret_cast<const char*>(t.shape.data()), 8 * ndim);
  out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}

}  // namespace d2k
