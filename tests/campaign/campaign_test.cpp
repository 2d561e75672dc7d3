// Campaigns (docs/CAMPAIGNS.md): the real `d2k campaign` binary against a fake model server on loopback, the CPU
// evaluation path and three toy tasks (tests/fixtures/campaign_tasks). A campaign killed with SIGKILL midway and
// resumed scores as an uninterrupted one; shards merged equal the unsharded campaign; merge conflicts are refused;
// campaign files with mistakes are refused naming the file, the line and the key.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <set>
#include <sqlite3.h>
#include <thread>

#include "agent_loop/agent_loop_support.hpp"
#include "campaign/config.hpp"
#include "campaign/gpu_lock.hpp"
#include "campaign/merge.hpp"
#include "campaign/runner.hpp"
#include "campaign/routed_model_server.hpp"
#include "core/files.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using agent::ProviderKind;
using test::ScriptedReply;

constexpr const char* kSolution = R"(import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


def solve(x, y, *, alpha):
    n = x.numel()
    _scale[(triton.cdiv(n, 1024),)](x, y, n, alpha, BLOCK=1024)
)";

std::string solution(bool correct) {
  std::string s = kSolution;
  s.replace(s.find("FACTOR"), 6, correct ? "alpha" : "(alpha + 1.0)");
  return s;
}

// The fake models' behaviour, a function of the conversation so that concurrent and resumed runs get the same
// answers: fake-a speaks OpenAI, fake-b Anthropic. `solve`: write solution.py, submit, say done (fake-b gets
// toy_half wrong without guidance); otherwise say done at once.
ScriptedReply fake_model(const test::RecordedRequest& req, bool solve, int delay_ms) {
  json body = json::parse(req.body);
  ProviderKind kind = req.path.find("/v1/messages") != std::string::npos ? ProviderKind::anthropic : ProviderKind::openai;
  int assistant = 0;
  for (const auto& m : body.value("messages", json::array()))
    if (m.value("role", "") == "assistant") ++assistant;
  bool guided = req.body.find("Vector loads") != std::string::npos;
  bool wrong = kind == ProviderKind::anthropic && req.body.find("toy_half") != std::string::npos && !guided;
  ScriptedReply r;
  std::string id = "c" + std::to_string(assistant + 1);
  if (!solve || assistant >= 2)
    r = test::reply(kind, "Done.", {});
  else if (assistant == 0)
    r = test::reply(kind, "", {{id, "write_file", {{"path", "solution.py"}, {"content", solution(!wrong)}}, ""}});
  else
    r = test::reply(kind, "", {{id, "submit", json::object(), ""}});
  r.delay_ms = delay_ms;
  return r;
}

fs::path write_registry(const fs::path& dir, const std::string& base_url) {
  fs::path p = dir / "models.toml";
  std::string text;
  for (auto [name, provider] : {std::pair{"fake-a", "openai"}, std::pair{"fake-b", "anthropic"}})
    text += fmt::format(R"([[models]]
name = "{}"
provider = "{}"
base_url = "{}"
model = "{}-model"
max_output_tokens = 1024
context_window = 100000
request_timeout_s = 30
prices = {{ input = 2.0, cached_input = 0.5, output = 8.0 }}

)",
                        name, provider, base_url, name);
  write_file_atomic(p, text);
  return p;
}

fs::path tasks_dir() { return test::fixtures() / "campaign_tasks"; }

fs::path write_campaign(const fs::path& dir, const std::string& extra = "", const std::string& store = "store.db") {
  fs::create_directories(dir);
  fs::path p = dir / "campaign.toml";
  write_file_atomic(p, fmt::format(R"(name = "ci"
store = "{}"
tasks_dir = "{}"
models_file = "../models.toml"
models = ["fake-a", "fake-b"]
tasks = ["all"]
conditions = ["unguided", "guided"]
repeats = 1

[budgets]
turns = 10

[agent]
sandbox = "none"
{}
)",
                                   store, tasks_dir().string(), extra));
  return p;
}

