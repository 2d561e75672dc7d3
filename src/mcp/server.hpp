#pragma once
// d2k's MCP server: the ToolBox's tools, the task prompt as a prompt and a resource, over newline-delimited
// JSON-RPC 2.0. Serves both protocol eras on one connection type: the `initialize` handshake
// (2025-03-26, 2025-06-18, 2025-11-25) and the stateless 2026-07-28 revision (`server/discover`, the protocol
// version in every request's params._meta). The first request decides the connection's era; docs/MCP.md.
#include <iosfwd>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/tools/toolbox.hpp"
#include "mcp/protocol.hpp"

namespace d2k::mcp {

struct ServerContent {
  std::string server_version;  // serverInfo.version
  std::string task_name;
  std::string guidance;        // the closed guidance levels shown, e.g. "L1,L2" or "none"
  std::string prompt_text;     // render_prompt's output
};

inline constexpr std::string_view kPromptName = "task";
inline constexpr std::string_view kPromptUri = "d2k://task/prompt";

class Server {
 public:
  Server(agent::ToolBox& tools, ServerContent content);

  // One incoming line; the response line to write, if any (notifications and responses get none).
  // Malformed JSON gets a -32700 error with a null id.
  std::optional<std::string> handle_line(const std::string& line);
  std::optional<nlohmann::json> handle_message(const nlohmann::json& message);

  // Reads lines from `in` until EOF, writing each response line to `out` and flushing it.
  void serve(std::istream& in, std::ostream& out);

  enum class Era { undecided, handshake, modern };
  Era era() const { return era_; }

 private:
  nlohmann::json dispatch(const std::string& method, const nlohmann::json& params, bool modern);
  nlohmann::json initialize(const nlohmann::json& params);
  nlohmann::json capabilities() const;
  nlohmann::json server_info() const;
  std::string instructions() const;
  nlohmann::json call_tool(const nlohmann::json& params);

  agent::ToolBox& tools_;
  ServerContent content_;
  Era era_ = Era::undecided;
  bool initialized_ = false;
  std::string version_;  // the negotiated handshake version
};

}  // namespace d2k::mcp
