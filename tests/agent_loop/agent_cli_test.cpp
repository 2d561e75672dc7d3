// End-to-end: the real `d2k agent` binary against the scripted fake model server, on the toy task
// (tests/fixtures/base) with the CPU evaluation path: a correct submission, SIGKILL then --resume, SIGTERM,
// an external agent driven through MCP, the wall-time limit of an external agent.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "agent/loop/agent_loop.hpp"
#include "agent/loop/external_agent.hpp"
#include "agent/loop/trajectory.hpp"
#include "agent_loop/agent_loop_support.hpp"
#include "test_support.hpp"

namespace d2k::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::FakeModelServer;
using test::ScriptedReply;

// A d2k process started in the background, its output in a log file.
struct Child {
  pid_t pid = -1;
  fs::path log;
};

Child spawn_d2k(const std::vector<std::string>& args, const fs::path& log, const fs::path& cache) {
  Child c;
  c.log = log;
  c.pid = ::fork();
  if (c.pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("D2K_CACHE", cache.c_str(), 1);
    std::vector<char*> argv;
    std::string bin = D2K_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return c;
}

// The exit code (128 + signal when killed), or -1 after `timeout`.
int wait_exit(const Child& c, std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(c.pid, SIGKILL);
  ::waitpid(c.pid, &status, 0);
  return -1;
}

bool wait_until(const std::function<bool()>& f, std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string log_of(const Child& c) { return read_file(c.log).value_or("(no log)"); }

std::vector<json> records_of(const fs::path& run, const std::string& type = "") {
  std::vector<json> out;
  for (auto& r : read_trajectory(run / "trajectory.jsonl").records)
    if (type.empty() || r.value("type", "") == type) out.push_back(r);
  return out;
}

// A model registry with one model served by the fake server.
fs::path write_registry(const fs::path& dir, ProviderKind kind, const std::string& base_url) {
  fs::path p = dir / "models.toml";
  write_file_atomic(p, fmt::format(R"([[models]]
name = "fake"
provider = "{}"
base_url = "{}"
model = "fake-model"
max_output_tokens = 1024
context_window = 100000
request_timeout_s = 30
prices = {{ input = 2.0, cached_input = 0.5, output = 8.0 }}
)",
                                   kind == ProviderKind::openai ? "openai" : "anthropic", base_url));
  return p;
}

struct CliRun {
  test::TempDir tmp;
  fs::path run = tmp.path() / "run";
  fs::path cache = tmp.path() / "cache";
  std::vector<std::string> base_args(const fs::path& registry) const {
    return {"agent", "run", "--tasks", (test::fixtures() / "base").string(), "--task", "1", "--model", "fake",
            "--models", registry.string(), "--out", run.string()};
  }
};

std::string triton_ok() { return read_file(test::fixtures() / "solutions" / "triton_ok" / "solution.py").value(); }

TEST(AgentCli, CorrectSubmissionOnTheCpuEvaluator) {
  CliRun c;
  const auto kind = ProviderKind::openai;
  FakeModelServer server(
      {test::reply(kind, "", {{"c1", "write_file", {{"path", "solution.py"}, {"content", triton_ok()}}, ""}}),
       test::reply(kind, "", {{"c2", "submit", json::object(), ""}}), test::reply(kind, "Submitted.", {})},
      std::chrono::milliseconds(120000));
  auto reg = write_registry(c.tmp.path(), kind, server.base_url());
  Child ch = spawn_d2k(c.base_args(reg), c.tmp.path() / "log", c.cache);
  int rc = wait_exit(ch, std::chrono::seconds(240));
  ASSERT_EQ(rc, 0) << log_of(ch);
  auto fin = records_of(c.run, "final");
  ASSERT_EQ(fin.size(), 1u) << log_of(ch);
  EXPECT_EQ(fin[0]["status"], "finished");
  ASSERT_TRUE(fin[0]["final_submission"].is_object()) << fin[0].dump(2) << log_of(ch);
  EXPECT_EQ(fin[0]["final_submission"]["number"], 1);
  EXPECT_TRUE(fin[0]["auto_submit"].is_null()) << "the submitted solution was submitted again";
  // Recorded as `d2k mcp` records: WORKSPACE.submissions/001 with the evaluation and the solution.
  auto ev = json::parse(read_file(c.run / "workspace.submissions" / "001" / "evaluation.json").value());
  ASSERT_FALSE(ev["traces"].empty());
  for (const auto& t : ev["traces"]) EXPECT_EQ(t["status"], "passed") << t.dump(2);
  EXPECT_EQ(read_file(c.run / "workspace.submissions" / "001" / "solution.py").value(), triton_ok());
  // The workspace started with the task's public files.
  EXPECT_TRUE(fs::exists(c.run / "workspace" / "TASK.md"));
  auto start = records_of(c.run, "start");
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(start[0]["mode"], "loop");
  EXPECT_EQ(start[0]["model"]["name"], "fake");
  EXPECT_EQ(start[0]["budgets"]["max_turns"], 350);
  auto st = test::run_d2k("agent status --json '" + c.run.string() + "'");
  ASSERT_EQ(st.code, 0) << st.out;
  EXPECT_EQ(json::parse(st.out)["status"], "finished");
  // A finished run is not resumed.
  auto again = test::run_d2k("agent run --resume '" + c.run.string() + "'");
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("already ended with status finished"), std::string::npos) << again.out;
}