struct Proc {
  pid_t pid = -1;
  fs::path log;
};

Proc spawn(const std::vector<std::string>& args, const fs::path& log, const fs::path& cache) {
  Proc p{-1, log};
  p.pid = ::fork();
  if (p.pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("D2K_CACHE", cache.c_str(), 1);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    std::string bin = D2K_BINARY;
    std::vector<std::string> all{bin};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return p;
}

int wait_exit(const Proc& p, std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  int st = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(p.pid, &st, WNOHANG) == p.pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(p.pid, SIGKILL);
  ::waitpid(p.pid, &st, 0);
  return -1;
}

std::string log_of(const Proc& p) { return read_file(p.log).value_or("(no log)"); }

// Read-only and without the store's migrations: the campaign process may be creating the store right now (opening
// it through Store::open here would race its first migration).
int count_status(const fs::path& store, const std::string& status) {
  if (!fs::exists(store)) return 0;
  sqlite3* db = nullptr;
  int n = 0;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM runs r JOIN campaigns c ON c.id=r.campaign_id "
                               "WHERE c.name='ci' AND r.status=?", -1, &q, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(q, 1, status.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return n;
}

// `d2k score --json` without wall times (the one figure a resumed run cannot reproduce).
json scores_without_wall(const fs::path& store) {
  auto r = test::run_d2k("score '" + store.string() + "' --json");
  EXPECT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out.substr(r.out.find('{')));
  std::function<void(json&)> strip = [&](json& x) {
    if (x.is_object()) {
      x.erase("wall_s");
      for (auto& [k, v] : x.items()) strip(v);
    } else if (x.is_array()) {
      for (auto& v : x) strip(v);
    }
  };
  strip(j);
  return j;
}

// The agent runs' own logs (for a failure message: a resumed run that ended early says why there).
std::string run_logs(const fs::path& runs) {
  std::string out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(runs, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".log") continue;
    std::ifstream in(it->path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() > 1500) text = "..." + text.substr(text.size() - 1500);
    out += "\n--- " + it->path().string() + "\n" + text;
  }
  return out;
}

bool any_run_lock_held(const fs::path& runs) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(runs, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "lock") continue;
    int fd = ::open(it->path().c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    ::close(fd);
    if (held) return true;
  }
  return false;
}

