// The validator against the toy task (valid) and each broken fixture (tests/fixtures/broken/<case>/):
// a case's files overlay a copy of the toy task, DELETE lists files to remove, EXPECT the diagnostics.
#include "task/validate.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> broken_cases() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(test::fixtures() / "broken")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Validate, ToyTaskIsValid) {
  Diagnostics d;
  auto t = validate_task(test::base_task(), d);
  ASSERT_TRUE(t);
  for (const auto& i : d.items()) ADD_FAILURE() << i.to_string();
}

TEST(Validate, ToySuiteIsValid) {
  Diagnostics d;
  auto s = load_suite(test::fixtures() / "base", d);
  ASSERT_TRUE(s);
  validate_suite(*s, d);
  EXPECT_TRUE(d.empty());
}

class BrokenTask : public ::testing::TestWithParam<std::string> {};

TEST_P(BrokenTask, FailsWithThePreciseMessage) {
  const auto case_dir = test::fixtures() / "broken" / GetParam();
  test::TempDir tmp;
  const auto dir = tmp.path() / "001_toy_scale";
  fs::copy(test::base_task(), dir, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(case_dir)) {
    auto rel = fs::relative(e.path(), case_dir);
    if (rel == "EXPECT" || rel == "DELETE") continue;
    if (e.is_directory())
      fs::create_directories(dir / rel);
    else
      fs::copy_file(e.path(), dir / rel, fs::copy_options::overwrite_existing);
  }
  for (const auto& f : lines_of(case_dir / "DELETE")) ASSERT_TRUE(fs::remove(dir / f)) << f;
  auto expected = lines_of(case_dir / "EXPECT");
  ASSERT_FALSE(expected.empty()) << "fixture without EXPECT";

  Diagnostics d;
  validate_task(dir, d);
  std::vector<std::string> got;
  for (const auto& i : d.items()) {
    auto s = i.to_string();
    auto prefix = dir.string() + "/";
    if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
    got.push_back(s);
  }
  std::string all;
  for (const auto& g : got) all += "  " + g + "\n";
  for (const auto& want : expected) {
    bool found = std::any_of(got.begin(), got.end(), [&](const auto& g) { return g.find(want) != std::string::npos; });
    EXPECT_TRUE(found) << "expected: " << want << "\ngot:\n" << all;
  }
  EXPECT_EQ(got.size(), expected.size()) << "diagnostics beyond the expected ones:\n" << all;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BrokenTask, ::testing::ValuesIn(broken_cases()),
                         [](const auto& p) { return p.param; });

TEST(Validate, SuiteIndexProblems) {
  test::TempDir tmp;
  fs::create_directories(tmp.path() / "001_a");
  write_file_atomic(tmp.path() / "suite.toml", "version = \"1\"\ntasks = [\"001_a\", \"001_a\", \"002_missing\", \"bad\"]\n");
  Diagnostics d;
  EXPECT_FALSE(load_suite(tmp.path(), d));
  std::string all;
  for (const auto& i : d.items()) all += i.to_string() + "\n";
  EXPECT_NE(all.find("tasks[1]: '001_a' is listed twice"), std::string::npos) << all;
  EXPECT_NE(all.find("tasks[2]: no folder"), std::string::npos) << all;
  EXPECT_NE(all.find("tasks[3]: 'bad' is not a task folder name"), std::string::npos) << all;
}

}  // namespace
}  // namespace d2k
