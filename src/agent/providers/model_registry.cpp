#include "agent/providers/model_registry.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cctype>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include "core/files.hpp"
#include "core/toml_reader.hpp"

namespace d2k::agent {

using d2k::TomlReader;

std::string_view provider_kind_name(ProviderKind k) { return k == ProviderKind::openai ? "openai" : "anthropic"; }

std::string ModelConfig::endpoint() const {
  return base_url + (provider == ProviderKind::openai ? "/chat/completions" : "/v1/messages");
}

const ModelConfig* ModelRegistry::find(std::string_view name) const {
  for (const auto& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

namespace {

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }


nlohmann::json toml_to_json(const toml::node& n) {
  std::ostringstream out;
  if (const auto* t = n.as_table())
    out << toml::json_formatter{*t};
  else if (const auto* a = n.as_array())
    out << toml::json_formatter{*a};
  return nlohmann::json::parse(out.str());
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':' || c == '/' ||
          c == '@'))
      return false;
  return true;
}

void read_model(const toml::table& t, const std::string& path, const std::string& file, Diagnostics& d,
                ModelConfig& m) {
  TomlReader r(t, path, file, d);
  r.only_keys({"name", "provider", "base_url", "api_key_env", "model", "temperature", "top_p", "max_output_tokens",
               "context_window", "prices", "extra", "request_timeout_s", "max_tokens_field", "prompt_cache"});
  m.file = file;
  m.line = line_of(t);
  if (auto s = r.str("name", true)) {
    m.name = *s;
    if (!valid_name(m.name)) r.error("name", r.get("name"), "must be non-empty: letters, digits and - _ . : / @");
  }
  if (auto s = r.str("provider", true)) {
    if (*s == "openai")
      m.provider = ProviderKind::openai;
    else if (*s == "anthropic")
      m.provider = ProviderKind::anthropic;
    else
      r.error("provider", r.get("provider"),
              fmt::format("unknown provider '{}' (openai: Chat Completions, anthropic: Messages)", *s));
  }
  if (auto s = r.str("base_url", true)) {
    m.base_url = *s;
    while (!m.base_url.empty() && m.base_url.back() == '/') m.base_url.pop_back();
    if (!m.base_url.starts_with("http://") && !m.base_url.starts_with("https://"))
      r.error("base_url", r.get("base_url"), "must start with http:// or https://");
  }
  if (auto s = r.str("api_key_env", false)) {
    m.api_key_env = *s;
    for (char c : m.api_key_env)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) {
        r.error("api_key_env", r.get("api_key_env"),
                "must be the NAME of an environment variable (letters, digits, _), never the key itself");
        break;
      }
  }
  if (auto s = r.str("model", true)) {
    m.model = *s;
    if (m.model.empty()) r.error("model", r.get("model"), "must not be empty");
  }
  if (auto v = r.number("temperature", false)) {
    if (*v < 0 || *v > 2)
      r.error("temperature", r.get("temperature"), "must be in [0, 2]");
    else
      m.temperature = v;
  }
  if (auto v = r.number("top_p", false)) {
    if (*v <= 0 || *v > 1)
      r.error("top_p", r.get("top_p"), "must be in (0, 1]");
    else
      m.top_p = v;
  }
  if (auto v = r.integer("max_output_tokens", true)) {
    m.max_output_tokens = *v;
    if (*v <= 0) r.error("max_output_tokens", r.get("max_output_tokens"), "must be positive");
  }
  if (auto v = r.integer("context_window", true)) {
    m.context_window = *v;
    if (*v <= 0)
      r.error("context_window", r.get("context_window"), "must be positive");
    else if (m.max_output_tokens > 0 && *v <= m.max_output_tokens)
      r.error("context_window", r.get("context_window"),
              fmt::format("must be larger than max_output_tokens ({})", m.max_output_tokens));
  }
  if (auto v = r.number("request_timeout_s", false)) {
    if (*v <= 0)
      r.error("request_timeout_s", r.get("request_timeout_s"), "must be positive");
    else
      m.request_timeout_s = *v;
  }
  if (const auto* n = r.get("prompt_cache")) {
    if (!n->is_boolean())
      r.error("prompt_cache", n, "must be true or false");
    else
      m.prompt_cache = n->as_boolean()->get();
  }
  if (auto s = r.str("max_tokens_field", false)) {
    if (*s != "max_tokens" && *s != "max_completion_tokens")
      r.error("max_tokens_field", r.get("max_tokens_field"), "must be \"max_tokens\" or \"max_completion_tokens\"");
    else if (m.provider != ProviderKind::openai)
      r.error("max_tokens_field", r.get("max_tokens_field"), "applies to provider \"openai\" only");
    else
      m.max_tokens_field = *s;
  }
  if (const auto* p = r.get("prices")) {
    if (const auto* pt = p->as_table()) {
      TomlReader pr(*pt, r.key("prices"), file, d);
      pr.only_keys({"input", "cached_input", "cache_write", "output"});
      auto price = [&](std::string_view k, bool required) -> std::optional<double> {
        auto v = pr.number(k, required);
        if (v && *v < 0) {
          pr.error(k, pr.get(k), "must not be negative (dollars per million tokens)");
          return std::nullopt;
        }
        return v;
      };
      if (auto v = price("input", true)) m.prices.input = *v;
      if (auto v = price("output", true)) m.prices.output = *v;
      m.prices.cached_input = price("cached_input", false).value_or(m.prices.input);
      m.prices.cache_write = price("cache_write", false).value_or(m.prices.input);
      if (m.provider == ProviderKind::openai && pt->get("cache_write"))
        pr.error("cache_write", pt->get("cache_write"), "applies to provider \"anthropic\" only");
    } else {
      r.error("prices", p, "must be a table (input, cached_input, cache_write, output: dollars per million tokens)");
    }
  } else {
    r.error("prices", nullptr, "missing (a table: input, output, and optional cached_input, cache_write)");
  }
  if (const auto* e = r.get("extra")) {
    if (const auto* et = e->as_table()) {
      m.extra = toml_to_json(*et);
      static const std::set<std::string, std::less<>> reserved{"model", "messages", "tools", "system", "stream"};
      for (auto&& [k, v] : *et)
        if (reserved.count(k.str()))
          d.add(file, line_of(v), r.key("extra") + "." + std::string(k.str()),
                "d2k sets this field itself; it cannot be overridden");
    } else {
      r.error("extra", e, "must be a table (fields merged into the request body)");
    }
  }
}

}  // namespace

