// d2k mcp: an MCP server over stdio serving the agent's tools, with the task prompt as a prompt and a
// resource. stdout carries protocol messages only; everything else goes to stderr. docs/MCP.md.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "agent/sandbox/sandbox.hpp"
#include "agent/tools/public_files.hpp"
#include "agent/tools/toolbox.hpp"
#include "core/files.hpp"
#include "eval/evaluator.hpp"
#include "task/solution.hpp"
#include "agent/sandbox/worker_jail.hpp"
#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "d2k/build_info.hpp"
#include "mcp/server.hpp"
#include "task/manifest.hpp"
#include "task/prompt.hpp"

namespace d2k::cli {

std::string format_table(const Task& task, const Solution& sol, const EvalResult& ev);

namespace {

// evaluate: a quick look on the public workloads (one seed, short timing). submit: the official evaluation,
// recorded outside the workspace (the agent cannot edit the record) with a copy of the solution.
agent::ToolResult evaluate_workspace(const Task& task, const std::filesystem::path& workspace,
                                     const std::filesystem::path& records, bool official) {
  Diagnostics d;
  auto sol = load_solution(workspace, d);
  if (!sol) {
    std::string why;
    for (const auto& i : d.items()) why += i.message + "\n";
    return {"no solution to evaluate: " + why + "write solution.py (Triton) or solution.cu (CUDA C++) at the "
            "workspace root (templates in template/)", true};
  }
  EvalOptions eo;
  eo.worker = worker_path();
  agent::confine_solution_worker(eo, agent::WorkerSandboxMode::automatic);  // bwrap when it works here
  eo.include_dir = std::filesystem::path(build::source_dir) / "include";
  if (!official) {
    eo.seeds = 1;
    eo.compile_baseline = false;
    eo.max_time_per_workload_s = 2;
  }
  EvalResult ev;
  try {
    ev = evaluate(task, *sol, eo);
  } catch (const std::exception& e) {
    return {std::string("the evaluation could not run: ") + e.what(), true};
  }
  std::string text = format_table(task, *sol, ev);
  bool all_passed = std::all_of(ev.traces.begin(), ev.traces.end(),
                                [](const auto& t) { return !t.skipped.empty() || t.status == Status::passed; });
  if (official) {
    std::filesystem::create_directories(records);
    int n = 1;
    while (std::filesystem::exists(records / fmt::format("{:03}", n))) ++n;
    auto dir = records / fmt::format("{:03}", n);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(sol->source, dir / sol->source.filename());
    auto j = ev.to_json();
    j["d2k_version"] = build::version;
    write_file_atomic(dir / "evaluation.json", j.dump(2));
    text += fmt::format("\nsubmission {} recorded\n", n);
  }
  return {text, !all_passed};
}

}  // namespace

int run_mcp(const std::vector<std::string>& args) {
  CLI::App app{"Serve a task's tools (read_file, write_file, edit_file, list_files, bash, evaluate, submit) and "
               "its prompt over MCP on stdin/stdout, in both protocol eras (initialize handshake and 2026-07-28).",
               "d2k mcp"};
  std::string root, id, workspace, guidance = "none", records, sandbox = "bwrap";
  std::size_t max_calls = 0;
  app.add_option("--task", id, "task name, folder name, number, or a path to a task folder")->required();
  app.add_option("--workspace", workspace, "the folder the tools work in (created if missing)")->required();
  app.add_option("--guidance", guidance, "none, all, or a comma list of levels such as L1,L2 (dependencies are added)");
  app.add_option("--max-tool-calls", max_calls, "tool calls allowed before every call answers \"budget exhausted\" "
                                                "(0: no limit)");
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  app.add_option("--submissions", records, "where submit records its evaluations (default: WORKSPACE.submissions)");
  app.add_option("--sandbox", sandbox, "where bash runs: bwrap (bubblewrap: no network, only the workspace writable, "
                                       "the repository hidden; refused if bwrap cannot run here) or none")
      ->check(CLI::IsMember({"bwrap", "none"}));
  if (auto rc = parse_args(app, args)) return *rc;

  int rc = kOk;
  auto task = load_task_arg(root, id, "mcp", rc);
  if (!task) return rc;
  auto found_levels = guidance_levels_arg(*task, guidance, "mcp", rc);
  if (!found_levels) return rc;
  const auto& levels = *found_levels;
  while (workspace.size() > 1 && workspace.back() == '/') workspace.pop_back();  // "ws/" must not put records inside
  std::filesystem::path records_dir(records.empty() ? workspace + ".submissions" : records);
  try {
    auto written = agent::populate_workspace(*task, levels, std::filesystem::path(build::source_dir) / "include", workspace);
    if (!written.empty()) fmt::print(stderr, "d2k mcp: workspace starts with {} public files\n", written.size());
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k mcp: cannot prepare the workspace: {}\n", e.what());
    return kFailed;
  }
  std::optional<agent::ToolBox> tools;
  try {
    agent::ToolBoxOptions opt;
    opt.max_calls = max_calls;
    agent::SandboxOptions so;
    so.kind = *agent::parse_sandbox_kind(sandbox);
    so.hidden = {task->dir.parent_path(), records_dir};  // the suite (expert solutions) and the records
    std::string chosen;
    try {
      opt.runner = agent::make_command_runner(so, &chosen);
    } catch (const agent::SandboxUnavailable& e) {
      fmt::print(stderr, "d2k mcp: {}\n", e.what());
      return kFailed;
    }
    fmt::print(stderr, "d2k mcp: sandbox for bash: {}\n", chosen);
    opt.evaluate = [&task, ws = std::filesystem::path(workspace), records_dir](bool official) {
      return evaluate_workspace(*task, ws, records_dir, official);
    };
    tools.emplace(agent::Workspace(workspace), opt);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "d2k mcp: {}\n", e.what());
    return kUsage;
  }
  std::string shown_levels;
  for (const auto& l : levels) shown_levels += (shown_levels.empty() ? "" : ",") + l;
  mcp::ServerContent content{build::version, task->name, shown_levels.empty() ? "none" : shown_levels,
                             render_prompt(*task, levels)};
  mcp::Server server(*tools, content);
  fmt::print(stderr, "d2k mcp: task {} (guidance: {}), workspace {}, {} on stdio\n", task->name, content.guidance,
             tools->workspace().root().string(),
             max_calls ? fmt::format("{} tool calls", max_calls) : std::string("no tool-call limit"));
  server.serve(std::cin, std::cout);
  fmt::print(stderr, "d2k mcp: stdin closed after {} tool calls\n", tools->calls_made());
  return kOk;
}

}  // namespace d2k::cli
