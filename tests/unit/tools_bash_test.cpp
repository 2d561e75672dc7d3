// The bash tool and its runner: exit codes, cwd, timeouts that kill the process group, head/tail cutting.
#include <gtest/gtest.h>

#include <chrono>

#include "agent/tools/toolbox.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace d2k::agent;
using d2k::test::TempDir;
using nlohmann::json;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(HeadTailBuffer, KeepsHeadAndTailWithNote) {
  OutputLimits lim{4, 3};
  EXPECT_EQ(cut_middle("abcdefg", lim), "abcdefg");
  EXPECT_EQ(cut_middle("abcdXXXXXXefg", lim), "abcd\n[... 6 bytes cut ...]\nefg");
  HeadTailBuffer b(lim);
  for (char c : std::string("0123456789")) b.append(&c, 1);
  EXPECT_EQ(b.total(), 10u);
  EXPECT_EQ(b.str(), "0123\n[... 3 bytes cut ...]\n789");
}

struct BashTest : ::testing::Test {
  TempDir tmp;
  ToolBox make(ToolBoxOptions o = {}) { return ToolBox(Workspace(tmp.path()), std::move(o)); }
};

TEST_F(BashTest, RunsInTheWorkspaceAndReportsExitCode) {
  auto tb = make();
  auto r = tb.call("bash", {{"command", "echo hi; pwd; echo err >&2"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(has(r.text, "exit code 0\nhi\n")) << r.text;
  EXPECT_TRUE(has(r.text, fs::canonical(tmp.path()).string())) << r.text;
  EXPECT_TRUE(has(r.text, "err")) << r.text;
  auto bad = tb.call("bash", {{"command", "exit 3"}});
  EXPECT_TRUE(bad.is_error);
  EXPECT_EQ(bad.text, "exit code 3\n(no output)\n");
  auto stdin_empty = tb.call("bash", {{"command", "cat; echo done"}});
  EXPECT_TRUE(has(stdin_empty.text, "done")) << stdin_empty.text;
}

TEST_F(BashTest, TimeoutKillsTheProcessGroup) {
  auto tb = make();
  auto t0 = std::chrono::steady_clock::now();
  auto r = tb.call("bash", {{"command", "echo started; (sleep 30; echo late > late.txt) & sleep 30"},
                            {"timeout_s", 1}});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(has(r.text, "timed out after 1 s")) << r.text;
  EXPECT_TRUE(has(r.text, "started")) << r.text;
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(BashTest, BackgroundJobsDoNotHoldTheCall) {
  auto tb = make();
  auto t0 = std::chrono::steady_clock::now();
  auto r = tb.call("bash", {{"command", "sleep 30 & echo quick"}});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(has(r.text, "quick")) << r.text;
}

TEST_F(BashTest, LongOutputIsCutToHeadAndTail) {
  ToolBoxOptions o;
  o.bash_output = {1000, 1000};
  auto tb = make(o);
  auto r = tb.call("bash", {{"command", "echo FIRST; head -c 1000000 /dev/zero | tr '\\0' x; echo; echo LAST"}});
  ASSERT_FALSE(r.is_error) << r.text.substr(0, 200);
  EXPECT_TRUE(has(r.text, "FIRST")) << r.text.substr(0, 200);
  EXPECT_TRUE(has(r.text, "LAST"));
  EXPECT_TRUE(has(r.text, " bytes cut ...]"));
  EXPECT_LT(r.text.size(), 2200u);
}

struct FakeRunner : CommandRunner {
  std::string seen;
  std::chrono::seconds timeout{};
  CommandResult run(const std::string& command, const fs::path&, std::chrono::seconds t,
                    const OutputLimits&) override {
    seen = command;
    timeout = t;
    CommandResult r;
    r.started = true;
    r.exited = true;
    r.exit_code = 0;
    r.output = "fake";
    return r;
  }
};

TEST_F(BashTest, RunnerIsASeam) {
  auto fake = std::make_shared<FakeRunner>();
  ToolBoxOptions o;
  o.runner = fake;
  auto tb = make(o);
  auto r = tb.call("bash", {{"command", "nvcc k.cu"}});
  EXPECT_EQ(r.text, "exit code 0\nfake\n");
  EXPECT_EQ(fake->seen, "nvcc k.cu");
  EXPECT_EQ(fake->timeout, std::chrono::seconds(120));
}

}  // namespace