TEST(Campaign, SigkillMidwayThenResumeScoresAsAnUninterruptedRun) {
  test::TempDir tmp;
  test::RoutedModelServer server([](const test::RecordedRequest& r) { return fake_model(r, true, 150); });
  write_registry(tmp.path(), server.base_url());
  fs::path cache = tmp.path() / "cache";

  // The uninterrupted campaign; two runs at once sharing "GPU 0" (CPU path: the lock is still taken and recorded).
  fs::path ref = write_campaign(tmp.path() / "ref");
  Proc a = spawn({"campaign", "run", ref.string(), "--jobs", "2", "--gpus", "0"}, tmp.path() / "ref.log", cache);
  ASSERT_EQ(wait_exit(a, std::chrono::seconds(900)), 0) << log_of(a);
  fs::path ref_store = tmp.path() / "ref" / "store.db";
  EXPECT_EQ(count_status(ref_store, "finished"), 12) << log_of(a);

  // The same campaign killed with SIGKILL once a third of its runs are stored.
  fs::path killed = write_campaign(tmp.path() / "killed");
  fs::path killed_store = tmp.path() / "killed" / "store.db";
  Proc b = spawn({"campaign", "run", killed.string(), "--jobs", "2"}, tmp.path() / "killed1.log", cache);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (count_status(killed_store, "finished") < 4 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::kill(b.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(b, std::chrono::seconds(30)), 128 + SIGKILL);
  int finished_at_kill = count_status(killed_store, "finished");
  EXPECT_GE(finished_at_kill, 4) << log_of(b);
  EXPECT_LT(finished_at_kill, 12) << "the campaign was not killed midway";
  EXPECT_GE(count_status(killed_store, "running"), 1) << "no run was in flight when the campaign was killed";
  // Its agent runs die with it (they are resumed, not left running).
  auto t0 = std::chrono::steady_clock::now();
  while (any_run_lock_held(tmp.path() / "killed" / "ci.runs") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(any_run_lock_held(tmp.path() / "killed" / "ci.runs"));

  Proc c = spawn({"campaign", "run", killed.string(), "--jobs", "2"}, tmp.path() / "killed2.log", cache);
  ASSERT_EQ(wait_exit(c, std::chrono::seconds(900)), 0) << log_of(c) << run_logs(tmp.path() / "killed" / "ci.runs");
  std::string log2 = log_of(c);
  EXPECT_NE(log2.find(fmt::format("{} already done", finished_at_kill)), std::string::npos) << log2;
  EXPECT_EQ(count_status(killed_store, "finished"), 12) << log2;

  json sa = scores_without_wall(ref_store), sb = scores_without_wall(killed_store);
  EXPECT_EQ(sa, sb) << "uninterrupted:\n" << sa.dump(1) << "\nkilled and resumed:\n" << sb.dump(1);
  // The scores are not trivial: fake-b is wrong on toy_half without guidance, right everywhere else.
  auto dump = sa.dump();
  EXPECT_NE(dump.find("fake-a"), std::string::npos);
  store::OpenOptions oo;
  oo.create = false;
  for (const auto& path : {ref_store, killed_store}) {
    auto st = store::Store::open(path, oo);
    auto camp = st.resolve_campaign("ci");
    auto data = st.load(camp.id);
    int correct = 0, incorrect = 0;
    for (const auto& r : st.runs(camp.id)) {
      auto* sql = "SELECT COUNT(*) FROM submissions s JOIN evaluations e ON e.submission_id=s.id "
                  "WHERE s.run_id=? AND s.final=1 AND e.correct=1";
      sqlite3_stmt* q = nullptr;
      ASSERT_EQ(sqlite3_prepare_v2(st.handle(), sql, -1, &q, nullptr), SQLITE_OK);
      sqlite3_bind_int64(q, 1, r.id);
      ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
      bool ok = sqlite3_column_int(q, 0) > 0;
      sqlite3_finalize(q);
      (ok ? correct : incorrect)++;
      EXPECT_EQ(ok, !(r.model == "fake-b" && r.task == "toy_half" && r.condition == "none")) << r.model << " " << r.task;
      EXPECT_EQ(r.turns, 3) << r.model << " " << r.task << " " << r.condition;
      EXPECT_EQ(r.input_tokens, 3000);
    }
    EXPECT_EQ(correct, 11);
    EXPECT_EQ(incorrect, 1);
  }
  // Shared GPU: every official evaluation of the reference campaign held the GPU's lock exclusively, and says so.
  {
    auto st = store::Store::open(ref_store, oo);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(st.handle(), "SELECT trace_json FROM evaluations", -1, &q, nullptr), SQLITE_OK);
    int n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
      json t = json::parse(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
      ASSERT_TRUE(t.contains("gpu_lock")) << t.dump().substr(0, 500);
      EXPECT_EQ(t["gpu_lock"]["exclusive"], true);
      EXPECT_EQ(t["gpu_lock"]["cuda_visible_devices"], "0");
      EXPECT_NE(t["gpu_lock"]["path"].get<std::string>().find("gpu0.lock"), std::string::npos);
      ++n;
    }
    sqlite3_finalize(q);
    EXPECT_GE(n, 12);
  }
  // The killed-and-resumed campaign ran with one GPU-less slot each: nothing locked.
  EXPECT_NE(log_of(a).find("sharing 1 GPU(s)"), std::string::npos) << log_of(a);
}

TEST(Campaign, ShardsMergedEqualTheUnshardedCampaign) {
  test::TempDir tmp;
  test::RoutedModelServer server([](const test::RecordedRequest& r) { return fake_model(r, false, 0); });
  write_registry(tmp.path(), server.base_url());
  fs::path cache = tmp.path() / "cache";
  fs::path whole = write_campaign(tmp.path() / "whole");
  Proc w = spawn({"campaign", "run", whole.string(), "--jobs", "2"}, tmp.path() / "whole.log", cache);
  ASSERT_EQ(wait_exit(w, std::chrono::seconds(600)), 0) << log_of(w);

  std::vector<fs::path> shard_stores;
  int total = 0;
  for (int i = 1; i <= 2; ++i) {
    fs::path dir = tmp.path() / fmt::format("shard{}", i);
    fs::path f = write_campaign(dir);
    auto plan = test::run_d2k(fmt::format("campaign run '{}' --shard {}/2 --check", f.string(), i));
    ASSERT_EQ(plan.code, 0) << plan.out;
    EXPECT_NE(plan.out.find(fmt::format("shard {}/2: 6 runs", i)), std::string::npos) << plan.out;
    Proc s = spawn({"campaign", "run", f.string(), "--shard", fmt::format("{}/2", i), "--jobs", "2"},
                   tmp.path() / fmt::format("shard{}.log", i), cache);
    ASSERT_EQ(wait_exit(s, std::chrono::seconds(600)), 0) << log_of(s);
    total += count_status(dir / "store.db", "finished");
    EXPECT_EQ(count_status(dir / "store.db", "finished"), 6);
    shard_stores.push_back(dir / "store.db");
  }
  EXPECT_EQ(total, 12);
  fs::path merged = tmp.path() / "merged.db";
  auto m = test::run_d2k("campaign merge '" + merged.string() + "' '" + shard_stores[0].string() + "' '" +
                         shard_stores[1].string() + "'");
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("12 run(s)"), std::string::npos) << m.out;
  EXPECT_EQ(count_status(merged, "finished"), 12);
  EXPECT_EQ(scores_without_wall(merged), scores_without_wall(tmp.path() / "whole" / "store.db"));
  // Merging a shard again changes nothing: its runs are identical duplicates.
  auto again = test::run_d2k("campaign merge '" + merged.string() + "' '" + shard_stores[0].string() + "'");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("0 run(s)"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("6 identical"), std::string::npos) << again.out;
  EXPECT_EQ(count_status(merged, "finished"), 12);
}

