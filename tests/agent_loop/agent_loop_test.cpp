// Whole episodes of the built-in agent loop against the scripted fake model server on loopback, in both wire
// formats: a correct submission, budgets, API failures, retries, malformed tool calls, cached tokens,
// condensing, resume; the trajectory is read back and checked in each case.
#include <gtest/gtest.h>

#include <set>

#include "agent/loop/agent_loop.hpp"
#include "agent/loop/condense.hpp"
#include "agent/loop/trajectory.hpp"
#include "agent_loop/agent_loop_support.hpp"
#include "test_support.hpp"

namespace d2k::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Call;
using test::FakeModelServer;
using test::ScriptedReply;
using test::Tokens;

// One run's world: a workspace, a submissions folder, a trajectory, the fake evaluator, and a provider for the
// fake server with retries that do not sleep.
struct Episode {
  ProviderKind kind;
  test::TempDir tmp;
  fs::path ws = tmp.path() / "workspace";
  fs::path subs = tmp.path() / "workspace.submissions";
  fs::path traj_path = tmp.path() / "trajectory.jsonl";
  test::FakeWorld world;
  std::shared_ptr<RetryLog> retry_log = std::make_shared<RetryLog>();
  int evaluations = 0;
  LoopOptions options;
  ModelConfig model;

  explicit Episode(ProviderKind k) : kind(k) {
    fs::create_directories(ws);
    options.retry_log = retry_log;
  }

  ProviderDeps deps(RetryPolicy policy = {}) {
    ProviderDeps d = world.deps(policy);
    auto prev = d.on_retry;
    auto log = retry_log;
    d.on_retry = [prev, log](const RetryEvent& e) {
      prev(e);
      log->add(e);
    };
    return d;
  }

  std::vector<Message> initial() const {
    return {Message::system("You write kernels."), Message::user("Task: write solution.py, then submit.")};
  }

  // Runs a fresh episode against `server`, then finalizes it as `d2k agent run` does.
  LoopResult run(FakeModelServer& server, RetryPolicy policy = {}, json* final_record = nullptr,
                 bool auto_submit = true, FinalPolicy fp = FinalPolicy::last) {
    if (model.name.empty()) model = test::test_model(kind, server.base_url());
    auto provider = make_provider(model, deps(policy));
    ToolBoxOptions to;
    to.evaluate = test::fake_evaluator(ws, subs, &evaluations);
    ToolBox tools(Workspace(ws), to);
    TrajectoryWriter traj(traj_path);
    AgentLoop loop(*provider, tools, traj, options);
    LoopResult r = loop.run(initial());
    json fin = finalize_run(traj, tools, r, {auto_submit, fp, ws, subs});
    if (final_record) *final_record = fin;
    return r;
  }

  std::vector<json> records() const {
    auto r = read_trajectory(traj_path);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_FALSE(r.torn_tail);
    return r.records;
  }
};

std::vector<json> of_type(const std::vector<json>& recs, const std::string& type) {
  std::vector<json> out;
  for (const auto& r : recs)
    if (r.value("type", "") == type) out.push_back(r);
  return out;
}

// Every record parses, turns are numbered 1..n, each tool record answers a call of the model record before it,
// and the run ends with exactly one final record as its last line.
void expect_complete_trajectory(const std::vector<json>& recs, int turns, const std::string& status) {
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.back().value("type", ""), "final");
  EXPECT_EQ(recs.back().value("status", ""), status) << recs.back().dump(2);
  EXPECT_EQ(of_type(recs, "final").size(), 1u);
  auto models = of_type(recs, "model");
  ASSERT_EQ(static_cast<int>(models.size()), turns);
  for (int i = 0; i < turns; ++i) {
    EXPECT_EQ(models[i]["turn"], i + 1);
    for (const char* k : {"input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost_usd"})
      EXPECT_TRUE(models[i]["usage"].contains(k)) << k;
    EXPECT_TRUE(models[i].contains("model_ms"));
    EXPECT_TRUE(models[i].contains("wall_s"));
  }
  std::set<std::string> open;
  for (const auto& r : recs) {
    if (r["type"] == "model")
      for (const auto& c : r["message"].value("tool_calls", json::array())) open.insert(c["id"].get<std::string>());
    if (r["type"] == "tool") {
      EXPECT_EQ(open.erase(r["tool_call_id"].get<std::string>()), 1u) << "tool record answers no open call: " << r.dump();
      EXPECT_TRUE(r["result"].contains("text"));
      EXPECT_TRUE(r.contains("tool_ms"));
    }
  }
  EXPECT_TRUE(open.empty()) << "a tool call without a recorded result";
  EXPECT_EQ(recs.back()["totals"]["turns"], turns);
}

