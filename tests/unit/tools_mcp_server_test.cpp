// The MCP server's message handling, in process: both eras, errors, the budget, parse errors.
#include <gtest/gtest.h>

#include <sstream>

#include "mcp/server.hpp"
#include "test_support.hpp"

using namespace d2k;
using d2k::test::TempDir;
using nlohmann::json;

namespace {

struct McpServerTest : ::testing::Test {
  TempDir tmp;
  agent::ToolBox tools{agent::Workspace(tmp.path()), [] {
                         agent::ToolBoxOptions o;
                         o.max_calls = 3;
                         return o;
                       }()};
  mcp::Server server{tools, {"0.test", "toy_scale", "none", "# Toy task\nScale a vector."}};

  json request(int id, const std::string& method, json params = json::object()) {
    auto r = server.handle_message({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    EXPECT_TRUE(r.has_value());
    return r ? *r : json();
  }
  static json modern(json params = json::object()) {
    params["_meta"] = {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                       {"io.modelcontextprotocol/clientCapabilities", json::object()}};
    return params;
  }
  void handshake(const std::string& version = "2025-06-18") {
    auto r = request(0, "initialize", {{"protocolVersion", version}, {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
    ASSERT_TRUE(r.contains("result")) << r;
    EXPECT_FALSE(server.handle_message({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}));
  }
};

TEST_F(McpServerTest, InitializeNegotiatesVersion) {
  auto r = request(1, "initialize", {{"protocolVersion", "2025-03-26"}, {"capabilities", json::object()}});
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "d2k");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  auto newer = request(2, "initialize", {{"protocolVersion", "2099-01-01"}});
  EXPECT_EQ(newer["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(server.era(), mcp::Server::Era::handshake);
}

TEST_F(McpServerTest, RequestsBeforeInitializeAreRefusedButPingWorks) {
  EXPECT_EQ(request(1, "tools/list")["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(request(2, "ping")["result"], json::object());
}

TEST_F(McpServerTest, HandshakeToolsPromptsResources) {
  handshake();
  auto tools_list = request(1, "tools/list")["result"]["tools"];
  ASSERT_EQ(tools_list.size(), 7u);
  EXPECT_EQ(tools_list[0]["name"], "read_file");
  EXPECT_TRUE(tools_list[0].contains("inputSchema"));
  auto w = request(2, "tools/call", {{"name", "write_file"}, {"arguments", {{"path", "a.txt"}, {"content", "hi\n"}}}});
  EXPECT_EQ(w["result"]["isError"], false) << w;
  auto e = request(3, "tools/call", {{"name", "evaluate"}, {"arguments", json::object()}});
  EXPECT_EQ(e["result"]["isError"], true);
  EXPECT_EQ(e["result"]["content"][0]["text"], "evaluate is not available in this session");
  auto p = request(4, "prompts/get", {{"name", "task"}});
  EXPECT_EQ(p["result"]["messages"][0]["content"]["text"], "# Toy task\nScale a vector.");
  auto res = request(5, "resources/read", {{"uri", "d2k://task/prompt"}});
  EXPECT_EQ(res["result"]["contents"][0]["text"], "# Toy task\nScale a vector.");
  EXPECT_EQ(request(6, "resources/read", {{"uri", "d2k://nope"}})["error"]["code"], mcp::kResourceNotFound);
  EXPECT_FALSE(request(7, "tools/list")["result"].contains("resultType"));  // handshake results stay plain
}

TEST_F(McpServerTest, ToolErrorsVersusProtocolErrors) {
  handshake();
  EXPECT_EQ(request(1, "tools/call", {{"name", "nope"}})["error"]["code"], mcp::kInvalidParams);
  EXPECT_EQ(request(2, "tools/call", {{"arguments", json::object()}})["error"]["code"], mcp::kInvalidParams);
  EXPECT_EQ(request(3, "tools/call", {{"name", "bash"}, {"arguments", "x"}})["error"]["code"], mcp::kInvalidParams);
  auto bad_args = request(4, "tools/call", {{"name", "read_file"}, {"arguments", json::object()}});
  EXPECT_EQ(bad_args["result"]["isError"], true);
  EXPECT_EQ(request(5, "no/such")["error"]["code"], mcp::kMethodNotFound);
  EXPECT_EQ(request(6, "prompts/get", {{"name", "x"}})["error"]["code"], mcp::kInvalidParams);
}

TEST_F(McpServerTest, BudgetInToolCalls) {
  handshake();
  for (int i = 0; i < 3; ++i) request(i, "tools/call", {{"name", "list_files"}});
  auto over = request(9, "tools/call", {{"name", "list_files"}});
  EXPECT_EQ(over["result"]["isError"], true);
  EXPECT_NE(over["result"]["content"][0]["text"].get<std::string>().find("budget exhausted"), std::string::npos);
}

TEST_F(McpServerTest, StatelessRevision) {
  auto d = request(1, "server/discover", modern());
  ASSERT_TRUE(d.contains("result")) << d;
  EXPECT_EQ(d["result"]["supportedVersions"], json::array({"2026-07-28"}));
  EXPECT_EQ(d["result"]["resultType"], "complete");
  EXPECT_EQ(d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "d2k");
  auto t = request(2, "tools/list", modern());
  EXPECT_EQ(t["result"]["tools"].size(), 7u);
  EXPECT_EQ(t["result"]["ttlMs"], 0);
  auto c = request(3, "tools/call", modern({{"name", "bash"}, {"arguments", {{"command", "echo hi"}}}}));
  EXPECT_EQ(c["result"]["content"][0]["text"], "exit code 0\nhi\n");
  EXPECT_EQ(c["result"]["resultType"], "complete");
  EXPECT_FALSE(c["result"].contains("ttlMs"));
  // The era is fixed: no handshake now, and requests must carry the envelope.
  EXPECT_EQ(request(4, "initialize", {{"protocolVersion", "2025-11-25"}})["error"]["code"],
            mcp::kUnsupportedProtocolVersion);
  EXPECT_EQ(request(5, "tools/list")["error"]["code"], mcp::kInvalidParams);
}

TEST_F(McpServerTest, StatelessEnvelopeChecks) {
  json p = modern();
  p["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2030-01-01";
  auto r = request(1, "server/discover", p);
  EXPECT_EQ(r["error"]["code"], mcp::kUnsupportedProtocolVersion);
  EXPECT_EQ(r["error"]["data"]["supported"], json::array({"2026-07-28"}));
  json q = modern();
  q["_meta"].erase("io.modelcontextprotocol/clientCapabilities");
  EXPECT_EQ(request(2, "tools/list", q)["error"]["code"], mcp::kInvalidParams);
}

TEST_F(McpServerTest, EnvelopeOnAHandshakeConnectionIsRefused) {
  handshake();
  EXPECT_EQ(request(1, "tools/list", modern())["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(request(2, "server/discover")["error"]["code"], mcp::kMethodNotFound);
}

TEST_F(McpServerTest, MalformedInputKeepsTheServerGoing) {
  std::istringstream in("{not json\n\n[1,2]\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
  std::ostringstream out;
  server.serve(in, out);
  std::istringstream lines(out.str());
  std::string l1, l2, l3;
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  EXPECT_EQ(json::parse(l1)["error"]["code"], mcp::kParseError);
  EXPECT_TRUE(json::parse(l1)["id"].is_null());
  EXPECT_EQ(json::parse(l2)["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(json::parse(l3)["id"], 7);
  EXPECT_EQ(json::parse(l3)["result"], json::object());
}

TEST_F(McpServerTest, InvalidUtf8InToolOutputIsReplacedNotThrown) {
  handshake();
  auto line = server.handle_line(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"printf '\\xff\\xfe'"}}})");
  ASSERT_TRUE(line);
  auto r = json::parse(*line);
  EXPECT_EQ(r["result"]["isError"], false) << *line;
}

}  // namespace
