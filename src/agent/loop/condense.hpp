#pragma once
// Keeping a long conversation inside the model's context window: older tool outputs (and the bulky arguments
// of older write_file/edit_file calls) are replaced by a short note. Only message contents change, never the
// messages themselves, their roles, order or tool-call ids, so both providers' pairing rules still hold
// (OpenAI: tool messages right after the assistant message with the calls; Anthropic: tool_result blocks first
// in the next user message, each id answered once).
#include <cstddef>
#include <vector>

#include "agent/providers/conversation.hpp"

namespace d2k::agent {

// A rough token count of messages[from..]: characters / 4 plus a few tokens per message and tool call.
long long estimate_tokens(const std::vector<Message>& messages, std::size_t from = 0);

// Condenses message `m` in place (deterministic, so a resumed run replays it exactly). Returns the characters
// saved (0 when there was nothing worth condensing).
std::size_t condense_message(Message& m);

// Condenses the oldest condensable messages until about `tokens_to_free` tokens are freed, never touching the
// first user message (the task) or system messages, nor the last `keep_recent` tool results and the assistant
// messages that own them. Returns the indices changed, in order.
std::vector<std::size_t> condense(std::vector<Message>& messages, long long tokens_to_free, std::size_t keep_recent);

}  // namespace d2k::agent
