#include "agent/loop/external_agent.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace d2k::agent {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string substitute_placeholders(const std::string& command, const std::map<std::string, std::string>& values) {
  std::string out;
  std::size_t pos = 0;
  while (pos < command.size()) {
    std::size_t open = command.find('{', pos);
    if (open == std::string::npos) break;
    std::size_t close = command.find('}', open);
    if (close == std::string::npos) break;
    std::string name = command.substr(open + 1, close - open - 1);
    bool looks_like_placeholder = !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos;
    out += command.substr(pos, open - pos);
    if (!looks_like_placeholder) {  // shell braces such as ${VAR} or {a,b} pass through
      out += command.substr(open, close - open + 1);
    } else {
      auto it = values.find(name);
      if (it == values.end() || (open > 0 && command[open - 1] == '$')) {
        if (open > 0 && command[open - 1] == '$') {
          out += command.substr(open, close - open + 1);  // ${name}: a shell variable
        } else {
          std::string known;
          for (const auto& [k, v] : values) known += (known.empty() ? "{" : ", {") + k + "}";
          throw std::invalid_argument("unknown placeholder {" + name + "} in the agent command (known: " + known + ")");
        }
      } else {
        out += shell_quote(it->second);
      }
    }
    pos = close + 1;
  }
  out += command.substr(pos);
  return out;
}

nlohmann::json mcp_config_json(const std::string& d2k_binary, const std::vector<std::string>& args) {
  return {{"mcpServers", {{"d2k", {{"type", "stdio"}, {"command", d2k_binary}, {"args", args}}}}}};
}

ExternalAgentResult run_external_agent(const ExternalAgentOptions& o) {
  using Clock = std::chrono::steady_clock;
  ExternalAgentResult r;
  int log_fd = ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    r.error = "cannot open " + o.log.string() + ": " + std::strerror(errno);
    return r;
  }
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(log_fd);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    if (::chdir(o.cwd.c_str()) != 0) {
      const char msg[] = "d2k: cannot enter the workspace\n";
      (void)!::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
    // The parent's signal handlers (SIGINT for a clean stop) must not be inherited as ignored or caught.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execl("/bin/bash", "bash", "-c", o.command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(log_fd);
  r.started = true;
  int status = 0;
  bool term_sent = false;
  Clock::time_point term_at;
  while (true) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!term_sent) {
      bool over = o.max_wall_s > 0 && elapsed >= o.max_wall_s;
      bool stop = o.interrupted && o.interrupted();
      if (over || stop) {
        r.timed_out = over;
        r.interrupted = !over && stop;
        ::kill(-pid, SIGTERM);
        term_sent = true;
        term_at = Clock::now();
      }
    } else if (std::chrono::duration<double>(Clock::now() - term_at).count() >= o.kill_grace_s) {
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);  // whatever the agent left running in its group
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace d2k::agent
