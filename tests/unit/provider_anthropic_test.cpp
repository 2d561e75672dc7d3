// Anthropic Messages over loopback: system at the top, tool_use / tool_result blocks, tool results first in the
// next user message, is_error, the version header, cache usage and cost.
#include <gtest/gtest.h>

#include "agent/providers/model_registry.hpp"
#include "agent/providers/provider.hpp"
#include "unit/provider_fake_server.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
using test::FakeModelServer;
using test::FakeWorld;
using test::ScriptedReply;

json reply(json content, const std::string& stop, json usage = nullptr) {
  json r{{"id", "msg_1"},      {"type", "message"},   {"role", "assistant"},     {"model", "claude-test"},
         {"content", content}, {"stop_reason", stop}, {"stop_sequence", nullptr}};
  if (!usage.is_null()) r["usage"] = usage;
  return r;
}

ToolSpec bash_tool() {
  return {"bash", "Runs a command.", json{{"type", "object"}, {"properties", {{"cmd", {{"type", "string"}}}}}}};
}

TEST(ProviderAnthropic, ToolUseRoundTripExactWire) {
  json content1 =
      json::array({{{"type", "text"}, {"text", "Let me look."}},
                   {{"type", "tool_use"}, {"id", "toolu_01"}, {"name", "bash"}, {"input", {{"cmd", "ls"}}}},
                   {{"type", "tool_use"}, {"id", "toolu_02"}, {"name", "bash"}, {"input", {{"cmd", "nvcc"}}}}});
  json usage1{{"input_tokens", 100},
              {"cache_read_input_tokens", 1000},
              {"cache_creation_input_tokens", 200},
              {"output_tokens", 50}};
  FakeModelServer server({ScriptedReply::json(reply(content1, "tool_use", usage1)),
                          ScriptedReply::json(reply(json::array({{{"type", "text"}, {"text", "Done."}}}), "end_turn",
                                                    {{"input_tokens", 10}, {"output_tokens", 3}}))});
  FakeWorld world;
  ModelConfig model = test::test_model(ProviderKind::anthropic, server.base_url());
  model.temperature = 0.0;
  AnthropicProvider p(model, world.deps());

  std::vector<Message> conv{Message::system("You write kernels."), Message::user("Task: scale.")};
  Completion c = p.complete(conv, {bash_tool()});
  EXPECT_EQ(c.stop_reason, StopReason::tool_use);
  EXPECT_EQ(c.message.text, "Let me look.");
  ASSERT_EQ(c.message.tool_calls.size(), 2u);
  EXPECT_EQ(c.message.tool_calls[0].id, "toolu_01");
  EXPECT_EQ(c.message.tool_calls[1].arguments, json({{"cmd", "nvcc"}}));
  EXPECT_TRUE(c.message.tool_calls[0].arguments_error.empty());
  EXPECT_EQ(c.usage.input_tokens, 1300);  // uncached + cache reads + cache writes
  EXPECT_EQ(c.usage.cached_input_tokens, 1000);
  EXPECT_EQ(c.usage.cache_write_tokens, 200);
  EXPECT_EQ(c.usage.output_tokens, 50);
  EXPECT_DOUBLE_EQ(c.usage.cost_usd, (100 * 2.0 + 1000 * 0.5 + 200 * 2.5 + 50 * 8.0) / 1e6);

  conv.push_back(c.message);
  conv.push_back(Message::tool_result("toolu_01", "a.cu"));
  conv.push_back(Message::tool_result("toolu_02", "nvcc: error", true));
  conv.push_back(Message::user("Note: the GPU is an H200."));
  Completion c2 = p.complete(conv, {bash_tool()});
  EXPECT_EQ(c2.stop_reason, StopReason::end_turn);
  EXPECT_EQ(c2.message.text, "Done.");

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].path, "/v1/messages");
  EXPECT_EQ(reqs[0].headers["x-api-key"], "sk-test-123");
  EXPECT_EQ(reqs[0].headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(reqs[0].headers["content-type"], "application/json");
  EXPECT_EQ(reqs[0].headers.count("authorization"), 0u);
  // Prompt caching (on by default): breakpoints on the last tool, the system prompt and the last block of the
  // last user message; the latter moves forward with the conversation.
  const json eph = {{"type", "ephemeral"}};
  json tools = json::array({{{"name", "bash"},
                             {"description", "Runs a command."},
                             {"input_schema", bash_tool().input_schema},
                             {"cache_control", eph}}});
  json first{
      {"model", "claude-test"},
      {"max_tokens", 1024},
      {"system", json::array({{{"type", "text"}, {"text", "You write kernels."}, {"cache_control", eph}}})},
      {"temperature", 0.0},
      {"messages", json::array({{{"role", "user"},
                                 {"content", json::array({{{"type", "text"},
                                                           {"text", "Task: scale."},
                                                           {"cache_control", eph}}})}}})},
      {"tools", tools}};
  EXPECT_EQ(reqs[0].json(), first) << reqs[0].body;
  json second = first;
  second["messages"][0]["content"][0].erase("cache_control");
  second["messages"].push_back({{"role", "assistant"}, {"content", content1}});
  second["messages"].push_back(
      {{"role", "user"},
       {"content",
        json::array(
            {{{"type", "tool_result"}, {"tool_use_id", "toolu_01"}, {"content", "a.cu"}},
             {{"type", "tool_result"}, {"tool_use_id", "toolu_02"}, {"content", "nvcc: error"}, {"is_error", true}},
             {{"type", "text"}, {"text", "Note: the GPU is an H200."}, {"cache_control", eph}}})}});
  EXPECT_EQ(reqs[1].json(), second) << reqs[1].body;
}

