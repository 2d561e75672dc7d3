#pragma once
// The agent's tools, one implementation for the built-in agent loop and the MCP server:
// read_file, write_file, edit_file, list_files, bash, evaluate, submit.
// Every failure (bad arguments, a path outside the workspace, a command that timed out) is a ToolResult with
// is_error set, never an exception. docs/MCP.md documents each tool's arguments and output.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool_spec.hpp"
#include "agent/tools/command_runner.hpp"
#include "agent/tools/workspace.hpp"

namespace d2k::agent {

// Runs an evaluation of the workspace's current solution: official=false for `evaluate` (feedback on the
// public workloads), true for `submit` (an official, recorded evaluation).
using EvaluateFn = std::function<ToolResult(bool official)>;

struct ToolBoxOptions {
  std::shared_ptr<CommandRunner> runner;  // default: LocalCommandRunner
  EvaluateFn evaluate;                    // empty: evaluate and submit answer "not available in this session"
  OutputLimits bash_output;               // head and tail kept of a command's output
  int bash_default_timeout_s = 120;
  int bash_max_timeout_s = 1800;
  std::size_t read_default_lines = 2000;  // read_file without `limit`
  std::size_t read_max_line_chars = 2000; // longer lines are cut with a note
  std::size_t list_max_entries = 1000;
  std::size_t max_calls = 0;              // 0: no budget; else calls beyond it answer "budget exhausted"
};

class ToolBox {
 public:
  ToolBox(Workspace workspace, ToolBoxOptions options = {});

  std::vector<ToolSpec> specs() const;
  bool has(const std::string& name) const;

  // Validates `args` against the tool's schema, then runs it. Unknown tools, missing, extra and wrongly
  // typed arguments are is_error results that say what is wrong. Each call of a known tool counts
  // against max_calls, valid or not.
  ToolResult call(const std::string& name, const nlohmann::json& args);

  std::size_t calls_made() const { return calls_; }
  const Workspace& workspace() const { return workspace_; }

 private:
  ToolResult read_file(const nlohmann::json& a);
  ToolResult write_file(const nlohmann::json& a);
  ToolResult edit_file(const nlohmann::json& a);
  ToolResult list_files(const nlohmann::json& a);
  ToolResult bash(const nlohmann::json& a);
  ToolResult evaluate(bool official);

  Workspace workspace_;
  ToolBoxOptions opt_;
  std::vector<ToolSpec> specs_;
  std::size_t calls_ = 0;
};

// Checks `args` against a flat object schema as ToolBox builds them: "required", "properties" with
// "type" string|integer|boolean|number|object|array, integer "minimum"/"maximum", and no extra properties.
// Returns what is wrong, or nullopt when args fit.
std::optional<std::string> check_args(const nlohmann::json& schema, const nlohmann::json& args);

}  // namespace d2k::agent
