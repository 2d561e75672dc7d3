// The built-in agent loop's own overhead per tool call: the wall time of an episode minus the time spent in
// HTTP exchanges with the model (the model's latency; here a fake server on loopback that answers at once) and
// minus the time inside the tools. What is left is the harness: building and parsing request bodies,
// trajectory records with an fsync each, condensing checks, bookkeeping. Target: under 20 ms per tool call.
//
//   build/tests/d2k_agent_overhead_bench [TURNS]     (default 200 turns, one cheap tool call each)
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "agent/loop/agent_loop.hpp"
#include "agent/providers/http_client.hpp"
#include "agent_loop/agent_loop_support.hpp"
#include "test_support.hpp"

namespace {

using namespace d2k;
using namespace d2k::agent;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Wraps the real libcurl client and adds up the time of each exchange.
class TimedHttp final : public HttpClient {
 public:
  HttpResponse post(const std::string& url, const std::map<std::string, std::string>& headers, const std::string& body,
                    std::chrono::milliseconds timeout) override {
    auto t0 = Clock::now();
    HttpResponse r = inner_.post(url, headers, body, timeout);
    std::lock_guard<std::mutex> l(mu_);
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }
  double seconds() const { return seconds_; }

 private:
  CurlHttpClient inner_;
  std::mutex mu_;
  double seconds_ = 0;
};

struct Figures {
  double wall_s = 0, http_s = 0, tool_s = 0;
  int tool_calls = 0;
  double per_call_ms() const { return (wall_s - http_s - tool_s) / tool_calls * 1000; }
};

Figures episode(ProviderKind kind, int turns) {
  test::TempDir tmp;
  auto ws = tmp.path() / "workspace";
  std::filesystem::create_directories(ws);
  write_file_atomic(ws / "notes.txt", std::string(2000, 'n') + "\n");
  std::vector<test::ScriptedReply> script;
  for (int i = 0; i < turns; ++i) {
    // Alternate a read and a write so the conversation grows as a real one does (~2-3 KB a turn).
    if (i % 2 == 0)
      script.push_back(test::reply(kind, "Reading the notes.", {{"c" + std::to_string(i), "read_file", {{"path", "notes.txt"}}, ""}}));
    else
      script.push_back(test::reply(kind, "Writing.", {{"c" + std::to_string(i), "write_file",
                                                      {{"path", "solution.py"}, {"content", std::string(600, 's')}}, ""}}));
  }
  script.push_back(test::reply(kind, "done", {}));
  test::FakeModelServer server(script, std::chrono::milliseconds(600000));
  auto http = std::make_shared<TimedHttp>();
  ProviderDeps deps;
  deps.http = http;
  deps.getenv = [](const std::string&) -> std::optional<std::string> { return "key"; };
  auto provider = make_provider(test::test_model(kind, server.base_url()), deps);
  ToolBox tools(Workspace(ws), {});
  TrajectoryWriter traj(tmp.path() / "trajectory.jsonl");
  LoopOptions lo;
  lo.budgets.max_turns = 0;
  AgentLoop loop(*provider, tools, traj, lo);
  auto t0 = Clock::now();
  LoopResult r = loop.run({Message::system("bench"), Message::user("go")});
  Figures f;
  f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  f.http_s = http->seconds();
  f.tool_s = r.totals.tool_s;
  f.tool_calls = r.totals.tool_calls;
  if (r.status != RunStatus::finished) fmt::print(stderr, "unexpected status {}: {}\n", run_status_name(r.status), r.detail);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int turns = argc > 1 ? std::atoi(argv[1]) : 200;
  for (auto kind : {ProviderKind::openai, ProviderKind::anthropic}) {
    Figures f = episode(kind, turns);
    fmt::print("{:<9} {} tool calls: wall {:.3f} s, model HTTP {:.3f} s, tools {:.3f} s -> harness overhead "
               "{:.2f} ms per tool call (target < 20 ms)\n",
               test::kind_name(kind), f.tool_calls, f.wall_s, f.http_s, f.tool_s, f.per_call_ms());
  }
  return 0;
}