class AgentCliBoth : public ::testing::TestWithParam<ProviderKind> {};

TEST_P(AgentCliBoth, SigkillMidwayThenResumeFinishesTheRun) {
  CliRun c;
  const auto kind = GetParam();
  ScriptedReply slow = test::reply(kind, "", {{"c2", "list_files", json::object(), ""}});
  slow.delay_ms = 2000;  // the process is killed while it waits for this one
  FakeModelServer server(
      {test::reply(kind, "", {{"c1", "write_file", {{"path", "notes.txt"}, {"content", "kept\n"}}, ""}}), slow,
       test::reply(kind, "", {{"c3", "bash", {{"command", "cat notes.txt"}}, ""}}), test::reply(kind, "done", {})},
      std::chrono::milliseconds(60000));
  auto reg = write_registry(c.tmp.path(), kind, server.base_url());
  auto args = c.base_args(reg);
  args.push_back("--no-auto-submit");
  Child ch = spawn_d2k(args, c.tmp.path() / "log1", c.cache);
  ASSERT_TRUE(wait_until([&] { return server.requests().size() >= 2; }, std::chrono::seconds(30))) << log_of(ch);
  ASSERT_EQ(::kill(ch.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(ch, std::chrono::seconds(10)), 128 + SIGKILL);

  // Found without a final record: reported as interrupted, nothing recorded lost.
  auto st = test::run_d2k("agent status --json '" + c.run.string() + "'");
  ASSERT_EQ(st.code, 0) << st.out;
  auto sj = json::parse(st.out);
  EXPECT_EQ(sj["status"], "interrupted");
  EXPECT_EQ(sj["recorded"], false);
  EXPECT_EQ(sj["totals"]["turns"], 1);
  EXPECT_EQ(records_of(c.run, "model").size(), 1u);
  EXPECT_EQ(records_of(c.run, "tool").size(), 1u);

  Child re = spawn_d2k({"agent", "run", "--resume", c.run.string()}, c.tmp.path() / "log2", c.cache);
  ASSERT_EQ(wait_exit(re, std::chrono::seconds(60)), 0) << log_of(re);
  auto recs = records_of(c.run);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.back()["type"], "final");
  EXPECT_EQ(recs.back()["status"], "finished") << recs.back().dump(2);
  EXPECT_EQ(recs.back()["totals"]["turns"], 3);
  EXPECT_EQ(records_of(c.run, "resume").size(), 1u);
  auto tools = records_of(c.run, "tool");
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_NE(tools[1]["result"]["text"].get<std::string>().find("kept"), std::string::npos) << tools[1].dump();
  // The resumed request carried the first life's conversation.
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_NE(reqs[2].body.find("notes.txt"), std::string::npos);
  EXPECT_NE(reqs[2].body.find("c1"), std::string::npos);
  auto st2 = test::run_d2k("agent status --json '" + c.run.string() + "'");
  EXPECT_EQ(json::parse(st2.out)["status"], "finished") << st2.out;
}