std::optional<ModelRegistry> parse_model_registry(std::string_view text, const std::string& file, Diagnostics& diags) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    diags.add(file, static_cast<int>(e.source().begin.line), "", std::string(e.description()));
    return std::nullopt;
  }
  std::size_t before = diags.size();
  TomlReader top(root, "", file, diags);
  top.only_keys({"models"});
  ModelRegistry reg;
  const auto* n = root.get("models");
  const auto* arr = n ? n->as_array() : nullptr;
  if (!n) {
    diags.add(file, 1, "models", "missing (write at least one [[models]] entry)");
  } else if (!arr || !arr->is_array_of_tables()) {
    diags.add(file, line_of(*n), "models", "must be an array of tables ([[models]])");
  } else {
    std::map<std::string, int> seen;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto& t = *arr->get(i)->as_table();
      ModelConfig m;
      std::string path = fmt::format("models[{}]", i);
      read_model(t, path, file, diags, m);
      if (!m.name.empty()) {
        if (auto it = seen.find(m.name); it != seen.end())
          diags.add(file, line_of(t), path + ".name",
                    fmt::format("duplicate model name '{}' (first at line {})", m.name, it->second));
        else
          seen[m.name] = line_of(t);
      }
      reg.models.push_back(std::move(m));
    }
  }
  if (diags.size() != before) return std::nullopt;
  return reg;
}

std::optional<ModelRegistry> load_model_registry(const std::filesystem::path& path, Diagnostics& diags) {
  auto text = read_file(path, 4u << 20);
  if (!text) {
    diags.add(path.string(), 0, "", "cannot read the model registry (missing, unreadable or over 4 MiB)");
    return std::nullopt;
  }
  return parse_model_registry(*text, path.string(), diags);
}

}  // namespace d2k::agent
