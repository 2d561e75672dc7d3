#pragma once
// A model provider: sends a conversation and the tools, returns the model's next message with usage and cost.
// Retries transient failures (429, 5xx, timeouts, dropped connections) with backoff; every other failure is a
// ProviderError whose kind the agent loop switches on.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "agent/providers/conversation.hpp"
#include "agent/providers/http_client.hpp"
#include "agent/providers/model_registry.hpp"
#include "agent/tool_spec.hpp"

namespace d2k::agent {

enum class ErrorKind {
  config,                // the key's environment variable is unset or empty; nothing was sent
  invalid_conversation,  // the messages break the provider's rules (a tool call left unanswered, ...); nothing sent
  auth,                  // 401/403: the key was refused
  bad_request,           // 400/422: the API refused the request; its message is quoted
  context_overflow,      // 400/413 saying the prompt is longer than the context window: condense and retry
  not_found,             // 404: wrong base_url or model id
  client_error,          // any other 4xx
  rate_limited,          // 429 until the retry budget ran out
  server_error,          // 5xx (retried ones until the budget ran out; others at once)
  timeout,               // the request timed out until the retry budget ran out
  network,               // no connection / dropped connections until the budget ran out, or a TLS failure
  malformed_response,    // a 2xx reply that is not the API's JSON (not JSON, missing fields)
};
std::string_view error_kind_name(ErrorKind k);

class ProviderError : public std::runtime_error {
 public:
  ProviderError(ErrorKind kind, std::string message, int http_status = 0, int attempts = 0,
                std::string api_message = {});
  ErrorKind kind() const { return kind_; }
  int http_status() const { return http_status_; }  // 0: no HTTP status (transport failure, or nothing sent)
  int attempts() const { return attempts_; }        // HTTP attempts made
  const std::string& api_message() const { return api_message_; }  // the API's own error text, if any

 private:
  ErrorKind kind_;
  int http_status_;
  int attempts_;
  std::string api_message_;
};

struct RetryPolicy {
  int max_attempts = 6;                               // first try included
  std::chrono::milliseconds initial_delay{1000};      // before the 2nd attempt; doubles each time
  std::chrono::milliseconds max_delay{60'000};        // one backoff delay at most (without Retry-After)
  std::chrono::milliseconds max_total_wait{300'000};  // all waits of one completion together
  double jitter = 0.5;  // each backoff delay is scaled by a uniform factor in [1 - jitter, 1]
};

// One retry, reported before its wait (for logs and trajectories).
struct RetryEvent {
  int attempt = 0;  // the attempt that failed (1-based)
  int http_status = 0;
  std::string reason;  // "HTTP 429", "timeout", "dropped", ...
  std::chrono::milliseconds wait{0};
  bool from_retry_after = false;
};

// What a provider needs from the outside world; all of it replaceable in tests.
struct ProviderDeps {
  std::shared_ptr<HttpClient> http;  // null: a CurlHttpClient
  RetryPolicy retry;
  std::function<void(std::chrono::milliseconds)> sleep;                  // default: std::this_thread::sleep_for
  std::function<std::chrono::system_clock::time_point()> wall_now;       // for Retry-After dates
  std::function<double()> random01;                                      // uniform in [0, 1): jitter
  std::function<std::optional<std::string>(const std::string&)> getenv;  // default: std::getenv
  std::function<void(const RetryEvent&)> on_retry;                       // optional
};

// Retry-After (seconds, or an HTTP date relative to `now`) as a wait; nullopt when unparsable. Past dates: 0.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now);

// One provider serves one conversation at a time (complete() is not reentrant); make one per agent run.
class Provider {
 public:
  Provider(ModelConfig model, ProviderDeps deps);
  virtual ~Provider() = default;
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;

  // The model's next message. Throws ProviderError (never anything else for API or network trouble).
  Completion complete(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools);

  // The exact request body complete() would send (throws ProviderError invalid_conversation).
  virtual nlohmann::json build_request(const std::vector<Message>& messages,
                                       const std::vector<ToolSpec>& tools) const = 0;
  // Parses a 2xx reply body into a completion without cost; throws ProviderError malformed_response.
  virtual Completion parse_response(const std::string& body) const = 0;

  const ModelConfig& model() const { return model_; }

 protected:
  virtual std::map<std::string, std::string> auth_headers(const std::string& key) const = 0;

  ModelConfig model_;
  ProviderDeps deps_;

 private:
  std::string api_key() const;  // throws config when the variable is named but unset
  ProviderError http_error(const HttpResponse& r, int attempts) const;
};

class OpenAIProvider final : public Provider {
 public:
  using Provider::Provider;
  nlohmann::json build_request(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools) const override;
  Completion parse_response(const std::string& body) const override;

 protected:
  std::map<std::string, std::string> auth_headers(const std::string& key) const override;
};

class AnthropicProvider final : public Provider {
 public:
  using Provider::Provider;
  nlohmann::json build_request(const std::vector<Message>& messages, const std::vector<ToolSpec>& tools) const override;
  Completion parse_response(const std::string& body) const override;

 protected:
  std::map<std::string, std::string> auth_headers(const std::string& key) const override;
};

// The provider for `model.provider`, with default dependencies filled in where `deps` leaves them empty.
std::unique_ptr<Provider> make_provider(const ModelConfig& model, ProviderDeps deps = {});

}  // namespace d2k::agent
