#pragma once
// A child process the supervisor talks to: requests on its stdin, one JSON line per response on fd 3,
// stdout and stderr into a log file. Timeouts and crashes are results, never exceptions.
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k {

struct ExitInfo {
  bool exited = false;    // exited normally with `code`
  int code = 0;
  bool signaled = false;  // killed by `signal`
  int signal = 0;
  std::string describe() const;
};

// Confinement applied in the child between fork and exec.
struct ChildLimits {
  bool isolate_network = false;           // a new, empty network namespace (needs root; else the log says so)
  unsigned long long max_file_bytes = 0;  // RLIMIT_FSIZE; 0 leaves it alone
  unsigned long long max_open_files = 0;  // RLIMIT_NOFILE; 0 leaves it alone
  bool no_core_dumps = true;              // a crashing CUDA process would otherwise dump gigabytes
  int run_as_uid = -1;                    // >= 0: drop to this user (and group) before exec; needs root
  int run_as_gid = -1;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path) in its own process group with `env` as its whole environment.
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::filesystem::path& log_file, const ChildLimits& limits = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool send(const nlohmann::json& request);  // false if the child is gone
  void close_stdin();                         // EOF for a child that reads all of its input first

  enum class Outcome { response, timeout, closed, garbled };
  struct Reply {
    Outcome outcome;
    nlohmann::json body;  // set for Outcome::response
    std::string raw;      // the offending text for Outcome::garbled
  };
  // Waits for the next response line until `timeout` passes.
  Reply receive(std::chrono::milliseconds timeout);

  void kill();                // SIGKILL to the whole process group
  ExitInfo wait();            // reaps the child (kills it first if it is still running after 2 s)
  std::string log_tail(std::size_t max_bytes = 4000) const;
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  std::filesystem::path log_;
  std::optional<ExitInfo> exit_;
};

// "PID STARTTIME" of a live process (starttime: /proc/PID/stat, field 22), or "" when there is none: a record of
// who owns something that stays right when the pid is reused.
std::string process_identity(int pid);

}  // namespace d2k
