// The campaign store: schema and migrations, transactions, kill-safety, bad input, export, and the tiny
// campaign's scores through the store's trace extraction.
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "score/score.hpp"
#include "store/store.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace d2k::store;
using nlohmann::json;

namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / fmt::format("d2k-store-test-{:08x}{:08x}", rd(), rd());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path db() const { return dir_ / "c.sqlite"; }
  fs::path dir_;
};

long long count(Store& s, const std::string& table) {
  for (const auto& [t, n] : s.counts())
    if (t == table) return n;
  return -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes the tiny campaign through the store's API; returns the campaign id.
std::int64_t write_tiny(Store& st, bool judgments = true) {
  auto cid = st.add_campaign({0, "tiny", {{"models", {"A", "B"}}}, "1", ""});
  for (const auto& tr : d2k::testing::tiny_runs(judgments)) {
    Store::Transaction t(st);
    RunRow r;
    r.campaign_id = cid;
    r.model = tr.model;
    r.task = tr.task;
    r.condition = tr.condition;
    r.status = "finished";
    r.input_tokens = tr.input;
    r.cached_tokens = tr.cached;
    r.output_tokens = tr.output;
    r.cost_usd = tr.cost;
    r.id = st.add_run(r);
    std::int64_t last = 0;
    for (size_t i = 0; i < tr.subs.size(); ++i) {
      SubmissionRow s;
      s.run_id = r.id;
      s.seq = static_cast<int>(i);
      s.final = i + 1 == tr.subs.size();
      last = st.add_submission(s);
      // A check evaluation that disagrees is never scored; the official one is.
      st.add_evaluation(last, "check", d2k::testing::tiny_trace(tr.task, {false, 0, 0}));
      st.add_evaluation(last, "official", d2k::testing::tiny_trace(tr.task, tr.subs[i]));
    }
    for (const auto& [level, sc] : tr.judgments) {
      JudgmentRow j;
      j.run_id = r.id;
      j.submission_id = last;
      j.level = level;
      j.valid = sc >= 0;
      j.score = sc < 0 ? 0 : sc;
      st.add_judgment(j);
    }
    t.commit();
  }
  return cid;
}

TEST_F(StoreTest, CreatesCurrentSchemaInWalMode) {
  auto st = Store::open(db());
  EXPECT_EQ(st.schema_version(), kSchemaVersion);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(st.handle(), "PRAGMA journal_mode", -1, &q, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)), "wal");
  sqlite3_finalize(q);
  EXPECT_EQ(count(st, "schema_migrations"), kSchemaVersion);
  EXPECT_EQ(st.integrity_check(), "ok");
}

TEST_F(StoreTest, ProcessesCreatingOneNewStoreAtOnceAllSucceed) {
  // A campaign and its first agent runs (or two shards on one disk) may create the same store together: each
  // must see either no schema or the whole of it, and none may fail applying a migration the other applied.
  for (int round = 0; round < 8; ++round) {
    auto path = dir_ / fmt::format("race{}.db", round);
    std::vector<pid_t> kids;
    for (int k = 0; k < 4; ++k) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        try {
          auto st = Store::open(path);
          ::_exit(st.schema_version() == kSchemaVersion ? 0 : 2);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "open failed: %s\n", e.what());
          ::_exit(1);
        }
      }
      kids.push_back(pid);
    }
    for (pid_t pid : kids) {
      int ws = 0;
      ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
      EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << "round " << round << ": a process failed to open";
    }
    auto st = Store::open(path);
    EXPECT_EQ(count(st, "schema_migrations"), kSchemaVersion);
  }
}

