#include "agent/providers/provider.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

namespace d2k::agent {

using std::chrono::milliseconds;

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::config: return "config";
    case ErrorKind::invalid_conversation: return "invalid_conversation";
    case ErrorKind::auth: return "auth";
    case ErrorKind::bad_request: return "bad_request";
    case ErrorKind::context_overflow: return "context_overflow";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::client_error: return "client_error";
    case ErrorKind::rate_limited: return "rate_limited";
    case ErrorKind::server_error: return "server_error";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::network: return "network";
    case ErrorKind::malformed_response: return "malformed_response";
  }
  return "?";
}

ProviderError::ProviderError(ErrorKind kind, std::string message, int http_status, int attempts,
                             std::string api_message)
    : std::runtime_error(std::move(message)),
      kind_(kind),
      http_status_(http_status),
      attempts_(attempts),
      api_message_(std::move(api_message)) {}

std::optional<milliseconds> parse_retry_after(std::string_view value, std::chrono::system_clock::time_point now) {
  std::string v(value);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(v.begin());
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; })) {
    char* end = nullptr;
    double s = std::strtod(v.c_str(), &end);
    if (end != v.c_str() + v.size() || !std::isfinite(s) || s < 0 || s > 1e7) return std::nullopt;
    return milliseconds(static_cast<long long>(std::llround(s * 1000)));
  }
  // HTTP dates: IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT"),
  // asctime ("Sun Nov  6 08:49:37 1994"); all UTC.
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* end = strptime(v.c_str(), format, &tm);
    if (!end || *end != '\0') continue;
    std::time_t t = timegm(&tm);
    if (t == static_cast<std::time_t>(-1)) return std::nullopt;
    auto when = std::chrono::system_clock::from_time_t(t);
    if (when <= now) return milliseconds(0);
    return std::chrono::duration_cast<milliseconds>(when - now);
  }
  return std::nullopt;
}

Provider::Provider(ModelConfig model, ProviderDeps deps) : model_(std::move(model)), deps_(std::move(deps)) {
  if (!deps_.http) deps_.http = std::make_shared<CurlHttpClient>();
  if (!deps_.sleep) deps_.sleep = [](milliseconds d) { std::this_thread::sleep_for(d); };
  if (!deps_.wall_now) deps_.wall_now = [] { return std::chrono::system_clock::now(); };
  if (!deps_.random01) {
    auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
    deps_.random01 = [rng] { return std::uniform_real_distribution<double>(0.0, 1.0)(*rng); };
  }
  if (!deps_.getenv)
    deps_.getenv = [](const std::string& name) -> std::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      if (!v) return std::nullopt;
      return std::string(v);
    };
}

std::string Provider::api_key() const {
  if (model_.api_key_env.empty()) return {};
  auto v = deps_.getenv(model_.api_key_env);
  if (!v || v->empty())
    throw ProviderError(ErrorKind::config, fmt::format("model '{}': the environment variable {} (api_key_env) is {}",
                                                       model_.name, model_.api_key_env, v ? "empty" : "not set"));
  return *v;
}

namespace {

// The API's own error text: {"error": {"message": ...}} (both APIs), {"error": "..."}, {"message": ...}.
std::string api_error_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (auto e = j.find("error"); e != j.end()) {
      if (e->is_string()) return e->get<std::string>();
      if (e->is_object()) {
        if (auto m = e->find("message"); m != e->end() && m->is_string()) return m->get<std::string>();
      }
    }
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
  }
  std::string s = body.substr(0, 300);
  if (body.size() > 300) s += "...";
  return s;
}

bool mentions_context_overflow(const std::string& body, const std::string& message) {
  std::string all = body + " " + message;
  std::transform(all.begin(), all.end(), all.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* needle : {"context_length_exceeded", "maximum context length", "prompt is too long",
                             "context window", "too many tokens", "input is too long"})
    if (all.find(needle) != std::string::npos) return true;
  return false;
}

bool retryable_status(int s) {
  return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504 || s == 529;
}

}  // namespace

ProviderError Provider::http_error(const HttpResponse& r, int attempts) const {
  std::string api = api_error_message(r.body);
  std::string where =
      fmt::format("model '{}' ({} {})", model_.name, provider_kind_name(model_.provider), model_.endpoint());
  int s = r.status;
  if (s == 401 || s == 403) {
    std::string key = model_.api_key_env.empty()
                          ? std::string("no key is sent (api_key_env is empty in the registry)")
                          : fmt::format("check the key in the environment variable {}", model_.api_key_env);
    return {ErrorKind::auth,
            fmt::format("HTTP {} from {}: the API refused the credentials; {}: {}", s, where, key, api), s, attempts,
            api};
  }
  if ((s == 400 || s == 413 || s == 422) && mentions_context_overflow(r.body, api))
    return {ErrorKind::context_overflow,
            fmt::format("HTTP {} from {}: the prompt exceeds the context window: {}", s, where, api), s, attempts, api};
  if (s == 400 || s == 422)
    return {ErrorKind::bad_request, fmt::format("HTTP {} from {}: the API refused the request: {}", s, where, api), s,
            attempts, api};
  if (s == 404)
    return {ErrorKind::not_found,
            fmt::format("HTTP 404 from {}: check base_url and the model id '{}': {}", where, model_.model, api), s,
            attempts, api};
  if (s >= 500) return {ErrorKind::server_error, fmt::format("HTTP {} from {}: {}", s, where, api), s, attempts, api};
  if (s >= 200 && s < 300)  // not reached: 2xx replies are parsed
    return {ErrorKind::malformed_response, fmt::format("HTTP {} from {}", s, where), s, attempts, api};
  return {ErrorKind::client_error, fmt::format("HTTP {} from {}: {}", s, where, api), s, attempts, api};
}

