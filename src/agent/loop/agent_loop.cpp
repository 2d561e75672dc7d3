#include "agent/loop/agent_loop.hpp"

#include <fmt/format.h>

#include <ctime>
#include <set>
#include <stdexcept>

#include "agent/loop/condense.hpp"

namespace d2k::agent {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json retry_json(const RetryEvent& e) {
  return {{"attempt", e.attempt}, {"http_status", e.http_status}, {"reason", e.reason},
          {"wait_ms", e.wait.count()}, {"from_retry_after", e.from_retry_after}};
}

// Sums what a trajectory's records say about a run so far (for resume and for runs without a final record).
LoopTotals totals_from_records(const std::vector<json>& records) {
  LoopTotals t;
  for (const auto& r : records) {
    const std::string type = r.value("type", "");
    t.wall_s = std::max(t.wall_s, r.value("wall_s", 0.0));
    if (type == "model") {
      ++t.turns;
      t.usage += usage_from_json(r.value("usage", json::object()));
      t.model_s += r.value("model_ms", 0.0) / 1000;
      t.retries += static_cast<int>(r.value("retries", json::array()).size());
    } else if (type == "tool") {
      ++t.tool_calls;
      t.tool_s += r.value("tool_ms", 0.0) / 1000;
      if (r.value("format_error", false)) ++t.format_errors;
    } else if (type == "condense") {
      ++t.condensations;
    }
  }
  return t;
}

constexpr const char* kPendingNote =
    "not run: the run stopped (killed or interrupted) while this call was pending; whether it had any effect is "
    "unknown, so check the workspace before relying on it";

}  // namespace

std::string_view run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::finished: return "finished";
    case RunStatus::budget_turns: return "budget_turns";
    case RunStatus::budget_tokens: return "budget_tokens";
    case RunStatus::budget_cost: return "budget_cost";
    case RunStatus::budget_wall: return "budget_wall";
    case RunStatus::api_error: return "api_error";
    case RunStatus::format_errors: return "format_errors";
    case RunStatus::interrupted: return "interrupted";
    case RunStatus::agent_error: return "agent_error";
  }
  return "?";
}

std::optional<RunStatus> parse_run_status(std::string_view s) {
  for (auto st : {RunStatus::finished, RunStatus::budget_turns, RunStatus::budget_tokens, RunStatus::budget_cost,
                  RunStatus::budget_wall, RunStatus::api_error, RunStatus::format_errors, RunStatus::interrupted,
                  RunStatus::agent_error})
    if (run_status_name(st) == s) return st;
  return std::nullopt;
}

json Budgets::to_json() const {
  return {{"max_turns", max_turns}, {"max_tokens", max_tokens}, {"max_cost_usd", max_cost_usd},
          {"max_wall_s", max_wall_s}, {"max_format_errors", max_format_errors}};
}

Budgets Budgets::from_json(const json& j) {
  Budgets b;
  b.max_turns = j.value("max_turns", b.max_turns);
  b.max_tokens = j.value("max_tokens", b.max_tokens);
  b.max_cost_usd = j.value("max_cost_usd", b.max_cost_usd);
  b.max_wall_s = j.value("max_wall_s", b.max_wall_s);
  b.max_format_errors = j.value("max_format_errors", b.max_format_errors);
  return b;
}

void RetryLog::add(const RetryEvent& e) {
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(e);
}

std::vector<RetryEvent> RetryLog::take() {
  std::lock_guard<std::mutex> l(mu_);
  return std::exchange(events_, {});
}

json LoopTotals::to_json() const {
  return {{"turns", turns},
          {"usage", agent::to_json(usage)},
          {"tokens", usage.input_tokens + usage.output_tokens},
          {"cost_usd", usage.cost_usd},
          {"wall_s", wall_s},
          {"tool_calls", tool_calls},
          {"format_errors", format_errors},
          {"condensations", condensations},
          {"retries", retries},
          {"model_s", model_s},
          {"tool_s", tool_s},
          {"harness_s", std::max(0.0, wall_s - model_s - tool_s)}};
}

AgentLoop::AgentLoop(Provider& provider, ToolBox& tools, TrajectoryWriter& trajectory, LoopOptions options)
    : provider_(provider), tools_(tools), traj_(trajectory), opt_(std::move(options)) {}

double AgentLoop::wall_now() const { return prior_wall_s_ + seconds_since(segment_start_); }

