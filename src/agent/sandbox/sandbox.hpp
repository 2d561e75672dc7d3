#pragma once
// The agent's sandbox: bubblewrap (bwrap) around every command the `bash` tool runs, and later around the
// evaluator's solution worker. Inside: the workspace read-write, the system read-only, the GPU device nodes,
// a private /tmp and /proc, no network (own network namespace), no capabilities, resource limits, and an
// environment built from an allow-list. Outside its view: the repository (tasks with their expert solutions,
// the build, the evaluator's files), the d2k cache, submissions, $HOME. docs/SANDBOX.md.
//
// Two layers: SandboxSpec + bwrap_argv() are pure (a spec in, an argv out), so any caller can wrap any command;
// default_sandbox_spec() and make_command_runner() look at the machine (bwrap, the venv, nvcc, /dev/nvidia*).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agent/tools/command_runner.hpp"

namespace d2k::agent {

// Resource limits, applied inside the sandbox (after bwrap has made its namespaces) with bash's `ulimit`, so the
// process count is the sandbox's own (RLIMIT_NPROC is counted per user namespace). 0 leaves a limit alone.
struct SandboxLimits {
  std::uint64_t memory_bytes = 0;     // RLIMIT_DATA (heap and private writable maps; RLIMIT_AS would break CUDA)
  std::uint64_t processes = 0;        // RLIMIT_NPROC: processes and threads in the sandbox
  std::uint64_t file_bytes = 0;       // RLIMIT_FSIZE: the largest file a process may write
  std::uint64_t cpu_seconds = 0;      // RLIMIT_CPU per process
  std::uint64_t open_files = 0;       // RLIMIT_NOFILE
  std::uint64_t tmp_bytes = 0;        // size of the private /tmp (a tmpfs)
  bool no_core_dumps = true;          // RLIMIT_CORE = 0
};

// A path shown inside at the same place as outside.
struct SandboxBind {
  std::filesystem::path path;
  bool writable = false;
};

// A path covered inside: an empty tmpfs over a folder, /dev/null over a file.
struct SandboxHidden {
  std::filesystem::path path;
  bool is_dir = true;
};

struct SandboxSpec {
  std::filesystem::path bwrap = "bwrap";
  std::filesystem::path workspace;             // bound read-write at the same path; the command's cwd
  std::vector<SandboxBind> binds;              // read-only unless `writable`; missing sources are skipped (-try)
  std::vector<std::pair<std::string, std::filesystem::path>> symlinks;  // (target, link): merged /usr, /bin -> usr/bin
  std::vector<SandboxHidden> hidden;           // covered wherever a bind (or the workspace) would show them
  std::vector<std::filesystem::path> devices;  // device nodes bound with device access (GPU)
  std::vector<std::pair<std::string, std::string>> env;  // the whole environment inside (clearenv, then these)
  SandboxLimits limits;
  std::string hostname = "d2k-sandbox";
  // Set when bwrap runs as root: bwrap builds the sandbox with root's view of the files (a workspace under a
  // 0700 folder is still bound), without a user namespace, and the command runs as this host uid/gid through
  // `setpriv` (capabilities gone with the switch, RLIMIT_NPROC counted for that uid). Unset: bwrap runs as the
  // caller in its own user namespace (nested ones disabled) and the command keeps the caller's uid.
  std::optional<std::pair<long, long>> run_as;
  std::filesystem::path setpriv = "/usr/bin/setpriv";
};

// The bwrap command line that runs `command` (argv, command[0] a path inside the sandbox) under `spec`.
// Mounts are ordered by depth so a deeper bind lands on top of a shallower one: a hidden folder is covered after
// the binds that contain it and before the binds inside it (the venv inside the hidden repository stays
// visible). The limits are set by a `/bin/bash -c 'ulimit ...; exec "$@"'` prefix inside.
std::vector<std::string> bwrap_argv(const SandboxSpec& spec, const std::vector<std::string>& command);

// The `ulimit` commands bwrap_argv() runs before the command ("" when no limit is set).
std::string ulimit_script(const SandboxLimits& limits);

// Whether an environment variable name looks like a secret: *_API_KEY, *_KEY, *TOKEN*, *SECRET*, *PASSWORD*,
// *PASSWD*, *CREDENTIAL*, *PRIVATE*, *COOKIE*, *SESSION*, AWS_*, AZURE_*, GOOGLE_*, GCP_*, GCLOUD_*, HF_*,
// HUGGING*, OPENAI_*, ANTHROPIC_*, GITHUB_*, GH_*, GITLAB_*, SSH_*, GPG_*, NPM_*, PYPI_*, DOCKER_* (case-insensitive).
bool is_secret_env_name(const std::string& name);

// The variables of `environ` ("K=V" strings) that the allow-list admits (exact names, or prefixes ending in
// '*') and that do not look like secrets, followed by `overrides` (which replace same-named ones).
std::vector<std::pair<std::string, std::string>> filter_environment(
    const std::vector<std::string>& environ, const std::vector<std::string>& allow,
    const std::vector<std::pair<std::string, std::string>>& overrides);

// The names passed by default: PATH, LANG, LANGUAGE, LC_*, TERM, TZ, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES,
// NVIDIA_DRIVER_CAPABILITIES, CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH, TRITON_INTERPRET, OMP_NUM_THREADS.
std::vector<std::string> default_env_allow_list();

enum class SandboxKind { bwrap, none };

inline constexpr long sandbox_uid_base = 0x40000000;  // no passwd entry; USER and LOGNAME are set to "d2k"

// What the factory needs to know; the defaults are what `d2k mcp` and `d2k agent run` use.
struct SandboxOptions {
  SandboxKind kind = SandboxKind::bwrap;
  std::filesystem::path bwrap;                   // empty: find_bwrap()
  std::vector<std::filesystem::path> read_only;  // extra read-only binds
  std::vector<std::filesystem::path> hidden;     // extra hidden paths (the tasks folder, the submissions folder)
  std::vector<std::string> env_allow;            // extra allowed variable names (secrets are dropped regardless)
  std::optional<SandboxLimits> limits;           // nullopt: default_sandbox_limits()
  // The host uid/gid the command runs as when d2k runs as root (the kernel does not limit root's process count,
  // and root owns too much). -1: a uid of its own, sandbox_uid_base + (d2k's pid mod 65536), so that one
  // sandbox's processes count against its own limit only. The workspace is handed to it (chown of what d2k
  // wrote) before every command. Ignored when d2k is not root: the command keeps d2k's uid.
  long run_as_uid = -1;
  long run_as_gid = -1;
};

// "bwrap" or "none"; nullopt for anything else.
std::optional<SandboxKind> parse_sandbox_kind(const std::string& text);

// The environment of the bwrap process itself (not of the sandbox): PATH, and the library path of the unpacked
// packages when bwrap is the `.deps` one (scripts/device-deps.sh).
std::map<std::string, std::string> bwrap_environment(const std::filesystem::path& bwrap);

// bwrap on PATH, else the build tree's `.deps/usr/bin/bwrap` (scripts/device-deps.sh); nullopt when neither.
std::optional<std::filesystem::path> find_bwrap();

// Limits sized to the machine: memory = half the RAM (at most 64 GiB), 2048 processes, 4 GiB files, 1 h of CPU
// per process, 4096 open files (or the hard limit if lower), /tmp of a quarter of the RAM (at most 8 GiB).
SandboxLimits default_sandbox_limits();

// The spec for a workspace on this machine: the system folders (/usr, /etc, /opt, /sys; /bin, /lib... as
// symlinks or binds), the Python environment d2k was built with (its venv, bound explicitly even though it lies
// in the repository), the CUDA toolkit of the nvcc on PATH, /dev/nvidia* and /dev/nvidia-caps/*; hidden: the
// repository (build::source_dir), the d2k cache, $D2K_TASKS and options.hidden; HOME=workspace, TMPDIR=/tmp.
SandboxSpec default_sandbox_spec(const std::filesystem::path& bwrap, const std::filesystem::path& workspace,
                                 const SandboxOptions& options);

// Whether bwrap can build a sandbox here: runs `true` in one made like the real ones. nullopt when it can, else
// why not (bwrap's own message, e.g. no permission to create namespaces in an unprivileged container).
std::optional<std::string> probe_bwrap(const SandboxOptions& options);

// Runs each command inside bwrap with the spec default_sandbox_spec(bwrap, cwd, options) builds for the cwd it is
// given, through run_process() (same timeouts, process-group kill and output cutting as LocalCommandRunner; the
// sandbox's own pid namespace ends every process of the command when it exits or is killed).
class BwrapCommandRunner final : public CommandRunner {
 public:
  BwrapCommandRunner(std::filesystem::path bwrap, SandboxOptions options);
  CommandResult run(const std::string& command, const std::filesystem::path& cwd, std::chrono::seconds timeout,
                    const OutputLimits& limits) override;
  const std::filesystem::path& bwrap() const { return bwrap_; }
  // The host uid the commands run as (-1: d2k's own).
  long run_as_uid() const { return uid_; }
  // The spec run() uses for a workspace (what the runner adds to default_sandbox_spec(): the uid switch).
  SandboxSpec spec_for(const std::filesystem::path& workspace) const;

 private:
  std::filesystem::path bwrap_;
  SandboxOptions options_;
  long uid_ = -1, gid_ = -1;
};

// Thrown by make_command_runner when the bwrap sandbox was asked for and cannot run here.
struct SandboxUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// kind none: LocalCommandRunner. kind bwrap: a BwrapCommandRunner after probe_bwrap() succeeded, else throws
// SandboxUnavailable saying to install bubblewrap or to pass `--sandbox none`. `description`, when given, gets
// one line saying what was chosen (for stderr).
std::unique_ptr<CommandRunner> make_command_runner(const SandboxOptions& options, std::string* description = nullptr);

}  // namespace d2k::agent
