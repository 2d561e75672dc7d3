#include "mcp/protocol.hpp"

#include <algorithm>

namespace d2k::mcp {

std::string negotiate_handshake_version(const std::string& requested) {
  for (auto v : kHandshakeVersions)
    if (v == requested) return requested;
  return std::string(kHandshakeVersions.back());
}

bool is_modern_version(const std::string& v) {
  return std::find(kModernVersions.begin(), kModernVersions.end(), v) != kModernVersions.end();
}

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json make_error(const nlohmann::json& id, const RpcError& e) {
  nlohmann::json err{{"code", e.code}, {"message", e.message}};
  if (!e.data.is_null()) err["data"] = e.data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

std::string dump_line(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace d2k::mcp