class AgentLoopBoth : public ::testing::TestWithParam<ProviderKind> {};

TEST_P(AgentLoopBoth, EpisodeEndsWithACorrectSubmission) {
  Episode e(GetParam());
  FakeModelServer server({
      test::reply(e.kind, "I will write it.",
                  {{"c1", "write_file", {{"path", "solution.py"}, {"content", "# CORRECT ms=2\n"}}, ""}}),
      test::reply(e.kind, "", {{"c2", "submit", json::object(), ""}}),
      test::reply(e.kind, "Done: submitted.", {}),
  });
  json fin;
  LoopResult r = e.run(server, {}, &fin);
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  EXPECT_EQ(r.totals.turns, 3);
  EXPECT_EQ(r.totals.tool_calls, 2);
  EXPECT_EQ(e.evaluations, 1) << "the same solution must not be auto-submitted again";
  EXPECT_EQ(read_file(e.ws / "solution.py").value_or(""), "# CORRECT ms=2\n");
  ASSERT_TRUE(fin["final_submission"].is_object()) << fin.dump(2);
  EXPECT_EQ(fin["final_submission"]["number"], 1);
  EXPECT_TRUE(fin["correct"].get<bool>());
  EXPECT_TRUE(fs::exists(e.subs / "001" / "solution.py"));
  auto recs = e.records();
  expect_complete_trajectory(recs, 3, "finished");
  auto tools = of_type(recs, "tool");
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[1]["name"], "submit");
  EXPECT_NE(tools[1]["result"]["text"].get<std::string>().find("submission 1 recorded"), std::string::npos);
  EXPECT_EQ(of_type(recs, "message").size(), 2u);  // system and task
  // The second request carried the first tool result back, in the provider's own format.
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  std::string body = reqs[1].body;
  EXPECT_NE(body.find(e.kind == ProviderKind::openai ? "\"tool_call_id\":\"c1\"" : "\"tool_use_id\":\"c1\""),
            std::string::npos) << body;
  EXPECT_DOUBLE_EQ(fin["totals"]["usage"]["input_tokens"].get<double>(), 3000);
}

TEST_P(AgentLoopBoth, TurnBudgetEndsTheRunAndAutoSubmits) {
  Episode e(GetParam());
  e.options.budgets.max_turns = 2;
  FakeModelServer server({
      test::reply(e.kind, "", {{"c1", "write_file", {{"path", "solution.py"}, {"content", "# CORRECT ms=3\n"}}, ""}}),
      test::reply(e.kind, "", {{"c2", "list_files", json::object(), ""}}),
      test::reply(e.kind, "never asked for", {}),
  });
  json fin;
  LoopResult r = e.run(server, {}, &fin);
  EXPECT_EQ(r.status, RunStatus::budget_turns);
  EXPECT_EQ(r.totals.turns, 2);
  EXPECT_EQ(server.requests().size(), 2u) << "a third generation was asked for past the budget";
  EXPECT_EQ(e.evaluations, 1);
  auto recs = e.records();
  expect_complete_trajectory(recs, 2, "budget_turns");
  ASSERT_EQ(of_type(recs, "auto_submit").size(), 1u);
  EXPECT_EQ(fin["final_submission"]["number"], 1);
}

TEST_P(AgentLoopBoth, NoAutoSubmitLeavesTheSolutionUnsubmitted) {
  Episode e(GetParam());
  e.options.budgets.max_turns = 1;
  FakeModelServer server(
      {test::reply(e.kind, "", {{"c1", "write_file", {{"path", "solution.py"}, {"content", "# CORRECT\n"}}, ""}})});
  json fin;
  e.run(server, {}, &fin, /*auto_submit=*/false);
  EXPECT_EQ(e.evaluations, 0);
  EXPECT_TRUE(fin["final_submission"].is_null());
  EXPECT_FALSE(fin["correct"].get<bool>());
}

