#pragma once
// External agent CLIs (Claude Code, Codex, ...) driven through d2k's MCP server: the command line with its
// placeholders filled in, run in the workspace under the wall-time limit, its output logged to a file.
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace d2k::agent {

// `s` quoted for bash: '...' with embedded quotes escaped.
std::string shell_quote(const std::string& s);

// Replaces each {name} of `values` in `command` by its value, shell-quoted. Throws std::invalid_argument
// naming an unknown {placeholder} (a typo would otherwise reach the shell as literal text).
std::string substitute_placeholders(const std::string& command, const std::map<std::string, std::string>& values);

// The MCP client configuration most CLIs read: {"mcpServers": {"d2k": {"command": ..., "args": [...]}}}.
nlohmann::json mcp_config_json(const std::string& d2k_binary, const std::vector<std::string>& args);

struct ExternalAgentOptions {
  std::string command;                       // a bash command line, placeholders already filled in
  std::filesystem::path cwd;                 // the workspace
  std::filesystem::path log;                 // stdout and stderr, appended
  double max_wall_s = 0;                     // 0: no limit
  std::map<std::string, std::string> env;    // added to the inherited environment
  std::function<bool()> interrupted;         // polled every 50 ms; may be empty
  double kill_grace_s = 5;                   // SIGTERM first, SIGKILL this long after
};

struct ExternalAgentResult {
  bool started = false;
  std::string error;  // when not started
  bool timed_out = false;
  bool interrupted = false;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  double wall_s = 0;
};

// Runs the command with /bin/bash -c in its own process group (stdin /dev/null); on the time limit or an
// interruption the whole group gets SIGTERM, then SIGKILL after the grace period.
ExternalAgentResult run_external_agent(const ExternalAgentOptions& options);

}  // namespace d2k::agent
