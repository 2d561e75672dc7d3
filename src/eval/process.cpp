#include "eval/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/files.hpp"

namespace d2k {

constexpr std::size_t kMaxResponseBytes = 16u << 20;

std::string ExitInfo::describe() const {
  if (signaled) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  if (exited) return fmt::format("exited with code {}", code);
  return "still running";
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::filesystem::path& log_file, const ChildLimits& limits)
    : log_(log_file) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", strerror(errno)));
  int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error(fmt::format("{}: {}", log_file.string(), strerror(errno)));

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  const pid_t parent = ::getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(fmt::format("fork: {}", strerror(errno)));
  if (pid_ == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);
    dup2(in_pipe[0], 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    dup2(out_pipe[1], 3);
    if (limits.no_core_dumps) {
      rlimit r{0, 0};
      setrlimit(RLIMIT_CORE, &r);
    }
    if (limits.max_file_bytes) {
      rlimit r{limits.max_file_bytes, limits.max_file_bytes};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    if (limits.max_open_files) {
      rlimit r{limits.max_open_files, limits.max_open_files};
      setrlimit(RLIMIT_NOFILE, &r);
    }
    if (limits.isolate_network && unshare(CLONE_NEWNET) != 0) {
      const char msg[] = "d2k: network not isolated: unshare(CLONE_NEWNET) failed\n";
      (void)!write(2, msg, sizeof msg - 1);
    }
    if (limits.run_as_uid >= 0) {
      if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(limits.run_as_gid)) != 0 ||
          setuid(static_cast<uid_t>(limits.run_as_uid)) != 0) {
        const char msg[] = "d2k: cannot drop privileges\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(126);
      }
    }
    // The child dies with d2k (killed by a timeout, Ctrl-C, a crash): no worker is left holding the GPU, or
    // running a hung solution, under the next evaluation. Set after the user switch, which clears it.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(125);
    execve(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "d2k: exec failed\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  setpgid(pid_, pid_);  // also from the parent, so kill() works even before the child ran
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(log_fd);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  signal(SIGPIPE, SIG_IGN);
}

ChildProcess::~ChildProcess() {
  if (!exit_) {
    kill();
    wait();
  }
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
}

bool ChildProcess::send(const nlohmann::json& request) {
  if (to_child_ < 0) return false;
  std::string line = request.dump() + "\n";
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(to_child_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

void ChildProcess::close_stdin() {
  if (to_child_ >= 0) ::close(to_child_);
  to_child_ = -1;
}

ChildProcess::Reply ChildProcess::receive(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      try {
        auto j = nlohmann::json::parse(line);
        if (!j.is_object()) return {Outcome::garbled, {}, line.substr(0, 200)};
        return {Outcome::response, std::move(j), {}};
      } catch (const nlohmann::json::exception&) {
        return {Outcome::garbled, {}, line.substr(0, 200)};
      }
    }
    if (buffer_.size() > kMaxResponseBytes) return {Outcome::garbled, {}, "response longer than 16 MiB"};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {Outcome::timeout, {}, {}};
    pollfd p{from_child_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {Outcome::closed, {}, {}};
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

void ChildProcess::kill() {
  if (pid_ > 0 && !exit_) ::kill(-pid_, SIGKILL);
}

ExitInfo ChildProcess::wait() {
  if (exit_) return *exit_;
  if (to_child_ >= 0) {
    ::close(to_child_);  // EOF on stdin asks a well-behaved worker to exit
    to_child_ = -1;
  }
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (i == 199) {
      kill();
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(-pid_, SIGKILL);  // leftovers the child spawned in its group
  ExitInfo e;
  if (WIFEXITED(status)) {
    e.exited = true;
    e.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.signal = WTERMSIG(status);
  }
  exit_ = e;
  return e;
}

std::string ChildProcess::log_tail(std::size_t max_bytes) const {
  auto text = read_file(log_, std::size_t(1) << 30);
  if (!text) return {};
  if (text->size() > max_bytes) return "..." + text->substr(text->size() - max_bytes);
  return *text;
}

std::string process_identity(int pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat", 1 << 16);
  if (!stat) return "";
  auto close = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::size_t at = close + 1;
  std::string field;
  for (int f = 3; f <= 22; ++f) {  // field 3 (state) follows the name
    auto begin = stat->find_first_not_of(' ', at);
    if (begin == std::string::npos) return "";
    auto end = stat->find(' ', begin);
    field = stat->substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    at = end == std::string::npos ? stat->size() : end;
  }
  return fmt::format("{} {}", pid, field);
}

}  // namespace d2k
