// d2k judge: the runtime-blind judges (docs/JUDGES.md).
//   d2k judge STORE.db --judge-model M [--campaign NAME] [--kind impl|design|both] [--repeats N] ...
//   d2k judge --solution DIR --task T --judge-model M [--repeats N] [--json]
//   d2k judge --task T --design-model M | --proposal FILE  --judge-model J [--repeats N] [--json]
//   d2k judge --print-prompt --task T --level L (--solution DIR | --proposal FILE)
#include <fmt/format.h>

#include <cstdlib>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"

#ifdef D2K_WITH_JUDGE
#include "agent/providers/model_registry.hpp"
#include "core/files.hpp"
#include "judge/campaign_judge.hpp"
#include "judge/judge.hpp"
#include "judge/noise.hpp"
#include "store/store.hpp"
#endif

namespace d2k::cli {

#ifndef D2K_WITH_JUDGE
int run_judge(const std::vector<std::string>&) {
  fmt::print(stderr, "d2k judge: this d2k was built without SQLite and libcurl (D2K_WITH_STORE_AND_HTTP=OFF), so it "
                     "has no judges\n");
  return kFailed;
}
#else

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<agent::ModelRegistry> registry(std::string file, int& rc) {
  if (file.empty())
    if (const char* env = std::getenv("D2K_MODELS")) file = env;
  if (file.empty()) {
    fmt::print(stderr, "d2k judge: no model registry: pass --models FILE or set D2K_MODELS "
                       "(example: tests/fixtures/models/example.toml)\n");
    rc = kUsage;
    return std::nullopt;
  }
  Diagnostics d;
  auto reg = agent::load_model_registry(file, d);
  if (!reg) {
    print_diagnostics(d);
    rc = kFailed;
  }
  return reg;
}

const agent::ModelConfig* find_model(const agent::ModelRegistry& reg, const std::string& name, int& rc) {
  const auto* m = reg.find(name);
  if (!m) {
    std::string names;
    for (const auto& mm : reg.models) names += (names.empty() ? "" : ", ") + mm.name;
    fmt::print(stderr, "d2k judge: no model '{}' in the registry (it has: {})\n", name, names);
    rc = kUsage;
  }
  return m;
}

json level_json(const judge::LevelJudgment& l) {
  return {{"level", l.level}, {"score", l.score}, {"valid", l.valid}, {"reasoning", l.reasoning},
          {"citations", l.citations_json()}, {"attempts", l.attempts.size()},
          {"invalid_reason", l.valid ? json(nullptr) : json(l.invalid_reason)}};
}

void print_levels(const std::vector<judge::LevelJudgment>& ls) {
  for (const auto& l : ls) {
    fmt::print("{} {:>5}{}  {}\n", l.level, l.valid ? fmt::format("{:g}", l.score) : "0",
               l.valid ? (l.attempts.size() > 1 ? " (after a re-ask)" : "") : " INVALID", l.reasoning);
    for (const auto& c : l.citations)
      fmt::print("     {} {}:{}-{}{}\n", c.verified ? "✓" : "✗", c.file, c.start_line, c.end_line,
                 c.verified ? "" : "  " + c.why);
    if (!l.valid) fmt::print("     why invalid: {}\n", l.invalid_reason);
  }
}

}  // namespace

