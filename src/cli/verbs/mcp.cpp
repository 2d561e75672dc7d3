// d2k mcp: an MCP server over stdio serving the agent's tools, with the task prompt as a prompt and a
// resource. stdout carries protocol messages only; everything else goes to stderr. docs/MCP.md.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "agent/tools/toolbox.hpp"
#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "d2k/build_info.hpp"
#include "mcp/server.hpp"
#include "task/manifest.hpp"
#include "task/prompt.hpp"

namespace d2k::cli {

int run_mcp(const std::vector<std::string>& args) {
  CLI::App app{"Serve a task's tools (read_file, write_file, edit_file, list_files, bash, evaluate, submit) and "
               "its prompt over MCP on stdin/stdout, in both protocol eras (initialize handshake and 2026-07-28).",
               "d2k mcp"};
  std::string root, id, workspace, guidance = "none";
  std::size_t max_calls = 0;
  app.add_option("--task", id, "task name, folder name, number, or a path to a task folder")->required();
  app.add_option("--workspace", workspace, "the folder the tools work in (created if missing)")->required();
  app.add_option("--guidance", guidance, "none, all, or a comma list of levels such as L1,L2 (dependencies are added)");
  app.add_option("--max-tool-calls", max_calls, "tool calls allowed before every call answers \"budget exhausted\" "
                                                "(0: no limit)");
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  if (auto rc = parse_args(app, args)) return *rc;

  std::filesystem::path dir;
  if (id.find('/') != std::string::npos) {
    dir = id;
  } else {
    auto suite = load_suite_or_report(root);
    if (!suite) return kFailed;
    std::string why;
    auto found = find_task_dir(*suite, id, why);
    if (!found) {
      fmt::print(stderr, "d2k mcp: {}\n", why);
      return kUsage;
    }
    dir = *found;
  }
  Diagnostics d;
  auto task = load_task(dir, d);
  if (!task) {
    print_diagnostics(d);
    return kFailed;
  }
  std::vector<std::string> levels;
  try {
    levels = close_guidance(*task, parse_guidance_arg(*task, guidance));
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "d2k mcp: {}\n", e.what());
    return kUsage;
  }
  std::error_code ec;
  std::filesystem::create_directories(workspace, ec);
  std::optional<agent::ToolBox> tools;
  try {
    agent::ToolBoxOptions opt;
    opt.max_calls = max_calls;
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
