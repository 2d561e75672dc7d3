// Retries and errors, over loopback with the real libcurl client: 429 with Retry-After, dropped connections,
// timeouts, 5xx until give-up, the total-wait cap, and the 4xx that are never retried.
#include <gtest/gtest.h>

#include "agent/providers/provider.hpp"
#include "unit/provider_fake_server.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using test::FakeModelServer;
using test::FakeWorld;
using test::ScriptedReply;

const json kOk{
    {"choices",
     json::array({{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "ok"}}}, {"finish_reason", "stop"}}})},
    {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 2}}}};

ScriptedReply status(int code, const std::string& message, std::vector<std::pair<std::string, std::string>> h = {}) {
  ScriptedReply r = ScriptedReply::json(json{{"error", {{"message", message}, {"type", "x"}}}}, code);
  r.headers = std::move(h);
  return r;
}

ErrorKind kind_of(Provider& p) {
  try {
    p.complete({Message::user("hi")}, {});
  } catch (const ProviderError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::config;
}

TEST(ProviderRetry, ParseRetryAfter) {
  auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("2", now), milliseconds(2000));
  EXPECT_EQ(parse_retry_after(" 0 ", now), milliseconds(0));
  EXPECT_EQ(parse_retry_after("1.5", now), milliseconds(1500));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), milliseconds(10000));
  EXPECT_EQ(parse_retry_after("Sunday, 06-Nov-94 08:50:37 GMT", now), milliseconds(60000));
  EXPECT_EQ(parse_retry_after("Sun Nov  6 08:49:38 1994", now), milliseconds(1000));
  EXPECT_EQ(parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", now), milliseconds(0));  // past: now
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("", now));
  EXPECT_FALSE(parse_retry_after("-3", now));
}

TEST(ProviderRetry, RateLimitHonorsRetryAfterSeconds) {
  FakeModelServer server({status(429, "Rate limit reached", {{"Retry-After", "2"}}), ScriptedReply::json(kOk)});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  Completion c = p.complete({Message::user("hi")}, {});
  EXPECT_EQ(c.message.text, "ok");
  EXPECT_EQ(c.attempts, 2);
  EXPECT_EQ(world.sleeps, std::vector<milliseconds>{milliseconds(2000)});
  ASSERT_EQ(world.retries.size(), 1u);
  EXPECT_TRUE(world.retries[0].from_retry_after);
  EXPECT_EQ(world.retries[0].http_status, 429);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].body, reqs[1].body);  // the same request again
}

TEST(ProviderRetry, RetryAfterAsHttpDateAndAsMilliseconds) {
  FakeModelServer server({status(503, "busy", {{"Retry-After", "Sun, 06 Nov 1994 08:49:47 GMT"}}),
                          status(429, "slow down", {{"retry-after-ms", "250"}, {"Retry-After", "1"}}),
                          ScriptedReply::json(kOk)});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  EXPECT_EQ(p.complete({Message::user("hi")}, {}).attempts, 3);
  EXPECT_EQ(world.sleeps, (std::vector<milliseconds>{milliseconds(10000), milliseconds(250)}));
}

TEST(ProviderRetry, DroppedConnectionThenSuccess) {
  ScriptedReply drop;
  drop.drop = true;
  FakeModelServer server({drop, ScriptedReply::json(kOk)});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  Completion c = p.complete({Message::user("hi")}, {});
  EXPECT_EQ(c.attempts, 2);
  EXPECT_EQ(world.sleeps, std::vector<milliseconds>{milliseconds(750)});  // 1 s backoff x jitter 0.75
  ASSERT_EQ(world.retries.size(), 1u);
  EXPECT_NE(world.retries[0].reason.find("dropped"), std::string::npos) << world.retries[0].reason;
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(ProviderRetry, TimeoutThenSuccess) {
  ScriptedReply slow = ScriptedReply::json(kOk);
  slow.delay_ms = 400;
  FakeModelServer server({slow, ScriptedReply::json(kOk)});
  FakeWorld world;
  ModelConfig m = test::test_model(ProviderKind::openai, server.base_url());
  m.request_timeout_s = 0.2;
  ProviderDeps deps = world.deps();
  // The server answers one connection at a time and is busy with the slow reply until 400 ms: really wait
  // (200 ms timeout + 750 ms backoff).
  deps.sleep = [&world](milliseconds ms) {
    world.sleeps.push_back(ms);
    std::this_thread::sleep_for(ms);
  };
  OpenAIProvider p(m, deps);
  Completion c = p.complete({Message::user("hi")}, {});
  EXPECT_EQ(c.attempts, 2);
  ASSERT_EQ(world.retries.size(), 1u);
  EXPECT_NE(world.retries[0].reason.find("timeout"), std::string::npos) << world.retries[0].reason;
}

TEST(ProviderRetry, ServerErrorsUntilGiveUp) {
  FakeModelServer server({status(500, "boom"), status(502, "bad gateway"), status(500, "boom again")});
  FakeWorld world;
  RetryPolicy policy;
  policy.max_attempts = 3;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps(policy));
  try {
    p.complete({Message::user("hi")}, {});
    ADD_FAILURE();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::server_error);
    EXPECT_EQ(e.attempts(), 3);
    EXPECT_EQ(e.http_status(), 500);
    EXPECT_EQ(e.api_message(), "boom again");
    EXPECT_NE(std::string(e.what()).find("gave up after 3 attempts"), std::string::npos) << e.what();
  }
  EXPECT_EQ(world.sleeps, (std::vector<milliseconds>{milliseconds(750), milliseconds(1500)}));
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(ProviderRetry, BackoffCappedAndJittered) {
  FakeModelServer server({status(502, "a"), status(504, "b"), status(503, "c"), ScriptedReply::json(kOk)});
  FakeWorld world;
  world.draw = 0.0;  // no jitter: the full delay
  RetryPolicy policy;
  policy.max_delay = milliseconds(1500);
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps(policy));
  EXPECT_EQ(p.complete({Message::user("hi")}, {}).attempts, 4);
  EXPECT_EQ(world.sleeps, (std::vector<milliseconds>{milliseconds(1000), milliseconds(1500), milliseconds(1500)}));
}

