// OpenAI Chat Completions over loopback: the exact JSON sent, tool-call round trips, usage and cost.
#include <gtest/gtest.h>

#include "agent/providers/provider.hpp"
#include "unit/provider_fake_server.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
using test::FakeModelServer;
using test::FakeWorld;
using test::ScriptedReply;

json reply(json message, const std::string& finish, json usage = nullptr) {
  json r{{"id", "chatcmpl-1"},
         {"object", "chat.completion"},
         {"created", 1},
         {"model", "gpt-test"},
         {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})}};
  if (!usage.is_null()) r["usage"] = usage;
  return r;
}

ToolSpec read_file_tool() {
  return {
      "read_file", "Reads a file of the workspace.",
      json{{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}, {"required", json::array({"path"})}}};
}

TEST(ProviderOpenAI, ToolCallRoundTripExactWire) {
  json call_msg{{"role", "assistant"},
                {"content", nullptr},
                {"tool_calls",
                 json::array({{{"id", "call_abc"},
                               {"type", "function"},
                               {"function", {{"name", "read_file"}, {"arguments", "{\"path\":\"README.md\"}"}}}}})}};
  json usage1{{"prompt_tokens", 1200},
              {"completion_tokens", 50},
              {"total_tokens", 1250},
              {"prompt_tokens_details", {{"cached_tokens", 1000}}},
              {"completion_tokens_details", {{"reasoning_tokens", 20}}}};
  json usage2{
      {"prompt_tokens", 1300}, {"completion_tokens", 5}, {"prompt_tokens_details", {{"cached_tokens", nullptr}}}};
  FakeModelServer server({ScriptedReply::json(reply(call_msg, "tool_calls", usage1)),
                          ScriptedReply::json(reply({{"role", "assistant"}, {"content", "done"}}, "stop", usage2))});
  FakeWorld world;
  ModelConfig model = test::test_model(ProviderKind::openai, server.base_url() + "/v1");
  model.temperature = 0.0;
  OpenAIProvider p(model, world.deps());

  std::vector<Message> conv{Message::system("You write kernels."), Message::user("Task: scale a vector.")};
  Completion c = p.complete(conv, {read_file_tool()});
  EXPECT_EQ(c.stop_reason, StopReason::tool_use);
  EXPECT_EQ(c.raw_stop_reason, "tool_calls");
  EXPECT_EQ(c.attempts, 1);
  ASSERT_EQ(c.message.tool_calls.size(), 1u);
  EXPECT_EQ(c.message.tool_calls[0].id, "call_abc");
  EXPECT_EQ(c.message.tool_calls[0].name, "read_file");
  EXPECT_EQ(c.message.tool_calls[0].arguments, json({{"path", "README.md"}}));
  EXPECT_TRUE(c.message.tool_calls[0].arguments_error.empty());
  EXPECT_TRUE(c.usage.reported);
  EXPECT_EQ(c.usage.input_tokens, 1200);
  EXPECT_EQ(c.usage.cached_input_tokens, 1000);
  EXPECT_EQ(c.usage.output_tokens, 50);
  EXPECT_EQ(c.usage.reasoning_tokens, 20);
  EXPECT_DOUBLE_EQ(c.usage.cost_usd, (200 * 2.0 + 1000 * 0.5 + 50 * 8.0) / 1e6);
  EXPECT_EQ(c.raw["id"], "chatcmpl-1");

  conv.push_back(c.message);
  conv.push_back(Message::tool_result("call_abc", "# README"));
  Completion c2 = p.complete(conv, {read_file_tool()});
  EXPECT_EQ(c2.stop_reason, StopReason::end_turn);
  EXPECT_EQ(c2.message.text, "done");
  EXPECT_EQ(c2.usage.cached_input_tokens, 0);  // null means none

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_EQ(reqs[0].headers["authorization"], "Bearer sk-test-123");
  EXPECT_EQ(reqs[0].headers["content-type"], "application/json");
  EXPECT_EQ(reqs[0].headers.count("x-api-key"), 0u);
  json tools = json::array({{{"type", "function"},
                             {"function",
                              {{"name", "read_file"},
                               {"description", "Reads a file of the workspace."},
                               {"parameters", read_file_tool().input_schema}}}}});
  json first{{"model", "gpt-test"},
             {"messages", json::array({{{"role", "system"}, {"content", "You write kernels."}},
                                       {{"role", "user"}, {"content", "Task: scale a vector."}}})},
             {"max_tokens", 1024},
             {"temperature", 0.0},
             {"tools", tools}};
  EXPECT_EQ(reqs[0].json(), first) << reqs[0].body;
  json second = first;
  second["messages"].push_back(call_msg);
  second["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_abc"}, {"content", "# README"}});
  EXPECT_EQ(reqs[1].json(), second) << reqs[1].body;
}

