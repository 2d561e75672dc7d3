#include "store/store.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "score/score.hpp"

namespace d2k::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- schema ----------------------------------------------------------------------------------------------

struct Migration {
  int version;
  const char* sql;
};

// v1: campaigns, runs, submissions, evaluations and their per-workload figures.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE schema_migrations(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE campaigns(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  config TEXT NOT NULL DEFAULT '{}',
  suite_version TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
  model TEXT NOT NULL,
  task TEXT NOT NULL,
  condition TEXT NOT NULL,
  repeat INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK(status IN ('pending', 'running', 'finished', 'failed', 'interrupted')),
  input_tokens INTEGER NOT NULL DEFAULT 0,
  cached_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  wall_s REAL NOT NULL DEFAULT 0,
  turns INTEGER NOT NULL DEFAULT 0,
  trajectory_path TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  started_at TEXT NOT NULL DEFAULT '',
  finished_at TEXT NOT NULL DEFAULT '',
  UNIQUE(campaign_id, model, task, condition, repeat));
CREATE TABLE submissions(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  seq INTEGER NOT NULL,
  turn INTEGER NOT NULL DEFAULT 0,
  kind TEXT NOT NULL DEFAULT 'submit',
  language TEXT NOT NULL DEFAULT '',
  sha256 TEXT NOT NULL DEFAULT '',
  source_path TEXT NOT NULL DEFAULT '',
  final INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  UNIQUE(run_id, seq));
CREATE TABLE evaluations(
  id INTEGER PRIMARY KEY,
  submission_id INTEGER NOT NULL REFERENCES submissions(id),
  kind TEXT NOT NULL DEFAULT 'official',
  status TEXT NOT NULL,
  correct INTEGER NOT NULL,
  geomean_speedup_eager REAL,
  geomean_speedup_compile REAL,
  pct_sol REAL,
  trace_json TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE TABLE workload_results(
  id INTEGER PRIMARY KEY,
  evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
  workload TEXT NOT NULL,
  timed INTEGER NOT NULL,
  status TEXT NOT NULL,
  median_ms REAL,
  eager_ms REAL,
  compile_ms REAL,
  speedup_vs_eager REAL,
  speedup_vs_compile REAL,
  pct_sol REAL);
CREATE INDEX runs_campaign ON runs(campaign_id);
CREATE INDEX submissions_run ON submissions(run_id);
CREATE INDEX evaluations_submission ON evaluations(submission_id);
CREATE INDEX workload_results_evaluation ON workload_results(evaluation_id);
)sql";

// v2: the judges (issue 6) and the providers' full usage (cache writes, reasoning tokens).
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE runs ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
CREATE TABLE judgments(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  submission_id INTEGER REFERENCES submissions(id),
  kind TEXT NOT NULL CHECK(kind IN ('impl', 'design')),
  level TEXT NOT NULL CHECK(level IN ('L1', 'L2', 'L3')),
  score REAL NOT NULL CHECK(score >= 0 AND score <= 100),
  valid INTEGER NOT NULL,
  citations TEXT NOT NULL DEFAULT '[]',
  reasoning TEXT NOT NULL DEFAULT '',
  raw_output TEXT NOT NULL DEFAULT '',
  judge_model TEXT NOT NULL DEFAULT '',
  repeat INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL);
CREATE INDEX judgments_run ON judgments(run_id);
)sql";

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> m{{1, kSchemaV1}, {2, kSchemaV2}};
  return m;
}

constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

// "FILE: what SQLite said", with a plain word for a damaged file.
std::string sqlite_error(sqlite3* db, const std::string& what) {
  const char* file = sqlite3_db_filename(db, "main");
  int rc = sqlite3_errcode(db) & 0xff;
  std::string msg = sqlite3_errmsg(db);
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) msg = "not a d2k store, or a corrupt one (" + msg + ")";
  return fmt::format("{}{}{}{}", file && *file ? file : "", file && *file ? ": " : "", what, msg);
}

// ---- statements ------------------------------------------------------------------------------------------

