// Judging flows against the scripted fake model server: one level (valid, re-asked, invalid), a campaign in a
// store (resume, API errors, timings never in a prompt), JS_design, and the `d2k judge` CLI.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>

#include "core/files.hpp"
#include "judge/campaign_judge.hpp"
#include "judge/judge.hpp"
#include "score/score.hpp"
#include "store/store.hpp"
#include "task/manifest.hpp"
#include "unit/provider_fake_server.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace d2k;
using d2k::test::FakeModelServer;
using d2k::test::ScriptedReply;

namespace {

const fs::path kFix = D2K_JUDGE_FIXTURES;

Task toy_task() {
  Diagnostics d;
  auto t = load_task(kFix / "001_toy_scale", d);
  if (!t) throw std::runtime_error("fixture task does not load");
  return *t;
}

ScriptedReply openai_text(const std::string& text, const std::string& finish = "stop") {
  json r{{"id", "chatcmpl-j"}, {"object", "chat.completion"}, {"model", "gpt-test"},
         {"choices", json::array({{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"finish_reason", finish}}})},
         {"usage", {{"prompt_tokens", 1000}, {"completion_tokens", 100}}}};
  return ScriptedReply::json(r);
}

ScriptedReply anthropic_text(const std::string& text) {
  json r{{"id", "msg_j"}, {"type", "message"}, {"role", "assistant"}, {"model", "claude-test"},
         {"content", json::array({{{"type", "text"}, {"text", text}}})}, {"stop_reason", "end_turn"},
         {"usage", {{"input_tokens", 900}, {"output_tokens", 90}}}};
  return ScriptedReply::json(r);
}

// A verdict citing the fixture solution (tests/fixtures/judge/solution/solution.py).
std::string verdict(int score, int start = 11, int end = 12, std::string quote = "x = tl.load(x_ptr + offs, mask=mask)",
                    std::string file = "solution.py") {
  json v{{"reasoning", "the loads are masked and the scale is fused"}, {"score", score},
         {"citations", json::array({{{"file", file}, {"start_line", start}, {"end_line", end}, {"quote", quote}}})}};
  return v.dump();
}
std::string fabricated(int score) { return verdict(score, 3, 5, "tl.atomic_cas(flags + tile, 0, 1)"); }

struct World {
  test::FakeWorld fw;
  std::unique_ptr<agent::Provider> provider(const FakeModelServer& s, agent::ProviderKind k = agent::ProviderKind::openai) {
    auto m = test::test_model(k, s.base_url());
    m.api_key_env = "";
    agent::RetryPolicy p;
    p.max_attempts = 2;
    return agent::make_provider(judge::judge_model_config(m), fw.deps(p));
  }
};

judge::Subject solution_subject() {
  judge::Subject s;
  s.snapshot = judge::snapshot_solution(kFix / "solution");
  return s;
}

std::string last_user_text(const test::RecordedRequest& r) {
  auto j = r.json();
  return j["messages"].back()["content"].get<std::string>();
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / fmt::format("d2k_judge_{}_{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(JudgeLevel, ValidJudgmentIsAcceptedFirstTime) {
  FakeModelServer srv({openai_text("```json\n" + verdict(75) + "\n```")});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  auto task = toy_task();
  auto r = j.judge_level(task, "L2", solution_subject());
  EXPECT_TRUE(r.valid) << r.invalid_reason;
  EXPECT_EQ(r.score, 75);
  ASSERT_EQ(r.citations.size(), 1u);
  EXPECT_TRUE(r.citations[0].verified);
  EXPECT_EQ(r.attempts.size(), 1u);
  EXPECT_EQ(r.usage.input_tokens, 1000);
  auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 1u);
  auto body = reqs[0].json();
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_FALSE(body.contains("tools"));
  EXPECT_EQ(body["messages"][0]["role"], "system");
  std::string user = last_user_text(reqs[0]);
  EXPECT_NE(user.find("One program per 4096 elements"), std::string::npos);  // L2's guidance
  EXPECT_EQ(user.find("Load and store 16 bytes per thread"), std::string::npos);  // not L1's
  EXPECT_NE(user.find("11|         x = tl.load(x_ptr + offs, mask=mask)"), std::string::npos) << user;
  EXPECT_NE(user.find("builds on: L1 (Vector loads)"), std::string::npos);
  EXPECT_NE(user.find("- 75:"), std::string::npos);  // the anchors
  EXPECT_EQ(user.find("{{"), std::string::npos);
  auto raw = r.raw_json();
  EXPECT_EQ(raw["attempts"].size(), 1u);
  EXPECT_EQ(raw["prompt_sha256"], judge::embedded_prompts().sha256());
}

