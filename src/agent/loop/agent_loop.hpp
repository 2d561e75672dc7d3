#pragma once
// The built-in agent loop: one turn = one model generation; the model's tool calls run through the ToolBox
// and their results go back to it, until the model stops calling tools or a budget ends the run. Every step is
// appended to the trajectory (trajectory.hpp) before the next one starts, so a killed run can be resumed.
// docs/AGENTS.md describes budgets, statuses, condensing and the trajectory's records.
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/loop/submissions.hpp"
#include "agent/loop/trajectory.hpp"
#include "agent/providers/provider.hpp"
#include "agent/tools/toolbox.hpp"

namespace d2k::agent {

// How a run ended. Every run ends in exactly one of these, recorded in its final record.
enum class RunStatus {
  finished,       // the model ended its turn without calling a tool (or the external agent exited 0)
  budget_turns,   // the turn limit was reached
  budget_tokens,  // the token limit (input + output over the run) was reached
  budget_cost,    // the cost limit (USD, from the registry's prices) was reached
  budget_wall,    // the wall-time limit was reached
  api_error,      // the model's API failed beyond retries (or refused the request)
  format_errors,  // too many malformed tool calls in a row
  interrupted,    // SIGINT/SIGTERM, or killed and found without a final record
  agent_error,    // the external agent command failed (non-zero exit, or could not start)
};
std::string_view run_status_name(RunStatus s);
std::optional<RunStatus> parse_run_status(std::string_view s);

struct Budgets {
  int max_turns = 350;         // model generations; 0: no limit
  long long max_tokens = 0;    // input + output tokens summed over all turns; 0: no limit
  double max_cost_usd = 0;     // 0: no limit
  double max_wall_s = 0;       // wall time of the run (resumed runs: all segments); 0: no limit
  int max_format_errors = 5;   // consecutive malformed or unknown tool calls
  nlohmann::json to_json() const;
  static Budgets from_json(const nlohmann::json& j);
};

// Retries the provider reports (ProviderDeps::on_retry), collected for the next trajectory record.
struct RetryLog {
  void add(const RetryEvent& e);
  std::vector<RetryEvent> take();

 private:
  std::mutex mu_;
  std::vector<RetryEvent> events_;
};

struct LoopOptions {
  Budgets budgets;
  double condense_fraction = 0.75;         // condense when the estimate passes this share of the usable window
  std::size_t keep_recent_tool_results = 4;
  std::shared_ptr<RetryLog> retry_log;     // may be null
  std::function<bool()> interrupted;       // polled between model calls and tool calls; may be empty
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

struct LoopTotals {
  int turns = 0;
  Usage usage;
  double wall_s = 0;       // all segments
  int tool_calls = 0;
  int format_errors = 0;   // over the run
  int condensations = 0;
  int retries = 0;
  double model_s = 0;      // time inside provider calls (HTTP, retries and their waits included)
  double tool_s = 0;       // time inside tool calls
  nlohmann::json to_json() const;
};

struct LoopResult {
  RunStatus status = RunStatus::finished;
  std::string detail;  // why, in words (the API's error, the budget's figures)
  LoopTotals totals;
};

class AgentLoop {
 public:
  AgentLoop(Provider& provider, ToolBox& tools, TrajectoryWriter& trajectory, LoopOptions options);

  // A fresh run: records `initial` (system and user messages) and loops.
  LoopResult run(const std::vector<Message>& initial);

  // Continues a run from its trajectory records: rebuilds the conversation (condensing replayed), answers tool
  // calls that were pending when it died with an error saying so, and loops to the budget.
  // Throws std::runtime_error when the records do not make a conversation.
  LoopResult resume(const std::vector<nlohmann::json>& records);

  // The same, except that a run killed before its first model call (no model record since the start or the last
  // restart: its initial messages may be missing or incomplete) is restarted: a "restart" record, then `initial`
  // as in run(). Records before the last restart are not replayed.
  LoopResult resume_or_restart(const std::vector<nlohmann::json>& records, const std::vector<Message>& initial);

  const std::vector<Message>& conversation() const { return messages_; }

 private:
  LoopResult loop();
  std::optional<RunStatus> budget_hit(std::string& detail) const;
  void maybe_condense(bool forced);
  void record(nlohmann::json rec);
  double wall_now() const;
  bool interrupted() const { return opt_.interrupted && opt_.interrupted(); }

  Provider& provider_;
  ToolBox& tools_;
  TrajectoryWriter& traj_;
  LoopOptions opt_;
  std::vector<Message> messages_;
  LoopTotals totals_;
  int consecutive_format_errors_ = 0;
  double prior_wall_s_ = 0;
  std::chrono::steady_clock::time_point segment_start_;
  // Context estimate: the last reply's reported input + output tokens cover messages_[0..measured_upto_).
  long long measured_tokens_ = 0;
  std::size_t measured_upto_ = 0;
};

// The model's configuration as recorded in a run's start record (no key: only the variable's name).
nlohmann::json model_config_to_json(const ModelConfig& m);
ModelConfig model_config_from_json(const nlohmann::json& j);  // throws std::runtime_error

// The end of a run, for both the built-in loop and external agents: auto-submits the workspace's solution
// when the run did not end by interruption, `auto_submit` is on and the solution differs from the last
// submission; then picks the final submission by `policy` and appends the final record. Returns that record.
struct FinalizeOptions {
  bool auto_submit = true;
  FinalPolicy policy = FinalPolicy::last;
  std::filesystem::path workspace;
  std::filesystem::path submissions;
};
nlohmann::json finalize_run(TrajectoryWriter& trajectory, ToolBox& tools, const LoopResult& result,
                            const FinalizeOptions& options);

// What `d2k agent status` prints: the last final record, or, for a run without one, a record with status
// interrupted and the totals summed from the trajectory (`recorded` false: nothing was written).
struct RunSummary {
  nlohmann::json start;     // the start record (empty when missing)
  nlohmann::json final;     // the last final record, or the derived one
  bool has_final = false;
  bool torn_tail = false;
  std::string error;
};
RunSummary summarize_run(const std::filesystem::path& trajectory_path);

}  // namespace d2k::agent