Completion Provider::complete(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools) {
  const std::string key = api_key();
  const nlohmann::json request = build_request(messages, tools);
  // Tool outputs may hold invalid UTF-8 (binary bash output): replaced, never a throw.
  const std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto headers = auth_headers(key);
  headers["content-type"] = "application/json";
  const std::string url = model_.endpoint();
  const auto timeout = milliseconds(static_cast<long long>(std::ceil(model_.request_timeout_s * 1000)));
  const RetryPolicy& policy = deps_.retry;

  milliseconds waited{0};
  for (int attempt = 1;; ++attempt) {
    HttpResponse r = deps_.http->post(url, headers, body, timeout);
    if (r.transport == HttpResponse::Transport::ok && r.status >= 200 && r.status < 300) {
      Completion c = parse_response(r.body);
      c.attempts = attempt;
      c.usage.cost_usd = usage_cost(c.usage, model_.prices);
      return c;
    }
    ErrorKind kind;
    std::string reason;
    std::string api;
    if (r.transport != HttpResponse::Transport::ok) {
      kind = r.transport == HttpResponse::Transport::timeout ? ErrorKind::timeout : ErrorKind::network;
      reason = fmt::format("{} ({})", transport_name(r.transport), r.error);
      if (r.transport == HttpResponse::Transport::error)
        throw ProviderError(kind, fmt::format("model '{}': request to {} failed: {}", model_.name, url, r.error), 0,
                            attempt);
    } else {
      if (!retryable_status(r.status)) throw http_error(r, attempt);
      kind = r.status == 429 ? ErrorKind::rate_limited : r.status == 408 ? ErrorKind::timeout : ErrorKind::server_error;
      api = api_error_message(r.body);
      reason = fmt::format("HTTP {}", r.status);
    }

    // The wait: Retry-After (retry-after-ms first, as OpenAI sends it), else exponential backoff with jitter.
    milliseconds wait{0};
    bool from_retry_after = false;
    if (r.transport == HttpResponse::Transport::ok) {
      std::optional<milliseconds> ra;
      if (auto ms = r.header("retry-after-ms")) {
        char* end = nullptr;
        double v = std::strtod(ms->c_str(), &end);
        if (end && *end == '\0' && std::isfinite(v) && v >= 0) ra = milliseconds(static_cast<long long>(v));
      }
      if (!ra)
        if (auto h = r.header("retry-after")) ra = parse_retry_after(*h, deps_.wall_now());
      if (ra) {
        wait = *ra;
        from_retry_after = true;
      }
    }
    if (!from_retry_after) {
      double base = static_cast<double>(policy.initial_delay.count()) * std::pow(2.0, attempt - 1);
      base = std::min(base, static_cast<double>(policy.max_delay.count()));
      double factor = 1.0 - std::clamp(policy.jitter, 0.0, 1.0) * deps_.random01();
      wait = milliseconds(static_cast<long long>(base * factor));
    }

    auto give_up = [&](std::string why) {
      std::string msg =
          fmt::format("model '{}' ({}): gave up after {} attempt{} ({:.1f} s waited): last failure: {}{}", model_.name,
                      url, attempt, attempt == 1 ? "" : "s", waited.count() / 1000.0, reason, why);
      if (!api.empty()) msg += ": " + api;
      return ProviderError(kind, msg, r.status, attempt, api);
    };
    if (attempt >= policy.max_attempts) throw give_up("");
    if (waited + wait > policy.max_total_wait)
      throw give_up(fmt::format("; waiting {:.1f} s more{} would pass the {:.0f} s cap on total wait",
                                wait.count() / 1000.0, from_retry_after ? " (Retry-After)" : "",
                                policy.max_total_wait.count() / 1000.0));
    if (deps_.on_retry) deps_.on_retry(RetryEvent{attempt, r.status, reason, wait, from_retry_after});
    deps_.sleep(wait);
    waited += wait;
  }
}

std::unique_ptr<Provider> make_provider(const ModelConfig& model, ProviderDeps deps) {
  if (model.provider == ProviderKind::anthropic) return std::make_unique<AnthropicProvider>(model, std::move(deps));
  return std::make_unique<OpenAIProvider>(model, std::move(deps));
}

}  // namespace d2k::agent