TEST_F(StoreTest, MigratesV1ToCurrentKeepingRows) {
  {
    auto st = Store::open(db(), {.create = true, .target_version = 1});
    ASSERT_EQ(st.schema_version(), 1);
    // v1 has no judgments table and no reasoning-token column.
    EXPECT_THROW(st.exec("SELECT * FROM judgments"), StoreError);
    EXPECT_THROW(st.exec("SELECT reasoning_tokens FROM runs"), StoreError);
    st.exec("INSERT INTO campaigns(name, created_at) VALUES('old', '2026-01-01T00:00:00Z')");
    st.exec("INSERT INTO runs(campaign_id, model, task, condition, status, input_tokens, cached_tokens, "
            "output_tokens, cost_usd) VALUES(1, 'm', 't', 'none', 'finished', 10, 4, 2, 0.25)");
  }
  auto st = Store::open(db());
  EXPECT_EQ(st.schema_version(), kSchemaVersion);
  auto c = st.campaign("old");
  ASSERT_TRUE(c);
  auto runs = st.runs(c->id);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].model, "m");
  EXPECT_EQ(runs[0].input_tokens, 10);
  EXPECT_EQ(runs[0].cached_tokens, 4);
  EXPECT_EQ(runs[0].reasoning_tokens, 0);
  EXPECT_DOUBLE_EQ(runs[0].cost_usd, 0.25);
  JudgmentRow j;
  j.run_id = runs[0].id;
  j.level = "L2";
  j.score = 75;
  EXPECT_GT(st.add_judgment(j), 0);
  EXPECT_EQ(count(st, "schema_migrations"), 2);
  EXPECT_EQ(st.integrity_check(), "ok");
}