int run_judge(const std::vector<std::string>& args) {
  CLI::App app{"Runtime-blind judges: JS_impl (how much of each guidance level a solution implements) and JS_design "
               "(how much of it a model proposes unguided), scored 0-100 on five anchors with verified code "
               "citations.", "d2k judge"};
  std::string db, campaign, judge_model, models_file, kind = "impl", prompts_dir, root, proposals_dir;
  std::string solution, task_id, design_model, proposal_file, level;
  int repeats = 1;
  bool as_json = false, print_prompt = false;
  app.add_option("STORE", db, "the campaign store: judge its campaign's final submissions (and designs)");
  app.add_option("--judge-model", judge_model, "the judge: a model of the registry (sent at temperature 0)");
  app.add_option("--models", models_file, "the model registry (default: $D2K_MODELS)");
  app.add_option("--campaign", campaign, "the campaign's name (default: the store's only campaign)");
  app.add_option("--kind", kind, "impl (default), design, or both")->check(CLI::IsMember({"impl", "design", "both"}));
  app.add_option("--repeats", repeats, "judge each item N times (repeat 0..N-1) to measure judge noise")
      ->check(CLI::Range(1, 20));
  app.add_option("--proposals", proposals_dir, "where design proposals are kept (default: STORE.judge/proposals)");
  app.add_option("--solution", solution, "judge one solution (a folder or a solution file) and print the scores");
  app.add_option("--task", task_id, "the task of --solution, --design-model or --proposal");
  app.add_option("--design-model", design_model, "ask this model for a design proposal of --task, then judge it");
  app.add_option("--proposal", proposal_file, "judge this design proposal (a text file) for --task");
  app.add_option("--level", level, "--print-prompt: the level (L1, L2, L3)");
  app.add_flag("--print-prompt", print_prompt, "print the judge's prompt for --level and exit (no model is called)");
  app.add_option("--prompts", prompts_dir, "read the prompts from this folder instead of the built-in prompts/judge");
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  app.add_flag("--json", as_json, "print JSON (single solution or proposal)");
  if (auto rc = parse_args(app, args)) return *rc;

  judge::PromptSet prompts;
  try {
    prompts = prompts_dir.empty() ? judge::embedded_prompts() : judge::load_prompts(prompts_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k judge: {}\n", e.what());
    return kUsage;
  }
  bool single = !solution.empty() || !design_model.empty() || !proposal_file.empty();
  if (!db.empty() && single) {
    fmt::print(stderr, "d2k judge: give either STORE or one of --solution, --design-model, --proposal\n");
    return kUsage;
  }
  if (db.empty() && !single) {
    fmt::print(stderr, "d2k judge: nothing to judge: give STORE, or --solution DIR --task T, or --task T with "
                       "--design-model M or --proposal FILE\n");
    return kUsage;
  }
  if (single && task_id.empty()) {
    fmt::print(stderr, "d2k judge: --task is required with --solution, --design-model and --proposal\n");
    return kUsage;
  }
  if ((!solution.empty()) + (!design_model.empty()) + (!proposal_file.empty()) > 1) {
    fmt::print(stderr, "d2k judge: give only one of --solution, --design-model, --proposal\n");
    return kUsage;
  }

  int rc = kOk;
  std::optional<Task> task;
  if (single) {
    task = load_task_arg(root, task_id, "judge", rc);
    if (!task) return rc;
  }

  // The subject of a single judgment (the design model's proposal is asked for later, after the registry).
  judge::Subject subject;
  try {
    if (!solution.empty()) subject.snapshot = judge::snapshot_solution(solution);
    if (!proposal_file.empty()) {
      auto text = read_file(proposal_file);
      if (!text) throw std::runtime_error(fmt::format("cannot read {}", proposal_file));
      subject = judge::design_subject(*text);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k judge: {}\n", e.what());
    return kFailed;
  }

  if (print_prompt) {
    if (!task || level.empty() || !design_model.empty()) {
      fmt::print(stderr, "d2k judge: --print-prompt needs --task, --level and --solution or --proposal\n");
      return kUsage;
    }
    try {
      fmt::print("{}\n\n{}", prompts.get("system"), judge::build_judge_prompt(prompts, *task, level, subject));
      return kOk;
    } catch (const std::exception& e) {
      fmt::print(stderr, "d2k judge: {}\n", e.what());
      return kFailed;
    }
  }

  if (judge_model.empty()) {
    fmt::print(stderr, "d2k judge: --judge-model is required\n");
    return kUsage;
  }
  auto reg = registry(models_file, rc);
  if (!reg) return rc;
  const auto* jm = find_model(*reg, judge_model, rc);
  if (!jm) return rc;
  auto judge_provider = agent::make_provider(judge::judge_model_config(*jm));

  if (single) {
    try {
      json out{{"task", task->name}, {"judge_model", judge_model}, {"prompt_sha256", prompts.sha256()}};
      if (!design_model.empty()) {
        const auto* dm = find_model(*reg, design_model, rc);
        if (!dm) return rc;
        auto mp = agent::make_provider(*dm);
        auto p = judge::propose_design(*mp, *task, prompts);
        subject = judge::design_subject(p.text);
        if (!as_json) fmt::print("design proposal of {}:\n\n{}\n\n", design_model, p.text);
        out["proposal"] = p.text;
      }
      out["kind"] = subject.kind;
      judge::Judge j(*judge_provider, prompts);
      std::vector<judge::NoiseItem> noise;
      json reps = json::array();
      for (int r = 0; r < repeats; ++r) {
        std::vector<judge::LevelJudgment> ls;
        for (const auto& l : judge::task_levels(*task)) ls.push_back(j.judge_level(*task, l, subject));
        double mean = judge::mean_score(ls);
        json jl = json::array();
        for (std::size_t i = 0; i < ls.size(); ++i) {
          jl.push_back(level_json(ls[i]));
          if (noise.size() <= i) noise.push_back({ls[i].level, {}});
          noise[i].scores.push_back(ls[i].valid ? ls[i].score : 0.0);
        }
        if (noise.size() <= ls.size()) noise.push_back({"mean", {}});
        noise[ls.size()].scores.push_back(mean);
        reps.push_back({{"repeat", r}, {"levels", jl}, {"mean", mean}});
        if (!as_json) {
          if (repeats > 1) fmt::print("repeat {}\n", r);
          print_levels(ls);
          fmt::print("{} = {:.1f}  (mean of {} levels; invalid counts 0)\n\n",
                     subject.kind == "design" ? "JS_design" : "JS_impl", mean, ls.size());
        }
      }
      auto ns = judge::judge_noise(noise);
      out["repeats"] = reps;
      out["noise"] = judge::to_json(ns);
      if (as_json)
        fmt::print("{}\n", out.dump(2));
      else if (repeats > 1)
        fmt::print("{}", judge::format_noise(ns));
      return kOk;
    } catch (const agent::ProviderError& e) {
      fmt::print(stderr, "d2k judge: API error ({}): {}\n", agent::error_kind_name(e.kind()), e.what());
      return kFailed;
    } catch (const std::exception& e) {
      fmt::print(stderr, "d2k judge: {}\n", e.what());
      return kFailed;
    }
  }

  // A campaign in a store.
  try {
    auto st = store::Store::open(db, {.create = false});
    judge::CampaignJudgeOptions o;
    o.campaign = campaign;
    o.judge_model = judge_model;
    o.repeats = repeats;
    o.impl = kind != "design";
    o.design = kind != "impl";
    o.judge = judge_provider.get();
    o.prompts = prompts;
    o.base_dir = fs::absolute(db).parent_path();
    o.proposals_dir = proposals_dir.empty() ? fs::path(db + ".judge") / "proposals" : fs::path(proposals_dir);
    auto suite = load_suite_or_report(root);
    o.load_task = [&](const std::string& name, std::string& why) -> std::optional<Task> {
      if (!suite) {
        why = "the suite cannot be loaded";
        return std::nullopt;
      }
      auto dir = find_task_dir(*suite, name, why);
      if (!dir) return std::nullopt;
      Diagnostics d;
      auto t = load_task(*dir, d);
      if (!t) why = "its task.toml does not load (run d2k validate)";
      return t;
    };
    const agent::ModelRegistry& registry_ref = *reg;
    o.model_provider = [&](const std::string& name) -> std::unique_ptr<agent::Provider> {
      const auto* m = registry_ref.find(name);
      if (!m) throw std::runtime_error(fmt::format("model '{}' is not in the registry", name));
      return agent::make_provider(*m);
    };
    o.log = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
    auto res = judge::judge_campaign(st, o);
    auto camp = st.resolve_campaign(campaign);
    fmt::print("campaign {} · judge {} · {} judged ({} invalid), {} already stored, {} failed{}\n", camp.name,
               judge_model, res.judged, res.invalid, res.skipped, res.failed, res.aborted ? " · STOPPED" : "");
    fmt::print("judge tokens: {} input ({} cached), {} output, ${:.4f}\n", res.judge_usage.input_tokens,
               res.judge_usage.cached_input_tokens, res.judge_usage.output_tokens, res.judge_usage.cost_usd);
    if (res.proposals)
      fmt::print("design proposals: {} asked, {} input tokens, {} output tokens, ${:.4f}\n", res.proposals,
                 res.design_usage.input_tokens, res.design_usage.output_tokens, res.design_usage.cost_usd);
    fmt::print("{}", judge::format_noise(judge::stored_noise(st, camp.id, judge_model)));
    for (const auto& e : res.errors) fmt::print(stderr, "d2k judge: {}\n", e);
    return res.failed || res.aborted ? kFailed : kOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k judge: {}\n", e.what());
    return kFailed;
  }
}

#endif

}  // namespace d2k::cli