void AgentLoop::record(json rec) {
  rec["wall_s"] = wall_now();
  traj_.append(rec);
}

LoopResult AgentLoop::run(const std::vector<Message>& initial) {
  segment_start_ = Clock::now();
  messages_.clear();
  for (const auto& m : initial) {
    messages_.push_back(m);
    record({{"type", "message"}, {"message", message_to_json(m)}});
  }
  return loop();
}

LoopResult AgentLoop::resume_or_restart(const std::vector<json>& records, const std::vector<Message>& initial) {
  std::size_t from = 0;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].value("type", "") == "restart") from = i + 1;
  bool any_model = false;
  for (std::size_t i = from; i < records.size(); ++i) any_model = any_model || records[i].value("type", "") == "model";
  if (any_model) return resume(records);
  record({{"type", "restart"}, {"at", utc_now()},
          {"reason", "the run was killed before its first model call; its conversation starts again"}});
  return run(initial);
}

LoopResult AgentLoop::resume(const std::vector<json>& records) {
  segment_start_ = Clock::now();
  messages_.clear();
  totals_ = totals_from_records(records);
  prior_wall_s_ = totals_.wall_s;
  bool last_was_final_reply = false;
  std::size_t from = 0;  // a restart drops what came before it
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].value("type", "") == "restart") from = i + 1;
  for (std::size_t ri = from; ri < records.size(); ++ri) {
    const auto& r = records[ri];
    const std::string type = r.value("type", "");
    if (type == "message" || type == "model" || type == "tool") {
      if (type == "tool") {
        const auto& res = r.at("result");
        messages_.push_back(Message::tool_result(r.at("tool_call_id").get<std::string>(),
                                                 res.value("text", ""), res.value("is_error", false)));
        consecutive_format_errors_ = r.value("format_error", false) ? consecutive_format_errors_ + 1 : 0;
      } else {
        messages_.push_back(message_from_json(r.at("message")));
      }
      last_was_final_reply = type == "model" && messages_.back().tool_calls.empty() &&
                             r.value("stop_reason", "") != "max_tokens";
    } else if (type == "condense") {
      for (const auto& idx : r.value("indices", json::array())) {
        auto i = idx.get<std::size_t>();
        if (i >= messages_.size()) throw std::runtime_error("condense record names message " + std::to_string(i) +
                                                            " past the conversation's end");
        condense_message(messages_[i]);
      }
    }
  }
  if (messages_.empty()) throw std::runtime_error("the trajectory holds no messages to resume from");
  record({{"type", "resume"}, {"at", utc_now()}, {"turns", totals_.turns}, {"messages", messages_.size()}});
  // Tool calls of the last assistant message that have no result: the process died while they ran.
  std::size_t last_assistant = messages_.size();
  for (std::size_t i = messages_.size(); i-- > 0;)
    if (messages_[i].role == Role::assistant) {
      last_assistant = i;
      break;
    }
  if (last_assistant < messages_.size()) {
    std::set<std::string> answered;
    for (std::size_t i = last_assistant + 1; i < messages_.size(); ++i)
      if (messages_[i].role == Role::tool) answered.insert(messages_[i].tool_call_id);
    const auto calls = messages_[last_assistant].tool_calls;
    for (const auto& c : calls) {
      if (answered.count(c.id)) continue;
      messages_.push_back(Message::tool_result(c.id, kPendingNote, true));
      ++totals_.tool_calls;
      record({{"type", "tool"}, {"turn", totals_.turns}, {"tool_call_id", c.id}, {"name", c.name},
              {"arguments", c.arguments}, {"result", {{"text", kPendingNote}, {"is_error", true}}},
              {"tool_ms", 0.0}, {"format_error", false}, {"synthetic", true}});
    }
  }
  if (last_was_final_reply) {
    // It died after the model's last word and before the final record: the run had finished.
    LoopResult r{RunStatus::finished, "the model ended its turn (found on resume)", totals_};
    r.totals.wall_s = wall_now();
    return r;
  }
  return loop();
}

