// The half of the sandbox that looks at the machine: where bwrap is, what to bind (system, Python environment,
// CUDA toolkit, GPU nodes), what to hide, limits sized to the machine; the runner and the factory.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <random>
#include <system_error>

#include <nlohmann/json.hpp>

#include "agent/sandbox/sandbox.hpp"

#include <map>
#include "d2k/build_info.hpp"
#include "eval/cuda_build.hpp"

extern char** environ;

namespace d2k::agent {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= p.size()) {
    auto end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    auto dir = p.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    fs::path cand = fs::path(dir) / name;
    if (::access(cand.c_str(), X_OK) == 0 && fs::is_regular_file(cand)) return cand;
  }
  return std::nullopt;
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p.lexically_normal() : c;
}

bool within(const fs::path& p, const fs::path& base) {
  auto rel = p.lexically_normal().lexically_relative(base.lexically_normal());
  return !rel.empty() && rel.begin()->string() != "..";
}

// sys.prefix, sys.base_prefix and sys.path of the Python d2k was built with (asked once per process).
std::vector<fs::path> python_paths() {
  static std::mutex m;
  static std::optional<std::vector<fs::path>> cached;
  std::lock_guard lock(m);
  if (cached) return *cached;
  cached.emplace();
  std::string py = build::python_executable;
  if (py.empty() || ::access(py.c_str(), X_OK) != 0) return *cached;
  auto r = run_process({py, {py, "-I", "-c", "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix] + sys.path))"},
                        std::nullopt, "/", {}},
                       std::chrono::seconds(30), OutputLimits{1u << 20, 0});
  if (!r.exited || r.exit_code != 0) return *cached;
  try {
    for (const auto& s : nlohmann::json::parse(r.output)) {
      fs::path p = s.get<std::string>();
      if (p.is_absolute() && fs::exists(p)) cached->push_back(p);
    }
  } catch (const std::exception&) {
  }
  return *cached;
}

std::optional<fs::path> venv_root() {
  fs::path py = build::python_executable;
  if (py.empty()) return std::nullopt;
  auto root = py.parent_path().parent_path();
  if (fs::exists(root / "pyvenv.cfg")) return root;
  return std::nullopt;
}

std::vector<fs::path> gpu_devices() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    auto name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && fs::is_character_file(e.symlink_status())) out.push_back(e.path());
  }
  for (const auto& e : fs::directory_iterator("/dev/nvidia-caps", ec))
    if (fs::is_character_file(e.symlink_status())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : (16ull << 30);
}

// As root, the sandbox's user must own what d2k wrote into the workspace to edit it. Only entries owned by d2k's
// own uid, or by an earlier sandbox's uid (a resumed workspace, another d2k process), change hands; symlinks are not followed (lchown) and files with several hard links are left alone (a
// link to a file outside must not move that file's ownership).
void hand_over(const fs::path& root, uid_t uid, gid_t gid) {
  uid_t self = ::geteuid();
  auto give = [&](const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    bool earlier_sandbox = st.st_uid >= sandbox_uid_base && st.st_uid < sandbox_uid_base + 65536;
    if (st.st_uid != self && !earlier_sandbox) return;
    if (st.st_uid == uid && st.st_gid == gid) return;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) return;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) return;
    if (::lchown(p.c_str(), uid, gid) != 0) return;
  };
  give(root);
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  std::size_t n = 0;
  for (; !ec && it != end && n < 200000; it.increment(ec), ++n) give(it->path());
}

}  // namespace

std::map<std::string, std::string> bwrap_environment(const fs::path& bwrap) {
  std::map<std::string, std::string> env{{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}};
  auto deps = bwrap.parent_path().parent_path().parent_path();  // .deps/usr/bin/bwrap (device-deps.sh)
  if (deps.filename() == ".deps")  // the unpacked packages' libcap and libselinux
    env["LD_LIBRARY_PATH"] = (deps / "lib" / "x86_64-linux-gnu").string() + ":" +
                             (deps / "usr" / "lib" / "x86_64-linux-gnu").string();
  return env;
}

std::optional<fs::path> find_bwrap() {
  if (auto p = which("bwrap")) return p;
  fs::path local = fs::path(build::source_dir) / ".deps" / "usr" / "bin" / "bwrap";
  if (::access(local.c_str(), X_OK) == 0) return local;
  return std::nullopt;
}