TEST_F(StoreTest, RefusesBadFiles) {
  // Not SQLite at all.
  { std::ofstream(db()) << std::string(4096, 'x'); }
  try {
    Store::open(db());
    FAIL() << "opened a garbage file";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("not a d2k store"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(db().string()), std::string::npos) << e.what();
  }
  // SQLite, but someone else's.
  fs::remove(db());
  {
    sqlite3* h = nullptr;
    sqlite3_open(db().c_str(), &h);
    sqlite3_exec(h, "CREATE TABLE foo(x)", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  try {
    Store::open(db());
    FAIL() << "opened a foreign SQLite file";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("not a d2k store"), std::string::npos) << e.what();
  }
  // A store from a newer d2k.
  fs::remove(db());
  { Store::open(db()).exec("PRAGMA user_version=99"); }
  try {
    Store::open(db());
    FAIL() << "opened a newer store";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer d2k"), std::string::npos) << e.what();
  }
  // Absent, without create.
  EXPECT_THROW(Store::open(dir_ / "absent.sqlite", {.create = false}), StoreError);
  EXPECT_FALSE(fs::exists(dir_ / "absent.sqlite"));
}

TEST_F(StoreTest, TruncatedStoreIsReportedAsCorrupt) {
  {
    auto st = Store::open(db());
    write_tiny(st);
    st.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  auto size = fs::file_size(db());
  ASSERT_GT(size, 8192u);
  // Overwrite the middle of the file (the tables' pages) with garbage.
  {
    std::fstream f(db(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    std::string junk(size - 4096, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  bool reported = false;
  try {
    auto st = Store::open(db());
    auto check = st.integrity_check();
    reported = check != "ok";
    if (!reported) st.load(st.resolve_campaign("").id);
  } catch (const StoreError& e) {
    reported = true;
    EXPECT_NE(std::string(e.what()).find(db().string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(reported);
}

TEST_F(StoreTest, GarbledTracesAreRejectedAndWriteNothing) {
  auto st = Store::open(db());
  auto cid = st.add_campaign({0, "c", json::object(), "", ""});
  RunRow r;
  r.campaign_id = cid;
  r.model = "m";
  r.task = "t";
  r.condition = "none";
  auto rid = st.add_run(r);
  auto sid = st.add_submission({0, rid, 0, 0, "submit", "triton", "", "", true});
  struct Case {
    json trace;
    std::string expect;
  };
  std::vector<Case> cases{
      {json("passed"), "expected an object or an array"},
      {json::object(), "\"traces\" array"},
      {json{{"traces", json::array()}}, "no workloads"},
      {json{{"traces", {42}}}, "traces[0]: expected an object"},
      {json{{"traces", {{{"status", "passed"}}}}}, "traces[0]: no \"workload\""},
      {json{{"traces", {{{"workload", "w"}, {"status", 3}}}}}, "traces[0](w).status"},
      {json{{"traces", {{{"workload", "w"}, {"status", "passed"}, {"timed", "yes"}}}}}, "timed"},
      {json{{"traces", {{{"workload", "w"}, {"status", "passed"}, {"performance", {{"solution", {{"median_ms", "fast"}}}}}}}}},
       "performance.solution.median_ms: expected a number"},
      {json{{"traces", {{{"workload", "w"}, {"status", "passed"}, {"performance", {{"eager", 5}}}}}}},
       "performance.eager: expected an object"},
  };
  for (const auto& c : cases) {
    try {
      st.add_evaluation(sid, "official", c.trace);
      ADD_FAILURE() << "accepted " << c.trace.dump();
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(count(st, "evaluations"), 0);
  EXPECT_EQ(count(st, "workload_results"), 0);
  // Out-of-range judgments are refused too.
  JudgmentRow j;
  j.run_id = rid;
  j.level = "L1";
  j.score = 101;
  EXPECT_THROW(st.add_judgment(j), StoreError);
  j.score = 50;
  j.level = "L4";
  EXPECT_THROW(st.add_judgment(j), StoreError);
  EXPECT_EQ(count(st, "judgments"), 0);
}

TEST_F(StoreTest, TraceExtraction) {
  auto e = parse_trace(d2k::testing::tiny_trace("t1", {true, 2, 3}));
  EXPECT_TRUE(e.correct);
  EXPECT_EQ(e.status, "passed");
  ASSERT_EQ(e.workloads.size(), 3u);
  EXPECT_DOUBLE_EQ(*e.workloads[0].median_ms, 2);
  EXPECT_DOUBLE_EQ(*e.workloads[0].eager_ms, 4);
  EXPECT_DOUBLE_EQ(*e.workloads[0].compile_ms, 2);
  EXPECT_FALSE(e.workloads[1].compile_ms.has_value());
  EXPECT_FALSE(e.workloads[2].timed);
  EXPECT_NEAR(*e.geomean_speedup_eager, std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(*e.geomean_speedup_compile, 1.0, 1e-12);  // w0 only: 2/2
  EXPECT_NEAR(*e.pct_sol, 25.0, 1e-12);
  auto bad = parse_trace(d2k::testing::tiny_trace("t1", {false, 0, 0}));
  EXPECT_FALSE(bad.correct);
  EXPECT_EQ(bad.status, "incorrect_numerics");
  // A skipped workload (null status: no GPU) is not correct.
  auto skipped = parse_trace(json::array({{{"workload", "w"}, {"status", nullptr}, {"skipped", "no GPU"}}}));
  EXPECT_EQ(skipped.status, "skipped");
  EXPECT_FALSE(skipped.correct);
}

TEST_F(StoreTest, TransactionsRollBackAsAWholeAndNest) {
  auto st = Store::open(db());
  auto cid = st.add_campaign({0, "c", json::object(), "", ""});
  RunRow r;
  r.campaign_id = cid;
  r.model = "m";
  r.task = "t";
  r.condition = "none";
  try {
    Store::Transaction t(st);
    auto rid = st.add_run(r);
    st.add_submission({0, rid, 0, 0, "submit", "", "", "", false});
    throw std::runtime_error("crash before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(count(st, "runs"), 0);
  EXPECT_EQ(count(st, "submissions"), 0);
  // A failing inner write (a duplicate run) rolls back only its savepoint.
  {
    Store::Transaction t(st);
    st.add_run(r);
    EXPECT_EQ(st.load(cid).runs.size(), 1u);  // reads inside a transaction see its writes
    EXPECT_THROW(st.add_run(r), StoreError);  // UNIQUE(campaign, model, task, condition, repeat)
    r.repeat = 1;
    st.add_run(r);
    t.commit();
  }
  EXPECT_EQ(count(st, "runs"), 2);
  // update_run of a missing id fails loudly.
  RunRow ghost;
  ghost.id = 999;
  EXPECT_THROW(st.update_run(ghost), StoreError);
  // Final submission flag moves.
  auto run = st.find_run(cid, "m", "t", "none", 0);
  ASSERT_TRUE(run);
  auto s0 = st.add_submission({0, run->id, 0, 0, "submit", "", "", "", true});
  auto s1 = st.add_submission({0, run->id, 1, 0, "submit", "", "", "", true});
  st.add_evaluation(s0, "official", d2k::testing::tiny_trace("t1", {true, 1, 1}));
  st.add_evaluation(s1, "official", d2k::testing::tiny_trace("t1", {true, 2, 2}));
  auto d = st.load(cid);
  ASSERT_EQ(d.runs[0].submissions.size(), 2u);
  EXPECT_FALSE(d.runs[0].submissions[0].final);
  EXPECT_TRUE(d.runs[0].submissions[1].final);
  st.set_final_submission(run->id, s0);
  d = st.load(cid);
  EXPECT_TRUE(d.runs[0].submissions[0].final);
  EXPECT_FALSE(d.runs[0].submissions[1].final);
  EXPECT_THROW(st.set_final_submission(run->id, 12345), StoreError);
}

// A child process writes batches of rows, one transaction per batch, telling the parent after each commit and
// in the middle of each batch. The parent kills it with SIGKILL in the middle of a batch. The store then opens
// cleanly and holds whole batches only: every one the child reported committed, and at most the one it was in.
TEST_F(StoreTest, SigkillMidBatchKeepsExactlyTheCommittedRows) {
  constexpr int kRows = 40;
  std::int64_t rid = 0;
  {
    auto st = Store::open(db());
    auto cid = st.add_campaign({0, "kill", json::object(), "", ""});
    RunRow r;
    r.campaign_id = cid;
    r.model = "m";
    r.task = "t";
    r.condition = "none";
    rid = st.add_run(r);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    long long before = 0;
    {
      auto st = Store::open(db());
      before = count(st, "submissions");
    }
    ASSERT_EQ(before % kRows, 0);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        auto st = Store::open(db());
        for (int b = static_cast<int>(before / kRows);; ++b) {
          Store::Transaction t(st);
          for (int k = 0; k < kRows; ++k) {
            st.add_submission({0, rid, b * kRows + k, 0, fmt::format("batch{}", b), "", "", "", false});
            if (k == kRows / 2) {
              int mid = -1 - b;
              if (write(fds[1], &mid, sizeof mid) != sizeof mid) _exit(3);
            }
          }
          t.commit();
          if (write(fds[1], &b, sizeof b) != sizeof b) _exit(3);
        }
      } catch (...) {
        _exit(2);
      }
      _exit(0);
    }
    close(fds[1]);
    int committed = static_cast<int>(before / kRows) - 1, msg = 0;
    int target = committed + 5 + attempt * 7;
    bool killed = false;
    while (read(fds[0], &msg, sizeof msg) == sizeof msg) {
      if (msg >= 0) committed = msg;
      if (msg < 0 && committed >= target) {  // in the middle of batch -1 - msg
        kill(pid, SIGKILL);
        killed = true;
        break;
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    while (read(fds[0], &msg, sizeof msg) == sizeof msg)
      if (msg >= 0) committed = msg;
    close(fds[0]);
    ASSERT_TRUE(killed) << "the child ended before it could be killed (status " << status << ")";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    auto st = Store::open(db());
    EXPECT_EQ(st.integrity_check(), "ok");
    long long n = count(st, "submissions");
    EXPECT_EQ(n % kRows, 0) << "a partial batch survived";
    long long batches = n / kRows;
    EXPECT_GE(batches, committed + 1) << "a committed batch was lost";
    EXPECT_LE(batches, committed + 2);
    // Every row of every surviving batch, and nothing else.
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(st.handle(), "SELECT count(DISTINCT seq), min(seq), max(seq) FROM submissions", -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int64(q, 0), n);
    EXPECT_EQ(sqlite3_column_int64(q, 1), 0);
    EXPECT_EQ(sqlite3_column_int64(q, 2), n - 1);
    sqlite3_finalize(q);
  }
}

TEST_F(StoreTest, TinyCampaignScoresThroughTheStore) {
  auto st = Store::open(db());
  auto cid = write_tiny(st);
  auto from_store = d2k::score::compute_scores(st.load(cid), {});
  auto by_hand = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  EXPECT_EQ(d2k::score::to_json(from_store).dump(), d2k::score::to_json(by_hand).dump());
  EXPECT_NEAR(*from_store.group("A", "none")->s_perf, 1.8612097182041991, 1e-9);
  EXPECT_NEAR(*from_store.group("B", "none")->s_perf, 0.5946035575013605, 1e-9);
  auto fc = d2k::score::compute_scores(st.load(cid), {d2k::score::BaselineKind::first_correct, "A"});
  EXPECT_NEAR(*fc.group("A", "all")->s_perf, 3.7224194364083982, 1e-9);
}

TEST_F(StoreTest, ExportsJsonAndCsv) {
  auto st = Store::open(db());
  auto cid = write_tiny(st);
  auto run = st.find_run(cid, "A", "t1", "none", 0);
  ASSERT_TRUE(run);
  run->error = "line one, \"quoted\"\nline two";
  st.update_run(*run);

  auto files = st.export_json(dir_ / "json");
  EXPECT_EQ(files.size(), table_names().size());
  auto runs = json::parse(slurp(dir_ / "json" / "runs.json"));
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0]["model"], "A");
  EXPECT_EQ(runs[0]["error"], "line one, \"quoted\"\nline two");
  EXPECT_EQ(runs[0]["input_tokens"], 1000);
  auto evals = json::parse(slurp(dir_ / "json" / "evaluations.json"));
  ASSERT_EQ(evals.size(), 2u * 10u);  // 10 submissions, a check and an official evaluation each
  EXPECT_TRUE(evals[1]["trace_json"].is_object());
  EXPECT_EQ(evals[1]["trace_json"]["traces"].size(), 3u);
  EXPECT_EQ(evals[1]["kind"], "official");
  auto judg = json::parse(slurp(dir_ / "json" / "judgments.json"));
  EXPECT_EQ(judg.size(), 25u);
  EXPECT_TRUE(judg[0]["citations"].is_array());
  auto wl = json::parse(slurp(dir_ / "json" / "workload_results.json"));
  EXPECT_EQ(wl.size(), 60u);

  st.export_csv(dir_ / "csv");
  auto csv = slurp(dir_ / "csv" / "runs.csv");
  EXPECT_EQ(csv.rfind("id,campaign_id,model,task,condition,repeat,status,", 0), 0u) << csv.substr(0, 200);
  EXPECT_NE(csv.find("\"line one, \"\"quoted\"\"\nline two\""), std::string::npos);
  // Header plus eight records, each ending in CRLF (one record has an embedded LF inside quotes).
  size_t crlf = 0;
  for (size_t p = csv.find("\r\n"); p != std::string::npos; p = csv.find("\r\n", p + 2)) ++crlf;
  EXPECT_EQ(crlf, 9u);
  auto wcsv = slurp(dir_ / "csv" / "workload_results.csv");
  EXPECT_NE(wcsv.find(",w0,1,passed,2,4,2,2,1,20"), std::string::npos) << wcsv.substr(0, 400);
}

}  // namespace
