// End-to-end: the real d2k binary on the real suite and on the toy fixtures.
#include <gtest/gtest.h>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

using test::run_d2k;

TEST(Cli, HelpIsPrintedFromTheVerbTable) {
  auto r = run_d2k("help");
  EXPECT_EQ(r.code, 0);
  for (const char* v : {"tasks", "show", "validate"}) EXPECT_NE(r.out.find(std::string("  ") + v), std::string::npos) << r.out;
  EXPECT_EQ(run_d2k("").code, 2);
  auto bad = run_d2k("frobnicate");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("no verb 'frobnicate'"), std::string::npos);
  EXPECT_EQ(run_d2k("show --no-such-flag 1").code, 2);
}

TEST(Cli, VersionNamesTheLibraries) {
  auto r = run_d2k("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("d2k 0."), std::string::npos) << r.out;
}

TEST(Cli, ValidateTheRealSuite) {
  auto r = run_d2k("validate");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("valid"), std::string::npos) << r.out;
}

TEST(Cli, TasksListsTheRealSuite) {
  auto r = run_d2k("tasks");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("001 varlen_segmented_scan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("correctness"), std::string::npos) << r.out;
  auto j = run_d2k("tasks --json");
  EXPECT_EQ(j.code, 0);
  EXPECT_NE(j.out.find("\"suite_version\""), std::string::npos);
}

TEST(Cli, ShowTheRealTaskGuidedAndUnguided) {
  auto plain = run_d2k("show varlen_segmented_scan");
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("Expert guidance"), std::string::npos);
  EXPECT_NE(plain.out.find("cu_seqlens"), std::string::npos);
  auto guided = run_d2k("show 1 --guidance L2");
  ASSERT_EQ(guided.code, 0) << guided.out;
  EXPECT_NE(guided.out.find("### L1:"), std::string::npos) << "L2 depends on L1, so L1 must be pulled in";
  EXPECT_NE(guided.out.find("### L2:"), std::string::npos);
  EXPECT_EQ(guided.out.find("### L3:"), std::string::npos);
  auto all = run_d2k("show 001_varlen_segmented_scan --guidance all");
  EXPECT_NE(all.out.find("### L3:"), std::string::npos);
  auto bad = run_d2k("show 1 --guidance L7");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("no level 'L7'"), std::string::npos) << bad.out;
  EXPECT_EQ(run_d2k("show no_such_task").code, 2);
}

TEST(Cli, ValidateFailsOnABrokenFolderWithItsMessage) {
  test::TempDir tmp;
  auto dir = tmp.path() / "001_toy_scale";
  std::filesystem::copy(test::base_task(), dir, std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir / "README.md");
  auto r = run_d2k("validate '" + dir.string() + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("README.md: missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 problem in 1 task"), std::string::npos) << r.out;
  auto ok = run_d2k("validate", "D2K_TASKS='" + test::fixtures().string() + "/base'");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// The MCP server's evaluate and submit run the real evaluator on the workspace's solution; submit records the
// evaluation outside the workspace. The workspace starts with the public files only.
TEST(Cli, McpSubmitEvaluatesAndRecords) {
  test::TempDir tmp;
  auto ws = tmp.path() / "ws";
  std::filesystem::create_directories(ws);
  std::filesystem::copy_file(test::base_task() / "expert" / "solution.py", ws / "solution.py");
  auto requests = tmp.path() / "requests.jsonl";
  write_file_atomic(requests,
                    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
                    "\n"
                    R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                    "\n"
                    R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"evaluate","arguments":{}}})"
                    "\n"
                    R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"submit","arguments":{}}})"
                    "\n");
  auto r = run_d2k("mcp --tasks '" + (test::fixtures() / "base").string() + "' --task 1 --workspace '" + ws.string() +
                   "' < '" + requests.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ragged                     passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("submission 1 recorded"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "ws.submissions" / "001" / "evaluation.json"));
  EXPECT_TRUE(std::filesystem::exists(ws / "TASK.md"));
  EXPECT_TRUE(std::filesystem::exists(ws / "template" / "solution.py"));
  EXPECT_FALSE(std::filesystem::exists(ws / "expert"));
  EXPECT_FALSE(std::filesystem::exists(ws / "wrong"));
}

}  // namespace
}  // namespace d2k
