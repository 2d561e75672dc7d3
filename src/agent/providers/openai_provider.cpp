// OpenAI Chat Completions (and the servers that speak it: vLLM, SGLang, llama.cpp, ...).
#include <fmt/format.h>

#include "agent/providers/provider.hpp"
#include "agent/providers/wire_common.hpp"

namespace d2k::agent {

using nlohmann::json;

std::map<std::string, std::string> OpenAIProvider::auth_headers(const std::string& key) const {
  if (key.empty()) return {};
  return {{"authorization", "Bearer " + key}};
}

json OpenAIProvider::build_request(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools) const {
  detail::check_tool_pairing(messages, model_.name);
  json msgs = json::array();
  for (const Message& m : messages) {
    switch (m.role) {
      case Role::system:
      case Role::user: msgs.push_back({{"role", role_name(m.role)}, {"content", m.text}}); break;
      case Role::assistant: {
        json a{{"role", "assistant"}};
        a["content"] = m.text.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.text);
        if (!m.tool_calls.empty()) {
          json calls = json::array();
          for (const ToolCall& c : m.tool_calls)
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function",
                              {{"name", c.name},
                               // what the model wrote, even when malformed: it must see its own call
                               {"arguments", c.arguments_text.empty() ? c.arguments.dump() : c.arguments_text}}}});
          a["tool_calls"] = std::move(calls);
        }
        msgs.push_back(std::move(a));
        break;
      }
      case Role::tool:
        // Chat Completions has no error flag on tool messages: a failure is said in the text.
        msgs.push_back({{"role", "tool"},
                        {"tool_call_id", m.tool_call_id},
                        {"content", m.is_error ? "Error: " + m.text : m.text}});
        break;
    }
  }
  json body{{"model", model_.model}, {"messages", std::move(msgs)}};
  body[model_.max_tokens_field] = model_.max_output_tokens;
  if (model_.temperature) body["temperature"] = *model_.temperature;
  if (model_.top_p) body["top_p"] = *model_.top_p;
  if (!tools.empty()) {
    json ts = json::array();
    for (const ToolSpec& t : tools)
      ts.push_back({{"type", "function"},
                    {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.input_schema}}}});
    body["tools"] = std::move(ts);
  }
  body.merge_patch(model_.extra);
  return body;
}

Completion OpenAIProvider::parse_response(const std::string& text) const {
  json j = detail::parse_reply(text, model_.name);
  if (auto e = j.find("error"); e != j.end() && !e->is_null())
    detail::malformed(model_.name, fmt::format("a 2xx reply carrying an error: {}", e->dump()));
  auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array() || ch->empty() || !(*ch)[0].is_object())
    detail::malformed(model_.name, "no choices[0]");
  const json& choice = (*ch)[0];
  auto mi = choice.find("message");
  if (mi == choice.end() || !mi->is_object()) detail::malformed(model_.name, "no choices[0].message");
  const json& msg = *mi;

  Completion c;
  c.raw = j;
  c.message.role = Role::assistant;
  if (auto ct = msg.find("content"); ct != msg.end()) {
    if (ct->is_string()) {
      c.message.text = ct->get<std::string>();
    } else if (ct->is_array()) {  // content parts
      for (const auto& part : *ct)
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
          c.message.text += part["text"].get<std::string>();
    } else if (!ct->is_null()) {
      detail::malformed(model_.name, "choices[0].message.content is neither a string nor null");
    }
  }
  if (auto tc = msg.find("tool_calls"); tc != msg.end() && !tc->is_null()) {
    if (!tc->is_array()) detail::malformed(model_.name, "choices[0].message.tool_calls is not an array");
    for (std::size_t i = 0; i < tc->size(); ++i) {
      const json& t = (*tc)[i];
      auto fn = t.is_object() ? t.find("function") : t.end();
      if (!t.is_object() || fn == t.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        detail::malformed(model_.name, fmt::format("tool_calls[{}] has no function.name", i));
      ToolCall call;
      call.name = (*fn)["name"].get<std::string>();
      // Some local servers leave out the id; the reply must still quote one.
      call.id = t.contains("id") && t["id"].is_string() && !t["id"].get<std::string>().empty()
                    ? t["id"].get<std::string>()
                    : fmt::format("call_{}", i);
      auto args = fn->find("arguments");
      if (args == fn->end() || args->is_null())
        detail::set_arguments(call, "");
      else if (args->is_string())
        detail::set_arguments(call, args->get<std::string>());
      else  // an object instead of a string (some servers)
        detail::set_arguments(call, args->dump());
      c.message.tool_calls.push_back(std::move(call));
    }
  }
  std::string finish = choice.contains("finish_reason") && choice["finish_reason"].is_string()
                           ? choice["finish_reason"].get<std::string>()
                           : std::string();
  c.raw_stop_reason = finish;
  if (finish == "length")
    c.stop_reason = StopReason::max_tokens;
  else if (!c.message.tool_calls.empty() || finish == "tool_calls" || finish == "function_call")
    c.stop_reason = StopReason::tool_use;
  else if (finish == "stop")
    c.stop_reason = StopReason::end_turn;
  else
    c.stop_reason = StopReason::other;

  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    c.usage.reported = true;
    c.usage.input_tokens = detail::int_or_zero(*u, "prompt_tokens");
    c.usage.output_tokens = detail::int_or_zero(*u, "completion_tokens");
    if (auto d = u->find("prompt_tokens_details"); d != u->end())
      c.usage.cached_input_tokens = detail::int_or_zero(*d, "cached_tokens");
    if (auto d = u->find("completion_tokens_details"); d != u->end())
      c.usage.reasoning_tokens = detail::int_or_zero(*d, "reasoning_tokens");
  }
  return c;
}

}  // namespace d2k::agent
