// The static compliance checks of CUDA C++ solutions (src/eval/compliance_cuda.cpp).
//
// Fixtures under tests/fixtures/static/cuda/: bad/<rule>_<n>.cu each start with comment lines
//   // expect: <rule> line <N> [in <file>]   a violation the source check must report (line 0: the whole file)
//   // expect-lib: <rule>                     a violation the library check must report once the fixture is built
//   // forbid: <name>                         added to task 001's forbidden_calls for this fixture
//   // forbid-library: <name>                 added to task 001's forbidden_libraries for this fixture
// and every rule the checks report must be one of the expected ones. good/*.cu (and the cuda_ok fixture and task
// 001's expert solution) must give no violation at all, from either check. lib/*.cu are library-check cases.
// The checks need nvcc (no GPU): without it the tests skip.
#include "eval/compliance_cuda.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/diagnostics.hpp"
#include "core/files.hpp"
#include "eval/cuda_build.hpp"
#include "task/manifest.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

fs::path static_dir() { return test::fixtures() / "static" / "cuda"; }
fs::path include_dir() { return fs::path(D2K_TASKS_DIR).parent_path() / "include"; }
fs::path expert_solution() { return fs::path(D2K_TASKS_DIR) / "001_varlen_segmented_scan" / "expert" / "solution.cu"; }

bool have_nvcc() {
  static const bool ok = std::system("nvcc --version >/dev/null 2>&1") == 0;
  return ok;
}

const Requirements& task_requirements() {
  static const Requirements req = [] {
    Diagnostics d;
    auto t = load_task(fs::path(D2K_TASKS_DIR) / "001_varlen_segmented_scan", d);
    if (!t) throw std::runtime_error("task 001 does not load");
    return t->requirements;
  }();
  return req;
}

struct Expect {
  std::string rule;
  int line = 0;
  std::string file;  // file name; empty: the fixture itself
};

struct Fixture {
  fs::path path;
  std::vector<Expect> source;
  std::vector<std::string> library;
  Requirements req;
};

Fixture read_fixture(const fs::path& p) {
  Fixture f;
  f.path = p;
  f.req = task_requirements();
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line) && line.starts_with("//")) {
    std::istringstream ss(line.substr(2));
    std::string key;
    ss >> key;
    if (key == "expect:") {
      Expect e;
      std::string word;
      ss >> e.rule >> word >> e.line;
      if (ss >> word && word == "in") ss >> e.file;
      f.source.push_back(e);
    } else if (key == "expect-lib:") {
      std::string rule;
      ss >> rule;
      f.library.push_back(rule);
    } else if (key == "forbid:") {
      std::string name;
      ss >> name;
      f.req.forbidden_calls.push_back(name);
    } else if (key == "forbid-library:") {
      std::string name;
      ss >> name;
      f.req.forbidden_libraries.push_back(name);
    }
  }
  return f;
}

std::vector<std::string> list(const std::string& sub) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(static_dir() / sub, ec))
    if (e.path().extension() == ".cu") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::string dump(const std::vector<Violation>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x.to_string();
  return s.empty() ? " (none)" : s;
}

std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string n = fs::path(info.param).stem().string();
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// Builds each source once per test program, into one temporary cache.
class Builds {
 public:
  static CudaBuild build(const fs::path& source) {
    static test::TempDir cache;
    static std::map<std::string, CudaBuild> built;
    auto it = built.find(source.string());
    if (it != built.end()) return it->second;
    CudaBuildOptions o;
    o.cache_dir = cache.path();
    o.include_dir = include_dir();
    auto b = build_cuda_solution(source, o);
    built[source.string()] = b;
    return b;
  }
};

// ------------------------------------------------------------------------------------------------------------
// Source check

class ComplianceCudaBad : public testing::TestWithParam<std::string> {};