TEST_P(AgentLoopBoth, TokenAndCostBudgets) {
  {
    Episode e(GetParam());
    e.options.budgets.max_tokens = 2000;  // 1100 a turn: over after the second
    FakeModelServer server({test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}),
                            test::reply(e.kind, "", {{"c2", "list_files", json::object(), ""}}),
                            test::reply(e.kind, "", {{"c3", "list_files", json::object(), ""}})});
    LoopResult r = e.run(server);
    EXPECT_EQ(r.status, RunStatus::budget_tokens) << r.detail;
    EXPECT_EQ(r.totals.turns, 2);
    expect_complete_trajectory(e.records(), 2, "budget_tokens");
  }
  {
    Episode e(GetParam());
    // 1000 input at $2/M + 100 output at $8/M = $0.0028 a turn.
    e.options.budgets.max_cost_usd = 0.005;
    FakeModelServer server({test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}),
                            test::reply(e.kind, "", {{"c2", "list_files", json::object(), ""}}),
                            test::reply(e.kind, "", {{"c3", "list_files", json::object(), ""}})});
    json fin;
    LoopResult r = e.run(server, {}, &fin);
    EXPECT_EQ(r.status, RunStatus::budget_cost) << r.detail;
    EXPECT_EQ(r.totals.turns, 2);
    EXPECT_NEAR(fin["totals"]["cost_usd"].get<double>(), 2 * 0.0028, 1e-12);
    expect_complete_trajectory(e.records(), 2, "budget_cost");
  }
}

TEST_P(AgentLoopBoth, WallBudget) {
  Episode e(GetParam());
  e.options.budgets.max_wall_s = 0.3;
  ScriptedReply slow = test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}});
  slow.delay_ms = 400;
  FakeModelServer server({slow, test::reply(e.kind, "never asked for", {})});
  LoopResult r = e.run(server);
  EXPECT_EQ(r.status, RunStatus::budget_wall) << r.detail;
  EXPECT_EQ(r.totals.turns, 1);
  expect_complete_trajectory(e.records(), 1, "budget_wall");
}

TEST_P(AgentLoopBoth, PersistentServerErrorsEndInApiError) {
  Episode e(GetParam());
  RetryPolicy p;
  p.max_attempts = 3;
  FakeModelServer server({ScriptedReply::json({{"error", {{"message", "overloaded"}}}}, 500),
                          ScriptedReply::json({{"error", {{"message", "overloaded"}}}}, 500),
                          ScriptedReply::json({{"error", {{"message", "overloaded"}}}}, 500)});
  json fin;
  LoopResult r = e.run(server, p, &fin);
  EXPECT_EQ(r.status, RunStatus::api_error);
  EXPECT_NE(r.detail.find("server_error"), std::string::npos) << r.detail;
  EXPECT_EQ(server.requests().size(), 3u);
  auto recs = e.records();
  expect_complete_trajectory(recs, 0, "api_error");
  auto errs = of_type(recs, "error");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0]["kind"], "server_error");
  EXPECT_EQ(errs[0]["attempts"], 3);
  EXPECT_EQ(errs[0]["http_status"], 500);
  EXPECT_EQ(errs[0]["retries"].size(), 2u);
}

TEST_P(AgentLoopBoth, ClientErrorEndsInApiErrorWithoutRetry) {
  Episode e(GetParam());
  FakeModelServer server({
      test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}),
      ScriptedReply::json({{"error", {{"type", "invalid_request_error"}, {"message", "bad field 'x'"}}}}, 400),
  });
  LoopResult r = e.run(server);
  EXPECT_EQ(r.status, RunStatus::api_error);
  EXPECT_NE(r.detail.find("bad_request"), std::string::npos) << r.detail;
  EXPECT_EQ(server.requests().size(), 2u);
  auto recs = e.records();
  expect_complete_trajectory(recs, 1, "api_error");
  EXPECT_EQ(of_type(recs, "error")[0]["attempts"], 1);
}

