#pragma once
// Internal to the providers: checks and JSON helpers both wire formats share.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/providers/conversation.hpp"
#include "agent/providers/provider.hpp"

namespace d2k::agent::detail {

// Every tool call of an assistant message must be answered by exactly one tool message before the next
// user or assistant message, and every tool message must answer a call still open. Throws invalid_conversation.
void check_tool_pairing(const std::vector<Message>& messages, std::string_view model_name);

// Parses a reply body as a JSON object or throws malformed_response quoting the start of the body.
nlohmann::json parse_reply(const std::string& body, std::string_view model_name);

[[noreturn]] void malformed(std::string_view model_name, const std::string& why);

// An integer at j[key] if present and a number; 0 otherwise (null and absent are both "not reported").
long long int_or_zero(const nlohmann::json& j, const char* key);

// The model's tool-call arguments as written: parsed into `call` (arguments, or arguments_error when they are
// not a JSON object).
void set_arguments(ToolCall& call, std::string text);

}  // namespace d2k::agent::detail
