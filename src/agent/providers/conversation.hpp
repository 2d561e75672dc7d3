#pragma once
// Provider-neutral conversation types: what the agent loop keeps and what every provider translates.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace d2k::agent {

struct Prices;

enum class Role { system, user, assistant, tool };
std::string_view role_name(Role r);

struct ToolCall {
  std::string id;                                       // the provider's id; the tool result must quote it
  std::string name;                                     // tool name
  nlohmann::json arguments = nlohmann::json::object();  // parsed arguments; an empty object when malformed
  std::string arguments_text;   // the arguments exactly as the model wrote them (OpenAI: a JSON string)
  std::string arguments_error;  // non-empty: the model's arguments are not a JSON object; answer with a tool error
};

struct Message {
  Role role = Role::user;
  std::string text;                  // may be empty for an assistant message that only calls tools
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only: the call this answers
  bool is_error = false;             // tool only: the call failed

  static Message system(std::string text);
  static Message user(std::string text);
  static Message assistant(std::string text, std::vector<ToolCall> calls = {});
  static Message tool_result(std::string tool_call_id, std::string text, bool is_error = false);
};

struct Usage {
  long long input_tokens = 0;         // all input tokens of the request, cached ones included
  long long cached_input_tokens = 0;  // of which read from the prompt cache
  long long cache_write_tokens = 0;   // of which written to the prompt cache (Anthropic)
  long long output_tokens = 0;        // all output tokens, reasoning ones included
  long long reasoning_tokens = 0;     // of which reasoning (OpenAI reports them; 0 when not reported)
  double cost_usd = 0;
  bool reported = false;  // false: the reply carried no usage (some local servers)

  Usage& operator+=(const Usage& o);
};

// Cost of `u` at `p` (dollars per million tokens): uncached input, cache reads, cache writes and output.
double usage_cost(const Usage& u, const Prices& p);

enum class StopReason { end_turn, tool_use, max_tokens, other };
std::string_view stop_reason_name(StopReason s);

struct Completion {
  Message message;  // role assistant
  Usage usage;
  StopReason stop_reason = StopReason::other;
  std::string raw_stop_reason;  // the provider's own word ("stop", "tool_calls", "end_turn", ...)
  nlohmann::json raw;           // the whole reply body
  int attempts = 1;             // HTTP attempts this completion took (1 + retries)
};

nlohmann::json to_json(const Message& m);
nlohmann::json to_json(const Usage& u);

}  // namespace d2k::agent