TEST_P(AgentLoopBoth, RateLimitAndDroppedConnectionAreRetriedAndTheRunGoesOn) {
  Episode e(GetParam());
  ScriptedReply limited = ScriptedReply::json({{"error", {{"message", "slow down"}}}}, 429);
  limited.headers = {{"Retry-After", "7"}};
  ScriptedReply dropped;
  dropped.drop = true;
  FakeModelServer server({limited, dropped, test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}),
                          test::reply(e.kind, "ok", {})});
  LoopResult r = e.run(server);
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  EXPECT_EQ(r.totals.turns, 2);
  EXPECT_EQ(r.totals.retries, 2);
  ASSERT_FALSE(e.world.sleeps.empty());
  EXPECT_EQ(e.world.sleeps[0], std::chrono::milliseconds(7000)) << "Retry-After not honoured";
  auto recs = e.records();
  expect_complete_trajectory(recs, 2, "finished");
  auto m1 = of_type(recs, "model")[0];
  EXPECT_EQ(m1["attempts"], 3);
  ASSERT_EQ(m1["retries"].size(), 2u);
  EXPECT_EQ(m1["retries"][0]["http_status"], 429);
  EXPECT_TRUE(m1["retries"][0]["from_retry_after"].get<bool>());
  EXPECT_EQ(m1["retries"][0]["wait_ms"], 7000);
  EXPECT_EQ(m1["retries"][1]["http_status"], 0);  // the dropped connection had no status
}

TEST_P(AgentLoopBoth, MalformedToolCallGoesBackAsAToolError) {
  Episode e(GetParam());
  // OpenAI: truncated JSON text; Anthropic: an input that is not an object.
  std::string bad = e.kind == ProviderKind::openai ? "{\"path\": \"solution.py\", \"content\": " : "oops";
  FakeModelServer server({
      test::reply(e.kind, "", {{"c1", "write_file", json::object(), bad}}),
      test::reply(e.kind, "", {{"c2", "write_file", {{"path", "solution.py"}, {"content", "x = 1\n"}}, ""}}),
      test::reply(e.kind, "fixed", {}),
  });
  LoopResult r = e.run(server, {}, nullptr, /*auto_submit=*/false);
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  EXPECT_EQ(r.totals.format_errors, 1);
  EXPECT_EQ(read_file(e.ws / "solution.py").value_or(""), "x = 1\n");
  auto recs = e.records();
  expect_complete_trajectory(recs, 3, "finished");
  auto t1 = of_type(recs, "tool")[0];
  EXPECT_TRUE(t1["format_error"].get<bool>());
  EXPECT_TRUE(t1["result"]["is_error"].get<bool>());
  // The model was told, in its own wire format, with the error flag.
  json req = server.requests()[1].json();
  bool told = false;
  for (const auto& m : req["messages"]) {
    if (e.kind == ProviderKind::openai && m["role"] == "tool" && m["tool_call_id"] == "c1") {
      told = m["content"].get<std::string>().rfind("Error: the arguments of this write_file call", 0) == 0;
    }
    if (e.kind == ProviderKind::anthropic && m["role"] == "user" && m["content"].is_array())
      for (const auto& b : m["content"])
        if (b.value("type", "") == "tool_result" && b["tool_use_id"] == "c1")
          told = b.value("is_error", false) && b.dump().find("not a JSON object") != std::string::npos;
  }
  EXPECT_TRUE(told) << req.dump(2);
}

TEST_P(AgentLoopBoth, ConsecutiveFormatErrorsEndTheRun) {
  Episode e(GetParam());
  e.options.budgets.max_format_errors = 2;
  std::string bad = e.kind == ProviderKind::openai ? "{not json" : "[]";
  FakeModelServer server({test::reply(e.kind, "", {{"c1", "bash", json::object(), bad}}),
                          test::reply(e.kind, "", {{"c2", "no_such_tool", json::object(), ""}}),
                          test::reply(e.kind, "never asked for", {})});
  LoopResult r = e.run(server);
  EXPECT_EQ(r.status, RunStatus::format_errors) << r.detail;
  EXPECT_EQ(r.totals.turns, 2);
  expect_complete_trajectory(e.records(), 2, "format_errors");
}