class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &st_, nullptr) != SQLITE_OK)
      throw StoreError(sqlite_error(db, fmt::format("SQL ({}...): ", sql.substr(0, 60))));
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bind(int i, long long v) {
    check(sqlite3_bind_int64(st_, i, v));
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<long long>(v)); }
  Stmt& bind(int i, long v) { return bind(i, static_cast<long long>(v)); }
  Stmt& bind(int i, bool v) { return bind(i, v ? 1LL : 0LL); }
  Stmt& bind(int i, double v) {
    check(std::isfinite(v) ? sqlite3_bind_double(st_, i, v) : sqlite3_bind_null(st_, i));
    return *this;
  }
  Stmt& bind(int i, const std::optional<double>& v) {
    if (v) return bind(i, *v);
    check(sqlite3_bind_null(st_, i));
    return *this;
  }
  Stmt& bind(int i, const std::optional<std::int64_t>& v) {
    if (v) return bind(i, static_cast<long long>(*v));
    check(sqlite3_bind_null(st_, i));
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw StoreError(sqlite_error(db_, ""));
  }
  void run() {
    step();
    sqlite3_reset(st_);
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  bool is_null(int i) { return sqlite3_column_type(st_, i) == SQLITE_NULL; }
  long long i64(int i) { return sqlite3_column_int64(st_, i); }
  double dbl(int i) { return sqlite3_column_double(st_, i); }
  std::optional<double> opt_dbl(int i) { return is_null(i) ? std::nullopt : std::optional<double>(dbl(i)); }
  std::string text(int i) {
    auto* p = sqlite3_column_text(st_, i);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st_, i)))
             : std::string();
  }
  sqlite3_stmt* get() { return st_; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw StoreError(sqlite_error(db_, "bind: "));
  }
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// ---- traces ----------------------------------------------------------------------------------------------

std::optional<double> number_at(const json& obj, std::initializer_list<const char*> path, const std::string& where) {
  const json* cur = &obj;
  std::string at = where;
  for (const char* k : path) {
    if (!cur->is_object()) throw StoreError(fmt::format("evaluation trace: {}: expected an object", at));
    auto it = cur->find(k);
    at += std::string(".") + k;
    if (it == cur->end() || it->is_null()) return std::nullopt;
    cur = &*it;
  }
  if (!cur->is_number()) throw StoreError(fmt::format("evaluation trace: {}: expected a number, got {}", at, cur->type_name()));
  double v = cur->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

EvaluationRow parse_trace(const json& trace) {
  const json* arr = nullptr;
  if (trace.is_object()) {
    auto it = trace.find("traces");
    if (it == trace.end() || !it->is_array())
      throw StoreError("evaluation trace: expected an object with a \"traces\" array (d2k eval --json)");
    arr = &*it;
  } else if (trace.is_array()) {
    arr = &trace;
  } else {
    throw StoreError(fmt::format("evaluation trace: expected an object or an array, got {}", trace.type_name()));
  }
  if (arr->empty()) throw StoreError("evaluation trace: no workloads");
  EvaluationRow e;
  std::vector<double> vs_eager, vs_compile, sols;
  bool all_passed = true;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& t = (*arr)[i];
    std::string where = fmt::format("traces[{}]", i);
    if (!t.is_object()) throw StoreError(fmt::format("evaluation trace: {}: expected an object", where));
    auto wl = t.find("workload");
    if (wl == t.end() || !wl->is_string() || wl->get<std::string>().empty())
      throw StoreError(fmt::format("evaluation trace: {}: no \"workload\" name", where));
    score::WorkloadResult w;
    w.workload = wl->get<std::string>();
    where += "(" + w.workload + ")";
    if (auto it = t.find("timed"); it != t.end()) {
      if (!it->is_boolean()) throw StoreError(fmt::format("evaluation trace: {}.timed: expected true or false", where));
      w.timed = it->get<bool>();
    }
    auto st = t.find("status");
    if (st == t.end()) throw StoreError(fmt::format("evaluation trace: {}: no \"status\"", where));
    if (st->is_null())
      w.status = "skipped";
    else if (st->is_string() && !st->get<std::string>().empty())
      w.status = st->get<std::string>();
    else
      throw StoreError(fmt::format("evaluation trace: {}.status: expected a status name or null", where));
    if (auto p = t.find("performance"); p != t.end() && !p->is_null()) {
      if (!p->is_object()) throw StoreError(fmt::format("evaluation trace: {}.performance: expected an object", where));
      w.median_ms = number_at(*p, {"solution", "median_ms"}, where + ".performance");
      w.eager_ms = number_at(*p, {"eager", "median_ms"}, where + ".performance");
      w.compile_ms = number_at(*p, {"torch_compile", "median_ms"}, where + ".performance");
      w.pct_sol = number_at(*p, {"pct_speed_of_light"}, where + ".performance");
      for (auto* v : {&w.median_ms, &w.eager_ms, &w.compile_ms})
        if (*v && **v <= 0) *v = std::nullopt;  // a zero median is no time at all
    }
    if (w.status != "passed") {
      if (all_passed) e.status = w.status;
      all_passed = false;
    }
    if (w.status == "passed" && w.timed && w.median_ms) {
      if (w.eager_ms) vs_eager.push_back(*w.eager_ms / *w.median_ms);
      if (w.compile_ms) vs_compile.push_back(*w.compile_ms / *w.median_ms);
      if (w.pct_sol) sols.push_back(*w.pct_sol);
    }
    e.workloads.push_back(std::move(w));
  }
  if (all_passed) e.status = "passed";
  e.correct = all_passed;
  if (!vs_eager.empty()) e.geomean_speedup_eager = score::geomean(vs_eager);
  if (!vs_compile.empty()) e.geomean_speedup_compile = score::geomean(vs_compile);
  if (!sols.empty()) {
    double s = 0;
    for (double x : sols) s += x;
    e.pct_sol = s / static_cast<double>(sols.size());
  }
  return e;
}

