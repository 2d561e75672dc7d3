#pragma once
// Helpers for the agent loop's tests: replies in both wire formats for the scripted fake model server, and an
// evaluator stand-in that records submissions in the real layout (agent/loop/submissions.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/loop/submissions.hpp"
#include "agent/tools/toolbox.hpp"
#include "core/files.hpp"
#include "unit/provider_fake_server.hpp"

namespace d2k::test {

struct Call {
  std::string id, name;
  nlohmann::json input;       // an object for a well-formed call
  std::string raw_arguments;  // non-empty: sent as is (OpenAI: the arguments string; Anthropic: input is this string)
};

struct Tokens {
  long long input = 1000, cached = 0, output = 100;  // input counts every input token, cached ones included
};

inline nlohmann::json model_reply(agent::ProviderKind kind, const std::string& text, const std::vector<Call>& calls,
                                  Tokens t = {}, bool with_usage = true, const std::string& stop = "") {
  using nlohmann::json;
  if (kind == agent::ProviderKind::openai) {
    json msg{{"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)}};
    if (!calls.empty()) {
      json tc = json::array();
      for (const auto& c : calls)
        tc.push_back({{"id", c.id}, {"type", "function"},
                      {"function", {{"name", c.name}, {"arguments", c.raw_arguments.empty() ? c.input.dump() : c.raw_arguments}}}});
      msg["tool_calls"] = tc;
    }
    json r{{"id", "chatcmpl-x"}, {"object", "chat.completion"}, {"model", "gpt-test"},
           {"choices", json::array({{{"index", 0}, {"message", msg},
                                     {"finish_reason", !stop.empty() ? stop : calls.empty() ? "stop" : "tool_calls"}}})}};
    if (with_usage)
      r["usage"] = {{"prompt_tokens", t.input}, {"completion_tokens", t.output},
                    {"prompt_tokens_details", {{"cached_tokens", t.cached}}}};
    return r;
  }
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (const auto& c : calls)
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name},
                       {"input", c.raw_arguments.empty() ? c.input : json(c.raw_arguments)}});
  std::string anth_stop = stop == "length" ? "max_tokens" : !stop.empty() ? stop : calls.empty() ? "end_turn" : "tool_use";
  json r{{"id", "msg_x"}, {"type", "message"}, {"role", "assistant"}, {"model", "claude-test"},
         {"content", content}, {"stop_reason", anth_stop}};
  if (with_usage)
    r["usage"] = {{"input_tokens", t.input - t.cached}, {"cache_read_input_tokens", t.cached},
                  {"output_tokens", t.output}};
  return r;
}

inline ScriptedReply reply(agent::ProviderKind kind, const std::string& text, const std::vector<Call>& calls,
                           Tokens t = {}, bool with_usage = true) {
  return ScriptedReply::json(model_reply(kind, text, calls, t, with_usage));
}

inline std::string kind_name(agent::ProviderKind k) { return k == agent::ProviderKind::openai ? "OpenAI" : "Anthropic"; }

// An evaluator stand-in: the workspace's solution.py is "correct" when it contains CORRECT, and its time is the
// number after "ms=" (e.g. "# CORRECT ms=2.5"). Submissions are recorded exactly as the real evaluate does.
inline agent::EvaluateFn fake_evaluator(std::filesystem::path workspace, std::filesystem::path records,
                                        int* calls = nullptr) {
  return [workspace, records, calls](bool official) -> agent::ToolResult {
    if (calls) ++*calls;
    auto src = read_file(workspace / "solution.py");
    if (!src) return {"no solution to evaluate", true};
    bool ok = src->find("CORRECT") != std::string::npos;
    double ms = 1.0;
    if (auto p = src->find("ms="); p != std::string::npos) ms = std::stod(src->substr(p + 3));
    nlohmann::json trace{{"workload", "w"}, {"timed", true}, {"status", ok ? "passed" : "incorrect_numerics"},
                         {"skipped", ""}};
    if (ok) trace["performance"] = {{"solution", {{"median_ms", ms}}}};
    nlohmann::json ev{{"traces", nlohmann::json::array({trace})}, {"gpu", true}};
    std::string text = fmt::format("w {}", ok ? "passed" : "incorrect_numerics");
    if (official) {
      int n = agent::record_submission(records, workspace / "solution.py", ev);
      text += fmt::format("\nsubmission {} recorded\n", n);
    }
    return {text, !ok};
  };
}

}  // namespace d2k::test
