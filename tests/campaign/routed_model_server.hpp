#pragma once
// A fake model server for campaigns: many agent runs talk to it at once, so instead of one script in order it
// answers each request with a function of the request (the conversation so far), and serves connections
// concurrently. Loopback only, one request per connection, every wait bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "unit/provider_fake_server.hpp"

namespace d2k::test {

class RoutedModelServer {
 public:
  using Handler = std::function<ScriptedReply(const RecordedRequest&)>;
  explicit RoutedModelServer(Handler h) : handler_(std::move(h)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0) {
      ::close(fd_);
      throw std::runtime_error("bind/listen on 127.0.0.1");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~RoutedModelServer() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    ::close(fd_);
  }
  RoutedModelServer(const RoutedModelServer&) = delete;
  RoutedModelServer& operator=(const RoutedModelServer&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return count_.load(); }

 private:
  bool readable(int fd, int ms) const {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }

  void accept_loop() {
    while (!stop_) {
      if (!readable(fd_, 20)) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      workers_.emplace_back([this, c] { serve(c); });
    }
  }

  void serve(int c) {
    std::string buf;
    char chunk[65536];
    std::size_t head_end = std::string::npos, length = 0;
    RecordedRequest req;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!stop_ && std::chrono::steady_clock::now() < deadline) {
      if (head_end == std::string::npos && (head_end = buf.find("\r\n\r\n")) != std::string::npos) {
        std::string head = buf.substr(0, head_end);
        for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (auto p = head.find("content-length:"); p != std::string::npos) length = std::stoul(head.substr(p + 15));
        auto sp = buf.find(' ');
        req.method = buf.substr(0, sp);
        req.path = buf.substr(sp + 1, buf.find(' ', sp + 1) - sp - 1);
      }
      if (head_end != std::string::npos && buf.size() >= head_end + 4 + length) {
        req.body = buf.substr(head_end + 4, length);
        break;
      }
      if (!readable(c, 20)) continue;
      ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    if (!req.body.empty()) {
      ++count_;
      ScriptedReply r = handler_(req);
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.delay_ms);
      while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::string out = "HTTP/1.1 " + std::to_string(r.status) + " Routed\r\nContent-Type: application/json\r\n"
                        "Connection: close\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
      std::size_t off = 0;
      while (off < out.size()) {
        ssize_t n = ::send(c, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
    }
    ::shutdown(c, SHUT_RDWR);
    ::close(c);
  }

  Handler handler_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::thread acceptor_;
  std::vector<std::thread> workers_;  // touched by the acceptor thread only, joined after it
};

}  // namespace d2k::test
