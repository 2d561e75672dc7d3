#pragma once
// Scores of a campaign (docs/SCORING.md): correctness over (model, task) pairs, per-task speedups against a
// selectable baseline, S_perf (an incorrect task scores 0.5), geometric-mean speedups, fast_p, % of
// speed-of-light, JS_impl per level, tokens and cost, and the rank correlation of judge scores with speedups.
// Pure functions of CampaignData.
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "score/data.hpp"

namespace d2k::score {

// Conditions: "none" (unguided), "L1", "L1+L2", "all" (guided = L1+L2+L3). Aliases ("unguided", "guided",
// "L1,L2", "L1,L2,L3", "L1+L2+L3") map to these; anything else is kept as it is.
std::string canonical_condition(const std::string& c);
std::string condition_label(const std::string& canonical);  // "unguided", "L1", "L1+L2", "guided"
int condition_order(const std::string& canonical);         // none < L1 < L1+L2 < all < others

enum class BaselineKind { eager, compile, first_correct };
struct Baseline {
  BaselineKind kind = BaselineKind::eager;
  std::string model;  // first_correct: whose unguided run gives the baseline
  std::string name() const;
};
// "eager", "compile" or "first-correct:MODEL"; nullopt (and `error`) otherwise.
std::optional<Baseline> parse_baseline(const std::string& text, std::string& error);

inline constexpr std::array<double, 3> kFastP{1.0, 1.5, 2.0};
inline constexpr double kIncorrectTaskScore = 0.5;
inline const std::array<std::string, 3> kLevels{"L1", "L2", "L3"};

// Statistics used throughout (exposed for tests).
double geomean(const std::vector<double>& xs);  // 0 for an empty list; xs must be > 0
std::vector<double> average_ranks(const std::vector<double>& xs);  // 1-based, ties get their mean rank
// Spearman's rho (Pearson correlation of average ranks); nullopt for fewer than 3 pairs or a constant side.
std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y);

struct TaskScore {
  std::string task;
  bool has_run = false;        // a run of this (model, task, condition, repeat) is in the store
  bool correct = false;        // its final submission passed every workload
  bool timed = false;          // correct and every timed workload has a solution time and a baseline time
  double speedup = 0;          // geomean over timed workloads of baseline / solution (timed only)
  double score = kIncorrectTaskScore;  // S_perf's term: speedup if timed, 0.5 if incorrect
  std::optional<double> pct_sol;       // mean % of speed-of-light over timed workloads
  int baseline_fallbacks = 0;  // workloads timed against eager because the chosen baseline was missing
  std::array<std::optional<double>, 3> js_level;  // JS_impl per level (mean over repeated judgments)
  std::optional<double> js_impl;                  // mean of the three levels (when all three are present)
  std::array<std::optional<double>, 3> js_design_level;  // JS_design (kind "design", on the unguided run)
  std::optional<double> js_design;
};

struct GroupScore {  // one (model, condition)
  std::string model, condition;
  std::vector<TaskScore> tasks;  // in the campaign's task order
  int pairs = 0, correct = 0, untimed_correct = 0;
  double correctness = 0;  // correct / pairs
  std::optional<double> s_perf;  // geomean over timed or incorrect tasks of TaskScore::score (absent: none)
  std::array<double, 3> fast_p{};  // share of pairs correct and faster than p x baseline, p in kFastP
  std::optional<double> geomean_speedup;         // over all tasks, when correct and timed on every task
  std::optional<double> geomean_speedup_common;  // over the tasks every model gets right (Scores::common_tasks)
  std::optional<double> pct_sol;                 // mean over timed tasks
  long long input_tokens = 0, cached_tokens = 0, output_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0, wall_s = 0;
  long long turns = 0;
  int runs = 0;
  std::array<std::optional<double>, 3> js_level;  // mean over tasks with a judgment
  std::optional<double> js_impl;
  std::array<std::optional<double>, 3> js_design_level;  // the same for JS_design (docs/JUDGES.md)
  std::optional<double> js_design;
};

struct ConditionSummary {  // all models together, one condition
  std::string condition;
  int pairs = 0, correct = 0;
  double correctness = 0;              // pooled over (model, task) pairs
  std::optional<double> s_perf_mean;   // arithmetic mean over models of S_perf (the paper's "average S_perf")
  std::optional<double> geomean_speedup_eligible;  // geomean over the eligible models' task speedups
  std::optional<double> js_impl_mean;  // mean over models
  std::array<std::optional<double>, 3> js_level_mean;
  long long input_tokens = 0, cached_tokens = 0, output_tokens = 0;
  double cost_usd = 0;
};

struct Correlation {
  std::string what;  // "JS_impl", "L1", "L2", "L3"
  std::string model;  // model_correlations: the model; empty: all models together
  int n = 0;
  std::optional<double> rho;
};

struct Scores {
  Baseline baseline;
  int repeat = 0;
  std::vector<std::string> models, tasks, conditions;  // conditions canonical, in order
  std::vector<std::string> paired_conditions;  // "none" and "all" when both are present, else all conditions
  std::vector<GroupScore> groups;               // models x conditions, model-major
  std::vector<ConditionSummary> summary;        // per condition
  std::vector<std::string> eligible_models;     // correct and timed on every task in every paired condition
  std::vector<std::string> common_tasks;        // correct and timed for every model in every paired condition
  std::vector<Correlation> correlations;        // judge score vs speedup over judged, timed runs
  std::vector<Correlation> model_correlations;  // the same per model (over its conditions), model-major
  std::vector<std::string> warnings;

  const GroupScore* group(const std::string& model, const std::string& condition) const;
};

// Scores the runs with repeat index `repeat` against `baseline`.
Scores compute_scores(const CampaignData& data, const Baseline& baseline, int repeat = 0);

nlohmann::json to_json(const Scores& s);

}  // namespace d2k::score