TEST(Campaign, SigtermStopsCleanlyAndTheRunsAreResumed) {
  test::TempDir tmp;
  // One slow list_files call, then done: a SIGTERM lands while the first model call is in flight.
  test::RoutedModelServer server([](const test::RecordedRequest& r) {
    bool anthropic = r.path.find("/v1/messages") != std::string::npos;
    auto kind = anthropic ? ProviderKind::anthropic : ProviderKind::openai;
    if (r.body.find("\"assistant\"") != std::string::npos) return test::reply(kind, "Done.", {});
    ScriptedReply rep = test::reply(kind, "", {{"c1", "list_files", json::object(), ""}});
    rep.delay_ms = 1500;
    return rep;
  });
  write_registry(tmp.path(), server.base_url());
  fs::path f = write_campaign(tmp.path() / "c");
  fs::path store = tmp.path() / "c" / "store.db";
  Proc p = spawn({"campaign", "run", f.string(), "--jobs", "3"}, tmp.path() / "1.log", tmp.path() / "cache");
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // Wait until the three children have written their start records (a child stopped before that has
  // nothing to resume and is restarted instead, which another test covers).
  auto started = [&] {
    int n = 0;
    for (const char* d : {"toy_scale/none", "toy_scale/all", "toy_triple/none"}) {
      fs::path t = tmp.path() / "c/ci.runs/fake-a" / d / "r0/trajectory.jsonl";
      std::ifstream in(t);
      std::string line;
      if (in && std::getline(in, line) && line.find("\"start\"") != std::string::npos) ++n;
    }
    return n;
  };
  while ((count_status(store, "running") < 3 || started() < 3) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(started(), 3) << log_of(p);
  ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(p, std::chrono::seconds(60)), 130) << log_of(p);
  EXPECT_NE(log_of(p).find("stopping: 3 run(s) asked to stop"), std::string::npos) << log_of(p);
  // The children wrote their interrupted records; the store says so; nothing is left running.
  EXPECT_EQ(count_status(store, "interrupted"), 3) << log_of(p);
  EXPECT_EQ(count_status(store, "running"), 0);
  auto st = test::run_d2k("agent status --json '" + (tmp.path() / "c/ci.runs/fake-a/toy_scale/none/r0").string() + "'");
  ASSERT_EQ(st.code, 0) << st.out;
  EXPECT_EQ(json::parse(st.out)["status"], "interrupted") << st.out;
  EXPECT_FALSE(json::parse(st.out).contains("recorded")) << "no final record was written: " << st.out;
  Proc q = spawn({"campaign", "run", f.string(), "--jobs", "3"}, tmp.path() / "2.log", tmp.path() / "cache");
  ASSERT_EQ(wait_exit(q, std::chrono::seconds(300)), 0) << log_of(q);
  EXPECT_NE(log_of(q).find("resume fake-a/toy_scale/none/r0"), std::string::npos) << log_of(q);
  EXPECT_EQ(count_status(store, "finished"), 12) << log_of(q);
}

