#include "eval/tensor_file.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

TEST(TensorFile, RoundTrip) {
  test::TempDir tmp;
  HostTensor t;
  t.dtype = DType::float32;
  t.shape = {2, 3};
  float v[6] = {1, -2, 3.5f, NAN, INFINITY, 0};
  t.data.resize(sizeof v);
  std::memcpy(t.data.data(), v, sizeof v);
  write_tensor_file(tmp.path() / "a.d2kt", t);
  auto r = read_tensor_file(tmp.path() / "a.d2kt");
  EXPECT_EQ(r.dtype, DType::float32);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.at(2), 3.5);
  EXPECT_TRUE(std::isnan(r.at(3)));
  EXPECT_TRUE(std::isinf(r.at(4)));
}

TEST(TensorFile, RejectsMalformedFiles) {
  test::TempDir tmp;
  auto p = tmp.path() / "bad.d2kt";
  write_file_atomic(p, "not a tensor");
  EXPECT_THROW(read_tensor_file(p), std::runtime_error);
  HostTensor t;
  t.shape = {4};
  t.data.resize(16);
  write_tensor_file(p, t);
  auto good = read_file(p).value();
  write_file_atomic(p, good.substr(0, good.size() - 1));
  EXPECT_THROW(read_tensor_file(p), std::runtime_error);  // truncated
  write_file_atomic(p, good + "x");
  EXPECT_THROW(read_tensor_file(p), std::runtime_error);  // trailing bytes
  auto huge = good;
  int64_t dim = int64_t(1) << 39;
  std::memcpy(huge.data() + 16, &dim, 8);
  write_file_atomic(p, huge);
  EXPECT_THROW(read_tensor_file(p, 1 << 20), std::runtime_error);  // over the size limit, not allocated
}

TEST(TensorFile, LowPrecisionDecoding) {
  EXPECT_EQ(bf16_to_double(0x3F80), 1.0);
  EXPECT_EQ(bf16_to_double(0xC040), -3.0);
  EXPECT_EQ(fp16_to_double(0x3C00), 1.0);
  EXPECT_EQ(fp16_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(fp16_to_double(0x7C00)));
  EXPECT_TRUE(std::isnan(fp16_to_double(0x7E00)));
  EXPECT_EQ(fp8_e4m3fn_to_double(0x7E), 448.0);  // the largest e4m3fn value
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_double(0x7F)));
  EXPECT_EQ(fp8_e4m3fn_to_double(0x38), 1.0);
  EXPECT_EQ(fp8_e4m3fn_to_double(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(fp8_e5m2_to_double(0x3C), 1.0);
  EXPECT_EQ(fp8_e5m2_to_double(0x7B), 57344.0);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_double(0x7C)));
}

// Large files are read in chunks on several threads; every chunk lands where it belongs, and a short file is
// refused however the chunks fall.
TEST(TensorFile, ChunkedReadOnThreads) {
  test::TempDir tmp;
  HostTensor t;
  t.dtype = DType::int32;
  t.shape = {10007};
  t.data.resize(4 * 10007);
  for (int32_t i = 0; i < 10007; ++i) std::memcpy(t.data.data() + 4 * i, &i, 4);
  auto p = tmp.path() / "big.d2kt";
  write_tensor_file(p, t);
  for (unsigned threads : {1u, 3u, 8u}) {
    auto r = read_tensor_file(p, std::size_t(1) << 30, {.chunk_bytes = 1000, .threads = threads});
    ASSERT_EQ(r.data.size(), t.data.size());
    EXPECT_EQ(std::memcmp(r.data.data(), t.data.data(), t.data.size()), 0) << threads << " threads";
  }
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 1);
  EXPECT_THROW(read_tensor_file(p, std::size_t(1) << 30, {.chunk_bytes = 1000, .threads = 4}), std::runtime_error);
}

}  // namespace
}  // namespace d2k
