// Anthropic Messages: system at the top level, tool_use / tool_result content blocks.
#include <fmt/format.h>

#include "agent/providers/provider.hpp"
#include "agent/providers/wire_common.hpp"

namespace d2k::agent {

using nlohmann::json;

namespace {

constexpr const char* kAnthropicVersion = "2023-06-01";
// The API refuses empty text blocks and empty messages; this stands in for an empty text.
constexpr const char* kEmptyText = "(empty)";

json text_block(const std::string& t) { return {{"type", "text"}, {"text", t}}; }

}  // namespace

std::map<std::string, std::string> AnthropicProvider::auth_headers(const std::string& key) const {
  std::map<std::string, std::string> h{{"anthropic-version", kAnthropicVersion}};
  if (!key.empty()) h["x-api-key"] = key;
  return h;
}

json AnthropicProvider::build_request(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools) const {
  detail::check_tool_pairing(messages, model_.name);
  std::string system;
  json out = json::array();
  json pending = json::array();  // tool_result blocks waiting for the next user message
  auto push = [&](const char* role, json blocks) {
    if (!out.empty() && out.back()["role"] == role) {  // consecutive turns of one role become one message
      for (auto& b : blocks) out.back()["content"].push_back(std::move(b));
    } else {
      out.push_back({{"role", role}, {"content", std::move(blocks)}});
    }
  };
  auto flush_results = [&](json then) {  // the user message answering tool calls: results first, then any text
    json blocks = std::move(pending);
    pending = json::array();
    for (auto& b : then) blocks.push_back(std::move(b));
    if (!blocks.empty()) push("user", std::move(blocks));
  };
  for (const Message& m : messages) {
    switch (m.role) {
      case Role::system:
        if (!system.empty()) system += "\n\n";
        system += m.text;
        break;
      case Role::user: flush_results(json::array({text_block(m.text.empty() ? kEmptyText : m.text)})); break;
      case Role::tool: {
        json r{{"type", "tool_result"},
               {"tool_use_id", m.tool_call_id},
               {"content", m.text.empty() ? kEmptyText : m.text}};
        if (m.is_error) r["is_error"] = true;
        pending.push_back(std::move(r));
        break;
      }
      case Role::assistant: {
        flush_results(json::array());
        json blocks = json::array();
        if (!m.text.empty()) blocks.push_back(text_block(m.text));
        for (const ToolCall& c : m.tool_calls)
          blocks.push_back({{"type", "tool_use"},
                            {"id", c.id},
                            {"name", c.name},
                            {"input", c.arguments.is_object() ? c.arguments : json::object()}});
        if (blocks.empty()) blocks.push_back(text_block(kEmptyText));
        push("assistant", std::move(blocks));
        break;
      }
    }
  }
  flush_results(json::array());
  if (out.empty() || out.front()["role"] != "user")
    throw ProviderError(
        ErrorKind::invalid_conversation,
        fmt::format("model '{}': the first message after the system prompt must be a user message", model_.name));
  const json ephemeral = {{"type", "ephemeral"}};
  if (model_.prompt_cache) {
    // Breakpoints (at most 4 are allowed; we use 3): the tools, the system prompt, and the last block of the
    // last user message, so each turn reads the whole earlier conversation from the cache and writes the rest.
    for (auto it = out.rbegin(); it != out.rend(); ++it)
      if ((*it)["role"] == "user" && !(*it)["content"].empty()) {
        (*it)["content"].back()["cache_control"] = ephemeral;
        break;
      }
  }
  json body{{"model", model_.model}, {"max_tokens", model_.max_output_tokens}, {"messages", std::move(out)}};
  if (!system.empty()) {
    if (model_.prompt_cache)
      body["system"] = json::array({{{"type", "text"}, {"text", system}, {"cache_control", ephemeral}}});
    else
      body["system"] = system;
  }
  if (model_.temperature) body["temperature"] = *model_.temperature;
  if (model_.top_p) body["top_p"] = *model_.top_p;
  if (!tools.empty()) {
    json ts = json::array();
    for (const ToolSpec& t : tools)
      ts.push_back({{"name", t.name}, {"description", t.description}, {"input_schema", t.input_schema}});
    if (model_.prompt_cache) ts.back()["cache_control"] = ephemeral;
    body["tools"] = std::move(ts);
  }
  body.merge_patch(model_.extra);
  return body;
}

Completion AnthropicProvider::parse_response(const std::string& text) const {
  json j = detail::parse_reply(text, model_.name);
  if (j.value("type", "") == "error")
    detail::malformed(model_.name, fmt::format("a 2xx reply carrying an error: {}", j.dump()));
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) detail::malformed(model_.name, "no content array");

  Completion c;
  c.raw = j;
  c.message.role = Role::assistant;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const json& b = (*content)[i];
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      detail::malformed(model_.name, fmt::format("content[{}] has no type", i));
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string())
        detail::malformed(model_.name, fmt::format("content[{}] (text) has no text", i));
      c.message.text += b["text"].get<std::string>();
    } else if (type == "tool_use") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
        detail::malformed(model_.name, fmt::format("content[{}] (tool_use) needs a string id and name", i));
      ToolCall call;
      call.id = b["id"].get<std::string>();
      call.name = b["name"].get<std::string>();
      const json input = b.contains("input") ? b["input"] : json::object();
      detail::set_arguments(call, input.dump());
      if (input.is_object()) call.arguments_text.clear();  // well formed: nothing worth keeping verbatim
      c.message.tool_calls.push_back(std::move(call));
    }
    // thinking, redacted_thinking and server tool blocks are left in `raw`
  }
  std::string stop =
      j.contains("stop_reason") && j["stop_reason"].is_string() ? j["stop_reason"].get<std::string>() : std::string();
  c.raw_stop_reason = stop;
  if (stop == "end_turn" || stop == "stop_sequence")
    c.stop_reason = StopReason::end_turn;
  else if (stop == "tool_use")
    c.stop_reason = StopReason::tool_use;
  else if (stop == "max_tokens")
    c.stop_reason = StopReason::max_tokens;
  else
    c.stop_reason = c.message.tool_calls.empty() ? StopReason::other : StopReason::tool_use;

  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    c.usage.reported = true;
    long long uncached = detail::int_or_zero(*u, "input_tokens");
    c.usage.cached_input_tokens = detail::int_or_zero(*u, "cache_read_input_tokens");
    c.usage.cache_write_tokens = detail::int_or_zero(*u, "cache_creation_input_tokens");
    c.usage.input_tokens = uncached + c.usage.cached_input_tokens + c.usage.cache_write_tokens;
    c.usage.output_tokens = detail::int_or_zero(*u, "output_tokens");
  }
  return c;
}

}  // namespace d2k::agent