TEST_P(AgentLoopBoth, CachedTokensAreCountedAndPricedAsCacheReads) {
  Episode e(GetParam());
  Tokens t{5000, 4000, 200};
  FakeModelServer server({test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}, t),
                          test::reply(e.kind, "done", {}, t)});
  json fin;
  LoopResult r = e.run(server, {}, &fin);
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_EQ(r.totals.usage.input_tokens, 10000);
  EXPECT_EQ(r.totals.usage.cached_input_tokens, 8000);
  EXPECT_EQ(r.totals.usage.output_tokens, 400);
  // prices: input 2, cached_input 0.5, output 8 per million
  double per_turn = (1000 * 2.0 + 4000 * 0.5 + 200 * 8.0) / 1e6;
  EXPECT_NEAR(r.totals.usage.cost_usd, 2 * per_turn, 1e-12);
  auto recs = e.records();
  auto models = of_type(recs, "model");
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["usage"]["cached_input_tokens"], 4000);
  EXPECT_EQ(models[0]["usage"]["input_tokens"], 5000);
  EXPECT_EQ(fin["totals"]["usage"]["cached_input_tokens"], 8000);
  EXPECT_NEAR(fin["totals"]["cost_usd"].get<double>(), 2 * per_turn, 1e-12);
}

// Checks the provider's pairing rules on a request body as sent.
void expect_paired(ProviderKind kind, const json& req) {
  const auto& msgs = req["messages"];
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    if (kind == ProviderKind::openai) {
      if (msgs[i]["role"] != "assistant" || !msgs[i].contains("tool_calls")) continue;
      std::size_t j = i + 1;
      for (const auto& c : msgs[i]["tool_calls"]) {
        ASSERT_LT(j, msgs.size());
        EXPECT_EQ(msgs[j]["role"], "tool");
        EXPECT_EQ(msgs[j]["tool_call_id"], c["id"]);
        ++j;
      }
    } else {
      if (msgs[i]["role"] != "assistant") continue;
      std::vector<std::string> ids;
      for (const auto& b : msgs[i]["content"])
        if (b["type"] == "tool_use") ids.push_back(b["id"]);
      if (ids.empty()) continue;
      ASSERT_LT(i + 1, msgs.size());
      const auto& next = msgs[i + 1];
      EXPECT_EQ(next["role"], "user");
      for (std::size_t k = 0; k < ids.size(); ++k) {
        EXPECT_EQ(next["content"][k]["type"], "tool_result");
        EXPECT_EQ(next["content"][k]["tool_use_id"], ids[k]);
      }
    }
  }
}

TEST_P(AgentLoopBoth, CondensingKeepsTheProviderRules) {
  Episode e(GetParam());
  std::string big;
  for (int i = 0; i < 60; ++i) big += std::string(100, 'x') + "\n";  // read_file cuts lines over 2000 chars
  write_file_atomic(e.ws / "big.txt", big);
  e.model = test::test_model(e.kind, "http://127.0.0.1:1");
  e.model.context_window = 4000;  // usable 4000 - 1024; condensing from 0.75 of that (~2200 tokens)
  e.options.keep_recent_tool_results = 1;
  std::vector<ScriptedReply> script;
  for (int i = 1; i <= 4; ++i)
    script.push_back(test::reply(e.kind, "reading", {{"r" + std::to_string(i), "read_file", {{"path", "big.txt"}}, ""}},
                                 {}, /*with_usage=*/false));
  script.push_back(test::reply(e.kind, "done", {}, {}, false));
  FakeModelServer server(script);
  e.model.base_url = server.base_url();
  LoopResult r = e.run(server, {}, nullptr, false);
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  EXPECT_GE(r.totals.condensations, 1);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 5u);
  for (const auto& q : reqs) expect_paired(e.kind, q.json());
  std::string last = reqs.back().body;
  EXPECT_NE(last.find("[condensed: this tool output"), std::string::npos) << "nothing was condensed";
  // Exactly one read (the newest, keep_recent_tool_results = 1) is still whole: 60 lines of 100 x.
  std::size_t whole_lines = 0;
  for (auto p = last.find(std::string(100, 'x')); p != std::string::npos; p = last.find(std::string(100, 'x'), p + 100))
    ++whole_lines;
  EXPECT_EQ(whole_lines, 60u) << "the newest tool output must stay whole, older ones condensed";
  EXPECT_NE(last.find("Task: write solution.py"), std::string::npos) << "the task prompt must stay";
  // The provider accepts the condensed conversation as is (its own pairing check runs before sending).
  auto recs = e.records();
  auto conds = of_type(recs, "condense");
  ASSERT_FALSE(conds.empty());
  EXPECT_LT(conds[0]["estimated_tokens_after"].get<long long>(), conds[0]["estimated_tokens_before"].get<long long>());
  expect_complete_trajectory(recs, 5, "finished");
}

