#include "task/manifest.hpp"

#include <gtest/gtest.h>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

TEST(Manifest, LoadsTheToyTask) {
  Diagnostics d;
  auto t = load_task(test::base_task(), d);
  ASSERT_TRUE(t) << (d.empty() ? "" : d.items()[0].to_string());
  EXPECT_EQ(t->name, "toy_scale");
  EXPECT_EQ(t->number, 1);
  EXPECT_EQ(t->folder, "001_toy_scale");
  ASSERT_EQ(t->inputs.size(), 1u);
  EXPECT_EQ(t->inputs[0].dtype, DType::float32);
  EXPECT_EQ(t->inputs[0].shape, std::vector<std::string>{"N"});
  ASSERT_EQ(t->outputs.size(), 1u);
  EXPECT_DOUBLE_EQ(t->outputs[0].tol.atol, 1e-6);
  EXPECT_DOUBLE_EQ(t->outputs[0].tol.matched_ratio, 1.0);
  ASSERT_EQ(t->params.size(), 1u);
  EXPECT_DOUBLE_EQ(t->params[0].value, 2.5);
  ASSERT_EQ(t->workloads.size(), 2u);
  EXPECT_TRUE(t->workloads[0].timed);
  EXPECT_EQ(t->workloads[0].axes.at("N"), 1048576);
  ASSERT_EQ(t->correctness.size(), 1u);
  EXPECT_FALSE(t->correctness[0].timed);
  ASSERT_EQ(t->guidance.size(), 2u);
  EXPECT_EQ(t->guidance[1].depends, std::vector<std::string>{"L1"});
  EXPECT_EQ(t->evaluation.seeds, 3);
  EXPECT_EQ(t->vars(t->workloads[0]).at("alpha"), 2.5);
}

TEST(Manifest, ReportsEveryStructuralProblemAtOnce) {
  std::string text = R"(schema = 2
name = 3
summary = "s"
[axes]
N = 4
[[inputs]]
name = "x"
dtype = "complex64"
shape = "N"
[[outputs]]
name = "y"
dtype = "float32"
shape = ["N"]
rtol = 0.1
)";
  Diagnostics d;
  auto t = parse_manifest(text, "t.toml", d);
  EXPECT_FALSE(t);
  std::string all;
  for (const auto& i : d.items()) all += i.to_string() + "\n";
  for (const char* want : {"t.toml:1: schema: unsupported schema 2", "name: must be a string", "category: missing",
                           "axes.N: an axis is declared with its description", "inputs[0].dtype: unknown dtype 'complex64'",
                           "inputs[0].shape: must be an array", "outputs[0].atol: missing", "workloads: missing",
                           "requirements: missing", "performance: missing", "guidance: missing"})
    EXPECT_NE(all.find(want), std::string::npos) << "missing diagnostic: " << want << "\n" << all;
}

TEST(Manifest, MissingFolderIsAnError) {
  Diagnostics d;
  EXPECT_FALSE(load_task("/nonexistent/001_x", d));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d.items()[0].to_string().find("task.toml: missing"), std::string::npos);
}

}  // namespace
}  // namespace d2k