std::optional<RunStatus> AgentLoop::budget_hit(std::string& detail) const {
  const Budgets& b = opt_.budgets;
  long long tokens = totals_.usage.input_tokens + totals_.usage.output_tokens;
  if (b.max_turns > 0 && totals_.turns >= b.max_turns) {
    detail = fmt::format("{} turns of {}", totals_.turns, b.max_turns);
    return RunStatus::budget_turns;
  }
  if (b.max_tokens > 0 && tokens >= b.max_tokens) {
    detail = fmt::format("{} tokens of {}", tokens, b.max_tokens);
    return RunStatus::budget_tokens;
  }
  if (b.max_cost_usd > 0 && totals_.usage.cost_usd >= b.max_cost_usd) {
    detail = fmt::format("${:.4f} of ${:.4f}", totals_.usage.cost_usd, b.max_cost_usd);
    return RunStatus::budget_cost;
  }
  if (b.max_wall_s > 0 && wall_now() >= b.max_wall_s) {
    detail = fmt::format("{:.1f} s of {:.1f} s", wall_now(), b.max_wall_s);
    return RunStatus::budget_wall;
  }
  return std::nullopt;
}

void AgentLoop::maybe_condense(bool forced) {
  const ModelConfig& m = provider_.model();
  long long usable = m.context_window - m.max_output_tokens;
  if (usable <= 0) return;
  long long estimate = measured_upto_ > 0 && measured_upto_ <= messages_.size()
                           ? measured_tokens_ + estimate_tokens(messages_, measured_upto_)
                           : estimate_tokens(messages_);
  long long trigger = static_cast<long long>(opt_.condense_fraction * static_cast<double>(usable));
  if (!forced && estimate < trigger) return;
  // Free down to half the trigger, so that condensing happens in few, large steps (each one changes the
  // prompt's prefix and so costs the provider's cache).
  long long to_free = std::max(estimate - trigger / 2, 1LL);
  auto changed = condense(messages_, forced ? (1LL << 60) : to_free, forced ? 1 : opt_.keep_recent_tool_results);
  if (changed.empty()) return;
  ++totals_.condensations;
  measured_upto_ = 0;  // the reply's figure no longer describes the conversation
  long long after = estimate_tokens(messages_);
  record({{"type", "condense"}, {"turn", totals_.turns}, {"indices", changed}, {"estimated_tokens_before", estimate},
          {"estimated_tokens_after", after}, {"forced", forced}});
  if (opt_.progress)
    opt_.progress(fmt::format("condensed {} messages (~{} -> ~{} tokens)", changed.size(), estimate, after));
}

