#pragma once
// A campaign file (docs/CAMPAIGNS.md): the paired experiment as a matrix of models x tasks x conditions x
// repeats, the agent's budgets and final-submission policy, where the store and the run directories go, and
// how many runs go at once. Parsing reports every problem with the file, the line and the key.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"

namespace d2k::campaign {

struct CampaignConfig {
  std::filesystem::path file;       // the campaign file (absolute)
  std::string name;
  std::filesystem::path store;      // SQLite store (relative paths: against the campaign file's folder)
  std::filesystem::path runs_dir;   // run directories (default: STORE's folder / NAME.runs)
  std::filesystem::path tasks_dir;  // the suite (default: $D2K_TASKS or the source tree's tasks/)
  std::filesystem::path models_file;  // the model registry (default: $D2K_MODELS)
  std::vector<std::string> models;
  std::vector<std::string> tasks;       // ids as written ("all": every task of the suite)
  std::vector<std::string> conditions;  // canonical: none, L1, L1+L2, all
  int repeats = 1;
  // [budgets]: as `d2k agent run`
  int turns = 350;
  long long max_tokens = 0;
  double max_cost = 0, max_wall = 0;
  int max_format_errors = 5;
  // [agent]
  std::string final_policy = "last";  // last | best
  bool auto_submit = true;
  std::string sandbox = "bwrap";      // bwrap | none
  double condense_at = 0.75;
  // [parallel]
  int jobs = 0;                          // 0: one per GPU (1 without a GPU)
  std::optional<std::vector<int>> gpus;  // none: the GPUs present

  // What decides the runs' outcomes (name, matrix, budgets, agent settings): stored as the campaign's config and
  // compared when a campaign is resumed or merged. Paths and parallelism are left out (they may differ between
  // machines and shards).
  nlohmann::json protocol_json() const;
};

// The guidance argument of `d2k agent run --guidance` for a canonical condition.
std::string guidance_arg(const std::string& condition);

// Parses and checks a campaign file; nullopt when any diagnostic was added ("file:line: key: why").
std::optional<CampaignConfig> load_campaign_config(const std::filesystem::path& file, Diagnostics& diags);

}  // namespace d2k::campaign