SandboxLimits default_sandbox_limits() {
  SandboxLimits l;
  auto ram = physical_memory();
  l.memory_bytes = std::min<std::uint64_t>(ram / 2, 64ull << 30);
  l.processes = 2048;
  l.file_bytes = 4ull << 30;
  l.cpu_seconds = 3600;
  l.open_files = 4096;
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_max != RLIM_INFINITY && nofile.rlim_max < l.open_files)
    l.open_files = nofile.rlim_max;
  l.tmp_bytes = std::min<std::uint64_t>(ram / 4, 8ull << 30);
  return l;
}

SandboxSpec default_sandbox_spec(const fs::path& bwrap, const fs::path& workspace, const SandboxOptions& options) {
  SandboxSpec s;
  s.bwrap = bwrap;
  s.workspace = canonical_or_self(workspace);
  s.limits = options.limits ? *options.limits : default_sandbox_limits();

  // Hidden: the repository (tasks, expert solutions, build, runs), the d2k cache, the tasks folder, $HOME.
  std::vector<fs::path> hidden = {fs::path(build::source_dir), default_cache_dir()};
  if (const char* t = std::getenv("D2K_TASKS"); t && *t) hidden.emplace_back(t);
  if (const char* h = std::getenv("HOME"); h && *h) hidden.emplace_back(h);
  for (const auto& h : options.hidden) hidden.push_back(h);
  for (const auto& h : hidden) {
    if (h.empty()) continue;
    auto c = canonical_or_self(h);
    if (c == "/" || !fs::exists(c)) continue;
    s.hidden.push_back({c, fs::is_directory(c)});
  }
  auto touches_hidden = [&](const fs::path& p) {
    return std::any_of(s.hidden.begin(), s.hidden.end(),
                       [&](const SandboxHidden& h) { return within(p, h.path) || within(h.path, p); });
  };
  auto covered = [&](const fs::path& p) {
    return std::any_of(s.binds.begin(), s.binds.end(), [&](const SandboxBind& b) { return within(p, b.path); });
  };

  // The system, read-only. Merged-/usr links stay links.
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    auto st = fs::symlink_status(top, ec);
    if (ec || !fs::exists(st)) continue;
    if (fs::is_symlink(st))
      s.symlinks.emplace_back(fs::read_symlink(top, ec).string(), top);
    else
      s.binds.push_back({top, false});
  }
  for (const char* dir : {"/usr", "/etc", "/opt", "/sys"})
    if (fs::is_directory(dir)) s.binds.push_back({dir, false});

  // The Python environment: its venv explicitly (it lives in the hidden repository), then whatever of its
  // sys.path the system binds do not show, unless that would show a hidden path.
  auto venv = venv_root();
  if (venv) s.binds.push_back({*venv, false});
  for (const auto& p : python_paths()) {
    auto c = canonical_or_self(p);
    if (!covered(p) && !covered(c) && !touches_hidden(c)) s.binds.push_back({c, false});
  }
  // The CUDA toolkit of the nvcc on PATH (or $CUDA_HOME), when the system binds do not show it.
  std::optional<fs::path> nvcc_bin;
  if (auto nvcc = which("nvcc")) {
    nvcc_bin = nvcc->parent_path();
    auto root = canonical_or_self(*nvcc).parent_path().parent_path();
    if (!covered(root) && !touches_hidden(root)) s.binds.push_back({root, false});
  }
  if (const char* ch = std::getenv("CUDA_HOME"); ch && *ch) {
    auto root = canonical_or_self(ch);
    if (fs::is_directory(root) && !covered(root) && !touches_hidden(root)) s.binds.push_back({root, false});
  }
  for (const auto& p : options.read_only) s.binds.push_back({canonical_or_self(p), false});

  s.devices = gpu_devices();

  // The environment: the allow-list of the parent's, then HOME, TMPDIR, PATH (the venv's bin first).
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  auto allow = default_env_allow_list();
  allow.insert(allow.end(), options.env_allow.begin(), options.env_allow.end());
  const char* parent_path = std::getenv("PATH");
  std::string path = parent_path && *parent_path ? parent_path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  if (nvcc_bin) path = nvcc_bin->string() + ":" + path;
  std::vector<std::pair<std::string, std::string>> overrides = {{"HOME", s.workspace.string()}, {"TMPDIR", "/tmp"}};
  if (venv) {
    path = (*venv / "bin").string() + ":" + path;
    overrides.emplace_back("VIRTUAL_ENV", venv->string());
  }
  overrides.emplace_back("PATH", path);
  s.env = filter_environment(env, allow, overrides);
  return s;
}

BwrapCommandRunner::BwrapCommandRunner(fs::path bwrap, SandboxOptions options)
    : bwrap_(std::move(bwrap)), options_(std::move(options)) {
  if (::geteuid() != 0) return;
  uid_ = options_.run_as_uid >= 0 ? options_.run_as_uid : sandbox_uid_base + (::getpid() % 65536);
  gid_ = options_.run_as_gid >= 0 ? options_.run_as_gid : uid_;
  if (uid_ == 0) uid_ = gid_ = -1;  // asked to stay root: no switch (and no process limit)
}