LoopResult AgentLoop::loop() {
  const std::vector<ToolSpec> specs = tools_.specs();
  bool overflow_retried = false;
  auto done = [&](RunStatus s, std::string detail) {
    totals_.wall_s = wall_now();
    return LoopResult{s, std::move(detail), totals_};
  };
  while (true) {
    std::string detail;
    if (interrupted()) return done(RunStatus::interrupted, "interrupted by a signal");
    if (auto st = budget_hit(detail)) return done(*st, detail);
    maybe_condense(false);

    Completion c;
    auto t0 = Clock::now();
    try {
      c = provider_.complete(messages_, specs);
    } catch (const ProviderError& e) {
      double ms = seconds_since(t0) * 1000;
      totals_.model_s += ms / 1000;
      json retries = json::array();
      if (opt_.retry_log)
        for (const auto& ev : opt_.retry_log->take()) retries.push_back(retry_json(ev));
      record({{"type", "error"}, {"turn", totals_.turns + 1}, {"kind", error_kind_name(e.kind())},
              {"http_status", e.http_status()}, {"attempts", e.attempts()}, {"message", e.what()},
              {"api_message", e.api_message()}, {"retries", retries}, {"model_ms", ms}});
      if (e.kind() == ErrorKind::context_overflow && !overflow_retried) {
        overflow_retried = true;
        maybe_condense(true);
        continue;
      }
      return done(RunStatus::api_error, fmt::format("{}: {}", error_kind_name(e.kind()), e.what()));
    }
    overflow_retried = false;
    double model_ms = seconds_since(t0) * 1000;
    totals_.model_s += model_ms / 1000;
    ++totals_.turns;
    totals_.usage += c.usage;
    json retries = json::array();
    if (opt_.retry_log)
      for (const auto& ev : opt_.retry_log->take()) retries.push_back(retry_json(ev));
    totals_.retries += static_cast<int>(retries.size());
    messages_.push_back(c.message);
    if (c.usage.reported) {
      measured_tokens_ = c.usage.input_tokens + c.usage.output_tokens;
      measured_upto_ = messages_.size();
    }
    record({{"type", "model"}, {"turn", totals_.turns}, {"message", message_to_json(c.message)},
            {"usage", to_json(c.usage)}, {"stop_reason", stop_reason_name(c.stop_reason)},
            {"raw_stop_reason", c.raw_stop_reason}, {"attempts", c.attempts}, {"retries", retries},
            {"model_ms", model_ms}, {"totals", totals_.to_json()}});
    if (opt_.progress) {
      std::string names;
      for (const auto& tc : c.message.tool_calls) names += (names.empty() ? "" : ", ") + tc.name;
      opt_.progress(fmt::format("turn {}: {} tokens in ({} cached), {} out, ${:.4f} so far{}", totals_.turns,
                                c.usage.input_tokens, c.usage.cached_input_tokens, c.usage.output_tokens,
                                totals_.usage.cost_usd, names.empty() ? "" : "; calls " + names));
    }

    if (c.message.tool_calls.empty()) {
      if (c.stop_reason == StopReason::max_tokens) {
        Message nudge = Message::user(
            "Your reply was cut off at the output token limit. Continue; keep each tool call's arguments short "
            "enough to fit (write large files in parts with edit_file).");
        messages_.push_back(nudge);
        record({{"type", "message"}, {"message", message_to_json(nudge)}});
        continue;
      }
      return done(RunStatus::finished, "the model ended its turn");
    }

    bool stop_now = false;
    for (const auto& call : c.message.tool_calls) {
      ToolResult res;
      bool format_error = false;
      double tool_ms = 0;
      if (stop_now || interrupted()) {
        stop_now = true;
        res = {"not run: the run was interrupted", true};
      } else if (!call.arguments_error.empty()) {
        format_error = true;
        res = {fmt::format("the arguments of this {} call are not a JSON object ({}); nothing was run. Call the "
                           "tool again with its arguments as one JSON object that fits its schema.",
                           call.name, call.arguments_error),
               true};
      } else if (!tools_.has(call.name)) {
        format_error = true;
        res = tools_.call(call.name, call.arguments);  // says which tools exist
      } else {
        auto tt = Clock::now();
        res = tools_.call(call.name, call.arguments);
        tool_ms = seconds_since(tt) * 1000;
      }
      totals_.tool_s += tool_ms / 1000;
      ++totals_.tool_calls;
      if (format_error) {
        ++totals_.format_errors;
        ++consecutive_format_errors_;
      } else if (!stop_now) {
        consecutive_format_errors_ = 0;
      }
      messages_.push_back(Message::tool_result(call.id, res.text, res.is_error));
      record({{"type", "tool"}, {"turn", totals_.turns}, {"tool_call_id", call.id}, {"name", call.name},
              {"arguments", call.arguments}, {"result", {{"text", res.text}, {"is_error", res.is_error}}},
              {"tool_ms", tool_ms}, {"format_error", format_error}});
    }
    if (stop_now) return done(RunStatus::interrupted, "interrupted by a signal");
    if (opt_.budgets.max_format_errors > 0 && consecutive_format_errors_ >= opt_.budgets.max_format_errors)
      return done(RunStatus::format_errors,
                  fmt::format("{} malformed or unknown tool calls in a row", consecutive_format_errors_));
  }
}

json model_config_to_json(const ModelConfig& m) {
  return {{"name", m.name},
          {"provider", provider_kind_name(m.provider)},
          {"base_url", m.base_url},
          {"api_key_env", m.api_key_env},
          {"model", m.model},
          {"temperature", m.temperature ? json(*m.temperature) : json(nullptr)},
          {"top_p", m.top_p ? json(*m.top_p) : json(nullptr)},
          {"max_output_tokens", m.max_output_tokens},
          {"context_window", m.context_window},
          {"prices",
           {{"input", m.prices.input},
            {"cached_input", m.prices.cached_input},
            {"cache_write", m.prices.cache_write},
            {"output", m.prices.output}}},
          {"extra", m.extra},
          {"request_timeout_s", m.request_timeout_s},
          {"max_tokens_field", m.max_tokens_field},
          {"prompt_cache", m.prompt_cache}};
}