TEST_P(AgentLoopBoth, ResumeRebuildsTheConversationAndAnswersThePendingCall) {
  Episode e(GetParam());
  e.options.budgets.max_turns = 4;
  // First life: two turns, then the process "dies" while the second turn's tool runs.
  {
    FakeModelServer server({
        test::reply(e.kind, "", {{"c1", "write_file", {{"path", "solution.py"}, {"content", "# CORRECT ms=1\n"}}, ""}}),
        test::reply(e.kind, "", {{"c2", "bash", {{"command", "echo hi"}}, ""}}),
        test::reply(e.kind, "done", {}),
    });
    e.options.budgets.max_turns = 2;
    e.run(server, {}, nullptr, false);
  }
  // Cut the trajectory back to what a SIGKILL during the bash call leaves: no tool record for c2, no final.
  auto recs = e.records();
  std::vector<json> kept;
  for (const auto& r : recs) {
    if (r["type"] == "final" || (r["type"] == "tool" && r["tool_call_id"] == "c2")) continue;
    kept.push_back(r);
  }
  {
    std::string text;
    for (const auto& r : kept) text += r.dump() + "\n";
    text += "{\"type\":\"tool\",\"tu";  // a torn line, as a crash mid-write leaves
    write_file_atomic(e.traj_path, text);
  }
  auto summary = summarize_run(e.traj_path);
  EXPECT_FALSE(summary.has_final);
  EXPECT_EQ(summary.final["status"], "interrupted");
  EXPECT_TRUE(summary.torn_tail);
  EXPECT_EQ(summary.final["totals"]["turns"], 2);

  // Second life.
  e.options.budgets.max_turns = 4;
  FakeModelServer server({test::reply(e.kind, "", {{"c3", "submit", json::object(), ""}}),
                          test::reply(e.kind, "done", {})});
  auto provider = make_provider(test::test_model(e.kind, server.base_url()), e.deps());
  ToolBoxOptions to;
  to.evaluate = test::fake_evaluator(e.ws, e.subs, &e.evaluations);
  ToolBox tools(Workspace(e.ws), to);
  LoopResult r;
  {
    TrajectoryWriter traj(e.traj_path);  // cuts the torn line
    AgentLoop loop(*provider, tools, traj, e.options);
    r = loop.resume(read_trajectory(e.traj_path).records);
    finalize_run(traj, tools, r, {true, FinalPolicy::last, e.ws, e.subs});
  }
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  EXPECT_EQ(r.totals.turns, 4);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  // The first request after resume carries the whole conversation: the task, c1's result, and c2 answered
  // with a note that it was pending when the run died.
  std::string body = reqs[0].body;
  EXPECT_NE(body.find("Task: write solution.py"), std::string::npos);
  EXPECT_NE(body.find("c1"), std::string::npos);
  EXPECT_NE(body.find("not run: the run stopped"), std::string::npos) << body;
  expect_paired(e.kind, reqs[0].json());
  auto after = e.records();
  EXPECT_EQ(of_type(after, "resume").size(), 1u);
  expect_complete_trajectory(after, 4, "finished");
  EXPECT_EQ(after.back()["final_submission"]["number"], 1);
  EXPECT_TRUE(summarize_run(e.traj_path).has_final);
}

