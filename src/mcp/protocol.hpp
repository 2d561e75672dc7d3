#pragma once
// MCP protocol facts d2k's server needs: the revisions it serves, the reserved _meta keys of the stateless
// 2026-07-28 revision, JSON-RPC error codes, and message helpers.
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace d2k::mcp {

// Revisions reached through the `initialize` handshake, oldest to newest.
inline constexpr std::array<std::string_view, 3> kHandshakeVersions{"2025-03-26", "2025-06-18", "2025-11-25"};
// Stateless revisions: no handshake, every request carries the protocol version in params._meta.
inline constexpr std::array<std::string_view, 1> kModernVersions{"2026-07-28"};

inline constexpr std::string_view kProtocolVersionKey = "io.modelcontextprotocol/protocolVersion";
inline constexpr std::string_view kClientInfoKey = "io.modelcontextprotocol/clientInfo";
inline constexpr std::string_view kClientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities";
inline constexpr std::string_view kServerInfoKey = "io.modelcontextprotocol/serverInfo";

// JSON-RPC 2.0 and MCP error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kResourceNotFound = -32002;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// The handshake version to answer an `initialize` asking for `requested`: the same when served, else the newest.
std::string negotiate_handshake_version(const std::string& requested);
bool is_modern_version(const std::string& v);

// A JSON-RPC error thrown inside the server and turned into an error response.
struct RpcError {
  int code;
  std::string message;
  nlohmann::json data;  // null: no data member
};

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json make_error(const nlohmann::json& id, const RpcError& e);

// Serializes a message on one line; invalid UTF-8 in strings (tool output) is replaced, never thrown on.
std::string dump_line(const nlohmann::json& message);

}  // namespace d2k::mcp
