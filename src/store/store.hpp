#pragma once
// The campaign store: one SQLite file in WAL mode (docs/SCORING.md, "Store"). Campaigns, runs, submissions,
// evaluations (the evaluator's trace JSON and the figures extracted from it), judgments. Every write is one
// transaction (or part of an enclosing Store::Transaction), so a process killed at any point leaves the rows
// that had committed and nothing else. The schema is versioned (PRAGMA user_version); opening a store migrates it
// to the current version.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "score/data.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace d2k::store {

inline constexpr int kSchemaVersion = 2;

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CampaignRow {
  std::int64_t id = 0;
  std::string name;
  nlohmann::json config = nlohmann::json::object();  // the campaign file as JSON (models, tasks, conditions...)
  std::string suite_version;
  std::string created_at;  // filled by the store (UTC, ISO 8601)
};

struct RunRow {
  std::int64_t id = 0, campaign_id = 0;
  std::string model, task, condition;  // condition: none | L1 | L1+L2 | all (score::canonical_condition)
  int repeat = 0;
  std::string status = "pending";      // pending | running | finished | failed | interrupted
  long long input_tokens = 0, cached_tokens = 0, cache_write_tokens = 0, output_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0, wall_s = 0;
  int turns = 0;
  std::string trajectory_path, error, started_at, finished_at;
};

struct SubmissionRow {
  std::int64_t id = 0, run_id = 0;
  int seq = 0;                   // 0, 1, ... within the run
  int turn = 0;                  // the agent turn that made it
  std::string kind = "submit";   // submit | evaluate (the agent's tool), or another label
  std::string language, sha256, source_path;
  bool final = false;
};

struct EvaluationRow {  // the extracted fields (the trace JSON is stored whole beside them)
  std::int64_t id = 0, submission_id = 0;
  std::string kind = "official";  // official (scored) | check
  std::string status;             // overall
  bool correct = false;
  std::optional<double> geomean_speedup_eager, geomean_speedup_compile, pct_sol;
  std::vector<score::WorkloadResult> workloads;
};

struct JudgmentRow {
  std::int64_t id = 0, run_id = 0;
  std::optional<std::int64_t> submission_id;  // the judged submission (JS_impl); none for JS_design
  std::string kind = "impl";                  // impl | design
  std::string level;                          // L1 | L2 | L3
  double score = 0;
  bool valid = true;
  nlohmann::json citations = nlohmann::json::array();  // [{file, start_line, end_line, quote, verified}]
  std::string reasoning, raw_output, judge_model;
  int repeat = 0;
};

// Parses an evaluator trace (docs/EVALUATOR.md: an object with "traces", or the array of traces) into the
// extracted fields. Throws StoreError naming what is wrong with it.
EvaluationRow parse_trace(const nlohmann::json& trace);

struct OpenOptions {
  bool create = true;                 // create the file if absent
  int target_version = kSchemaVersion;  // migrate up to this version (tests create older stores)
};

// One Store per thread (or process): SQLite serializes the connection, but the transaction nesting is per
// object. Concurrent writers in other processes wait on the busy timeout (30 s).
class Store {
 public:
  // Opens (or creates) a store, sets WAL and foreign keys, and migrates it. Throws StoreError: not a SQLite
  // file, a SQLite file that is not a d2k store, a store from a newer d2k, a corrupt file.
  static Store open(const std::filesystem::path& path, const OpenOptions& opt = {});
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::filesystem::path& path() const { return path_; }
  int schema_version();

  // A transaction grouping writes (nesting allowed: inner ones are savepoints). Commits on commit(); rolls
  // back when destroyed uncommitted (an exception).
  class Transaction {
   public:
    explicit Transaction(Store& s);
    ~Transaction();
    void commit();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

   private:
    Store& s_;
    int depth_;
    bool done_ = false;
  };

  std::int64_t add_campaign(const CampaignRow& c);
  std::optional<CampaignRow> campaign(const std::string& name);
  std::vector<CampaignRow> campaigns();

  std::int64_t add_run(const RunRow& r);  // unique per (campaign, model, task, condition, repeat)
  void update_run(const RunRow& r);       // every field but the key, by id
  std::optional<RunRow> run(std::int64_t id);
  std::optional<RunRow> find_run(std::int64_t campaign_id, const std::string& model, const std::string& task,
                                 const std::string& condition, int repeat);
  std::vector<RunRow> runs(std::int64_t campaign_id);

  std::int64_t add_submission(const SubmissionRow& s);
  void set_final_submission(std::int64_t run_id, std::int64_t submission_id);  // clears the others' flag

  // Stores the trace and its extracted fields; returns the evaluation's id. Throws StoreError on a garbled trace.
  std::int64_t add_evaluation(std::int64_t submission_id, const std::string& kind, const nlohmann::json& trace);
  std::int64_t add_judgment(const JudgmentRow& j);

  // Everything scoring needs for one campaign (official evaluations, judgments, runs' usage).
  score::CampaignData load(std::int64_t campaign_id);
  // The campaign named `name`, or the only campaign when `name` is empty. Throws StoreError otherwise.
  CampaignRow resolve_campaign(const std::string& name);

  // Writes one file per table into dir: <table>.json (an array of row objects; trace_json, config and citations
  // embedded as JSON) or <table>.csv (RFC 4180, a header row). Returns the files written.
  std::vector<std::filesystem::path> export_json(const std::filesystem::path& dir);
  std::vector<std::filesystem::path> export_csv(const std::filesystem::path& dir);

  // PRAGMA integrity_check; "ok" when healthy.
  std::string integrity_check();
  // Row counts per table.
  std::vector<std::pair<std::string, long long>> counts();

  // Raw SQL, for tests and migrations.
  void exec(const std::string& sql);
  sqlite3* handle() { return db_; }

 private:
  struct ReadSnapshot;
  Store(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  void migrate(int target);
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  int tx_depth_ = 0;
};

// The tables, in export order.
const std::vector<std::string>& table_names();

}  // namespace d2k::store
