#include "eval/tensor_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <thread>

#include "core/parallel.hpp"

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

HostTensor read_tensor_file(const std::filesystem::path& path, std::size_t max_bytes, const TensorReadOptions& io) {
  auto fail = [&](std::string_view why) { return std::runtime_error(fmt::format("{}: {}", path.string(), why)); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail("cannot open");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Reads exactly n bytes at off (false at the end of the file).
  auto read_at = [fd](void* dst, std::size_t n, std::size_t off) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t got = ::pread(fd, p, n, static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
      off += static_cast<std::size_t>(got);
    }
    return true;
  };
  char head[16];
  if (!read_at(head, 8, 0) || std::memcmp(head, kMagic, 8) != 0) throw fail("not a D2KT tensor file");
  if (!read_at(head + 8, 8, 8)) throw fail("truncated header");
  int32_t dtype = 0, ndim = 0;
  std::memcpy(&dtype, head + 8, 4);
  std::memcpy(&ndim, head + 12, 4);
  if (dtype < 0 || dtype > static_cast<int32_t>(DType::boolean)) throw fail(fmt::format("unknown dtype code {}", dtype));
  if (ndim < 0 || ndim > kMaxDims) throw fail(fmt::format("ndim {} outside [0, {}]", ndim, kMaxDims));
  HostTensor t;
  t.dtype = static_cast<DType>(dtype);
  t.shape.resize(static_cast<std::size_t>(ndim));
  if (ndim > 0 && !read_at(t.shape.data(), 8 * static_cast<std::size_t>(ndim), 16)) throw fail("truncated shape");
  std::size_t bytes = dtype_size(t.dtype);
  for (auto d : t.shape) {
    if (d < 0 || d > (int64_t(1) << 40)) throw fail(fmt::format("dimension {} out of range", d));
    if (d != 0 && bytes > max_bytes / static_cast<std::size_t>(d)) throw fail("larger than the size limit");
    bytes *= static_cast<std::size_t>(d);
  }
  const std::size_t start = 16 + 8 * static_cast<std::size_t>(ndim);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail("cannot stat");
  if (static_cast<std::size_t>(st.st_size) < start + bytes) throw fail("truncated data");
  if (static_cast<std::size_t>(st.st_size) > start + bytes) throw fail("trailing bytes after the data");
  t.data.resize(bytes);
  // A large file (an output and its float64 expected value: 768 MB per check of a 64 Mi-element workload) is
  // read in chunks on several threads where there are 4 or more (bench: d2k_bench_compare prints both ways).
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> short_read{false};
  for_chunks(bytes, io.chunk_bytes, io.threads ? io.threads : (hw < 4 ? 1u : std::min(8u, hw)),
             [&](std::size_t, std::size_t begin, std::size_t end) {
               if (!short_read && !read_at(t.data.data() + begin, end - begin, start + begin)) short_read = true;
             });
  if (short_read) throw fail("truncated data");
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