TEST(ProviderRetry, TotalWaitCapStopsEarly) {
  FakeModelServer server({status(429, "quota", {{"Retry-After", "600"}})});
  FakeWorld world;
  RetryPolicy policy;
  policy.max_total_wait = milliseconds(5000);
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps(policy));
  try {
    p.complete({Message::user("hi")}, {});
    ADD_FAILURE();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::rate_limited);
    EXPECT_EQ(e.attempts(), 1);
    EXPECT_NE(std::string(e.what()).find("cap on total wait"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(world.sleeps.empty());
}

TEST(ProviderRetry, AuthErrorNamesTheVariableAndIsNotRetried) {
  FakeModelServer server({status(401, "Incorrect API key provided: sk-te***23")});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  try {
    p.complete({Message::user("hi")}, {});
    ADD_FAILURE();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::auth);
    EXPECT_EQ(e.http_status(), 401);
    std::string w = e.what();
    EXPECT_NE(w.find("D2K_TEST_KEY"), std::string::npos) << w;
    EXPECT_NE(w.find("Incorrect API key provided"), std::string::npos) << w;
  }
  EXPECT_TRUE(world.sleeps.empty());
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(ProviderRetry, ClientErrorsAreClassified) {
  FakeModelServer server(
      {status(400, "Invalid schema for function 'bash'"),
       ScriptedReply::json(json{{"error",
                                 {{"message", "This model's maximum context length is 128000 tokens."},
                                  {"code", "context_length_exceeded"}}}},
                           400),
       status(404, "The model `gpt-x` does not exist"), status(403, "forbidden"), status(418, "teapot"),
       status(501, "not implemented")});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  EXPECT_EQ(kind_of(p), ErrorKind::bad_request);
  EXPECT_EQ(kind_of(p), ErrorKind::context_overflow);
  EXPECT_EQ(kind_of(p), ErrorKind::not_found);
  EXPECT_EQ(kind_of(p), ErrorKind::auth);
  EXPECT_EQ(kind_of(p), ErrorKind::client_error);
  EXPECT_EQ(kind_of(p), ErrorKind::server_error);  // 501 is not retried
  EXPECT_TRUE(world.sleeps.empty());
  EXPECT_EQ(server.requests().size(), 6u);
}

TEST(ProviderRetry, GarbledOkIsMalformedAndNotRetried) {
  ScriptedReply html;
  html.body = "<html>gateway</html>";
  FakeModelServer server({html});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  EXPECT_EQ(kind_of(p), ErrorKind::malformed_response);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(ProviderRetry, MissingKeyIsConfigAndNothingIsSent) {
  FakeModelServer server({}, milliseconds(300));
  FakeWorld world;
  world.env.clear();
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  try {
    p.complete({Message::user("hi")}, {});
    ADD_FAILURE();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config);
    EXPECT_NE(std::string(e.what()).find("D2K_TEST_KEY (api_key_env) is not set"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(server.requests().empty());
}

TEST(ProviderRetry, ConnectionRefusedGivesUpAsNetwork) {
  int port;
  {
    FakeModelServer closed({}, milliseconds(100));
    port = closed.port();
  }  // the port is free again, nothing listens
  FakeWorld world;
  RetryPolicy policy;
  policy.max_attempts = 2;
  OpenAIProvider p(test::test_model(ProviderKind::openai, "http://127.0.0.1:" + std::to_string(port)),
                   world.deps(policy));
  EXPECT_EQ(kind_of(p), ErrorKind::network);
  EXPECT_EQ(world.sleeps.size(), 1u);
}

TEST(ProviderRetry, MakeProviderPicksTheWireFormat) {
  FakeWorld world;
  auto a = make_provider(test::test_model(ProviderKind::anthropic, "http://127.0.0.1:9"), world.deps());
  auto o = make_provider(test::test_model(ProviderKind::openai, "http://127.0.0.1:9"), world.deps());
  EXPECT_NE(dynamic_cast<AnthropicProvider*>(a.get()), nullptr);
  EXPECT_NE(dynamic_cast<OpenAIProvider*>(o.get()), nullptr);
}

}  // namespace
}  // namespace d2k::agent