const std::vector<std::string>& table_names() {
  static const std::vector<std::string> t{"campaigns",        "runs",      "submissions", "evaluations",
                                          "workload_results", "judgments", "schema_migrations"};
  return t;
}

// ---- open and migrate ------------------------------------------------------------------------------------

Store Store::open(const fs::path& path, const OpenOptions& opt) {
  if (!opt.create && !fs::exists(path)) throw StoreError(fmt::format("{}: no such store", path.string()));
  if (opt.target_version < 1 || opt.target_version > kSchemaVersion)
    throw StoreError(fmt::format("schema version {} does not exist (1..{})", opt.target_version, kSchemaVersion));
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (opt.create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    throw StoreError(fmt::format("{}: cannot open: {}", path.string(), msg));
  }
  Store s(db, path);
  sqlite3_busy_timeout(db, 30000);  // campaign workers in other processes write too
  sqlite3_extended_result_codes(db, 1);
  try {
    // SQLite answers SQLITE_BUSY at once, without the busy handler, where waiting could deadlock (switching a
    // new file to WAL while another process does, upgrading a read to a write): the setup is retried whole.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int attempt = 0;; ++attempt) {
      try {
        s.exec("PRAGMA journal_mode=WAL");
        s.exec("PRAGMA synchronous=FULL");
        s.exec("PRAGMA foreign_keys=ON");
        // The version and the tables read in one statement, one snapshot: read apart, another process's first
        // migration could commit between them and make its tables look foreign.
        int v = 0;
        {
          Stmt q(db, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)");
          q.step();
          v = static_cast<int>(q.i64(0));
          if (v == 0 && q.i64(1) > 0)
            throw StoreError("a SQLite database, but not a d2k store (no schema version, foreign tables)");
        }
        if (v > kSchemaVersion)
          throw StoreError(fmt::format("made by a newer d2k (schema version {}; this build knows up to {})", v,
                                       kSchemaVersion));
        s.migrate(opt.target_version);
        break;
      } catch (const StoreError&) {
        int rc = sqlite3_errcode(db) & 0xff;
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() > give_up) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + 5 * std::min(attempt, 20)));
      }
    }
  } catch (const StoreError& e) {
    const char* file = sqlite3_db_filename(db, "main");
    std::string what = e.what();
    if (file && *file && what.rfind(file, 0) == 0) throw;  // already names the file
    throw StoreError(fmt::format("{}: {}", path.string(), what));
  }
  return s;
}

Store::Store(Store&& o) noexcept : db_(o.db_), path_(std::move(o.path_)), tx_depth_(o.tx_depth_) { o.db_ = nullptr; }
Store& Store::operator=(Store&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    tx_depth_ = o.tx_depth_;
    o.db_ = nullptr;
  }
  return *this;
}
Store::~Store() {
  if (db_) sqlite3_close_v2(db_);
}

void Store::exec(const std::string& sql) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) throw StoreError(sqlite_error(db_, ""));
}

