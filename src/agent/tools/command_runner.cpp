#include "agent/tools/command_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace d2k::agent {

void HeadTailBuffer::append(const char* data, std::size_t n) {
  total_ += n;
  std::size_t to_head = std::min(n, limits_.head_bytes - std::min(limits_.head_bytes, head_.size()));
  head_.append(data, to_head);
  data += to_head;
  n -= to_head;
  if (n == 0) return;
  tail_.append(data, n);
  if (tail_.size() > 2 * limits_.tail_bytes + 4096) tail_.erase(0, tail_.size() - limits_.tail_bytes);
}

std::string HeadTailBuffer::str() const {
  std::string tail = tail_;
  if (tail.size() > limits_.tail_bytes) tail.erase(0, tail.size() - limits_.tail_bytes);
  std::size_t cut = total_ - head_.size() - tail.size();
  if (cut == 0) return head_ + tail;
  std::string out = head_;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "[... " + std::to_string(cut) + " bytes cut ...]\n";
  out += tail;
  return out;
}

std::string cut_middle(const std::string& text, const OutputLimits& limits) {
  HeadTailBuffer b(limits);
  b.append(text.data(), text.size());
  return b.str();
}

namespace {

using Clock = std::chrono::steady_clock;

// Reads what is available on fd into buf; false at EOF or on a hard error.
bool drain(int fd, HeadTailBuffer& buf) {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace

CommandResult LocalCommandRunner::run(const std::string& command, const std::filesystem::path& cwd,
                                      std::chrono::seconds timeout, const OutputLimits& limits) {
  return run_process({"/bin/bash", {"bash", "-c", command}, std::nullopt, cwd, {}}, timeout, limits);
}

CommandResult run_process(const ProcessSpec& spec, std::chrono::seconds timeout, const OutputLimits& limits) {
  CommandResult r;
  if (spec.argv.empty()) {
    r.error = "no command";
    return r;
  }
  // Everything the child needs is built before fork: the child only makes system calls.
  const std::string& path = spec.path.empty() ? spec.argv[0] : spec.path;
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (spec.env) {
    for (const auto& e : *spec.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  std::string cwd_s = spec.cwd.string();
  pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    if (::chdir(cwd_s.c_str()) != 0) _exit(126);
    ::signal(SIGPIPE, SIG_DFL);
    // No descriptor of d2k's (a file, a socket, a folder to climb out of) reaches the command.
    if (::close_range(3, ~0U, 0) != 0)
      for (int f = 3; f < 4096; ++f) ::close(f);
    if (spec.before_exec) {
      if (const char* why = spec.before_exec()) {
        ssize_t ignored = ::write(2, why, std::strlen(why));
        (void)ignored;
        _exit(126);
      }
    }
    if (spec.env)
      ::execve(path.c_str(), argv.data(), envp.data());
    else
      ::execv(path.c_str(), argv.data());
    const char msg[] = "cannot execute the command\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  ::setpgid(pid, pid);  // also in the parent, so the kill below cannot race the child's own call
  ::close(fds[1]);
  int fd = fds[0];
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  r.started = true;

  HeadTailBuffer buf(limits);
  auto deadline = Clock::now() + timeout;
  bool open = true;
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    auto now = Clock::now();
    if (now >= deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      reaped = true;
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int wait_ms = static_cast<int>(std::min<long long>(left, 50));
    if (open) {
      pollfd p{fd, POLLIN, 0};
      int pr = ::poll(&p, 1, wait_ms);
      if (pr > 0) open = drain(fd, buf);
    } else {
      ::usleep(static_cast<useconds_t>(std::min(wait_ms, 2)) * 1000);  // output closed: the shell is ending
    }
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) reaped = true;
  }
  // The shell is gone: end whatever it left behind in its group, then read what is still buffered.
  ::kill(-pid, SIGKILL);
  auto grace = Clock::now() + std::chrono::milliseconds(500);
  while (open && Clock::now() < grace) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) open = drain(fd, buf);
  }
  ::close(fd);
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exited = true;
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signal = WTERMSIG(status);
    }
  } else {
    r.signal = SIGKILL;
  }
  r.output_bytes = buf.total();
  r.output = buf.str();
  return r;
}

}  // namespace d2k::agent
