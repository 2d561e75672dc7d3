#pragma once
// The judges (docs/JUDGES.md). JS_impl: the judge reads the task, one level of expert guidance and the submitted
// solution with numbered lines, and returns a score on the five-anchor scale with reasoning and 1-4 citations.
// JS_design: the model under test proposes an L1/L2/L3 design with no guidance and no tools; the judge scores the
// proposal the same way, level by level. Every reply is checked (verdict.hpp); a rejected reply is asked again
// once with the reasons, then recorded as invalid (score 0, flagged). The judge never sees timings: its prompt
// is built from the task (as `d2k show` renders it without guidance), the guidance file and the snapshot only.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/providers/provider.hpp"
#include "judge/citations.hpp"
#include "judge/prompts.hpp"
#include "task/manifest.hpp"

namespace d2k::judge {

struct Subject {
  std::string kind = "impl";  // "impl": a solution's source files; "design": {"proposal.md": the proposal}
  Snapshot snapshot;
};

inline constexpr const char* kProposalFile = "proposal.md";
Subject design_subject(const std::string& proposal);

struct Attempt {
  std::string reply;        // the judge's text, verbatim
  std::string stop_reason;  // end_turn, max_tokens, ...
  std::vector<std::string> problems;  // why it was rejected; empty when accepted
};

struct LevelJudgment {
  std::string kind, level;
  double score = 0;    // the accepted score; 0 when invalid
  bool valid = false;  // false: both attempts were rejected
  std::vector<Citation> citations;  // of the accepted reply, or of the last attempt (with why they failed)
  std::string reasoning;
  std::vector<Attempt> attempts;  // one or two
  std::string invalid_reason;     // the last attempt's problems, joined
  agent::Usage usage;             // over the attempts
  std::string prompt_sha256;

  nlohmann::json citations_json() const;
  // Everything the judge said and why it was taken or not: stored as the judgment's raw_output.
  nlohmann::json raw_json() const;
};

// The task as the judge sees it: `d2k show` without guidance.
std::string task_text(const Task& task);
// The task's guidance level ids, in order.
std::vector<std::string> task_levels(const Task& task);

// The judge's user message for one level: the task, that level's guidance, the anchors, the numbered text.
// Throws std::runtime_error when the level or its guidance file is missing.
std::string build_judge_prompt(const PromptSet& prompts, const Task& task, const std::string& level,
                               const Subject& subject);

class Judge {
 public:
  // The provider should be configured at temperature 0 (judge_model_config()).
  Judge(agent::Provider& provider, PromptSet prompts);

  // Judges one level. Throws agent::ProviderError when the API fails (nothing to record then); a garbled reply
  // is never an exception: it is re-asked once, then the judgment is invalid.
  LevelJudgment judge_level(const Task& task, const std::string& level, const Subject& subject);

  const PromptSet& prompts() const { return prompts_; }

 private:
  agent::Provider& provider_;
  PromptSet prompts_;
  std::string sha_;
};

// A registry entry made fit to judge: temperature 0 (top_p left unset).
agent::ModelConfig judge_model_config(agent::ModelConfig m);

struct Proposal {
  std::string text;
  std::string stop_reason;
  agent::Usage usage;
};
// Asks the model under test for its L1/L2/L3 design of the task (design_propose.md; no tools, no guidance).
// Throws agent::ProviderError on API trouble and std::runtime_error when the reply has no text.
Proposal propose_design(agent::Provider& model, const Task& task, const PromptSet& prompts);

// The mean of the levels' scores (invalid ones count 0); NaN for none.
double mean_score(const std::vector<LevelJudgment>& levels);

}  // namespace d2k::judge