TEST(JudgeLevel, FabricatedCitationsAreRejectedReaskedThenInvalid) {
  FakeModelServer srv({openai_text(fabricated(100)), openai_text(fabricated(100))});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  auto r = j.judge_level(toy_task(), "L1", solution_subject());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.score, 0);
  EXPECT_EQ(r.attempts.size(), 2u);
  ASSERT_EQ(r.citations.size(), 1u);
  EXPECT_FALSE(r.citations[0].verified);
  EXPECT_NE(r.invalid_reason.find("failed verification"), std::string::npos);
  auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 2u);
  auto second = reqs[1].json()["messages"];
  ASSERT_EQ(second.size(), 4u);  // system, task, the judge's own reply, the reasons
  EXPECT_EQ(second[2]["role"], "assistant");
  EXPECT_NE(second[2]["content"].get<std::string>().find("atomic_cas"), std::string::npos);
  EXPECT_NE(second[3]["content"].get<std::string>().find("does not occur in solution.py lines 3-5"), std::string::npos);
  EXPECT_EQ(r.raw_json()["valid"], false);
}

TEST(JudgeLevel, ReaskThatSucceeds) {
  FakeModelServer srv({openai_text("The code implements L1 well; I give it 75."), openai_text(verdict(75))});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  auto r = j.judge_level(toy_task(), "L1", solution_subject());
  EXPECT_TRUE(r.valid) << r.invalid_reason;
  EXPECT_EQ(r.score, 75);
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_FALSE(r.attempts[0].problems.empty());
  EXPECT_TRUE(r.attempts[1].problems.empty());
  EXPECT_NE(last_user_text(srv.requests()[1]).find("no JSON object"), std::string::npos);
}

TEST(JudgeLevel, OutOfRangeScoresAreReaskedThenInvalid) {
  {
    FakeModelServer srv({openai_text(verdict(150)), openai_text(verdict(150))});
    World w;
    auto p = w.provider(srv);
    judge::Judge j(*p, judge::embedded_prompts());
    auto r = j.judge_level(toy_task(), "L3", solution_subject());
    EXPECT_FALSE(r.valid);
    EXPECT_EQ(r.score, 0);
    EXPECT_NE(r.invalid_reason.find("outside 0..100"), std::string::npos);
    EXPECT_EQ(srv.requests().size(), 2u);
  }
  {
    FakeModelServer srv({openai_text(verdict(60)), openai_text(verdict(50))});
    World w;
    auto p = w.provider(srv);
    judge::Judge j(*p, judge::embedded_prompts());
    auto r = j.judge_level(toy_task(), "L3", solution_subject());
    EXPECT_TRUE(r.valid);
    EXPECT_EQ(r.score, 50);
    EXPECT_NE(last_user_text(srv.requests()[1]).find("not an anchor"), std::string::npos);
  }
}

TEST(JudgeLevel, MalformedJsonTwiceIsInvalid) {
  FakeModelServer srv({openai_text("{\"reasoning\": \"cut"), openai_text("{\"score\": 75, \"citations\": [", "length")});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  auto r = j.judge_level(toy_task(), "L1", solution_subject());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.score, 0);
  EXPECT_TRUE(r.citations.empty());
  EXPECT_NE(r.invalid_reason.find("cut off at the output limit"), std::string::npos) << r.invalid_reason;
  EXPECT_EQ(r.attempts[1].stop_reason, "max_tokens");
}

