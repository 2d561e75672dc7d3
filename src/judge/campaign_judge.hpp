#pragma once
// `d2k judge STORE.db`: JS_impl of every run's final submission and JS_design of every (model, task) of a
// campaign, written into the store's judgments table. Resumable: a judgment already stored for the same
// (run, submission, kind, level, judge model, repeat) is skipped. Each judgment is written as soon as it is made,
// so a kill loses at most the one in flight; an API error skips that item (reported) and loses nothing recorded.
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/providers/provider.hpp"
#include "judge/judge.hpp"
#include "judge/noise.hpp"
#include "store/store.hpp"
#include "task/manifest.hpp"

namespace d2k::judge {

struct CampaignJudgeOptions {
  std::string campaign;      // empty: the store's only campaign
  std::string judge_model;   // the registry name, recorded in each judgment
  int repeats = 1;           // repeat indices 0..repeats-1 are judged
  bool impl = true;          // JS_impl of final submissions
  bool design = false;       // JS_design: proposals by the models under test, then judged
  agent::Provider* judge = nullptr;  // temperature 0 (judge_model_config)
  PromptSet prompts;
  // The task a run names (name, folder or number); nullopt (with a reason) when it cannot be loaded.
  std::function<std::optional<Task>(const std::string& task, std::string& why)> load_task;
  // The provider of a model under test (JS_design); throws std::runtime_error when the registry lacks it.
  std::function<std::unique_ptr<agent::Provider>(const std::string& model)> model_provider;
  std::filesystem::path base_dir;       // relative submission source paths are resolved here (the store's folder)
  std::filesystem::path proposals_dir;  // design proposals: DIR/<campaign>/<model>/<task>/proposal.md
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

struct CampaignJudgeResult {
  int judged = 0;    // judgments written
  int invalid = 0;   // of which invalid (both attempts rejected)
  int skipped = 0;   // already in the store
  int failed = 0;    // items not judged: API errors, unreadable solutions, unknown tasks or models
  int proposals = 0; // design proposals asked for
  bool aborted = false;  // a fatal API error (missing key, refused key, unknown model): nothing more was tried
  std::vector<std::string> errors;
  agent::Usage judge_usage, design_usage;
};

CampaignJudgeResult judge_campaign(store::Store& st, const CampaignJudgeOptions& opt);

// The noise of the repeated judgments stored for a campaign by one judge model (empty: every judge model, each
// its own items).
NoiseSummary stored_noise(store::Store& st, std::int64_t campaign_id, const std::string& judge_model);

}  // namespace d2k::judge
