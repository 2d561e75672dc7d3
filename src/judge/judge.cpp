#include "judge/judge.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "core/files.hpp"
#include "judge/verdict.hpp"
#include "task/prompt.hpp"

namespace d2k::judge {

using nlohmann::json;

Subject design_subject(const std::string& proposal) {
  Subject s;
  s.kind = "design";
  s.snapshot.add(kProposalFile, proposal);
  return s;
}

json LevelJudgment::citations_json() const {
  json a = json::array();
  for (const auto& c : citations) a.push_back(c.to_json());
  return a;
}

json LevelJudgment::raw_json() const {
  json at = json::array();
  for (const auto& a : attempts)
    at.push_back({{"reply", a.reply}, {"stop_reason", a.stop_reason}, {"problems", a.problems},
                  {"accepted", a.problems.empty()}});
  json j{{"kind", kind}, {"level", level}, {"valid", valid}, {"prompt_sha256", prompt_sha256}, {"attempts", at},
         {"usage", agent::to_json(usage)}};
  if (!valid) j["invalid_reason"] = invalid_reason;
  return j;
}

std::string task_text(const Task& task) { return render_prompt(task, {}); }

std::vector<std::string> task_levels(const Task& task) {
  std::vector<std::string> out;
  for (const auto& g : task.guidance) out.push_back(g.id);
  return out;
}

agent::ModelConfig judge_model_config(agent::ModelConfig m) {
  m.temperature = 0.0;
  m.top_p.reset();
  return m;
}

Judge::Judge(agent::Provider& provider, PromptSet prompts)
    : provider_(provider), prompts_(std::move(prompts)), sha_(prompts_.sha256()) {}

std::string build_judge_prompt(const PromptSet& prompts_, const Task& task, const std::string& level,
                               const Subject& subject) {
  const GuidanceLevel* g = task.level(level);
  if (!g) throw std::runtime_error(fmt::format("task {} has no guidance level {}", task.name, level));
  auto guidance = read_file(task.dir / "guidance" / (level + ".md"));
  if (!guidance) throw std::runtime_error(fmt::format("cannot read {}", (task.dir / "guidance" / (level + ".md")).string()));
  std::string depends;
  if (!g->depends.empty()) {
    depends = "This level builds on:";
    for (const auto& d : g->depends) {
      const GuidanceLevel* dl = task.level(d);
      depends += fmt::format(" {} ({})", d, dl ? dl->title : "");
    }
    depends += ". Those levels are judged separately.";
  }
  bool design = subject.kind == "design";
  std::map<std::string, std::string> vars{
      {"task", task_text(task)},
      {"level", level},
      {"level_title", g->title},
      {"depends", depends},
      {"guidance", *guidance},
      {"anchors", prompts_.get(design ? "anchors_design" : "anchors_impl")},
      {"files", render_numbered(subject.snapshot)},
      {"output_format", prompts_.get("output_format")},
  };
  return render_template(prompts_.get(design ? "design_level" : "impl_level"), vars);
}

LevelJudgment Judge::judge_level(const Task& task, const std::string& level, const Subject& subject) {
  LevelJudgment out;
  out.kind = subject.kind;
  out.level = level;
  out.prompt_sha256 = sha_;
  std::vector<agent::Message> msgs{agent::Message::system(prompts_.get("system")),
                                   agent::Message::user(build_judge_prompt(prompts_, task, level, subject))};
  for (int attempt = 0; attempt < 2; ++attempt) {
    agent::Completion c = provider_.complete(msgs, {});
    out.usage += c.usage;
    Attempt a;
    a.reply = c.message.text;
    a.stop_reason = std::string(agent::stop_reason_name(c.stop_reason));
    std::string error;
    auto v = parse_verdict(a.reply, error);
    if (!v) {
      if (c.stop_reason == agent::StopReason::max_tokens)
        error += "; the reply was cut off at the output limit: keep the reasoning short";
      a.problems.push_back(error);
      out.citations.clear();
      out.reasoning.clear();
    } else {
      a.problems = check_verdict(*v, subject.snapshot);
      out.citations = v->citations;
      out.reasoning = v->reasoning;
      if (a.problems.empty()) out.score = *v->score;
    }
    bool ok = a.problems.empty();
    out.attempts.push_back(a);
    if (ok) {
      out.valid = true;
      return out;
    }
    std::string reasons;
    for (const auto& p : a.problems) reasons += "- " + p + "\n";
    out.invalid_reason = reasons;
    if (attempt == 0) {
      msgs.push_back(agent::Message::assistant(a.reply.empty() ? "(empty reply)" : a.reply));
      msgs.push_back(agent::Message::user(render_template(prompts_.get("reask"), {{"reasons", reasons}})));
    }
  }
  out.valid = false;
  out.score = 0;
  while (!out.invalid_reason.empty() && out.invalid_reason.back() == '\n') out.invalid_reason.pop_back();
  return out;
}

Proposal propose_design(agent::Provider& model, const Task& task, const PromptSet& prompts) {
  std::vector<agent::Message> msgs{
      agent::Message::user(render_template(prompts.get("design_propose"), {{"task", task_text(task)}}))};
  agent::Completion c = model.complete(msgs, {});
  Proposal p;
  p.text = c.message.text;
  p.stop_reason = std::string(agent::stop_reason_name(c.stop_reason));
  p.usage = c.usage;
  if (normalize_ws(p.text).empty())
    throw std::runtime_error(fmt::format("model {} returned no design proposal for task {} (stop reason {})",
                                         model.model().name, task.name, c.raw_stop_reason));
  return p;
}

double mean_score(const std::vector<LevelJudgment>& levels) {
  if (levels.empty()) return std::nan("");
  double s = 0;
  for (const auto& l : levels) s += l.valid ? l.score : 0.0;
  return s / static_cast<double>(levels.size());
}

}  // namespace d2k::judge