TEST(JudgeLevel, ScoreAboveZeroNeedsAVerifiedCitation) {
  json none{{"reasoning", "vector loads everywhere"}, {"score", 50}, {"citations", json::array()}};
  FakeModelServer srv({openai_text(none.dump()), openai_text(none.dump())});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  auto r = j.judge_level(toy_task(), "L1", solution_subject());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.score, 0);
  EXPECT_NE(r.invalid_reason.find("at least one citation"), std::string::npos);
  // A zero needs none.
  json zero{{"reasoning", "no grid-stride loop"}, {"score", 0}, {"citations", json::array()}};
  FakeModelServer srv2({openai_text(zero.dump())});
  auto p2 = w.provider(srv2);
  judge::Judge j2(*p2, judge::embedded_prompts());
  auto r2 = j2.judge_level(toy_task(), "L2", solution_subject());
  EXPECT_TRUE(r2.valid);
  EXPECT_EQ(r2.score, 0);
}

TEST(JudgeLevel, AnthropicWireFormatToo) {
  FakeModelServer srv({anthropic_text(verdict(100))});
  World w;
  auto p = w.provider(srv, agent::ProviderKind::anthropic);
  judge::Judge j(*p, judge::embedded_prompts());
  auto r = j.judge_level(toy_task(), "L1", solution_subject());
  EXPECT_TRUE(r.valid) << r.invalid_reason;
  EXPECT_EQ(r.score, 100);
  auto body = srv.requests().at(0).json();
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_NE(body["system"].dump().find("D2K-Bench"), std::string::npos);
}

TEST(JudgeLevel, ApiErrorsAreExceptionsNotJudgments) {
  FakeModelServer srv({ScriptedReply::json({{"error", {{"message", "bad key"}}}}, 401)});
  World w;
  auto p = w.provider(srv);
  judge::Judge j(*p, judge::embedded_prompts());
  EXPECT_THROW(j.judge_level(toy_task(), "L1", solution_subject()), agent::ProviderError);
}

// ---- a campaign in a store ----------------------------------------------------------------------------------

