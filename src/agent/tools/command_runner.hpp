#pragma once
// How the bash tool runs a command. The interface is the seam for the bubblewrap sandbox (a later runner
// wraps the command in bwrap); LocalCommandRunner runs it directly, and tests can substitute a fake.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace d2k::agent {

struct CommandResult {
  bool started = false;   // false: the command could not be started (`error` says why)
  std::string error;
  bool timed_out = false;  // killed (with its process group) when the timeout passed
  bool exited = false;     // exited normally with `exit_code`
  int exit_code = -1;
  int signal = 0;          // the signal that ended it, when it did not exit
  std::string output;      // stdout and stderr interleaved, already cut to head and tail
  std::size_t output_bytes = 0;  // the full size before cutting
};

struct OutputLimits {
  std::size_t head_bytes = 16 * 1024;
  std::size_t tail_bytes = 16 * 1024;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs `command` with `/bin/bash -c` in `cwd`, stdin from /dev/null.
  virtual CommandResult run(const std::string& command, const std::filesystem::path& cwd,
                            std::chrono::seconds timeout, const OutputLimits& limits) = 0;
};

// Runs the command in its own process group; on timeout, or once the shell has exited, the whole group is
// killed (background jobs do not outlive the call). The environment is inherited unchanged.
class LocalCommandRunner final : public CommandRunner {
 public:
  CommandResult run(const std::string& command, const std::filesystem::path& cwd, std::chrono::seconds timeout,
                    const OutputLimits& limits) override;
};

// One process as the runners start it: `path` is the absolute path executed (empty: argv[0]), `env` the whole environment ("K=V";
// nullopt inherits), `cwd` the host folder it starts in. `before_exec` runs in the forked child just before
// exec and may only make async-signal-safe calls (setrlimit, setuid, ...); it returns nullptr, or a message that
// ends the child with exit code 126.
struct ProcessSpec {
  std::string path;
  std::vector<std::string> argv;
  std::optional<std::vector<std::string>> env;
  std::filesystem::path cwd;
  std::function<const char*()> before_exec;
};

// The engine of LocalCommandRunner, shared by the sandboxed runner: stdin from /dev/null, stdout and stderr into
// one pipe cut to head and tail, its own process group killed on timeout and once the process has exited.
CommandResult run_process(const ProcessSpec& spec, std::chrono::seconds timeout, const OutputLimits& limits);

// Keeps the first head_bytes and the last tail_bytes of a stream of any length.
class HeadTailBuffer {
 public:
  explicit HeadTailBuffer(OutputLimits limits) : limits_(limits) {}
  void append(const char* data, std::size_t n);
  std::size_t total() const { return total_; }
  // The kept text; when bytes were dropped, a line "[... N bytes cut ...]" stands where they were.
  std::string str() const;

 private:
  OutputLimits limits_;
  std::string head_, tail_;
  std::size_t total_ = 0;
};

// The same cut applied to a string already in memory.
std::string cut_middle(const std::string& text, const OutputLimits& limits);

}  // namespace d2k::agent