int Store::schema_version() {
  Stmt q(db_, "PRAGMA user_version");
  q.step();
  return static_cast<int>(q.i64(0));
}

void Store::migrate(int target) {
  for (const auto& m : migrations()) {
    if (m.version > target) break;
    if (m.version <= schema_version()) continue;
    Transaction t(*this);
    // Another process may have applied it while we waited for the write lock (two opening a new store).
    if (m.version <= schema_version()) continue;
    exec(m.sql);
    Stmt(db_, fmt::format("INSERT INTO schema_migrations(version, applied_at) VALUES(?, {})", kNow))
        .bind(1, m.version)
        .run();
    exec(fmt::format("PRAGMA user_version={}", m.version));
    t.commit();
  }
}

// ---- transactions ----------------------------------------------------------------------------------------

Store::Transaction::Transaction(Store& s) : s_(s), depth_(s.tx_depth_) {
  s_.exec(depth_ == 0 ? "BEGIN IMMEDIATE" : fmt::format("SAVEPOINT sp{}", depth_));
  ++s_.tx_depth_;
}

void Store::Transaction::commit() {
  if (done_) return;
  s_.exec(depth_ == 0 ? "COMMIT" : fmt::format("RELEASE sp{}", depth_));
  done_ = true;
  --s_.tx_depth_;
}

