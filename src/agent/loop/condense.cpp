#include "agent/loop/condense.hpp"

#include <fmt/format.h>

namespace d2k::agent {

namespace {

constexpr std::size_t kMinChars = 300;  // shorter contents are left alone: the note would save nothing
constexpr const char* kNotePrefix = "[condensed:";

bool already_condensed(const std::string& s) { return s.rfind(kNotePrefix, 0) == 0; }

}  // namespace

long long estimate_tokens(const std::vector<Message>& messages, std::size_t from) {
  long long chars = 0, extra = 0;
  for (std::size_t i = from; i < messages.size(); ++i) {
    const Message& m = messages[i];
    chars += static_cast<long long>(m.text.size());
    extra += 4;
    for (const auto& c : m.tool_calls) {
      chars += static_cast<long long>(c.arguments_text.empty() ? c.arguments.dump().size() : c.arguments_text.size());
      chars += static_cast<long long>(c.name.size() + c.id.size());
      extra += 8;
    }
  }
  return chars / 4 + extra;
}

std::size_t condense_message(Message& m) {
  std::size_t saved = 0;
  if (m.role == Role::tool) {
    if (m.text.size() < kMinChars || already_condensed(m.text)) return 0;
    std::string note = fmt::format(
        "[condensed: this tool output ({} characters) was removed to keep the conversation within the context "
        "window; run the tool again if you need it]",
        m.text.size());
    saved = m.text.size() - std::min(m.text.size(), note.size());
    m.text = std::move(note);
    return saved;
  }
  if (m.role != Role::assistant) return 0;
  for (auto& c : m.tool_calls) {
    if (!c.arguments_error.empty()) {
      // Malformed arguments are sent back verbatim (OpenAI); a shortened text is still malformed, as it was.
      if (c.arguments_text.size() >= kMinChars && !already_condensed(c.arguments_text)) {
        std::string note = fmt::format("[condensed: {} characters of malformed arguments]", c.arguments_text.size());
        saved += c.arguments_text.size() - note.size();
        c.arguments_text = std::move(note);
      }
      continue;
    }
    if (!c.arguments.is_object()) continue;
    bool changed = false;
    for (auto& [key, value] : c.arguments.items()) {
      if (!value.is_string()) continue;
      const auto& s = value.get_ref<const std::string&>();
      if (s.size() < kMinChars || already_condensed(s)) continue;
      std::string note = fmt::format("[condensed: {} characters]", s.size());
      saved += s.size() - note.size();
      value = note;
      changed = true;
    }
    // The OpenAI provider sends arguments_text when it is set; keep it in step with the condensed arguments.
    if (changed) c.arguments_text = c.arguments.dump();
  }
  return saved;
}

std::vector<std::size_t> condense(std::vector<Message>& messages, long long tokens_to_free, std::size_t keep_recent) {
  std::vector<std::size_t> changed;
  // The protected tail: from the assistant message owning the keep_recent-th newest tool result onwards.
  std::size_t protect_from = messages.size();
  std::size_t seen = 0;
  for (std::size_t i = messages.size(); i-- > 0;) {
    if (seen >= keep_recent) break;
    if (messages[i].role == Role::tool) ++seen;
    protect_from = i;
  }
  if (keep_recent > 0) {
    while (protect_from > 0 && messages[protect_from].role == Role::tool) --protect_from;  // keep its assistant
  }
  bool first_user_seen = false;
  long long freed = 0;
  for (std::size_t i = 0; i < protect_from && freed < tokens_to_free; ++i) {
    Message& m = messages[i];
    if (m.role == Role::system) continue;
    if (m.role == Role::user && !first_user_seen) {
      first_user_seen = true;  // the task prompt stays whole
      continue;
    }
    std::size_t saved = condense_message(m);
    if (saved > 0) {
      freed += static_cast<long long>(saved) / 4;
      changed.push_back(i);
    }
  }
  return changed;
}

}  // namespace d2k::agent