namespace {

constexpr const char* kSecretMs = "7.654321";  // timings a judge must never see
constexpr const char* kSecretSpeedup = "13.579";

struct Campaign {
  fs::path dir, db;
  std::int64_t campaign_id = 0, run_id = 0, run2_id = 0, sub_id = 0;
};

Campaign make_campaign(const std::string& name) {
  Campaign c;
  c.dir = temp_dir(name);
  c.db = c.dir / "c.db";
  auto st = store::Store::open(c.db);
  c.campaign_id = st.add_campaign({0, "camp", json::object(), "0.0.1", ""});
  store::RunRow r;
  r.campaign_id = c.campaign_id;
  r.model = "fake-gpt";
  r.task = "toy_scale";
  r.condition = "none";
  r.status = "finished";
  c.run_id = st.add_run(r);
  r.condition = "all";
  c.run2_id = st.add_run(r);  // no final submission: not judged for JS_impl
  // The submission's record folder, as the agent loop leaves it: the solution and the evaluator's result.
  fs::path rec = c.dir / "runs" / "000";
  fs::create_directories(rec);
  fs::copy_file(kFix / "solution" / "solution.py", rec / "solution.py");
  json trace{{"environment", {{"gpu", "test"}}},
             {"traces", json::array({{{"task", "toy_scale"}, {"workload", "w0"}, {"timed", true}, {"status", "passed"},
                                      {"performance", {{"solution", {{"median_ms", std::stod(kSecretMs)}}},
                                                       {"eager", {{"median_ms", std::stod(kSecretMs) * std::stod(kSecretSpeedup)}}}}}}})}};
  write_file_atomic(rec / "evaluation.json", trace.dump());
  store::SubmissionRow s;
  s.run_id = c.run_id;
  s.seq = 0;
  s.language = "triton";
  s.source_path = "runs/000/solution.py";  // relative to the store's folder
  c.sub_id = st.add_submission(s);
  st.add_evaluation(c.sub_id, "official", trace);
  st.set_final_submission(c.run_id, c.sub_id);
  return c;
}

judge::CampaignJudgeOptions options(agent::Provider& judge_provider, const Campaign& c) {
  judge::CampaignJudgeOptions o;
  o.judge_model = "fake-judge";
  o.judge = &judge_provider;
  o.prompts = judge::embedded_prompts();
  o.base_dir = c.dir;
  o.proposals_dir = c.dir / "proposals";
  o.load_task = [](const std::string& name, std::string& why) -> std::optional<Task> {
    if (name != "toy_scale") {
      why = "unknown";
      return std::nullopt;
    }
    return toy_task();
  };
  return o;
}

long long count(store::Store& st, const std::string& where) {
  long long n = -1;
  st.exec("CREATE TEMP TABLE IF NOT EXISTS _n(v INTEGER)");
  st.exec("DELETE FROM _n");
  st.exec("INSERT INTO _n SELECT COUNT(*) FROM judgments WHERE " + where);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(st.handle(), "SELECT v FROM _n", -1, &q, nullptr);
  if (sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return n;
}

}  // namespace

TEST(JudgeCampaign, JudgesFinalSubmissionsResumesAndNeverShowsTimings) {
  auto c = make_campaign("camp");
  World w;
  {
    FakeModelServer srv({openai_text(verdict(75)), openai_text(fabricated(50)), openai_text(fabricated(50)),
                         openai_text(verdict(25))});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto res = judge::judge_campaign(st, options(*p, c));
    EXPECT_EQ(res.judged, 3);
    EXPECT_EQ(res.invalid, 1);
    EXPECT_EQ(res.failed, 0);
    EXPECT_EQ(res.judge_usage.input_tokens, 4000);
    EXPECT_EQ(count(st, "kind='impl' AND judge_model='fake-judge'"), 3);
    EXPECT_EQ(count(st, fmt::format("submission_id={} AND run_id={}", c.sub_id, c.run_id)), 3);
    EXPECT_EQ(count(st, "level='L2' AND valid=0 AND score=0"), 1);
    EXPECT_EQ(count(st, "level='L1' AND valid=1 AND score=75 AND citations LIKE '%\"verified\":true%'"), 1);
    EXPECT_EQ(count(st, "level='L2' AND raw_output LIKE '%atomic_cas%'"), 1);  // raw outputs are kept
    auto reqs = srv.requests();
    ASSERT_EQ(reqs.size(), 4u);
    for (const auto& r : reqs) {
      EXPECT_EQ(r.body.find(kSecretMs), std::string::npos);
      EXPECT_EQ(r.body.find(kSecretSpeedup), std::string::npos);
      EXPECT_EQ(r.body.find("median_ms"), std::string::npos);
      EXPECT_EQ(r.body.find("speedup"), std::string::npos);
      EXPECT_EQ(r.body.find("evaluation.json"), std::string::npos);
      EXPECT_NE(r.body.find("tl.store(y_ptr + offs, x * alpha, mask=mask)"), std::string::npos);  // the code is there
    }
    // The scores see the judgments: JS_impl of the run = (75 + 0 + 25) / 3.
    auto data = st.load(c.campaign_id);
    auto sc = score::compute_scores(data, score::Baseline{}, 0);
    const auto* g = sc.group("fake-gpt", "none");
    ASSERT_TRUE(g);
    ASSERT_TRUE(g->tasks.at(0).js_impl);
    EXPECT_NEAR(*g->tasks.at(0).js_impl, 100.0 / 3, 1e-9);
  }
  {  // Again: everything is stored, nothing is asked.
    FakeModelServer srv({});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto res = judge::judge_campaign(st, options(*p, c));
    EXPECT_EQ(res.judged, 0);
    EXPECT_EQ(res.skipped, 3);
    EXPECT_TRUE(srv.requests().empty());
  }
  {  // Two repeats: only repeat 1 is asked; the spread is measured.
    FakeModelServer srv({openai_text(verdict(75)), openai_text(verdict(50)), openai_text(verdict(25))});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto o = options(*p, c);
    o.repeats = 2;
    auto res = judge::judge_campaign(st, o);
    EXPECT_EQ(res.judged, 3);
    EXPECT_EQ(res.skipped, 3);
    EXPECT_EQ(count(st, "repeat=1"), 3);
    auto noise = judge::stored_noise(st, c.campaign_id, "fake-judge");
    EXPECT_EQ(noise.all.items, 3);
    EXPECT_EQ(noise.all.agree, 2);                // L1 75/75, L3 25/25; L2 0 (invalid) / 50
    EXPECT_DOUBLE_EQ(noise.all.max_range, 50);
    EXPECT_EQ(noise.by_level.at("mean").items, 1);
  }
  fs::remove_all(c.dir);
}

TEST(JudgeCampaign, ApiErrorsSkipTheItemAndLoseNothing) {
  auto c = make_campaign("apierr");
  World w;
  {
    FakeModelServer srv({openai_text(verdict(75)), ScriptedReply::json({{"error", {{"message", "nope"}}}}, 400),
                         openai_text(verdict(25))});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto res = judge::judge_campaign(st, options(*p, c));
    EXPECT_EQ(res.judged, 2);
    EXPECT_EQ(res.failed, 1);
    EXPECT_FALSE(res.aborted);
    ASSERT_EQ(res.errors.size(), 1u);
    EXPECT_NE(res.errors[0].find("L2"), std::string::npos);
    EXPECT_NE(res.errors[0].find("bad_request"), std::string::npos);
  }
  {  // A refused key stops everything at once; what was stored stays.
    FakeModelServer srv({ScriptedReply::json({{"error", {{"message", "bad key"}}}}, 401)});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto res = judge::judge_campaign(st, options(*p, c));
    EXPECT_TRUE(res.aborted);
    EXPECT_EQ(res.judged, 0);
    EXPECT_EQ(srv.requests().size(), 1u);
    EXPECT_EQ(count(st, "1"), 2);
  }
  {  // The resumed run asks only for L2.
    FakeModelServer srv({openai_text(verdict(50))});
    auto p = w.provider(srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto res = judge::judge_campaign(st, options(*p, c));
    EXPECT_EQ(res.judged, 1);
    EXPECT_EQ(res.skipped, 2);
    EXPECT_NE(last_user_text(srv.requests().at(0)).find("One program per 4096 elements"), std::string::npos);
    EXPECT_EQ(count(st, "level='L2' AND score=50"), 1);
  }
  fs::remove_all(c.dir);
}

TEST(JudgeCampaign, MissingSolutionOrTaskIsReportedNotFatal) {
  auto c = make_campaign("missing");
  fs::remove(c.dir / "runs" / "000" / "solution.py");
  World w;
  FakeModelServer srv({});
  auto p = w.provider(srv);
  auto st = store::Store::open(c.db, {.create = false});
  auto res = judge::judge_campaign(st, options(*p, c));
  EXPECT_EQ(res.failed, 1);
  EXPECT_EQ(res.judged, 0);
  ASSERT_EQ(res.errors.size(), 1u);
  EXPECT_NE(res.errors[0].find("solution.py"), std::string::npos) << res.errors[0];
  fs::remove_all(c.dir);
}

TEST(JudgeDesign, ProposalUnguidedThenJudgedAndResumed) {
  auto c = make_campaign("design");
  World w;
  std::string proposal =
      "## L1: algorithmic insight\nOne pass: read x once, write y once.\n\n"
      "## L2: dataflow design\nEach program owns 4096 consecutive elements and loops over them in blocks.\n\n"
      "## L3: low-level optimizations\n16-byte vector loads; multiply in registers.\n";
  json v1{{"reasoning", "the proposal loops over a 4096-element block"}, {"score", 100},
          {"citations", json::array({{{"file", "proposal.md"}, {"start_line", 5}, {"end_line", 5},
                                      {"quote", "Each program owns 4096 consecutive elements"}}})}};
  json v0{{"reasoning", "nothing about vector loads"}, {"score", 0}, {"citations", json::array()}};
  json bad{{"reasoning", "x"}, {"score", 75},
           {"citations", json::array({{{"file", "solution.py"}, {"start_line", 1}, {"end_line", 1}, {"quote", "import triton"}}})}};
  {
    FakeModelServer model_srv({openai_text(proposal)});
    FakeModelServer judge_srv({openai_text(v0.dump()), openai_text(v1.dump()), openai_text(bad.dump()),
                               openai_text(bad.dump())});
    auto jp = w.provider(judge_srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto o = options(*jp, c);
    o.impl = false;
    o.design = true;
    int made = 0;
    o.model_provider = [&](const std::string& name) {
      EXPECT_EQ(name, "fake-gpt");
      ++made;
      auto m = test::test_model(agent::ProviderKind::openai, model_srv.base_url());
      m.api_key_env = "";
      return agent::make_provider(m, w.fw.deps());
    };
    auto res = judge::judge_campaign(st, o);
    EXPECT_EQ(made, 1);  // one proposal per (model, task), though the model has two runs of the task
    EXPECT_EQ(res.proposals, 1);
    EXPECT_EQ(res.judged, 3);
    EXPECT_EQ(res.invalid, 1);  // L3 cited a file that is not the proposal
    // The proposer saw the task without guidance and without tools.
    auto mreq = model_srv.requests();
    ASSERT_EQ(mreq.size(), 1u);
    auto mbody = mreq[0].body;
    EXPECT_FALSE(mreq[0].json().contains("tools"));
    EXPECT_EQ(mbody.find("Load and store 16 bytes per thread"), std::string::npos);
    EXPECT_EQ(mbody.find("One program per 4096 elements"), std::string::npos);
    EXPECT_EQ(mbody.find("Expert guidance"), std::string::npos);
    EXPECT_NE(mbody.find("L1: algorithmic insight"), std::string::npos);
    // The judge saw the proposal with numbered lines.
    EXPECT_NE(last_user_text(judge_srv.requests()[1]).find("5| Each program owns 4096"), std::string::npos);
    EXPECT_EQ(count(st, fmt::format("kind='design' AND run_id={} AND submission_id IS NULL", c.run_id)), 3);
    EXPECT_EQ(count(st, "kind='design' AND level='L2' AND score=100 AND valid=1"), 1);
    EXPECT_EQ(count(st, "kind='design' AND level='L3' AND valid=0 AND raw_output LIKE '%Each program owns%'"), 1);
    EXPECT_TRUE(fs::exists(c.dir / "proposals" / "camp" / "fake-gpt" / "toy_scale" / "proposal.md"));
  }
  {  // Resumed with two repeats: the kept proposal is reused (no model call), only repeat 1 is judged.
    FakeModelServer judge_srv({openai_text(v0.dump()), openai_text(v1.dump()), openai_text(v0.dump())});
    auto jp = w.provider(judge_srv);
    auto st = store::Store::open(c.db, {.create = false});
    auto o = options(*jp, c);
    o.impl = false;
    o.design = true;
    o.repeats = 2;
    fs::remove_all(c.dir / "proposals");  // the store keeps the proposal too
    o.model_provider = [&](const std::string&) -> std::unique_ptr<agent::Provider> {
      ADD_FAILURE() << "the proposal must not be asked again";
      throw std::runtime_error("no");
    };
    auto res = judge::judge_campaign(st, o);
    EXPECT_EQ(res.proposals, 0);
    EXPECT_EQ(res.judged, 3);
    EXPECT_EQ(res.skipped, 3);
    EXPECT_EQ(count(st, "kind='design' AND repeat=1"), 3);
  }
  fs::remove_all(c.dir);
}

// ---- the CLI ------------------------------------------------------------------------------------------------

namespace {
struct Cmd {
  int rc;
  std::string out;
};
Cmd run_cmd(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (f && std::fgets(buf, sizeof buf, f)) out += buf;
  int st = f ? ::pclose(f) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}
std::string registry_for(const FakeModelServer& s, const fs::path& dir) {
  auto file = dir / "models.toml";
  write_file_atomic(file, fmt::format(R"([[models]]
name = "fake-judge"
provider = "openai"
base_url = "{}"
model = "judge-test"
temperature = 0.7
max_output_tokens = 1024
context_window = 100000
prices = {{ input = 1.0, output = 2.0 }}
)", s.base_url()));
  return file.string();
}
}  // namespace

TEST(JudgeCli, SingleSolutionPrintsScores) {
  auto dir = temp_dir("cli");
  FakeModelServer srv({openai_text(verdict(75)), openai_text(verdict(50)), openai_text(fabricated(25)),
                       openai_text(fabricated(25))});
  auto reg = registry_for(srv, dir);
  auto r = run_cmd(fmt::format("{} judge --solution {} --task {} --judge-model fake-judge --models {} --json", D2K_BINARY,
                               (kFix / "solution").string(), (kFix / "001_toy_scale").string(), reg));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["repeats"].size(), 1u);
  auto levels = j["repeats"][0]["levels"];
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0]["score"], 75);
  EXPECT_EQ(levels[1]["score"], 50);
  EXPECT_EQ(levels[2]["valid"], false);
  EXPECT_NEAR(j["repeats"][0]["mean"].get<double>(), 125.0 / 3, 1e-9);
  EXPECT_EQ(srv.requests().at(0).json()["temperature"], 0.0);  // the registry's 0.7 is overridden
  fs::remove_all(dir);
}

TEST(JudgeCli, UsageErrorsAndPromptPreview) {
  auto r = run_cmd(fmt::format("{} judge", D2K_BINARY));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("nothing to judge"), std::string::npos);
  r = run_cmd(fmt::format("{} judge --solution {} --judge-model x", D2K_BINARY, (kFix / "solution").string()));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--task is required"), std::string::npos);
  r = run_cmd(fmt::format("{} judge --print-prompt --solution {} --task {} --level L3", D2K_BINARY,
                          (kFix / "solution").string(), (kFix / "001_toy_scale").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("Multiply in registers right after the load"), std::string::npos);
  EXPECT_NE(r.out.find("def solve(x, y, *, alpha):"), std::string::npos);
  auto dir = temp_dir("cli2");
  FakeModelServer srv({});
  auto reg = registry_for(srv, dir);
  r = run_cmd(fmt::format("{} judge {} --judge-model fake-judge --models {}", D2K_BINARY, (dir / "absent.db").string(), reg));
  EXPECT_EQ(r.rc, 1) << r.out;
  r = run_cmd(fmt::format("{} judge {} --judge-model nope --models {}", D2K_BINARY, (dir / "absent.db").string(), reg));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("no model 'nope'"), std::string::npos);
  fs::remove_all(dir);
}

