#include "agent/providers/wire_common.hpp"

#include <fmt/format.h>

#include <map>

namespace d2k::agent::detail {

void check_tool_pairing(const std::vector<Message>& messages, std::string_view model_name) {
  std::map<std::string, std::string> open;  // id -> tool name
  std::size_t opened_at = 0;
  auto fail = [&](std::size_t i, const std::string& why) {
    throw ProviderError(ErrorKind::invalid_conversation,
                        fmt::format("model '{}': conversation message {}: {}", model_name, i, why));
  };
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (m.role == Role::tool) {
      auto it = open.find(m.tool_call_id);
      if (it == open.end())
        fail(i, fmt::format("tool result for '{}' answers no open tool call of the preceding assistant message",
                            m.tool_call_id));
      open.erase(it);
      continue;
    }
    if (!open.empty())
      fail(i, fmt::format("tool call '{}' ({}) of message {} has no tool result before this {} message",
                          open.begin()->first, open.begin()->second, opened_at, role_name(m.role)));
    if (m.role == Role::assistant) {
      for (const auto& c : m.tool_calls) {
        if (c.id.empty()) fail(i, fmt::format("tool call '{}' has no id", c.name));
        if (!open.emplace(c.id, c.name).second) fail(i, fmt::format("tool call id '{}' appears twice", c.id));
      }
      opened_at = i;
    }
  }
  if (!open.empty())
    fail(messages.size(), fmt::format("tool call '{}' ({}) of message {} has no tool result", open.begin()->first,
                                      open.begin()->second, opened_at));
}

[[noreturn]] void malformed(std::string_view model_name, const std::string& why) {
  throw ProviderError(ErrorKind::malformed_response, fmt::format("model '{}': malformed reply: {}", model_name, why),
                      200);
}

nlohmann::json parse_reply(const std::string& body, std::string_view model_name) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    std::string head = body.substr(0, 200);
    if (body.size() > 200) head += "...";
    malformed(model_name, fmt::format("not a JSON object: '{}'", head));
  }
  return j;
}

long long int_or_zero(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->is_number_integer() ? it->get<long long>() : static_cast<long long>(it->get<double>());
}

void set_arguments(ToolCall& call, std::string text) {
  call.arguments_text = std::move(text);
  std::string_view t = call.arguments_text;
  bool blank = t.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (blank) {  // some servers send "" for a call without arguments
    call.arguments = nlohmann::json::object();
    return;
  }
  try {
    auto j = nlohmann::json::parse(call.arguments_text);
    if (!j.is_object()) {
      call.arguments = nlohmann::json::object();
      call.arguments_error = fmt::format("the arguments must be a JSON object, not {}", j.type_name());
      return;
    }
    call.arguments = std::move(j);
  } catch (const nlohmann::json::parse_error& e) {
    call.arguments = nlohmann::json::object();
    call.arguments_error = fmt::format("the arguments are not valid JSON: {}", e.what());
  }
}

}  // namespace d2k::agent::detail