ModelConfig model_config_from_json(const json& j) {
  try {
    ModelConfig m;
    m.name = j.at("name").get<std::string>();
    const std::string p = j.at("provider").get<std::string>();
    if (p == "openai") m.provider = ProviderKind::openai;
    else if (p == "anthropic") m.provider = ProviderKind::anthropic;
    else throw std::runtime_error("unknown provider '" + p + "'");
    m.base_url = j.at("base_url").get<std::string>();
    m.api_key_env = j.value("api_key_env", "");
    m.model = j.at("model").get<std::string>();
    if (j.contains("temperature") && !j["temperature"].is_null()) m.temperature = j["temperature"].get<double>();
    if (j.contains("top_p") && !j["top_p"].is_null()) m.top_p = j["top_p"].get<double>();
    m.max_output_tokens = j.at("max_output_tokens").get<long long>();
    m.context_window = j.at("context_window").get<long long>();
    const auto& pr = j.at("prices");
    m.prices = {pr.at("input").get<double>(), pr.at("cached_input").get<double>(), pr.at("cache_write").get<double>(),
                pr.at("output").get<double>()};
    m.extra = j.value("extra", json::object());
    m.request_timeout_s = j.value("request_timeout_s", 600.0);
    m.max_tokens_field = j.value("max_tokens_field", "max_tokens");
    m.prompt_cache = j.value("prompt_cache", true);
    return m;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed model record: ") + e.what());
  }
}

json finalize_run(TrajectoryWriter& trajectory, ToolBox& tools, const LoopResult& result,
                  const FinalizeOptions& options) {
  json auto_j = nullptr;
  if (options.auto_submit && result.status != RunStatus::interrupted) {
    auto subs = list_submissions(options.submissions);
    auto sol = workspace_solution(options.workspace);
    if (sol && differs_from_last_submission(*sol, subs)) {
      auto t0 = Clock::now();
      ToolResult r = tools.call("submit", json::object());
      auto_j = {{"text", r.text}, {"is_error", r.is_error}, {"tool_ms", seconds_since(t0) * 1000}};
      trajectory.append({{"type", "auto_submit"}, {"result", auto_j}, {"wall_s", result.totals.wall_s}});
    }
  }
  auto subs = list_submissions(options.submissions);
  auto fin = choose_final(subs, options.policy);
  json all = json::array();
  for (const auto& s : subs) all.push_back(s.to_json());
  json rec{{"type", "final"},
           {"status", run_status_name(result.status)},
           {"detail", result.detail},
           {"final_policy", final_policy_name(options.policy)},
           {"final_submission", fin ? fin->to_json() : json(nullptr)},
           {"correct", fin.has_value()},
           {"submissions", all},
           {"auto_submit", auto_j},
           {"totals", result.totals.to_json()},
           {"wall_s", result.totals.wall_s},
           {"ended_at", utc_now()}};
  trajectory.append(rec);
  return rec;
}

RunSummary summarize_run(const std::filesystem::path& trajectory_path) {
  RunSummary s;
  auto read = read_trajectory(trajectory_path);
  s.torn_tail = read.torn_tail;
  s.error = read.error;
  std::optional<std::size_t> last_final, last_resume;
  for (std::size_t i = 0; i < read.records.size(); ++i) {
    const std::string type = read.records[i].value("type", "");
    if (type == "start" && s.start.is_null()) s.start = read.records[i];
    if (type == "final") last_final = i;
    if (type == "resume") last_resume = i;
  }
  if (last_final && (!last_resume || *last_resume < *last_final)) {
    s.final = read.records[*last_final];
    s.has_final = true;
    return s;
  }
  LoopTotals t = totals_from_records(read.records);
  json all = json::array();
  std::optional<SubmissionRecord> fin;
  if (s.start.is_object() && s.start.contains("submissions")) {
    auto subs = list_submissions(s.start["submissions"].get<std::string>());
    for (const auto& sub : subs) all.push_back(sub.to_json());
    auto policy = parse_final_policy(s.start.value("final_policy", "last")).value_or(FinalPolicy::last);
    fin = choose_final(subs, policy);
  }
  s.final = {{"type", "final"},
             {"status", "interrupted"},
             {"detail", "no final record: the run was killed (or is still running); `d2k agent run --resume` "
                        "continues it"},
             {"final_submission", fin ? fin->to_json() : json(nullptr)},
             {"correct", fin.has_value()},
             {"submissions", all},
             {"totals", t.to_json()},
             {"wall_s", t.wall_s},
             {"recorded", false}};
  return s;
}

}  // namespace d2k::agent
