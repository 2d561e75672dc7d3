#pragma once
// The model registry: which models d2k can drive, how to reach them, and what their tokens cost.
// A TOML file of [[models]] entries (docs/PROVIDERS.md; example: tests/fixtures/models/example.toml).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.hpp"

namespace d2k::agent {

enum class ProviderKind { openai, anthropic };  // OpenAI-compatible Chat Completions; Anthropic Messages
std::string_view provider_kind_name(ProviderKind k);

// US dollars per million tokens.
struct Prices {
  double input = 0;         // uncached input tokens
  double cached_input = 0;  // input tokens read from the provider's prompt cache (default: input)
  double cache_write = 0;   // input tokens written to the prompt cache, Anthropic only (default: input)
  double output = 0;        // output tokens, reasoning tokens included
};

struct ModelConfig {
  std::string name;  // the registry's name, used by `--model`
  ProviderKind provider = ProviderKind::openai;
  std::string base_url;     // trailing '/' removed; see endpoint()
  std::string api_key_env;  // name of the environment variable holding the key; empty: no key sent
  std::string model;        // the id sent to the API
  std::optional<double> temperature;
  std::optional<double> top_p;
  long long max_output_tokens = 0;
  long long context_window = 0;
  Prices prices;
  nlohmann::json extra = nlohmann::json::object();  // merged into the request body last
  double request_timeout_s = 600;
  std::string max_tokens_field = "max_tokens";  // openai only: or "max_completion_tokens"
  // anthropic only: mark the tools and system prompt, and the conversation up to the last user turn, as cache
  // breakpoints (cache_control), so a long run re-reads its prefix from the prompt cache instead of paying it
  // in full every turn. OpenAI-compatible servers cache prefixes on their own.
  bool prompt_cache = true;
  std::string file;                             // where it was defined
  int line = 0;

  // The URL requests go to: base_url + "/chat/completions" (openai) or "/v1/messages" (anthropic).
  std::string endpoint() const;
};

struct ModelRegistry {
  std::vector<ModelConfig> models;
  const ModelConfig* find(std::string_view name) const;
};

// Parses registry text; every problem is added to `diags` as "file:line: key: why". Returns nullopt when any
// diagnostic was added.
std::optional<ModelRegistry> parse_model_registry(std::string_view text, const std::string& file, Diagnostics& diags);
std::optional<ModelRegistry> load_model_registry(const std::filesystem::path& path, Diagnostics& diags);

}  // namespace d2k::agent