TEST(ProviderAnthropic, PromptCacheOffSendsThePlainForm) {
  ModelConfig model = test::test_model(ProviderKind::anthropic, "http://127.0.0.1:9");
  model.prompt_cache = false;
  AnthropicProvider p(model, FakeWorld().deps());
  json body = p.build_request({Message::system("s"), Message::user("a")}, {bash_tool()});
  EXPECT_EQ(body["system"], "s");
  EXPECT_EQ(body.dump().find("cache_control"), std::string::npos) << body.dump();
  // And the registry reads the switch, refusing anything but a boolean.
  d2k::Diagnostics d;
  auto reg = parse_model_registry(
      "[[models]]\nname = \"c\"\nprovider = \"anthropic\"\nbase_url = \"http://x\"\nmodel = \"m\"\n"
      "max_output_tokens = 10\ncontext_window = 100\nprompt_cache = false\nprices = { input = 1, output = 2 }\n",
      "m.toml", d);
  ASSERT_TRUE(reg) << (d.items().empty() ? std::string() : d.items()[0].message);
  EXPECT_FALSE(reg->models[0].prompt_cache);
  d2k::Diagnostics d2;
  EXPECT_FALSE(parse_model_registry(
      "[[models]]\nname = \"c\"\nprovider = \"anthropic\"\nbase_url = \"http://x\"\nmodel = \"m\"\n"
      "max_output_tokens = 10\ncontext_window = 100\nprompt_cache = \"yes\"\nprices = { input = 1, output = 2 }\n",
      "m.toml", d2));
}

TEST(ProviderAnthropic, ToolResultsAlwaysOpenTheNextUserMessage) {
  // The agent loop may put a user note before the tool results; the wire still has results first.
  AnthropicProvider p(test::test_model(ProviderKind::anthropic, "http://127.0.0.1:9"), FakeWorld().deps());
  ToolCall call{"toolu_9", "bash", json{{"cmd", "ls"}}, "", ""};
  json body = p.build_request({Message::user("a"), Message::assistant("", {call}), Message::tool_result("toolu_9", ""),
                               Message::user("b"), Message::user("c")},
                              {});
  json msgs = body["messages"];
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[1]["content"],
            json::array({{{"type", "tool_use"}, {"id", "toolu_9"}, {"name", "bash"}, {"input", {{"cmd", "ls"}}}}}));
  EXPECT_EQ(msgs[2]["role"], "user");
  ASSERT_EQ(msgs[2]["content"].size(), 3u);
  EXPECT_EQ(msgs[2]["content"][0]["type"], "tool_result");
  EXPECT_EQ(msgs[2]["content"][0]["content"], "(empty)");  // the API refuses empty content
  EXPECT_EQ(msgs[2]["content"][1]["text"], "b");
  EXPECT_EQ(msgs[2]["content"][2]["text"], "c");
  EXPECT_FALSE(body.contains("system"));
  EXPECT_FALSE(body.contains("tools"));

  // Results left unanswered, or a conversation that opens with the assistant, are refused before sending.
  for (const auto& conv :
       std::vector<std::vector<Message>>{{Message::user("a"), Message::assistant("", {call}), Message::user("b")},
                                         {Message::user("a"), Message::assistant("", {call})},
                                         {Message::system("s"), Message::assistant("hi")}}) {
    try {
      p.build_request(conv, {});
      ADD_FAILURE() << "accepted";
    } catch (const ProviderError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_conversation) << e.what();
    }
  }
}