TEST(JudgeCli, CampaignInAStore) {
  auto c = make_campaign("clistore");
  FakeModelServer srv({openai_text(verdict(75)), openai_text(verdict(50)), openai_text(verdict(25))});
  auto reg = registry_for(srv, c.dir);
  auto cmd = fmt::format("D2K_TASKS={} {} judge {} --judge-model fake-judge --models {}", kFix.string(), D2K_BINARY,
                         c.db.string(), reg);
  auto r = run_cmd(cmd);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("3 judged (0 invalid), 0 already stored, 0 failed"), std::string::npos) << r.out;
  r = run_cmd(cmd);  // resumed: nothing left to ask (the server has no more replies)
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("0 judged (0 invalid), 3 already stored"), std::string::npos) << r.out;
  fs::remove_all(c.dir);
}

TEST(JudgeCli, RepeatsPrintScoresAndTheirSpread) {
  auto dir = temp_dir("cli3");
  FakeModelServer srv({openai_text(verdict(75)), openai_text(verdict(50)), openai_text(fabricated(25)),
                       openai_text(fabricated(25)), openai_text(verdict(100)), openai_text(verdict(50)),
                       openai_text(verdict(25))});
  auto reg = registry_for(srv, dir);
  auto r = run_cmd(fmt::format("{} judge --solution {} --task {} --judge-model fake-judge --models {} --repeats 2",
                               D2K_BINARY, (kFix / "solution").string(), (kFix / "001_toy_scale").string(), reg));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("INVALID"), std::string::npos) << r.out;           // repeat 0, L3
  EXPECT_NE(r.out.find("✗ solution.py:3-5"), std::string::npos) << r.out;  // the failed citation, shown
  EXPECT_NE(r.out.find("JS_impl = 41.7"), std::string::npos) << r.out;    // (75 + 50 + 0) / 3
  EXPECT_NE(r.out.find("JS_impl = 58.3"), std::string::npos) << r.out;    // repeat 1: (100 + 50 + 25) / 3
  // Three level items, L2 agreeing (50, 50): 33.3% agree, largest range 25 (L1 75/100, L3 0/25).
  EXPECT_NE(r.out.find("levels     3 items  all repeats agree  33.3%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max range  25.0"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