TEST_P(AgentLoopBoth, KilledBeforeItsFirstModelCallTheRunRestarts) {
  // A SIGKILL right after the start record (the system message written, the task prompt not yet): nothing to
  // resume, so the conversation starts again; a later resume replays only what follows the restart.
  Episode e(GetParam());
  {
    std::string text = json({{"type", "start"}, {"mode", "loop"}}).dump() + "\n" +
                       json({{"type", "message"}, {"message", message_to_json(e.initial()[0])}}).dump() + "\n";
    write_file_atomic(e.traj_path, text);
  }
  FakeModelServer server({test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""}}),
                          test::reply(e.kind, "done", {})});
  auto provider = make_provider(test::test_model(e.kind, server.base_url()), e.deps());
  ToolBox tools(Workspace(e.ws), {});
  LoopResult r;
  {
    TrajectoryWriter traj(e.traj_path);
    AgentLoop loop(*provider, tools, traj, e.options);
    r = loop.resume_or_restart(read_trajectory(e.traj_path).records, e.initial());
    finalize_run(traj, tools, r, {true, FinalPolicy::last, e.ws, e.subs});
  }
  EXPECT_EQ(r.status, RunStatus::finished) << r.detail;
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  expect_paired(e.kind, reqs[0].json());
  // The first request holds the system prompt once and the task: nothing from before the restart is doubled.
  std::string body = reqs[0].body;
  EXPECT_NE(body.find("Task: write solution.py"), std::string::npos) << body;
  auto sys = e.initial()[0].text.substr(0, 20);
  EXPECT_EQ(body.find(sys), body.rfind(sys)) << body;
  auto recs = e.records();
  EXPECT_EQ(of_type(recs, "restart").size(), 1u);
  expect_complete_trajectory(recs, 2, "finished");
  // A resume now replays from the restart on: the conversation is the one the second life had.
  auto read = read_trajectory(e.traj_path);
  std::vector<json> before_final;  // up to c1's result: the model is asked again on resume
  for (const auto& rec : read.records) {
    before_final.push_back(rec);
    if (rec.value("type", "") == "tool") break;
  }
  FakeModelServer server2({test::reply(e.kind, "again", {})});
  auto provider2 = make_provider(test::test_model(e.kind, server2.base_url()), e.deps());
  TrajectoryWriter traj(e.traj_path);
  AgentLoop loop(*provider2, tools, traj, e.options);
  loop.resume_or_restart(before_final, e.initial());
  ASSERT_EQ(server2.requests().size(), 1u);
  std::string body2 = server2.requests()[0].body;
  EXPECT_EQ(body2.find(sys), body2.rfind(sys)) << body2;
}

TEST_P(AgentLoopBoth, InterruptionAnswersTheCallsAndEndsInterrupted) {
  Episode e(GetParam());
  FakeModelServer server({test::reply(e.kind, "", {{"c1", "list_files", json::object(), ""},
                                                   {"c2", "list_files", json::object(), ""}}),
                          test::reply(e.kind, "never asked for", {})});
  e.model = test::test_model(e.kind, server.base_url());
  auto provider = make_provider(e.model, e.deps());
  ToolBox tools(Workspace(e.ws), {});
  TrajectoryWriter traj(e.traj_path);
  // The signal arrives while the model is answering: both calls are answered "not run", nothing else is asked.
  LoopOptions o = e.options;
  int polls = 0;
  o.interrupted = [&polls] { return ++polls > 1; };
  AgentLoop loop(*provider, tools, traj, o);
  LoopResult r = loop.run(e.initial());
  finalize_run(traj, tools, r, {true, FinalPolicy::last, e.ws, e.subs});
  EXPECT_EQ(r.status, RunStatus::interrupted);
  EXPECT_EQ(server.requests().size(), 1u);
  auto recs = e.records();
  expect_complete_trajectory(recs, 1, "interrupted");
  for (const auto& t : of_type(recs, "tool")) EXPECT_EQ(t["result"]["text"], "not run: the run was interrupted");
}

INSTANTIATE_TEST_SUITE_P(WireFormats, AgentLoopBoth, ::testing::Values(ProviderKind::openai, ProviderKind::anthropic),
                         [](const auto& p) { return test::kind_name(p.param); });