// Two stores holding the same cell with different outcomes.
void make_store(const fs::path& p, const std::string& status, int turns, const json& protocol) {
  auto st = store::Store::open(p);
  store::CampaignRow c;
  c.name = "ci";
  c.config = {{"protocol", protocol}};
  auto cid = st.add_campaign(c);
  store::RunRow r;
  r.campaign_id = cid;
  r.model = "fake-a";
  r.task = "toy_scale";
  r.condition = "none";
  r.status = status;
  r.turns = turns;
  auto rid = st.add_run(r);
  store::SubmissionRow s;
  s.run_id = rid;
  s.seq = 1;
  s.sha256 = "abc";
  s.final = true;
  st.add_submission(s);
  store::RunRow r2 = r;
  r2.task = "toy_half";
  st.add_run(r2);
}

TEST(Campaign, MergeRefusesConflictingDuplicatesAndLeavesTheOutputAsItWas) {
  test::TempDir tmp;
  json proto{{"name", "ci"}, {"repeats", 1}};
  make_store(tmp.path() / "a.db", "finished", 3, proto);
  make_store(tmp.path() / "b.db", "finished", 4, proto);  // the same cell, another number of turns
  make_store(tmp.path() / "c.db", "finished", 3, {{"name", "ci"}, {"repeats", 2}});
  fs::path out = tmp.path() / "out.db";
  auto ok = test::run_d2k("campaign merge '" + out.string() + "' '" + (tmp.path() / "a.db").string() + "'");
  ASSERT_EQ(ok.code, 0) << ok.out;
  auto bad = test::run_d2k("campaign merge '" + out.string() + "' '" + (tmp.path() / "b.db").string() + "'");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("conflicting duplicate run: campaign 'ci', model fake-a, task toy_scale, condition none, "
                         "repeat 0"),
            std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("turns: 4 vs 3"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("nothing was merged"), std::string::npos) << bad.out;
  auto proto_bad = test::run_d2k("campaign merge '" + out.string() + "' '" + (tmp.path() / "c.db").string() + "'");
  EXPECT_EQ(proto_bad.code, 1) << proto_bad.out;
  EXPECT_NE(proto_bad.out.find("another configuration"), std::string::npos) << proto_bad.out;
  // The refused merges wrote nothing: OUT still holds exactly a.db's two runs and one submission.
  auto st = store::Store::open(out);
  auto c = st.resolve_campaign("ci");
  auto runs = st.runs(c.id);
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& r : runs) EXPECT_EQ(r.turns, 3) << "a.db's runs were overwritten";
  for (const auto& [table, n] : st.counts())
    if (table == "submissions") EXPECT_EQ(n, 1) << table;
  // A missing input is an error naming it.
  auto missing = test::run_d2k("campaign merge '" + out.string() + "' '" + (tmp.path() / "nope.db").string() + "'");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("nope.db: no such store"), std::string::npos) << missing.out;
}

