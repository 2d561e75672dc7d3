#pragma once
// Host copies of tensors exchanged between the supervisor and workers, as files ("D2KT" format):
// 8-byte magic "D2KT\x01\0\0\0", int32 dtype, int32 ndim, int64 shape[ndim], then the contiguous bytes.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"

namespace d2k {

// Leaves new elements uninitialized on resize: a tensor read from a file is overwritten at once, and zeroing
// gigabytes first doubled the time of reading a large output.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct HostTensor {
  DType dtype = DType::float32;
  std::vector<int64_t> shape;
  std::vector<std::byte, UninitAllocator<std::byte>> data;

  std::size_t numel() const;
  double at(std::size_t i) const;  // element i as a double (NaN and Inf preserved)
};

// How the data of a large file is read: in chunks, on up to `threads` threads (below 4 hardware threads, one).
struct TensorReadOptions {
  std::size_t chunk_bytes = std::size_t(64) << 20;
  unsigned threads = 0;  // 0: min(8, hardware threads), and 1 below 4
};

// Throws std::runtime_error naming the file and the problem.
HostTensor read_tensor_file(const std::filesystem::path& path, std::size_t max_bytes = std::size_t(64) << 30,
                            const TensorReadOptions& io = {});
void write_tensor_file(const std::filesystem::path& path, const HostTensor& t);

double bf16_to_double(uint16_t bits);
double fp16_to_double(uint16_t bits);
double fp8_e4m3fn_to_double(uint8_t bits);
double fp8_e5m2_to_double(uint8_t bits);

}  // namespace d2k