TEST(AgentLoopPolicy, LastAndBestCorrectSubmission) {
  test::TempDir tmp;
  auto ws = tmp.path() / "ws", subs = tmp.path() / "subs";
  fs::create_directories(ws);
  auto eval = test::fake_evaluator(ws, subs);
  for (const char* src : {"# CORRECT ms=5\n", "# CORRECT ms=2\n", "# wrong\n", "# CORRECT ms=4\n", "# wrong again\n"}) {
    write_file_atomic(ws / "solution.py", src);
    eval(true);
  }
  auto list = list_submissions(subs);
  ASSERT_EQ(list.size(), 5u);
  EXPECT_TRUE(list[0].correct);
  EXPECT_FALSE(list[2].correct);
  ASSERT_TRUE(list[1].geomean_ms);
  EXPECT_DOUBLE_EQ(*list[1].geomean_ms, 2.0);
  EXPECT_EQ(choose_final(list, FinalPolicy::last)->number, 4);
  EXPECT_EQ(choose_final(list, FinalPolicy::best)->number, 2);
  EXPECT_FALSE(choose_final({list[2], list[4]}, FinalPolicy::last));
  // The workspace still holds the last (wrong) solution: it differs from submission 5? No: it is submission 5.
  EXPECT_FALSE(differs_from_last_submission(ws / "solution.py", list));
  write_file_atomic(ws / "solution.py", "# CORRECT ms=1\n");
  EXPECT_TRUE(differs_from_last_submission(ws / "solution.py", list));
}

TEST(AgentLoopTrajectory, TornTailIsCutAndRecordsRoundTrip) {
  test::TempDir tmp;
  auto p = tmp.path() / "t.jsonl";
  write_file_atomic(p, "{\"type\":\"a\"}\n{\"type\":\"b\",\"x\":");
  {
    TrajectoryWriter w(p);
    Message m = Message::assistant("hi", {ToolCall{"id1", "bash", {{"command", "ls"}}, "{\"command\": \"ls\"}", ""}});
    w.append({{"type", "model"}, {"message", message_to_json(m)}, {"bad_utf8", std::string("\xff\xfe")}});
  }
  auto r = read_trajectory(p);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_FALSE(r.torn_tail);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0]["type"], "a");
  Message back = message_from_json(r.records[1]["message"]);
  ASSERT_EQ(back.tool_calls.size(), 1u);
  EXPECT_EQ(back.tool_calls[0].arguments_text, "{\"command\": \"ls\"}");
  EXPECT_EQ(back.tool_calls[0].arguments["command"], "ls");
  // A damaged line in the middle is an error, not silently skipped.
  write_file_atomic(p, "{\"type\":\"a\"}\nnot json\n{\"type\":\"c\"}\n");
  EXPECT_FALSE(read_trajectory(p).error.empty());
}

TEST(AgentLoopCondense, OnlyContentsChangeAndReplayIsExact) {
  std::vector<Message> msgs{Message::system("sys"), Message::user(std::string(2000, 't'))};
  for (int i = 0; i < 3; ++i) {
    msgs.push_back(Message::assistant("", {ToolCall{"w" + std::to_string(i), "write_file",
                                                    {{"path", "a.py"}, {"content", std::string(1000, 'c')}}, "", ""}}));
    msgs.push_back(Message::tool_result("w" + std::to_string(i), std::string(3000, 'o')));
  }
  auto copy = msgs;
  auto changed = condense(msgs, 1LL << 40, 1);
  // Messages 2..5 (the two older calls and results) change; the task and the newest pair stay.
  EXPECT_EQ(changed, (std::vector<std::size_t>{2, 3, 4, 5}));
  ASSERT_EQ(msgs.size(), copy.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(msgs[i].role, copy[i].role);
    EXPECT_EQ(msgs[i].tool_call_id, copy[i].tool_call_id);
    ASSERT_EQ(msgs[i].tool_calls.size(), copy[i].tool_calls.size());
    for (std::size_t k = 0; k < msgs[i].tool_calls.size(); ++k) EXPECT_EQ(msgs[i].tool_calls[k].id, copy[i].tool_calls[k].id);
  }
  EXPECT_EQ(msgs[1].text, copy[1].text);
  EXPECT_EQ(msgs[7].text, copy[7].text);
  EXPECT_EQ(msgs[2].tool_calls[0].arguments["path"], "a.py");
  EXPECT_EQ(msgs[2].tool_calls[0].arguments["content"], "[condensed: 1000 characters]");
  EXPECT_LT(estimate_tokens(msgs), estimate_tokens(copy));
  // Replaying the recorded indices on the original gives the same conversation.
  for (auto i : changed) condense_message(copy[i]);
  for (std::size_t i = 0; i < msgs.size(); ++i) EXPECT_EQ(message_to_json(msgs[i]), message_to_json(copy[i]));
}

}  // namespace
}  // namespace d2k::agent