struct BadFile {
  std::string name, toml, expected;
};

class CampaignFileErrors : public ::testing::TestWithParam<BadFile> {};

TEST_P(CampaignFileErrors, AreRefusedNamingFileLineAndKey) {
  test::TempDir tmp;
  write_registry(tmp.path(), "http://127.0.0.1:9");
  fs::path dir = tmp.path() / "c";
  fs::create_directories(dir);
  fs::path f = dir / "campaign.toml";
  std::string text = GetParam().toml;
  auto put = [&](const std::string& key, const std::string& value) {
    if (auto p = text.find("@" + key); p != std::string::npos) text.replace(p, key.size() + 1, value);
  };
  put("TASKS", tasks_dir().string());
  write_file_atomic(f, text);
  auto r = test::run_d2k("campaign run '" + f.string() + "' --check");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(GetParam().expected), std::string::npos) << "expected: " << GetParam().expected << "\n" << r.out;
  EXPECT_NE(r.out.find("nothing was run"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "store.db")) << "a refused campaign created its store";
}

const std::string kHead = "name = \"ci\"\nstore = \"store.db\"\ntasks_dir = \"@TASKS\"\nmodels_file = \"../models.toml\"\n";

INSTANTIATE_TEST_SUITE_P(
    Campaign, CampaignFileErrors,
    ::testing::Values(
        BadFile{"MissingName", "store = \"s.db\"\nmodels = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n",
                "name: missing"},
        BadFile{"UnknownKey", kHead + "models = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n[budgets]\nturn = 3\n",
                "campaign.toml:9: budgets.turn: unknown key"},
        BadFile{"UnknownCondition", kHead + "models = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\", \"L3\"]\n",
                "conditions[1]: unknown condition 'L3'"},
        BadFile{"UnknownModel", kHead + "models = [\"fake-a\", \"gpt-9\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n",
                "models[1]: no model 'gpt-9'"},
        BadFile{"UnknownTask", kHead + "models = [\"fake-a\"]\ntasks = [\"toy_scale\", \"nope\"]\nconditions = [\"none\"]\n",
                "tasks[1]:"},
        BadFile{"ZeroRepeats", kHead + "models = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\nrepeats = 0\n",
                "campaign.toml:8: repeats: must be between 1 and 1000"},
        BadFile{"DuplicateModel", kHead + "models = [\"fake-a\", \"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n",
                "models[1]: 'fake-a' is listed twice"},
        BadFile{"BadPolicy", kHead + "models = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n[agent]\nfinal = \"first\"\n",
                "agent.final: must be \"last\" or \"best\""},
        BadFile{"BadGpus", kHead + "models = [\"fake-a\"]\ntasks = [\"all\"]\nconditions = [\"none\"]\n[parallel]\ngpus = [0, -1]\n",
                "parallel.gpus[1]: must be a GPU index"},
        BadFile{"NotToml", "name = \"ci\nstore = 1\n", "campaign.toml:1"}),
    [](const auto& info) { return info.param.name; });