TEST_P(ComplianceCudaBad, ReportsTheExpectedRulesAndLines) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  auto f = read_fixture(static_dir() / GetParam());
  if (GetParam().starts_with("bad/")) {
    ASSERT_FALSE(f.source.empty()) << GetParam() << " has no `// expect:` line";
  }
  auto v = check_cuda_source(f.path, f.req, "nvcc", include_dir());
  for (const auto& e : f.source) {
    const std::string file = e.file.empty() ? f.path.filename().string() : e.file;
    bool found = std::any_of(v.begin(), v.end(), [&](const Violation& x) {
      return x.rule == e.rule && x.line == e.line && fs::path(x.file).filename() == file;
    });
    EXPECT_TRUE(found) << "expected " << e.rule << " at " << file << ":" << e.line << "; got:" << dump(v);
  }
  std::set<std::string> rules;
  for (const auto& e : f.source) rules.insert(e.rule);
  for (const auto& x : v) {
    EXPECT_TRUE(rules.count(x.rule)) << "unexpected: " << x.to_string();
    EXPECT_FALSE(x.message.empty());
  }
}

std::vector<std::string> source_cases() {
  std::vector<std::string> v;
  for (const auto& sub : {"bad", "lib"})
    for (const auto& n : list(sub)) v.push_back(std::string(sub) + "/" + n);
  return v;
}

INSTANTIATE_TEST_SUITE_P(ComplianceCudaSource, ComplianceCudaBad, testing::ValuesIn(source_cases()), param_name);

class ComplianceCudaGood : public testing::TestWithParam<std::string> {};

std::vector<std::string> good_sources() {
  std::vector<std::string> v;
  for (const auto& n : list("good")) v.push_back((static_dir() / "good" / n).string());
  v.push_back((test::fixtures() / "solutions" / "cuda_ok" / "solution.cu").string());
  v.push_back(expert_solution().string());
  return v;
}

std::string good_name(const testing::TestParamInfo<std::string>& info) {
  fs::path p(info.param);
  std::string n = p.stem() == "solution" ? p.parent_path().filename().string() : p.stem().string();
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

TEST_P(ComplianceCudaGood, SourceHasNoViolation) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  auto v = check_cuda_source(GetParam(), task_requirements(), "nvcc", include_dir());
  EXPECT_TRUE(v.empty()) << GetParam() << ":" << dump(v);
}

TEST_P(ComplianceCudaGood, BuildsAndLibraryHasNoViolation) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  auto b = Builds::build(GetParam());
  ASSERT_TRUE(b.ok) << b.log;
  CudaSourceFacts facts;  // as the evaluator does: the source check's facts inform the library check
  check_cuda_source(GetParam(), task_requirements(), "nvcc", include_dir(), "sm_90a", &facts);
  auto v = check_cuda_library(b.library, task_requirements(), {}, &facts);
  EXPECT_TRUE(v.empty()) << GetParam() << ":" << dump(v);
}

INSTANTIATE_TEST_SUITE_P(ComplianceCudaSource, ComplianceCudaGood, testing::ValuesIn(good_sources()), good_name);

// nvcc's host stubs of non-inline __device__ functions reference exit(): without the source's facts the library
// check cannot tell them from the solution's own exit, and reports it; with them it does not.
TEST(ComplianceCuda, ExitFromNvccDeviceStubsIsNotTheSolutions) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  const auto src = static_dir() / "good" / "device_helpers.cu";
  auto b = Builds::build(src);
  ASSERT_TRUE(b.ok) << b.log;
  auto blind = check_cuda_library(b.library, task_requirements());
  ASSERT_EQ(blind.size(), 1u) << dump(blind);  // the build does reference exit: the case is real
  EXPECT_EQ(blind[0].rule, "signal");
  CudaSourceFacts facts;
  EXPECT_TRUE(check_cuda_source(src, task_requirements(), "nvcc", include_dir(), "sm_90a", &facts).empty());
  EXPECT_FALSE(facts.names_exit);
  EXPECT_TRUE(check_cuda_library(b.library, task_requirements(), {}, &facts).empty());

  CudaSourceFacts named;
  check_cuda_source(static_dir() / "lib" / "exit_by_pointer.cu", task_requirements(), "nvcc", include_dir(), "sm_90a",
                    &named);
  EXPECT_TRUE(named.names_exit);
}