TEST(ProviderOpenAI, MalformedArgumentsReportedAndEchoedVerbatim) {
  const std::string bad_args = "{\"path\": \"README.md\", ";
  json call_msg{
      {"role", "assistant"},
      {"content", "Reading."},
      {"tool_calls",
       json::array(
           {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "read_file"}, {"arguments", bad_args}}}},
            {{"id", "call_2"},
             {"type", "function"},
             {"function", {{"name", "read_file"}, {"arguments", "[1, 2]"}}}}})}};
  FakeModelServer server({ScriptedReply::json(reply(call_msg, "tool_calls")),
                          ScriptedReply::json(reply({{"role", "assistant"}, {"content", "ok"}}, "stop"))});
  FakeWorld world;
  OpenAIProvider p(test::test_model(ProviderKind::openai, server.base_url()), world.deps());
  std::vector<Message> conv{Message::user("go")};
  Completion c = p.complete(conv, {read_file_tool()});
  ASSERT_EQ(c.message.tool_calls.size(), 2u);
  const ToolCall& t1 = c.message.tool_calls[0];
  EXPECT_NE(t1.arguments_error.find("not valid JSON"), std::string::npos) << t1.arguments_error;
  EXPECT_EQ(t1.arguments, json::object());
  EXPECT_EQ(t1.arguments_text, bad_args);
  EXPECT_NE(c.message.tool_calls[1].arguments_error.find("must be a JSON object"), std::string::npos);
  EXPECT_FALSE(c.usage.reported);
  EXPECT_EQ(c.usage.cost_usd, 0.0);

  conv.push_back(c.message);
  conv.push_back(Message::tool_result("call_1", "arguments are not valid JSON", true));
  conv.push_back(Message::tool_result("call_2", "arguments must be an object", true));
  p.complete(conv, {});
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  json msgs = reqs[1].json()["messages"];
  ASSERT_EQ(msgs.size(), 4u);
  EXPECT_EQ(msgs[1], call_msg);  // the model sees exactly what it wrote
  EXPECT_EQ(msgs[2],
            json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Error: arguments are not valid JSON"}}));
  EXPECT_EQ(msgs[3]["tool_call_id"], "call_2");
  EXPECT_FALSE(reqs[1].json().contains("tools"));
}

TEST(ProviderOpenAI, LocalServerQuirks) {
  // No usage, no tool-call id, arguments as an object, finish_reason "stop" with tool calls; no key configured.
  json msg{{"role", "assistant"},
           {"content", ""},
           {"tool_calls",
            json::array({{{"type", "function"}, {"function", {{"name", "bash"}, {"arguments", {{"cmd", "ls"}}}}}}})}};
  FakeModelServer server({ScriptedReply::json(reply(msg, "stop"))});
  FakeWorld world;
  ModelConfig m = test::test_model(ProviderKind::openai, server.base_url());
  m.api_key_env.clear();
  m.max_tokens_field = "max_completion_tokens";
  m.extra = {{"top_k", 20}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  OpenAIProvider p(m, world.deps());
  Completion c = p.complete({Message::user("hi")}, {});
  ASSERT_EQ(c.message.tool_calls.size(), 1u);
  EXPECT_EQ(c.message.tool_calls[0].id, "call_0");
  EXPECT_EQ(c.message.tool_calls[0].arguments, json({{"cmd", "ls"}}));
  EXPECT_EQ(c.stop_reason, StopReason::tool_use);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].headers.count("authorization"), 0u);
  json body = reqs[0].json();
  EXPECT_EQ(body["max_completion_tokens"], 1024);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_EQ(body["top_k"], 20);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], false);
}

TEST(ProviderOpenAI, StopReasonsAndContentParts) {
  OpenAIProvider p(test::test_model(ProviderKind::openai, "http://127.0.0.1:9"), FakeWorld().deps());
  Completion c = p.parse_response(reply({{"role", "assistant"}, {"content", "trunc"}}, "length").dump());
  EXPECT_EQ(c.stop_reason, StopReason::max_tokens);
  c = p.parse_response(reply({{"role", "assistant"}, {"content", "x"}}, "content_filter").dump());
  EXPECT_EQ(c.stop_reason, StopReason::other);
  EXPECT_EQ(c.raw_stop_reason, "content_filter");
  c = p.parse_response(
      reply({{"role", "assistant"},
             {"content", json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})}},
            "stop")
          .dump());
  EXPECT_EQ(c.message.text, "ab");
}

TEST(ProviderOpenAI, GarbledRepliesAreMalformedResponse) {
  OpenAIProvider p(test::test_model(ProviderKind::openai, "http://127.0.0.1:9"), FakeWorld().deps());
  for (const std::string& body : {std::string("<html>502 Bad Gateway</html>"), std::string("[]"), std::string("{}"),
                                  std::string(R"({"choices": []})"), std::string(R"({"choices": [{"message": 3}]})"),
                                  std::string(R"({"choices": [{"message": {"content": 5}}]})"),
                                  std::string(R"({"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]})"),
                                  std::string(R"({"error": {"message": "upstream failed"}})"), std::string("")}) {
    try {
      p.parse_response(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ProviderError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::malformed_response) << body;
    }
  }
}

TEST(ProviderOpenAI, ConversationRulesCheckedBeforeSending) {
  OpenAIProvider p(test::test_model(ProviderKind::openai, "http://127.0.0.1:9"), FakeWorld().deps());
  ToolCall call{"call_1", "bash", json::object(), "", ""};
  auto kind_of = [&](const std::vector<Message>& conv) {
    try {
      p.build_request(conv, {});
    } catch (const ProviderError& e) {
      return std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_NE(kind_of({Message::user("a"), Message::assistant("", {call})}).find("invalid_conversation"),
            std::string::npos);
  EXPECT_NE(
      kind_of({Message::user("a"), Message::assistant("", {call}), Message::user("b")}).find("has no tool result"),
      std::string::npos);
  EXPECT_NE(kind_of({Message::user("a"), Message::tool_result("call_9", "x")}).find("answers no open tool call"),
            std::string::npos);
  EXPECT_EQ(kind_of({Message::user("a"), Message::assistant("", {call}), Message::tool_result("call_1", "x")}),
            "accepted");
}

}  // namespace
}  // namespace d2k::agent
