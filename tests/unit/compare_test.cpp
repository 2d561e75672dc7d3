#include "eval/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace d2k {
namespace {

HostTensor f32(std::vector<float> v, std::vector<int64_t> shape = {}) {
  HostTensor t;
  t.dtype = DType::float32;
  t.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(v.size())} : shape;
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), v.size() * 4);
  return t;
}

HostTensor f64(std::vector<double> v) {
  HostTensor t;
  t.dtype = DType::float64;
  t.shape = {static_cast<int64_t>(v.size())};
  t.data.resize(v.size() * 8);
  std::memcpy(t.data.data(), v.data(), v.size() * 8);
  return t;
}

OutputSpec spec(double atol, double rtol, double ratio = 1.0) {
  OutputSpec s;
  s.name = "y";
  s.dtype = DType::float32;
  s.tol.atol = atol;
  s.tol.rtol = rtol;
  s.tol.matched_ratio = ratio;
  return s;
}

TEST(Compare, WithinTolerancePasses) {
  auto r = compare_output(spec(1e-3, 1e-3), f32({1.0f, 2.0005f, -3}), f64({1, 2, -3}), {3});
  EXPECT_EQ(r.status, Status::passed) << r.message;
  EXPECT_NEAR(r.max_abs_err, 5e-4, 1e-6);
}

TEST(Compare, OneElementOutsideFails) {
  auto r = compare_output(spec(1e-3, 0), f32({1, 2.1f, 3}), f64({1, 2, 3}), {3});
  EXPECT_EQ(r.status, Status::incorrect_numerics);
  EXPECT_EQ(r.mismatched, 1u);
  EXPECT_NE(r.message.find("first at flat index 1"), std::string::npos) << r.message;
}

TEST(Compare, MatchedRatioToleratesRareOutliers) {
  std::vector<float> got(100, 1.0f);
  got[7] = 5;
  std::vector<double> exp(100, 1.0);
  EXPECT_EQ(compare_output(spec(1e-3, 0, 0.99), f32(got), f64(exp), {100}).status, Status::passed);
  EXPECT_EQ(compare_output(spec(1e-3, 0, 1.0), f32(got), f64(exp), {100}).status, Status::incorrect_numerics);
}

TEST(Compare, NanAndInfNeverPassByAccident) {
  // Even a matched ratio that would forgive one element does not forgive NaN.
  std::vector<float> got(100, 1.0f);
  got[3] = NAN;
  EXPECT_EQ(compare_output(spec(1e9, 1e9, 0.5), f32(got), f64(std::vector<double>(100, 1.0)), {100}).status,
            Status::incorrect_numerics);
  got[3] = INFINITY;
  EXPECT_EQ(compare_output(spec(1e9, 1e9, 0.5), f32(got), f64(std::vector<double>(100, 1.0)), {100}).status,
            Status::incorrect_numerics);
  // Where the reference itself is NaN, only NaN matches.
  EXPECT_EQ(compare_output(spec(1, 1), f32({NAN}), f64({NAN}), {1}).status, Status::passed);
  EXPECT_EQ(compare_output(spec(1, 1), f32({0}), f64({NAN}), {1}).status, Status::incorrect_numerics);
}

TEST(Compare, AtolScalesWithTheOutputNorm) {
  auto s = spec(0, 0);
  s.tol.atol_norm = 1e-2;  // rms(expected) = 100 -> atol 1
  auto r = compare_output(s, f32({100.5f, -100}), f64({100, -100}), {2});
  EXPECT_EQ(r.status, Status::passed) << r.message;
  EXPECT_NEAR(r.atol_used, 1.0, 1e-12);
}

TEST(Compare, ShapeAndDtype) {
  EXPECT_EQ(compare_output(spec(1, 1), f32({1, 2}, {1, 2}), f64({1, 2}), {2}).status, Status::incorrect_shape);
  HostTensor h = f32({1, 2});
  h.dtype = DType::float16;
  h.data.resize(4);
  EXPECT_EQ(compare_output(spec(1, 1), h, f64({1, 2}), {2}).status, Status::incorrect_dtype);
}

}  // namespace
}  // namespace d2k