TEST(ComplianceCuda, ViolationToString) {
  Violation v{"host_sync", "solution.cu", 12, "`cudaDeviceSynchronize`: synchronizes"};
  EXPECT_EQ(v.to_string(), "solution.cu:12: host_sync: `cudaDeviceSynchronize`: synchronizes");
}

TEST(ComplianceCuda, ReportsFilesAsTheCallerSpelledTheFolder) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  test::TempDir tmp;
  fs::create_directories(tmp.path() / "sol");
  write_file_atomic(tmp.path() / "sol" / "solution.cu",
                    "#include \"d2k/solution.h\"\n#include <cstdlib>\n"
                    "__global__ void k(float* y) { y[0] = 1.f; }\n"
                    "extern \"C\" int d2k_solve(const d2k_tensor*, int, d2k_tensor* out, int, const d2k_param*, int,"
                    " d2k_stream s) {\n  k<<<1, 1, 0, (cudaStream_t)s>>>((float*)out[0].data);\n  abort();\n}\n");
  auto v = check_cuda_source(tmp.path() / "sol" / "solution.cu", task_requirements(), "nvcc", include_dir());
  ASSERT_EQ(v.size(), 1u) << dump(v);
  EXPECT_EQ(v[0].file, (tmp.path() / "sol" / "solution.cu").string());
  EXPECT_EQ(v[0].line, 6);
  EXPECT_EQ(v[0].rule, "signal");
}

TEST(ComplianceCuda, UnpreprocessableSourceIsAViolation) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  test::TempDir tmp;
  write_file_atomic(tmp.path() / "solution.cu", "#include \"does_not_exist.h\"\n");
  auto v = check_cuda_source(tmp.path() / "solution.cu", task_requirements(), "nvcc", include_dir());
  ASSERT_EQ(v.size(), 1u) << dump(v);
  EXPECT_EQ(v[0].rule, "preprocess_error");
  EXPECT_NE(v[0].message.find("does_not_exist.h"), std::string::npos) << v[0].message;

  v = check_cuda_source(tmp.path() / "missing.cu", task_requirements(), "nvcc", include_dir());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "preprocess_error");
}

TEST(ComplianceCuda, MissingNvccIsAHarnessError) {
  EXPECT_THROW(check_cuda_source(static_dir() / "good" / "lexing.cu", task_requirements(),
                                 "/nonexistent/bin/nvcc", include_dir()),
               std::runtime_error);
}

// ------------------------------------------------------------------------------------------------------------
// Library check

class ComplianceCudaLibrary : public testing::TestWithParam<std::string> {};

std::vector<std::string> library_cases() {
  std::vector<std::string> v;
  for (const auto& sub : {"bad", "lib"})
    for (const auto& n : list(sub)) {
      auto f = read_fixture(static_dir() / sub / n);
      if (!f.library.empty()) v.push_back((static_dir() / sub / n).string());
    }
  return v;
}