Store::Transaction::~Transaction() {
  if (done_) return;
  --s_.tx_depth_;
  char* err = nullptr;
  auto sql = depth_ == 0 ? std::string("ROLLBACK") : fmt::format("ROLLBACK TO sp{0}; RELEASE sp{0}", depth_);
  sqlite3_exec(s_.db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
}

// A read transaction (one snapshot of the WAL), or nothing inside a caller's transaction.
struct Store::ReadSnapshot {
  explicit ReadSnapshot(Store& st) : s(st), own(st.tx_depth_ == 0) {
    if (own) s.exec("BEGIN");
  }
  ~ReadSnapshot() {
    if (own) sqlite3_exec(s.db_, "COMMIT", nullptr, nullptr, nullptr);
  }
  Store& s;
  bool own;
};

// ---- writes ----------------------------------------------------------------------------------------------

std::int64_t Store::add_campaign(const CampaignRow& c) {
  if (c.name.empty()) throw StoreError("a campaign needs a name");
  Transaction t(*this);
  Stmt(db_, fmt::format("INSERT INTO campaigns(name, config, suite_version, created_at) VALUES(?, ?, ?, {})", kNow))
      .bind(1, c.name)
      .bind(2, c.config.dump())
      .bind(3, c.suite_version)
      .run();
  auto id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

namespace {
CampaignRow campaign_from(Stmt& q) {
  CampaignRow c;
  c.id = q.i64(0);
  c.name = q.text(1);
  c.config = json::parse(q.text(2), nullptr, false);
  if (c.config.is_discarded()) c.config = json::object();
  c.suite_version = q.text(3);
  c.created_at = q.text(4);
  return c;
}
constexpr const char* kCampaignCols = "id, name, config, suite_version, created_at";
constexpr const char* kRunCols =
    "id, campaign_id, model, task, condition, repeat, status, input_tokens, cached_tokens, cache_write_tokens, "
    "output_tokens, reasoning_tokens, cost_usd, wall_s, turns, trajectory_path, error, started_at, finished_at";
RunRow run_from(Stmt& q) {
  RunRow r;
  r.id = q.i64(0);
  r.campaign_id = q.i64(1);
  r.model = q.text(2);
  r.task = q.text(3);
  r.condition = q.text(4);
  r.repeat = static_cast<int>(q.i64(5));
  r.status = q.text(6);
  r.input_tokens = q.i64(7);
  r.cached_tokens = q.i64(8);
  r.cache_write_tokens = q.i64(9);
  r.output_tokens = q.i64(10);
  r.reasoning_tokens = q.i64(11);
  r.cost_usd = q.dbl(12);
  r.wall_s = q.dbl(13);
  r.turns = static_cast<int>(q.i64(14));
  r.trajectory_path = q.text(15);
  r.error = q.text(16);
  r.started_at = q.text(17);
  r.finished_at = q.text(18);
  return r;
}
}  // namespace

std::optional<CampaignRow> Store::campaign(const std::string& name) {
  Stmt q(db_, fmt::format("SELECT {} FROM campaigns WHERE name = ?", kCampaignCols));
  q.bind(1, name);
  if (!q.step()) return std::nullopt;
  return campaign_from(q);
}

std::vector<CampaignRow> Store::campaigns() {
  Stmt q(db_, fmt::format("SELECT {} FROM campaigns ORDER BY id", kCampaignCols));
  std::vector<CampaignRow> out;
  while (q.step()) out.push_back(campaign_from(q));
  return out;
}

CampaignRow Store::resolve_campaign(const std::string& name) {
  if (!name.empty()) {
    auto c = campaign(name);
    if (!c) throw StoreError(fmt::format("{}: no campaign named '{}'", path_.string(), name));
    return *c;
  }
  auto all = campaigns();
  if (all.empty()) throw StoreError(fmt::format("{}: the store holds no campaign", path_.string()));
  if (all.size() > 1) {
    std::string names;
    for (const auto& c : all) names += (names.empty() ? "" : ", ") + c.name;
    throw StoreError(fmt::format("{}: {} campaigns ({}); choose one with --campaign", path_.string(), all.size(), names));
  }
  return all.front();
}

std::int64_t Store::add_run(const RunRow& r) {
  Transaction t(*this);
  Stmt q(db_,
         "INSERT INTO runs(campaign_id, model, task, condition, repeat, status, input_tokens, cached_tokens, "
         "cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, wall_s, turns, trajectory_path, error, "
         "started_at, finished_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  q.bind(1, static_cast<long long>(r.campaign_id)).bind(2, r.model).bind(3, r.task).bind(4, r.condition);
  q.bind(5, r.repeat).bind(6, r.status).bind(7, r.input_tokens).bind(8, r.cached_tokens);
  q.bind(9, r.cache_write_tokens).bind(10, r.output_tokens).bind(11, r.reasoning_tokens).bind(12, r.cost_usd);
  q.bind(13, r.wall_s).bind(14, r.turns).bind(15, r.trajectory_path).bind(16, r.error).bind(17, r.started_at);
  q.bind(18, r.finished_at);
  q.run();
  auto id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

void Store::update_run(const RunRow& r) {
  Transaction t(*this);
  Stmt q(db_,
         "UPDATE runs SET status=?, input_tokens=?, cached_tokens=?, cache_write_tokens=?, output_tokens=?, "
         "reasoning_tokens=?, cost_usd=?, wall_s=?, turns=?, trajectory_path=?, error=?, started_at=?, "
         "finished_at=? WHERE id=?");
  q.bind(1, r.status).bind(2, r.input_tokens).bind(3, r.cached_tokens).bind(4, r.cache_write_tokens);
  q.bind(5, r.output_tokens).bind(6, r.reasoning_tokens).bind(7, r.cost_usd).bind(8, r.wall_s).bind(9, r.turns);
  q.bind(10, r.trajectory_path).bind(11, r.error).bind(12, r.started_at).bind(13, r.finished_at);
  q.bind(14, static_cast<long long>(r.id));
  q.run();
  if (sqlite3_changes(db_) != 1) throw StoreError(fmt::format("{}: no run with id {}", path_.string(), r.id));
  t.commit();
}

std::optional<RunRow> Store::run(std::int64_t id) {
  Stmt q(db_, fmt::format("SELECT {} FROM runs WHERE id = ?", kRunCols));
  q.bind(1, static_cast<long long>(id));
  if (!q.step()) return std::nullopt;
  return run_from(q);
}

std::optional<RunRow> Store::find_run(std::int64_t campaign_id, const std::string& model, const std::string& task,
                                      const std::string& condition, int repeat) {
  Stmt q(db_, fmt::format("SELECT {} FROM runs WHERE campaign_id=? AND model=? AND task=? AND condition=? AND "
                          "repeat=?", kRunCols));
  q.bind(1, static_cast<long long>(campaign_id)).bind(2, model).bind(3, task).bind(4, condition).bind(5, repeat);
  if (!q.step()) return std::nullopt;
  return run_from(q);
}

std::vector<RunRow> Store::runs(std::int64_t campaign_id) {
  Stmt q(db_, fmt::format("SELECT {} FROM runs WHERE campaign_id=? ORDER BY id", kRunCols));
  q.bind(1, static_cast<long long>(campaign_id));
  std::vector<RunRow> out;
  while (q.step()) out.push_back(run_from(q));
  return out;
}

std::int64_t Store::add_submission(const SubmissionRow& s) {
  Transaction t(*this);
  if (s.final) Stmt(db_, "UPDATE submissions SET final=0 WHERE run_id=?").bind(1, static_cast<long long>(s.run_id)).run();
  Stmt(db_, fmt::format("INSERT INTO submissions(run_id, seq, turn, kind, language, sha256, source_path, final, "
                        "created_at) VALUES(?,?,?,?,?,?,?,?,{})", kNow))
      .bind(1, static_cast<long long>(s.run_id))
      .bind(2, s.seq)
      .bind(3, s.turn)
      .bind(4, s.kind)
      .bind(5, s.language)
      .bind(6, s.sha256)
      .bind(7, s.source_path)
      .bind(8, s.final)
      .run();
  auto id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

void Store::set_final_submission(std::int64_t run_id, std::int64_t submission_id) {
  Transaction t(*this);
  Stmt(db_, "UPDATE submissions SET final=0 WHERE run_id=?").bind(1, static_cast<long long>(run_id)).run();
  Stmt(db_, "UPDATE submissions SET final=1 WHERE run_id=? AND id=?")
      .bind(1, static_cast<long long>(run_id))
      .bind(2, static_cast<long long>(submission_id))
      .run();
  if (sqlite3_changes(db_) != 1)
    throw StoreError(fmt::format("{}: run {} has no submission {}", path_.string(), run_id, submission_id));
  t.commit();
}

std::int64_t Store::add_evaluation(std::int64_t submission_id, const std::string& kind, const json& trace) {
  auto e = parse_trace(trace);  // before any write: a garbled trace writes nothing
  Transaction t(*this);
  Stmt(db_, fmt::format("INSERT INTO evaluations(submission_id, kind, status, correct, geomean_speedup_eager, "
                        "geomean_speedup_compile, pct_sol, trace_json, created_at) VALUES(?,?,?,?,?,?,?,?,{})", kNow))
      .bind(1, static_cast<long long>(submission_id))
      .bind(2, kind)
      .bind(3, e.status)
      .bind(4, e.correct)
      .bind(5, e.geomean_speedup_eager)
      .bind(6, e.geomean_speedup_compile)
      .bind(7, e.pct_sol)
      .bind(8, trace.dump())
      .run();
  auto id = sqlite3_last_insert_rowid(db_);
  Stmt w(db_,
         "INSERT INTO workload_results(evaluation_id, workload, timed, status, median_ms, eager_ms, compile_ms, "
         "speedup_vs_eager, speedup_vs_compile, pct_sol) VALUES(?,?,?,?,?,?,?,?,?,?)");
  for (const auto& r : e.workloads) {
    w.reset();
    std::optional<double> se, sc;
    if (r.median_ms && r.eager_ms) se = *r.eager_ms / *r.median_ms;
    if (r.median_ms && r.compile_ms) sc = *r.compile_ms / *r.median_ms;
    w.bind(1, static_cast<long long>(id)).bind(2, r.workload).bind(3, r.timed).bind(4, r.status);
    w.bind(5, r.median_ms).bind(6, r.eager_ms).bind(7, r.compile_ms).bind(8, se).bind(9, sc).bind(10, r.pct_sol);
    w.run();
  }
  t.commit();
  return id;
}

std::int64_t Store::add_judgment(const JudgmentRow& j) {
  if (!(j.score >= 0 && j.score <= 100)) throw StoreError(fmt::format("judgment score {} is outside 0..100", j.score));
  if (j.level != "L1" && j.level != "L2" && j.level != "L3")
    throw StoreError(fmt::format("judgment level '{}': expected L1, L2 or L3", j.level));
  if (j.kind != "impl" && j.kind != "design") throw StoreError(fmt::format("judgment kind '{}': expected impl or design", j.kind));
  Transaction t(*this);
  Stmt(db_, fmt::format("INSERT INTO judgments(run_id, submission_id, kind, level, score, valid, citations, "
                        "reasoning, raw_output, judge_model, repeat, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,{})", kNow))
      .bind(1, static_cast<long long>(j.run_id))
      .bind(2, j.submission_id)
      .bind(3, j.kind)
      .bind(4, j.level)
      .bind(5, j.score)
      .bind(6, j.valid)
      .bind(7, j.citations.dump())
      .bind(8, j.reasoning)
      .bind(9, j.raw_output)
      .bind(10, j.judge_model)
      .bind(11, j.repeat)
      .run();
  auto id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

// ---- reads -----------------------------------------------------------------------------------------------

score::CampaignData Store::load(std::int64_t campaign_id) {
  score::CampaignData d;
  {
    Stmt q(db_, "SELECT name FROM campaigns WHERE id=?");
    q.bind(1, static_cast<long long>(campaign_id));
    if (!q.step()) throw StoreError(fmt::format("{}: no campaign with id {}", path_.string(), campaign_id));
    d.name = q.text(0);
  }
  // One read transaction: a consistent snapshot while campaign workers keep writing.
  ReadSnapshot snap(*this);
  std::unordered_map<std::int64_t, size_t> run_index;
  {
    Stmt q(db_, fmt::format("SELECT {} FROM runs WHERE campaign_id=? ORDER BY id", kRunCols));
    q.bind(1, static_cast<long long>(campaign_id));
    while (q.step()) {
      auto r = run_from(q);
      score::Run run;
      run.model = r.model;
      run.task = r.task;
      run.condition = r.condition;
      run.repeat = r.repeat;
      run.status = r.status;
      run.input_tokens = r.input_tokens;
      run.cached_tokens = r.cached_tokens;
      run.cache_write_tokens = r.cache_write_tokens;
      run.output_tokens = r.output_tokens;
      run.reasoning_tokens = r.reasoning_tokens;
      run.cost_usd = r.cost_usd;
      run.wall_s = r.wall_s;
      run.turns = r.turns;
      run_index[r.id] = d.runs.size();
      d.runs.push_back(std::move(run));
    }
  }
  // submission id -> (run index, submission index)
  std::unordered_map<std::int64_t, std::pair<size_t, size_t>> sub_index;
  {
    Stmt q(db_, "SELECT s.id, s.run_id, s.seq, s.final FROM submissions s JOIN runs r ON r.id = s.run_id "
                "WHERE r.campaign_id=? ORDER BY s.run_id, s.seq");
    q.bind(1, static_cast<long long>(campaign_id));
    while (q.step()) {
      auto ri = run_index.at(q.i64(1));
      score::Submission s;
      s.seq = static_cast<int>(q.i64(2));
      s.final = q.i64(3) != 0;
      sub_index[q.i64(0)] = {ri, d.runs[ri].submissions.size()};
      d.runs[ri].submissions.push_back(std::move(s));
    }
  }
  // The latest official evaluation of each submission, with its workloads.
  std::unordered_map<std::int64_t, std::int64_t> latest;  // submission -> evaluation id
  {
    Stmt q(db_, "SELECT e.id, e.submission_id, e.status, e.correct FROM evaluations e "
                "JOIN submissions s ON s.id = e.submission_id JOIN runs r ON r.id = s.run_id "
                "WHERE r.campaign_id=? AND e.kind='official' ORDER BY e.id");
    q.bind(1, static_cast<long long>(campaign_id));
    while (q.step()) {
      auto [ri, si] = sub_index.at(q.i64(1));
      score::Evaluation e;
      e.status = q.text(2);
      e.correct = q.i64(3) != 0;
      d.runs[ri].submissions[si].evaluation = std::move(e);
      latest[q.i64(1)] = q.i64(0);
    }
  }
  {
    Stmt q(db_, "SELECT w.evaluation_id, e.submission_id, w.workload, w.timed, w.status, w.median_ms, w.eager_ms, "
                "w.compile_ms, w.pct_sol FROM workload_results w JOIN evaluations e ON e.id = w.evaluation_id "
                "JOIN submissions s ON s.id = e.submission_id JOIN runs r ON r.id = s.run_id "
                "WHERE r.campaign_id=? AND e.kind='official' ORDER BY w.id");
    q.bind(1, static_cast<long long>(campaign_id));
    while (q.step()) {
      auto sub = q.i64(1);
      if (latest.at(sub) != q.i64(0)) continue;
      auto [ri, si] = sub_index.at(sub);
      score::WorkloadResult w;
      w.workload = q.text(2);
      w.timed = q.i64(3) != 0;
      w.status = q.text(4);
      w.median_ms = q.opt_dbl(5);
      w.eager_ms = q.opt_dbl(6);
      w.compile_ms = q.opt_dbl(7);
      w.pct_sol = q.opt_dbl(8);
      d.runs[ri].submissions[si].evaluation->workloads.push_back(std::move(w));
    }
  }
  {
    Stmt q(db_, "SELECT j.run_id, j.kind, j.level, j.score, j.valid FROM judgments j JOIN runs r ON r.id = j.run_id "
                "WHERE r.campaign_id=? ORDER BY j.id");
    q.bind(1, static_cast<long long>(campaign_id));
    while (q.step()) {
      score::Judgment j;
      j.kind = q.text(1);
      j.level = q.text(2);
      j.score = q.dbl(3);
      j.valid = q.i64(4) != 0;
      d.runs[run_index.at(q.i64(0))].judgments.push_back(std::move(j));
    }
  }
  return d;
}

std::string Store::integrity_check() {
  Stmt q(db_, "PRAGMA integrity_check");
  std::string out;
  while (q.step()) out += (out.empty() ? "" : "; ") + q.text(0);
  return out;
}

std::vector<std::pair<std::string, long long>> Store::counts() {
  std::vector<std::pair<std::string, long long>> out;
  for (const auto& t : table_names()) {
    if (t == "judgments" && schema_version() < 2) continue;
    Stmt q(db_, "SELECT count(*) FROM " + t);
    q.step();
    out.emplace_back(t, q.i64(0));
  }
  return out;
}

// ---- export ----------------------------------------------------------------------------------------------

namespace {

bool is_json_column(const std::string& table, const std::string& col) {
  return (table == "campaigns" && col == "config") || (table == "evaluations" && col == "trace_json") ||
         (table == "judgments" && col == "citations");
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string real_text(double v) { return fmt::format("{}", v); }

}  // namespace

std::vector<fs::path> Store::export_json(const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<fs::path> files;
  ReadSnapshot snap(*this);
  for (const auto& table : table_names()) {
    if (table == "judgments" && schema_version() < 2) continue;
    Stmt q(db_, "SELECT * FROM " + table + (table == "schema_migrations" ? " ORDER BY version" : " ORDER BY id"));
    int n = sqlite3_column_count(q.get());
    json rows = json::array();
    while (q.step()) {
      json row = json::object();
      for (int i = 0; i < n; ++i) {
        std::string col = sqlite3_column_name(q.get(), i);
        switch (sqlite3_column_type(q.get(), i)) {
          case SQLITE_NULL: row[col] = nullptr; break;
          case SQLITE_INTEGER: row[col] = q.i64(i); break;
          case SQLITE_FLOAT: row[col] = q.dbl(i); break;
          default: {
            auto text = q.text(i);
            if (is_json_column(table, col)) {
              auto parsed = json::parse(text, nullptr, false);
              row[col] = parsed.is_discarded() ? json(text) : parsed;
            } else {
              row[col] = text;
            }
          }
        }
      }
      rows.push_back(std::move(row));
    }
    auto file = dir / (table + ".json");
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << rows.dump(1) << "\n";
    if (!out) throw StoreError(fmt::format("{}: cannot write", file.string()));
    files.push_back(file);
  }
  return files;
}

std::vector<fs::path> Store::export_csv(const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<fs::path> files;
  ReadSnapshot snap(*this);
  for (const auto& table : table_names()) {
    if (table == "judgments" && schema_version() < 2) continue;
    Stmt q(db_, "SELECT * FROM " + table + (table == "schema_migrations" ? " ORDER BY version" : " ORDER BY id"));
    int n = sqlite3_column_count(q.get());
    auto file = dir / (table + ".csv");
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < n; ++i) out << (i ? "," : "") << csv_field(sqlite3_column_name(q.get(), i));
    out << "\r\n";
    while (q.step()) {
      for (int i = 0; i < n; ++i) {
        if (i) out << ',';
        switch (sqlite3_column_type(q.get(), i)) {
          case SQLITE_NULL: break;
          case SQLITE_INTEGER: out << q.i64(i); break;
          case SQLITE_FLOAT: out << real_text(q.dbl(i)); break;
          default: out << csv_field(q.text(i));
        }
      }
      out << "\r\n";
    }
    if (!out) throw StoreError(fmt::format("{}: cannot write", file.string()));
    files.push_back(file);
  }
  return files;
}

}  // namespace d2k::store