TEST(ProviderAnthropic, NothingSentForAnInvalidConversation) {
  FakeModelServer server({}, std::chrono::milliseconds(500));
  FakeWorld world;
  AnthropicProvider p(test::test_model(ProviderKind::anthropic, server.base_url()), world.deps());
  ToolCall call{"toolu_1", "bash", json::object(), "", ""};
  EXPECT_THROW(p.complete({Message::user("a"), Message::assistant("", {call}), Message::user("b")}, {}), ProviderError);
  EXPECT_TRUE(server.requests().empty());
}

TEST(ProviderAnthropic, StopReasonsAndGarbledReplies) {
  AnthropicProvider p(test::test_model(ProviderKind::anthropic, "http://127.0.0.1:9"), FakeWorld().deps());
  Completion c = p.parse_response(reply(json::array({{{"type", "text"}, {"text", "x"}}}), "max_tokens").dump());
  EXPECT_EQ(c.stop_reason, StopReason::max_tokens);
  c = p.parse_response(reply(json::array({{{"type", "text"}, {"text", "x"}}}), "stop_sequence").dump());
  EXPECT_EQ(c.stop_reason, StopReason::end_turn);
  c = p.parse_response(reply(json::array({{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "s"}},
                                          {{"type", "text"}, {"text", "y"}}}),
                             "refusal")
                           .dump());
  EXPECT_EQ(c.stop_reason, StopReason::other);
  EXPECT_EQ(c.message.text, "y");
  EXPECT_FALSE(c.usage.reported);
  c = p.parse_response(
      reply(json::array({{{"type", "tool_use"}, {"id", "t"}, {"name", "bash"}, {"input", "ls"}}}), "tool_use").dump());
  EXPECT_FALSE(c.message.tool_calls.at(0).arguments_error.empty());

  for (const std::string& body :
       {std::string("not json"), std::string(R"({"type": "message"})"), std::string(R"({"content": [{"text": "x"}]})"),
        std::string(R"({"content": [{"type": "tool_use", "name": "bash"}]})"),
        std::string(R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})")}) {
    try {
      p.parse_response(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ProviderError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::malformed_response) << body;
    }
  }
}

TEST(ProviderAnthropic, OverloadedRetriedThenBadRequestQuoted) {
  json err{{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}};
  json bad{{"type", "error"},
           {"error", {{"type", "invalid_request_error"}, {"message", "max_tokens: Field required"}}}};
  FakeModelServer server({ScriptedReply::json(err, 529),
                          ScriptedReply::json(reply(json::array({{{"type", "text"}, {"text", "ok"}}}), "end_turn")),
                          ScriptedReply::json(bad, 400)});
  FakeWorld world;
  AnthropicProvider p(test::test_model(ProviderKind::anthropic, server.base_url()), world.deps());
  Completion c = p.complete({Message::user("a")}, {});
  EXPECT_EQ(c.attempts, 2);
  ASSERT_EQ(world.retries.size(), 1u);
  EXPECT_EQ(world.retries[0].http_status, 529);
  try {
    p.complete({Message::user("a")}, {});
    ADD_FAILURE();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_request);
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.api_message(), "max_tokens: Field required");
    EXPECT_NE(std::string(e.what()).find("max_tokens: Field required"), std::string::npos);
  }
  EXPECT_EQ(world.sleeps.size(), 1u);  // the 400 was not retried
}

}  // namespace
}  // namespace d2k::agent
