#include "agent/providers/conversation.hpp"

#include "agent/providers/model_registry.hpp"

namespace d2k::agent {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
    case Role::tool: return "tool";
  }
  return "?";
}

std::string_view stop_reason_name(StopReason s) {
  switch (s) {
    case StopReason::end_turn: return "end_turn";
    case StopReason::tool_use: return "tool_use";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::other: return "other";
  }
  return "?";
}

Message Message::system(std::string text) { return Message{Role::system, std::move(text), {}, {}, false}; }
Message Message::user(std::string text) { return Message{Role::user, std::move(text), {}, {}, false}; }
Message Message::assistant(std::string text, std::vector<ToolCall> calls) {
  return Message{Role::assistant, std::move(text), std::move(calls), {}, false};
}
Message Message::tool_result(std::string tool_call_id, std::string text, bool is_error) {
  return Message{Role::tool, std::move(text), {}, std::move(tool_call_id), is_error};
}

Usage& Usage::operator+=(const Usage& o) {
  input_tokens += o.input_tokens;
  cached_input_tokens += o.cached_input_tokens;
  cache_write_tokens += o.cache_write_tokens;
  output_tokens += o.output_tokens;
  reasoning_tokens += o.reasoning_tokens;
  cost_usd += o.cost_usd;
  reported = reported || o.reported;
  return *this;
}

double usage_cost(const Usage& u, const Prices& p) {
  long long uncached = u.input_tokens - u.cached_input_tokens - u.cache_write_tokens;
  if (uncached < 0) uncached = 0;
  double dollars_per_million =
      static_cast<double>(uncached) * p.input + static_cast<double>(u.cached_input_tokens) * p.cached_input +
      static_cast<double>(u.cache_write_tokens) * p.cache_write + static_cast<double>(u.output_tokens) * p.output;
  return dollars_per_million / 1e6;
}

nlohmann::json to_json(const Message& m) {
  nlohmann::json j{{"role", role_name(m.role)}, {"text", m.text}};
  if (!m.tool_calls.empty()) {
    auto& calls = j["tool_calls"] = nlohmann::json::array();
    for (const auto& c : m.tool_calls) {
      nlohmann::json cj{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}};
      if (!c.arguments_error.empty()) {
        cj["arguments_text"] = c.arguments_text;
        cj["arguments_error"] = c.arguments_error;
      }
      calls.push_back(std::move(cj));
    }
  }
  if (m.role == Role::tool) {
    j["tool_call_id"] = m.tool_call_id;
    j["is_error"] = m.is_error;
  }
  return j;
}

nlohmann::json to_json(const Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"cached_input_tokens", u.cached_input_tokens},
          {"cache_write_tokens", u.cache_write_tokens},
          {"output_tokens", u.output_tokens},
          {"reasoning_tokens", u.reasoning_tokens},
          {"cost_usd", u.cost_usd},
          {"reported", u.reported}};
}

}  // namespace d2k::agent
