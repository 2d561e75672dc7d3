#include "mcp/server.hpp"

#include <fmt/format.h>

#include <iostream>

namespace d2k::mcp {

using nlohmann::json;

namespace {

bool has_envelope(const json& params) {
  return params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
         params["_meta"].contains(std::string(kProtocolVersionKey));
}

json supported_modern() {
  json a = json::array();
  for (auto v : kModernVersions) a.push_back(std::string(v));
  return a;
}

const json& require_string(const json& params, const char* key) {
  if (!params.contains(key) || !params[key].is_string())
    throw RpcError{kInvalidParams, fmt::format("params.{} must be a string", key), nullptr};
  return params[key];
}

bool is_cacheable(const std::string& method) {
  return method == "server/discover" || method == "tools/list" || method == "prompts/list" ||
         method == "resources/list" || method == "resources/templates/list" || method == "resources/read";
}

}  // namespace

Server::Server(agent::ToolBox& tools, ServerContent content) : tools_(tools), content_(std::move(content)) {}

json Server::server_info() const { return {{"name", "d2k"}, {"title", "d2k task server"}, {"version", content_.server_version}}; }

json Server::capabilities() const {
  return {{"tools", {{"listChanged", false}}},
          {"prompts", {{"listChanged", false}}},
          {"resources", {{"subscribe", false}, {"listChanged", false}}}};
}

std::string Server::instructions() const {
  return fmt::format(
      "d2k task server for task {} (guidance: {}). The task is the prompt `{}` and the resource {}. Work in the "
      "workspace with read_file, write_file, edit_file, list_files and bash; check a solution with evaluate and "
      "hand it in with submit.",
      content_.task_name, content_.guidance, kPromptName, kPromptUri);
}

json Server::initialize(const json& params) {
  std::string requested = params.value("protocolVersion", std::string());
  version_ = negotiate_handshake_version(requested);
  era_ = Era::handshake;
  std::cerr << fmt::format("d2k mcp: initialize: client asked for {}, serving {}\n",
                           requested.empty() ? "(none)" : requested, version_);
  return {{"protocolVersion", version_},
          {"capabilities", capabilities()},
          {"serverInfo", server_info()},
          {"instructions", instructions()}};
}

json Server::call_tool(const json& params) {
  const std::string name = require_string(params, "name");
  if (!tools_.has(name)) throw RpcError{kInvalidParams, fmt::format("unknown tool: {}", name), nullptr};
  json args = params.contains("arguments") ? params["arguments"] : json::object();
  if (args.is_null()) args = json::object();
  if (!args.is_object()) throw RpcError{kInvalidParams, "params.arguments must be an object", nullptr};
  agent::ToolResult r = tools_.call(name, args);
  return {{"content", json::array({{{"type", "text"}, {"text", r.text}}})}, {"isError", r.is_error}};
}

json Server::dispatch(const std::string& method, const json& params, bool modern) {
  if (method == "ping") return json::object();
  if (method == "server/discover") {
    if (!modern)
      throw RpcError{kMethodNotFound, "server/discover belongs to the 2026-07-28 revision: send it with the "
                                      "protocol version in params._meta", nullptr};
    return {{"supportedVersions", supported_modern()}, {"capabilities", capabilities()},
            {"instructions", instructions()}};
  }
  if (method == "tools/list") {
    json tools = json::array();
    for (const auto& s : tools_.specs())
      tools.push_back({{"name", s.name}, {"description", s.description}, {"inputSchema", s.input_schema}});
    return {{"tools", tools}};
  }
  if (method == "tools/call") return call_tool(params);
  if (method == "prompts/list") {
    return {{"prompts", json::array({{{"name", kPromptName},
                                      {"title", "The d2k task"},
                                      {"description", fmt::format("Task {} as the agent is shown it (guidance: {})",
                                                                  content_.task_name, content_.guidance)},
                                      {"arguments", json::array()}}})}};
  }
  if (method == "prompts/get") {
    const std::string name = require_string(params, "name");
    if (name != kPromptName) throw RpcError{kInvalidParams, fmt::format("unknown prompt: {}", name), nullptr};
    return {{"description", fmt::format("Task {} (guidance: {})", content_.task_name, content_.guidance)},
            {"messages", json::array({{{"role", "user"},
                                       {"content", {{"type", "text"}, {"text", content_.prompt_text}}}}})}};
  }
  if (method == "resources/list") {
    return {{"resources", json::array({{{"uri", kPromptUri},
                                        {"name", "task-prompt"},
                                        {"title", fmt::format("Task {}", content_.task_name)},
                                        {"description", "the task prompt, as the prompt `task` gives it"},
                                        {"mimeType", "text/markdown"},
                                        {"size", content_.prompt_text.size()}}})}};
  }
  if (method == "resources/templates/list") return {{"resourceTemplates", json::array()}};
  if (method == "resources/read") {
    const std::string uri = require_string(params, "uri");
    if (uri != kPromptUri)
      throw RpcError{kResourceNotFound, fmt::format("resource not found: {}", uri), {{"uri", uri}}};
    return {{"contents", json::array({{{"uri", kPromptUri}, {"mimeType", "text/markdown"},
                                       {"text", content_.prompt_text}}})}};
  }
  throw RpcError{kMethodNotFound, fmt::format("method not found: {}", method), nullptr};
}

std::optional<json> Server::handle_message(const json& msg) {
  if (msg.is_array())
    return make_error(nullptr, {kInvalidRequest, "JSON-RPC batches are not supported; send one message a line",
                                nullptr});
  if (!msg.is_object()) return make_error(nullptr, {kInvalidRequest, "a message must be a JSON object", nullptr});
  json id = msg.contains("id") ? msg["id"] : json();
  bool has_id = msg.contains("id");
  if (has_id && !id.is_string() && !id.is_number_integer() && !id.is_number_unsigned())
    return make_error(nullptr, {kInvalidRequest, "id must be a string or an integer", nullptr});
  if (!msg.contains("method")) {
    if (msg.contains("result") || msg.contains("error")) return std::nullopt;  // a response: we send no requests
    return make_error(id, {kInvalidRequest, "missing method", nullptr});
  }
  if (msg.value("jsonrpc", std::string()) != "2.0" || !msg["method"].is_string())
    return make_error(id, {kInvalidRequest, "not a JSON-RPC 2.0 request (jsonrpc must be \"2.0\", method a string)",
                           nullptr});
  const std::string method = msg["method"];
  json params = msg.contains("params") ? msg["params"] : json::object();
  if (params.is_null()) params = json::object();

  if (!has_id) {  // a notification: never answered
    if (method == "notifications/initialized") initialized_ = true;
    return std::nullopt;
  }
  if (!params.is_object()) return make_error(id, {kInvalidParams, "params must be an object", nullptr});

  try {
    if (method == "initialize") {
      if (era_ == Era::modern)
        throw RpcError{kUnsupportedProtocolVersion,
                       "this connection serves the 2026-07-28 protocol; the initialize handshake is not accepted",
                       {{"supported", supported_modern()}, {"requested", params.value("protocolVersion", "")}}};
      return make_result(id, initialize(params));
    }
    bool modern = has_envelope(params);
    if (modern && era_ == Era::handshake)
      throw RpcError{kInvalidRequest, "this connection serves the handshake protocol era; requests carrying the "
                                      "2026-07-28 envelope are not accepted on it", nullptr};
    if (!modern && era_ == Era::modern)
      throw RpcError{kInvalidParams, fmt::format("params._meta must carry {} and {} on a 2026-07-28 connection",
                                                 kProtocolVersionKey, kClientCapabilitiesKey), nullptr};
    if (modern) {
      const json& meta = params["_meta"];
      if (!meta.contains(std::string(kClientCapabilitiesKey)))
        throw RpcError{kInvalidParams,
                       fmt::format("params._meta is missing the required envelope key {}", kClientCapabilitiesKey),
                       nullptr};
      const json& v = meta[std::string(kProtocolVersionKey)];
      if (!v.is_string()) throw RpcError{kInvalidParams, fmt::format("{} must be a string", kProtocolVersionKey), nullptr};
      if (!is_modern_version(v.get<std::string>()))
        throw RpcError{kUnsupportedProtocolVersion, fmt::format("unsupported protocol version {}", v.get<std::string>()),
                       {{"supported", supported_modern()}, {"requested", v}}};
      era_ = Era::modern;
      json result = dispatch(method, params, true);
      result["resultType"] = "complete";
      if (!result.contains("_meta")) result["_meta"] = json::object();
      result["_meta"][std::string(kServerInfoKey)] = server_info();
      if (is_cacheable(method)) {
        result["ttlMs"] = 0;
        result["cacheScope"] = "private";
      }
      return make_result(id, std::move(result));
    }
    if (!initialized_ && era_ != Era::handshake && method != "ping")
      throw RpcError{kInvalidRequest, "send initialize first, or carry the 2026-07-28 protocol version in "
                                      "params._meta",
                     nullptr};
    return make_result(id, dispatch(method, params, false));
  } catch (const RpcError& e) {
    return make_error(id, e);
  } catch (const std::exception& e) {
    std::cerr << fmt::format("d2k mcp: {} failed: {}\n", method, e.what());
    return make_error(id, {kInternalError, fmt::format("internal error: {}", e.what()), nullptr});
  }
}

std::optional<std::string> Server::handle_line(const std::string& line) {
  json msg;
  try {
    msg = json::parse(line);
  } catch (const json::parse_error& e) {
    return dump_line(make_error(nullptr, {kParseError, fmt::format("parse error: {}", e.what()), nullptr}));
  }
  auto reply = handle_message(msg);
  if (!reply) return std::nullopt;
  return dump_line(*reply);
}

void Server::serve(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (auto reply = handle_line(line)) {
      out << *reply << '\n';
      out.flush();
    }
  }
}

}  // namespace d2k::mcp
