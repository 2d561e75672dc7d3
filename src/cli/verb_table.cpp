#include "cli/verb_table.hpp"

#include <array>

namespace d2k::cli {
namespace {
constexpr std::array kVerbs{
    Verb{"tasks", "list the suite's tasks and their workloads, one line each", run_tasks},
    Verb{"show", "print exactly what an agent is shown for a task, with the guidance levels asked for", run_show},
    Verb{"validate", "lint task folders: manifest, files, workloads, expressions, guidance, solutions", run_validate},
    Verb{"eval", "evaluate a solution (or the suite's expert, naive or wrong solutions): correctness, timing, baselines", run_eval},
    Verb{"calibrate", "measure the GPU's copy bandwidth and matrix rates for speed-of-light figures", run_calibrate},
    Verb{"mcp", "serve a task's tools and prompt over MCP on stdio (initialize handshake and 2026-07-28 eras)", run_mcp},
    Verb{"score", "score a stored campaign: correctness, S_perf, geomean speedups, fast_p, % SOL, JS_impl, cost", run_score},
    Verb{"report", "write a stored campaign's report: Markdown and one self-contained HTML page", run_report},
    Verb{"store", "the campaign store (SQLite): info, check, migrate, export to JSON or CSV", run_store},
    Verb{"agent", "run an agent on a task under budgets (built-in loop or external CLI), resume it, show its outcome", run_agent},
    Verb{"judge", "runtime-blind judges: JS_impl of solutions and JS_design of proposals, with verified citations", run_judge},
    Verb{"campaign", "run a campaign (models x tasks x conditions x repeats) into a store, resumable and sharded; merge shard stores", run_campaign},
};
}  // namespace

std::span<const Verb> verbs() { return kVerbs; }

const Verb* find_verb(std::string_view name) {
  for (const auto& v : kVerbs)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace d2k::cli