TEST_P(AgentCliBoth, SigtermEndsTheRunInterruptedWithAFinalRecordAndItCanBeResumed) {
  CliRun c;
  const auto kind = GetParam();
  ScriptedReply slow = test::reply(kind, "", {{"c1", "list_files", json::object(), ""}});
  slow.delay_ms = 1000;
  FakeModelServer server({slow, test::reply(kind, "done", {})}, std::chrono::milliseconds(60000));
  auto reg = write_registry(c.tmp.path(), kind, server.base_url());
  auto args = c.base_args(reg);
  args.push_back("--no-auto-submit");
  Child ch = spawn_d2k(args, c.tmp.path() / "log1", c.cache);
  ASSERT_TRUE(wait_until([&] { return server.requests().size() >= 1; }, std::chrono::seconds(30))) << log_of(ch);
  ASSERT_EQ(::kill(ch.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(ch, std::chrono::seconds(30)), 130) << log_of(ch);
  auto fin = records_of(c.run, "final");
  ASSERT_EQ(fin.size(), 1u) << log_of(ch);
  EXPECT_EQ(fin[0]["status"], "interrupted");
  auto tools = records_of(c.run, "tool");
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["result"]["text"], "not run: the run was interrupted");

  Child re = spawn_d2k({"agent", "run", "--resume", c.run.string()}, c.tmp.path() / "log2", c.cache);
  ASSERT_EQ(wait_exit(re, std::chrono::seconds(60)), 0) << log_of(re);
  auto st = json::parse(test::run_d2k("agent status --json '" + c.run.string() + "'").out);
  EXPECT_EQ(st["status"], "finished");
  EXPECT_EQ(st["totals"]["turns"], 2);
}

INSTANTIATE_TEST_SUITE_P(WireFormats, AgentCliBoth, ::testing::Values(ProviderKind::openai, ProviderKind::anthropic),
                         [](const auto& p) { return test::kind_name(p.param); });

TEST(AgentCli, BashRunsInTheSandboxWithoutSightOfTheRunRecords) {
  CliRun c;
  const auto kind = ProviderKind::anthropic;
  FakeModelServer server({test::reply(kind, "", {{"c1", "bash", {{"command", "cat ../trajectory.jsonl; ls TASK.md"}}, ""}}),
                          test::reply(kind, "done", {})},
                         std::chrono::milliseconds(60000));
  auto reg = write_registry(c.tmp.path(), kind, server.base_url());
  auto args = c.base_args(reg);
  args.insert(args.end(), {"--no-auto-submit", "--sandbox", "bwrap"});
  Child ch = spawn_d2k(args, c.tmp.path() / "log", c.cache);
  int rc = wait_exit(ch, std::chrono::seconds(60));
  if (rc == 1 && log_of(ch).find("bwrap") != std::string::npos && !fs::exists(c.run))
    GTEST_SKIP() << "bubblewrap cannot run here: " << log_of(ch);
  ASSERT_EQ(rc, 0) << log_of(ch);
  EXPECT_EQ(records_of(c.run, "start")[0]["sandbox"], "bwrap");
  auto tools = records_of(c.run, "tool");
  ASSERT_EQ(tools.size(), 1u);
  std::string out = tools[0]["result"]["text"];
  EXPECT_NE(out.find("TASK.md"), std::string::npos) << out;  // the workspace is there
  EXPECT_EQ(out.find("\"type\":\"start\""), std::string::npos) << "the agent read its own trajectory: " << out;
  EXPECT_NE(out.find("No such file"), std::string::npos) << out;
}

