#pragma once
// Host copies of tensors exchanged between the supervisor and workers, as files ("D2KT" format):
// 8-byte magic "D2KT\x01\0\0\0", int32 dtype, int32 ndim, int64 shape[ndim], then the contiguous bytes.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace d2k {

struct HostTensor {
  DType dtype = DType::float32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  std::size_t numel() const;
  double at(std::size_t i) const;  // element i as a double (NaN and Inf preserved)
};

// Throws std::runtime_error naming the file and the problem.
HostTensor read_tensor_file(const std::filesystem::path& path, std::size_t max_bytes = std::size_t(64) << 30);
void write_tensor_file(const std::filesystem::path& path, const HostTensor& t);

double bf16_to_double(uint16_t bits);
double fp16_to_double(uint16_t bits);
double fp8_e4m3fn_to_double(uint8_t bits);
double fp8_e5m2_to_double(uint8_t bits);

}  // namespace d2k