TEST(Campaign, CheckPrintsTheMatrixAndShardsPartitionIt) {
  test::TempDir tmp;
  write_registry(tmp.path(), "http://127.0.0.1:9");
  fs::path f = write_campaign(tmp.path() / "c", "[parallel]\njobs = 3\n");
  Diagnostics d;
  auto cfg = load_campaign_config(f, d);
  ASSERT_TRUE(cfg) << (d.empty() ? "" : d.items()[0].to_string());
  auto cells = build_matrix(*cfg, d);
  ASSERT_TRUE(cells);
  ASSERT_EQ(cells->size(), 12u);
  EXPECT_EQ(cfg->jobs, 3);
  EXPECT_EQ(cfg->conditions, (std::vector<std::string>{"none", "all"}));
  EXPECT_EQ((*cells)[0].label(), "fake-a/toy_scale/none/r0");
  EXPECT_EQ((*cells)[11].label(), "fake-b/toy_half/all/r0");
  for (int n : {1, 2, 3, 5, 12, 13}) {
    std::set<int> seen;
    std::size_t sum = 0;
    for (int i = 1; i <= n; ++i) {
      auto part = shard_cells(*cells, {i, n});
      sum += part.size();
      for (const auto& c : part) EXPECT_TRUE(seen.insert(c.index).second) << "cell in two shards";
      EXPECT_LE(part.size(), (12u + static_cast<unsigned>(n) - 1) / static_cast<unsigned>(n));
    }
    EXPECT_EQ(sum, 12u) << n << " shards";
  }
  std::string why;
  EXPECT_FALSE(parse_shard("0/2", why));
  EXPECT_FALSE(parse_shard("3/2", why));
  EXPECT_FALSE(parse_shard("1-2", why));
  EXPECT_TRUE(parse_shard("2/2", why));
  auto r = test::run_d2k("campaign run '" + f.string() + "' --check --shard 2/5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("= 12 runs; shard 2/5: 3 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fake-a/toy_scale/all/r0"), std::string::npos) << r.out;  // cell 1
  auto bad = test::run_d2k("campaign run '" + f.string() + "' --check --shard 6/5");
  EXPECT_EQ(bad.code, 2) << bad.out;
}

TEST(Campaign, RunsGetThePhysicalDeviceOfTheirPosition) {
  // Under CUDA_VISIBLE_DEVICES=2,3 the campaign sees GPUs 0 and 1; the run on GPU 1 must be given "3" (a
  // child's CUDA_VISIBLE_DEVICES names devices of the machine, not positions in its parent's list).
  const char* old = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string saved = old ? old : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
  EXPECT_EQ(campaign::detect_gpus(), (std::vector<int>{0, 1}));
  EXPECT_EQ(campaign::visible_device(0), "2");
  EXPECT_EQ(campaign::visible_device(1), "3");
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb", 1);
  EXPECT_EQ(campaign::visible_device(1), "GPU-bbbb");
  ::setenv("CUDA_VISIBLE_DEVICES", "5,-1,6", 1);  // CUDA stops at -1
  EXPECT_EQ(campaign::detect_gpus(), (std::vector<int>{0}));
  EXPECT_EQ(campaign::visible_device(0), "5");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(campaign::visible_device(2), "2");
  if (old) ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
}

TEST(Campaign, GpuLockExcludesSharedHoldersWhileExclusive) {
  test::TempDir tmp;
  fs::path p = tmp.path() / "gpu0.lock";
  auto ex = std::make_unique<GpuLock>(p, GpuLock::Mode::exclusive);
  std::atomic<bool> got{false};
  std::thread t([&] {
    GpuLock sh(p, GpuLock::Mode::shared);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load()) << "shared work ran while the GPU was held exclusively";
  ex.reset();
  t.join();
  EXPECT_TRUE(got.load());
  GpuLock a(p, GpuLock::Mode::shared), b(p, GpuLock::Mode::shared);  // shared holders coexist
  EXPECT_LT(b.waited_s(), 1.0);
  EXPECT_EQ(a.record()["exclusive"], false);
}

}  // namespace
}  // namespace d2k::campaign