TEST(AgentCli, ExternalAgentSubmitsThroughMcp) {
  CliRun c;
  std::string cmd = fmt::format("{} {} {{mcp_config}} {}", shell_quote(D2K_TEST_PYTHON), shell_quote(D2K_FAKE_AGENT),
                                shell_quote((test::fixtures() / "solutions" / "triton_ok" / "solution.py").string()));
  Child ch = spawn_d2k({"agent", "run", "--tasks", (test::fixtures() / "base").string(), "--task", "1", "--guidance",
                        "all", "--agent-cmd", cmd, "--out", c.run.string(), "--max-wall", "240"},
                       c.tmp.path() / "log", c.cache);
  int rc = wait_exit(ch, std::chrono::seconds(280));
  std::string agent_log = read_file(c.run / "agent.log").value_or("(no agent.log)");
  ASSERT_EQ(rc, 0) << log_of(ch) << agent_log;
  // The configuration the agent read: this d2k's mcp verb on the run's workspace and submissions.
  auto cfg = json::parse(read_file(c.run / "mcp.json").value());
  const auto& srv = cfg["mcpServers"]["d2k"];
  EXPECT_EQ(srv["command"], fs::canonical(D2K_BINARY).string());
  auto args = srv["args"].get<std::vector<std::string>>();
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "mcp");
  auto has_pair = [&](const std::string& k, const std::string& v) {
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == k && args[i + 1] == v) return true;
    return false;
  };
  EXPECT_TRUE(has_pair("--workspace", (c.run / "workspace").string())) << srv.dump();
  EXPECT_TRUE(has_pair("--submissions", (c.run / "workspace.submissions").string())) << srv.dump();
  EXPECT_TRUE(has_pair("--guidance", "L1,L2")) << srv.dump();  // "all" of the toy task
  EXPECT_NE(agent_log.find("submission 1 recorded"), std::string::npos) << agent_log;
  auto fin = records_of(c.run, "final");
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0]["status"], "finished") << fin[0].dump(2);
  ASSERT_TRUE(fin[0]["final_submission"].is_object()) << fin[0].dump(2);
  EXPECT_EQ(fin[0]["final_submission"]["number"], 1);
  EXPECT_TRUE(fin[0]["auto_submit"].is_null());
  EXPECT_EQ(records_of(c.run, "agent_exit")[0]["exit_code"], 0);
}

TEST(AgentCli, ExternalAgentStoppedAtTheWallTimeLimit) {
  CliRun c;
  auto t0 = std::chrono::steady_clock::now();
  Child ch = spawn_d2k({"agent", "run", "--tasks", (test::fixtures() / "base").string(), "--task", "1", "--agent-cmd",
                        "echo started {workspace}; sleep 60", "--out", c.run.string(), "--max-wall", "1",
                        "--no-auto-submit"},
                       c.tmp.path() / "log", c.cache);
  ASSERT_EQ(wait_exit(ch, std::chrono::seconds(30)), 0) << log_of(ch);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  auto fin = records_of(c.run, "final");
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0]["status"], "budget_wall");
  EXPECT_NE(read_file(c.run / "agent.log").value_or("").find("started " + (c.run / "workspace").string()),
            std::string::npos);
}

TEST(AgentCli, UsageErrorsCreateNothing) {
  CliRun c;
  auto r = test::run_d2k("agent run --tasks '" + (test::fixtures() / "base").string() +
                         "' --task 1 --agent-cmd 'x {mcp_cfg}' --out '" + c.run.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown placeholder {mcp_cfg}"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(c.run));
  auto both = test::run_d2k("agent run --tasks '" + (test::fixtures() / "base").string() +
                            "' --task 1 --agent-cmd x --model m --out '" + c.run.string() + "'");
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_FALSE(fs::exists(c.run));
}

}  // namespace
}  // namespace d2k::agent
