// The model registry: the example loads; every mistake is a diagnostic with file, line, key and reason.
#include <gtest/gtest.h>

#include "agent/providers/model_registry.hpp"

namespace d2k::agent {
namespace {

std::string all(const Diagnostics& d) {
  std::string s;
  for (const auto& i : d.items()) s += i.to_string() + "\n";
  return s;
}

const char* kGood = R"(
[[models]]
name = "m"
provider = "openai"
base_url = "http://127.0.0.1:9/v1/"
model = "x"
max_output_tokens = 100
context_window = 1000
prices = { input = 1, output = 2 }
)";

TEST(ProviderRegistry, ExampleFileLoads) {
  Diagnostics d;
  auto reg = load_model_registry(std::filesystem::path(D2K_TEST_FIXTURES) / "models" / "example.toml", d);
  ASSERT_TRUE(reg) << all(d);
  ASSERT_EQ(reg->models.size(), 4u);
  const ModelConfig* gpt = reg->find("gpt-4.1");
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->provider, ProviderKind::openai);
  EXPECT_EQ(gpt->endpoint(), "https://api.openai.com/v1/chat/completions");
  EXPECT_EQ(gpt->api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(gpt->temperature, 0.0);
  EXPECT_DOUBLE_EQ(gpt->prices.cached_input, 0.5);
  EXPECT_DOUBLE_EQ(gpt->prices.cache_write, 2.0);  // defaults to input
  const ModelConfig* o4 = reg->find("o4-mini");
  ASSERT_NE(o4, nullptr);
  EXPECT_EQ(o4->max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(o4->extra, nlohmann::json({{"reasoning_effort", "high"}}));
  const ModelConfig* claude = reg->find("claude-sonnet-4");
  ASSERT_NE(claude, nullptr);
  EXPECT_EQ(claude->endpoint(), "https://api.anthropic.com/v1/messages");
  EXPECT_DOUBLE_EQ(claude->prices.cache_write, 3.75);
  const ModelConfig* local = reg->find("local-qwen");
  ASSERT_NE(local, nullptr);
  EXPECT_TRUE(local->api_key_env.empty());
  EXPECT_EQ(local->top_p, 0.95);
  EXPECT_DOUBLE_EQ(local->request_timeout_s, 1200);
  EXPECT_EQ(reg->find("nope"), nullptr);
}

TEST(ProviderRegistry, DefaultsAndTrailingSlash) {
  Diagnostics d;
  auto reg = parse_model_registry(kGood, "r.toml", d);
  ASSERT_TRUE(reg) << all(d);
  const auto& m = reg->models.at(0);
  EXPECT_EQ(m.base_url, "http://127.0.0.1:9/v1");
  EXPECT_FALSE(m.temperature.has_value());
  EXPECT_DOUBLE_EQ(m.prices.cached_input, 1.0);
  EXPECT_DOUBLE_EQ(m.request_timeout_s, 600);
  EXPECT_EQ(m.line, 2);
}

TEST(ProviderRegistry, UnknownKeysRejectedWithLine) {
  Diagnostics d;
  std::string text = std::string(kGood) + "temprature = 0.5\n";
  EXPECT_FALSE(parse_model_registry(text, "r.toml", d));
  ASSERT_EQ(d.size(), 1u) << all(d);
  EXPECT_EQ(d.items()[0].line, 10);
  EXPECT_EQ(d.items()[0].key, "models[0].temprature");
  EXPECT_NE(d.items()[0].message.find("unknown key"), std::string::npos);

  Diagnostics d2;
  EXPECT_FALSE(parse_model_registry("modles = 1\n", "r.toml", d2));
  EXPECT_NE(all(d2).find("r.toml:1: modles: unknown key"), std::string::npos) << all(d2);
  EXPECT_NE(all(d2).find("models: missing"), std::string::npos) << all(d2);

  Diagnostics d3;
  std::string p = kGood;
  p.replace(p.find("output = 2"), 10, "output = 2, cache = 1");
  EXPECT_FALSE(parse_model_registry(p, "r.toml", d3));
  EXPECT_NE(all(d3).find("r.toml:9: models[0].prices.cache: unknown key"), std::string::npos) << all(d3);
}

TEST(ProviderRegistry, EveryProblemReported) {
  const char* bad = R"([[models]]
name = "a b"
provider = "gemini"
base_url = "ftp://x"
api_key_env = "sk-abc123"
model = ""
temperature = 3
top_p = 0
max_output_tokens = 0
context_window = "big"
request_timeout_s = -1
prices = { input = -1 }
extra = { model = "other" }
)";
  Diagnostics d;
  EXPECT_FALSE(parse_model_registry(bad, "bad.toml", d));
  std::string s = all(d);
  for (const char* want :
       {"bad.toml:2: models[0].name: must be non-empty", "bad.toml:3: models[0].provider: unknown provider 'gemini'",
        "bad.toml:4: models[0].base_url: must start with http:// or https://",
        "bad.toml:5: models[0].api_key_env: must be the NAME of an environment variable",
        "bad.toml:6: models[0].model: must not be empty", "bad.toml:7: models[0].temperature: must be in [0, 2]",
        "bad.toml:8: models[0].top_p: must be in (0, 1]", "bad.toml:9: models[0].max_output_tokens: must be positive",
        "bad.toml:10: models[0].context_window: must be an integer",
        "bad.toml:11: models[0].request_timeout_s: must be positive",
        "bad.toml:12: models[0].prices.input: must not be negative", "models[0].prices.output: missing",
        "bad.toml:13: models[0].extra.model: d2k sets this field itself"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing: " << want << "\n" << s;
}

TEST(ProviderRegistry, MissingRequiredKeysAndDuplicates) {
  Diagnostics d;
  std::string text = std::string(kGood) + kGood + "[[models]]\nname = \"z\"\n";
  EXPECT_FALSE(parse_model_registry(text, "r.toml", d));
  std::string s = all(d);
  EXPECT_NE(s.find("r.toml:11: models[1].name: duplicate model name 'm' (first at line 2)"), std::string::npos) << s;
  for (const char* k :
       {"models[2].provider: missing", "models[2].base_url: missing", "models[2].model: missing",
        "models[2].max_output_tokens: missing", "models[2].context_window: missing", "models[2].prices: missing"})
    EXPECT_NE(s.find(k), std::string::npos) << "missing: " << k << "\n" << s;
}

TEST(ProviderRegistry, ContextWindowMustExceedOutputAndFieldRules) {
  Diagnostics d;
  std::string text = kGood;
  text.replace(text.find("context_window = 1000"), 21, "context_window = 100");
  text += "max_tokens_field = \"max_new_tokens\"\n";
  EXPECT_FALSE(parse_model_registry(text, "r.toml", d));
  std::string s = all(d);
  EXPECT_NE(s.find("models[0].context_window: must be larger than max_output_tokens (100)"), std::string::npos) << s;
  EXPECT_NE(s.find("models[0].max_tokens_field: must be"), std::string::npos) << s;
}

TEST(ProviderRegistry, SyntaxErrorAndMissingFile) {
  Diagnostics d;
  EXPECT_FALSE(parse_model_registry("[[models]]\nname = \n", "s.toml", d));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].file, "s.toml");
  EXPECT_EQ(d.items()[0].line, 2);
  Diagnostics d2;
  EXPECT_FALSE(load_model_registry("/nonexistent/models.toml", d2));
  EXPECT_NE(all(d2).find("cannot read the model registry"), std::string::npos);
}

}  // namespace
}  // namespace d2k::agent