TEST_P(ComplianceCudaLibrary, ReportsTheExpectedRules) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  auto f = read_fixture(GetParam());
  auto b = Builds::build(f.path);
  if (!b.ok) {
    // A source that cannot link (a vendor library's symbols, say) is a compile error; the source check must still
    // name the reason, so the solution fails either way.
    auto v = check_cuda_source(f.path, f.req, "nvcc", include_dir());
    EXPECT_FALSE(v.empty()) << "neither the build nor the source check rejects " << GetParam() << "\n" << b.log;
    return;
  }
  CudaSourceFacts facts;
  check_cuda_source(f.path, f.req, "nvcc", include_dir(), "sm_90a", &facts);
  auto v = check_cuda_library(b.library, f.req, {}, &facts);
  std::set<std::string> want(f.library.begin(), f.library.end());
  for (const auto& rule : want)
    EXPECT_TRUE(std::any_of(v.begin(), v.end(), [&](const Violation& x) { return x.rule == rule; }))
        << "expected " << rule << "; got:" << dump(v);
  for (const auto& x : v) {
    EXPECT_TRUE(want.count(x.rule)) << "unexpected: " << x.to_string();
    EXPECT_EQ(x.file, b.library.string());
    EXPECT_EQ(x.line, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(ComplianceCudaLib, ComplianceCudaLibrary, testing::ValuesIn(library_cases()), good_name);

// Where a task allows CUB's device-wide algorithms (task 005), a solution using them passes both checks.
TEST(ComplianceCuda, CubDeviceWideWhereTheTaskAllowsIt) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  Diagnostics d;
  auto t = load_task(fs::path(D2K_TASKS_DIR) / "005_moe_grouped_swiglu", d);
  ASSERT_TRUE(t);
  auto src = static_dir() / "allowed" / "cub_device_wide.cu";
  auto v = check_cuda_source(src, t->requirements, "nvcc", include_dir());
  EXPECT_TRUE(v.empty()) << dump(v);
  auto b = Builds::build(src.string());
  ASSERT_TRUE(b.ok) << b.log;
  v = check_cuda_library(b.library, t->requirements);
  EXPECT_TRUE(v.empty()) << dump(v);
}

TEST(ComplianceCuda, BuildLinksTheRuntimeDynamically) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  test::TempDir cache;
  CudaBuildOptions o;
  o.cache_dir = cache.path();
  o.include_dir = include_dir();
  auto b = build_cuda_solution(test::fixtures() / "solutions" / "cuda_ok" / "solution.cu", o);
  ASSERT_TRUE(b.ok) << b.log;
  EXPECT_NE(b.command.find("-cudart shared"), std::string::npos) << b.command;
}

TEST(ComplianceCuda, MissingEntryPoint) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  auto b = Builds::build(test::fixtures() / "solutions" / "cuda_no_entry" / "solution.cu");
  ASSERT_TRUE(b.ok) << b.log;
  auto v = check_cuda_library(b.library, task_requirements());
  ASSERT_EQ(v.size(), 1u) << dump(v);
  EXPECT_EQ(v[0].rule, "no_entry");
}

TEST(ComplianceCuda, LinkedVendorLibrary) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on PATH";
  // The build takes no user flags; link cuBLAS by hand to check the needed-library rule.
  test::TempDir tmp;
  auto so = tmp.path() / "linked.so";
  auto src = static_dir() / "bad" / "vendor_library_1.cu";
  std::string cmd = "nvcc -std=c++17 -shared -Xcompiler -fPIC -cudart shared -I'" + include_dir().string() + "' -o '" +
                    so.string() + "' '" + src.string() + "' -lcublas >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "cuBLAS is not installed with this nvcc";
  auto v = check_cuda_library(so, task_requirements());
  bool linked = false, vendor = false;
  for (const auto& x : v) {
    linked = linked || (x.rule == "linked_library" && x.message.find("libcublas") != std::string::npos);
    vendor = vendor || x.rule == "vendor_library";
  }
  EXPECT_TRUE(linked) << dump(v);
  EXPECT_TRUE(vendor) << dump(v);
}

TEST(ComplianceCuda, NotAnElfLibrary) {
  test::TempDir tmp;
  write_file_atomic(tmp.path() / "fake.so", "not an ELF file\n");
  auto v = check_cuda_library(tmp.path() / "fake.so", task_requirements());
  ASSERT_EQ(v.size(), 1u) << dump(v);
  EXPECT_EQ(v[0].rule, "bad_library");
  v = check_cuda_library(tmp.path() / "missing.so", task_requirements());
  ASSERT_EQ(v.size(), 1u) << dump(v);
  EXPECT_EQ(v[0].rule, "bad_library");
}

}  // namespace
}  // namespace d2k