SandboxSpec BwrapCommandRunner::spec_for(const fs::path& workspace) const {
  auto spec = default_sandbox_spec(bwrap_, workspace, options_);
  if (uid_ >= 0) {
    spec.run_as = {uid_, gid_};
    for (const char* k : {"USER", "LOGNAME"}) {
      std::erase_if(spec.env, [&](const auto& kv) { return kv.first == k; });
      spec.env.emplace_back(k, "d2k");
    }
  }
  return spec;
}

CommandResult BwrapCommandRunner::run(const std::string& command, const fs::path& cwd, std::chrono::seconds timeout,
                                      const OutputLimits& limits) {
  auto spec = spec_for(cwd);
  ProcessSpec p;
  p.path = bwrap_.string();
  p.argv = bwrap_argv(spec, {"/bin/bash", "-c", command});
  p.argv[0] = "bwrap";
  // bwrap itself gets a minimal environment too (the sandbox's is set with --clearenv/--setenv).
  std::vector<std::string> env;
  for (const auto& [k, v] : bwrap_environment(bwrap_)) env.push_back(k + "=" + v);
  p.env = env;
  p.cwd = spec.workspace;
  if (uid_ >= 0) hand_over(spec.workspace, static_cast<uid_t>(uid_), static_cast<gid_t>(gid_));
  return run_process(p, timeout, limits);
}

std::optional<std::string> probe_bwrap(const SandboxOptions& options) {
  fs::path bwrap = options.bwrap;
  if (bwrap.empty()) {
    auto found = find_bwrap();
    if (!found)
      return fmt::format("bwrap (bubblewrap) was not found on PATH nor at {}",
                         (fs::path(build::source_dir) / ".deps" / "usr" / "bin" / "bwrap").string());
    bwrap = *found;
  }
  std::random_device rd;
  auto dir = fs::temp_directory_path() / fmt::format("d2k-sandbox-probe-{}-{}", ::getpid(), rd());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fmt::format("cannot create {}: {}", dir.string(), ec.message());
  BwrapCommandRunner runner(bwrap, options);
  auto r = runner.run("exit 0", dir, std::chrono::seconds(30), OutputLimits{4096, 4096});
  fs::remove_all(dir, ec);
  if (!r.started) return fmt::format("{} could not start: {}", bwrap.string(), r.error);
  if (r.timed_out) return fmt::format("{} did not finish a trivial command in 30 s", bwrap.string());
  if (!r.exited || r.exit_code != 0) {
    auto out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return fmt::format("{} cannot create a sandbox here (exit {}): {}", bwrap.string(),
                       r.exited ? std::to_string(r.exit_code) : "by signal " + std::to_string(r.signal),
                       out.empty() ? "(no output)" : out);
  }
  return std::nullopt;
}

std::unique_ptr<CommandRunner> make_command_runner(const SandboxOptions& options, std::string* description) {
  if (options.kind == SandboxKind::none) {
    if (description)
      *description = "no sandbox (--sandbox none): bash runs as d2k's own user with its environment, network and "
                     "view of the files";
    return std::make_unique<LocalCommandRunner>();
  }
  fs::path bwrap = options.bwrap;
  if (bwrap.empty()) {
    if (auto found = find_bwrap()) bwrap = *found;
  }
  if (auto why = probe_bwrap(options)) {
    throw SandboxUnavailable(fmt::format(
        "the bubblewrap sandbox is not usable: {}. Install bubblewrap (apt-get install bubblewrap; on a machine "
        "without a package registry, scripts/device-deps.sh unpacks it into .deps/) or pass --sandbox none to run "
        "the agent's commands without a sandbox",
        *why));
  }
  auto runner = std::make_unique<BwrapCommandRunner>(bwrap, options);
  if (description) {
    auto limits = options.limits ? *options.limits : default_sandbox_limits();
    *description = fmt::format(
        "bubblewrap sandbox ({}{}): no network, workspace read-write, system read-only, {} GPU device nodes; "
        "limits: {} processes, {} MiB data, {} MiB files, {} s CPU",
        bwrap.string(), runner->run_as_uid() >= 0 ? fmt::format(", as uid {}", runner->run_as_uid()) : "",
        gpu_devices().size(), limits.processes, limits.memory_bytes >> 20, limits.file_bytes >> 20,
        limits.cpu_seconds);
  }
  return runner;
}

}  // namespace d2k::agent
