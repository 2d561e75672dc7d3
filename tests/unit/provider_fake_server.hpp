#pragma once
// A scripted fake model server on loopback for the provider tests: it answers the N requests it is given a
// script for, in order, records each request, then closes its socket. Plain blocking sockets, one request per
// connection ("Connection: close"), every wait bounded; it stops by itself after `lifetime`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace d2k::test {

struct ScriptedReply {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool drop = false;  // read the request, then close the connection without a reply
  int delay_ms = 0;   // wait this long before replying (to trip the client's timeout)

  static ScriptedReply json(const nlohmann::json& j, int status = 200) { return {status, j.dump(), {}, false, 0}; }
};

struct RecordedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

class FakeModelServer {
 public:
  explicit FakeModelServer(std::vector<ScriptedReply> script,
                           std::chrono::milliseconds lifetime = std::chrono::milliseconds(15000))
      : script_(std::move(script)), deadline_(std::chrono::steady_clock::now() + lifetime) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;  // ephemeral
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0) {
      ::close(fd_);
      throw std::runtime_error("bind/listen on 127.0.0.1");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeModelServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  FakeModelServer(const FakeModelServer&) = delete;
  FakeModelServer& operator=(const FakeModelServer&) = delete;

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<RecordedRequest> requests() const {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  bool expired() const { return stop_ || std::chrono::steady_clock::now() > deadline_; }

  // Waits for `fd` to become readable in 20 ms slices; false when the server must stop.
  bool wait_readable(int fd) const {
    while (!expired()) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, 20);
      if (r > 0) return true;
      if (r < 0) return false;
    }
    return false;
  }

  bool read_request(int c, RecordedRequest& req) {
    std::string buf;
    std::size_t header_end = std::string::npos;
    std::size_t content_length = 0;
    char chunk[65536];
    while (true) {
      if (header_end == std::string::npos) {
        header_end = buf.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          std::string head = buf.substr(0, header_end);
          std::size_t eol = head.find("\r\n");
          std::string first = head.substr(0, eol);
          std::size_t sp1 = first.find(' '), sp2 = first.rfind(' ');
          req.method = first.substr(0, sp1);
          req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
          std::size_t pos = eol == std::string::npos ? head.size() : eol + 2;
          while (pos < head.size()) {
            std::size_t e = head.find("\r\n", pos);
            if (e == std::string::npos) e = head.size();
            std::string line = head.substr(pos, e - pos);
            if (auto colon = line.find(':'); colon != std::string::npos) {
              std::string k = line.substr(0, colon), v = line.substr(colon + 1);
              for (auto& ch : k) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
              while (!v.empty() && v.front() == ' ') v.erase(v.begin());
              req.headers[k] = v;
            }
            pos = e + 2;
          }
          if (auto it = req.headers.find("content-length"); it != req.headers.end())
            content_length = std::stoul(it->second);
        }
      }
      if (header_end != std::string::npos && buf.size() >= header_end + 4 + content_length) {
        req.body = buf.substr(header_end + 4, content_length);
        return true;
      }
      if (!wait_readable(c)) return false;
      ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
  }

  void send_all(int c, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the client gave up (timeout): fine
      off += static_cast<std::size_t>(n);
    }
  }

  void serve() {
    for (const ScriptedReply& reply : script_) {
      if (!wait_readable(fd_)) return;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      RecordedRequest req;
      if (read_request(c, req)) {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(req);
      }
      if (!reply.drop) {
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(reply.delay_ms);
        while (std::chrono::steady_clock::now() < until && !expired())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " Scripted\r\n";
        out += "Content-Type: application/json\r\nConnection: close\r\n";
        out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
        for (const auto& [k, v] : reply.headers) out += k + ": " + v + "\r\n";
        out += "\r\n" + reply.body;
        send_all(c, out);
      }
      ::shutdown(c, SHUT_RDWR);
      ::close(c);
    }
  }

  std::vector<ScriptedReply> script_;
  std::chrono::steady_clock::time_point deadline_;
  std::atomic<bool> stop_{false};
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<RecordedRequest> requests_;
};

}  // namespace d2k::test

#include "agent/providers/provider.hpp"

namespace d2k::test {

// Provider dependencies for tests: the real libcurl client, recorded sleeps that do not sleep, a fixed wall
// clock and jitter draw, and an environment of our own.
struct FakeWorld {
  std::vector<std::chrono::milliseconds> sleeps;
  std::vector<agent::RetryEvent> retries;
  std::map<std::string, std::string> env{{"D2K_TEST_KEY", "sk-test-123"}};
  std::chrono::system_clock::time_point now =
      std::chrono::system_clock::from_time_t(784111777);  // 1994-11-06 08:49:37Z
  double draw = 0.5;                                      // jitter factor 1 - 0.5 * draw = 0.75

  agent::ProviderDeps deps(agent::RetryPolicy policy = {}) {
    agent::ProviderDeps d;
    d.retry = policy;
    d.sleep = [this](std::chrono::milliseconds ms) { sleeps.push_back(ms); };
    d.wall_now = [this] { return now; };
    d.random01 = [this] { return draw; };
    d.getenv = [this](const std::string& k) -> std::optional<std::string> {
      auto it = env.find(k);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    d.on_retry = [this](const agent::RetryEvent& e) { retries.push_back(e); };
    return d;
  }
};

inline agent::ModelConfig test_model(agent::ProviderKind kind, const std::string& base_url) {
  agent::ModelConfig m;
  m.name = kind == agent::ProviderKind::openai ? "fake-gpt" : "fake-claude";
  m.provider = kind;
  m.base_url = base_url;
  m.api_key_env = "D2K_TEST_KEY";
  m.model = kind == agent::ProviderKind::openai ? "gpt-test" : "claude-test";
  m.max_output_tokens = 1024;
  m.context_window = 100000;
  m.prices = {2.0, 0.5, 2.5, 8.0};  // input, cached_input, cache_write, output per million
  m.request_timeout_s = 5;
  return m;
}

}  // namespace d2k::test
