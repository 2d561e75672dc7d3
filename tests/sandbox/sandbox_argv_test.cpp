// The sandbox's pure half: the bwrap command line built from a spec, the limits script, the environment filter;
// and the factory's choices that need no working bwrap. These run everywhere.
#include <gtest/gtest.h>

#include <algorithm>

#include "agent/sandbox/sandbox.hpp"
#include "d2k/build_info.hpp"

namespace fs = std::filesystem;
using namespace d2k::agent;

namespace {

using Argv = std::vector<std::string>;

// Index of the first occurrence of the consecutive run `seq` in `a`, or -1.
long find_seq(const Argv& a, const Argv& seq) {
  for (std::size_t i = 0; i + seq.size() <= a.size(); ++i)
    if (std::equal(seq.begin(), seq.end(), a.begin() + static_cast<long>(i))) return static_cast<long>(i);
  return -1;
}

long index_of(const Argv& a, const std::string& s) { return find_seq(a, {s}); }

SandboxSpec sample() {
  SandboxSpec s;
  s.bwrap = "/usr/bin/bwrap";
  s.workspace = "/work/ws";
  s.binds = {{"/usr", false}, {"/opt", false}, {"/opt/repo/.venv", false}};
  s.symlinks = {{"usr/bin", "/bin"}};
  s.hidden = {{"/opt/repo", true}, {"/home/me", true}, {"/opt/secret.txt", false}};
  s.devices = {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-caps/nvidia-cap1"};
  s.env = {{"PATH", "/opt/repo/.venv/bin:/usr/bin"}, {"HOME", "/work/ws"}};
  return s;
}

TEST(SandboxArgv, NamespacesCapabilitiesAndSession) {
  auto a = bwrap_argv(sample(), {"/bin/bash", "-c", "echo hi"});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0], "/usr/bin/bwrap");
  for (const char* flag : {"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"})
    EXPECT_GE(index_of(a, flag), 0) << flag;
  EXPECT_GE(find_seq(a, {"--cap-drop", "ALL"}), 0);
  EXPECT_LT(index_of(a, "--share-net"), 0);
  EXPECT_GE(find_seq(a, {"--proc", "/proc"}), 0);
  EXPECT_GE(find_seq(a, {"--dev", "/dev"}), 0);
  EXPECT_GE(find_seq(a, {"--tmpfs", "/tmp"}), 0);
  EXPECT_GE(find_seq(a, {"--symlink", "usr/bin", "/bin"}), 0);
}

TEST(SandboxArgv, AsRootBwrapBuildsTheSandboxAndTheCommandDropsToItsUser) {
  auto s = sample();
  s.run_as = std::pair<long, long>{1073741900, 1073741901};
  s.limits.processes = 64;
  auto a = bwrap_argv(s, {"/bin/bash", "-c", "id"});
  for (const char* flag : {"--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                           "--new-session"})
    EXPECT_GE(index_of(a, flag), 0) << flag;
  // No user namespace: it would map root only, and the switch below needs the host's uids.
  EXPECT_LT(index_of(a, "--unshare-all"), 0);
  EXPECT_LT(index_of(a, "--unshare-user"), 0);
  long drop = find_seq(a, {"--cap-drop", "ALL"});
  ASSERT_GE(drop, 0);
  EXPECT_GT(find_seq(a, {"--cap-add", "CAP_SETUID"}), drop);
  EXPECT_GT(find_seq(a, {"--cap-add", "CAP_SETGID"}), drop);
  EXPECT_EQ(std::count(a.begin(), a.end(), "--cap-add"), 2);
  long sep = index_of(a, "--");
  ASSERT_GE(sep, 0);
  EXPECT_EQ(Argv(a.begin() + sep + 1, a.begin() + sep + 9),
            (Argv{"/usr/bin/setpriv", "--reuid", "1073741900", "--regid", "1073741901", "--clear-groups", "--",
                  "/bin/bash"}));
  const auto& script = a[sep + 10];
  EXPECT_EQ(script.rfind("cd -- \"$1\" || exit 125; shift; ", 0), 0u) << "the shell enters the workspace: " << script;
  EXPECT_NE(script.find("ulimit -u 64"), std::string::npos) << "limits are set after the switch";
  EXPECT_EQ(a[sep + 11], "d2k-sandbox");
  EXPECT_EQ(a[sep + 12], "/work/ws");
  EXPECT_EQ(Argv(a.begin() + sep + 13, a.end()), (Argv{"/bin/bash", "-c", "id"}));
  EXPECT_LT(index_of(a, "--chdir"), 0) << "bwrap, without capabilities, may not be able to enter the workspace";
}

TEST(SandboxArgv, WorkspaceIsTheOnlyWritableBindAndTheCwd) {
  auto a = bwrap_argv(sample(), {"/bin/true"});
  EXPECT_GE(find_seq(a, {"--bind", "/work/ws", "/work/ws"}), 0);
  EXPECT_GE(find_seq(a, {"--chdir", "/work/ws"}), 0);
  EXPECT_GE(find_seq(a, {"--ro-bind-try", "/usr", "/usr"}), 0);
  EXPECT_GE(find_seq(a, {"--ro-bind-try", "/opt/repo/.venv", "/opt/repo/.venv"}), 0);
  EXPECT_LT(index_of(a, "--bind-try"), 0);
  EXPECT_EQ(std::count(a.begin(), a.end(), "--bind"), 1);
  // The root is read-only once everything is mounted; the command follows "--".
  long ro = find_seq(a, {"--remount-ro", "/"});
  long sep = index_of(a, "--");
  ASSERT_GE(ro, 0);
  ASSERT_GT(sep, ro);
  EXPECT_GT(ro, find_seq(a, {"--bind", "/work/ws", "/work/ws"}));
  EXPECT_EQ(a.back(), "/bin/true");
}

TEST(SandboxArgv, HiddenPathsAreCoveredBetweenTheBindsAroundThem) {
  auto a = bwrap_argv(sample(), {"/bin/true"});
  long opt = find_seq(a, {"--ro-bind-try", "/opt", "/opt"});
  long repo = find_seq(a, {"--tmpfs", "/opt/repo"});
  long venv = find_seq(a, {"--ro-bind-try", "/opt/repo/.venv", "/opt/repo/.venv"});
  ASSERT_GE(opt, 0);
  ASSERT_GE(repo, 0) << "a hidden folder under a bind is covered";
  EXPECT_LT(opt, repo);
  EXPECT_LT(repo, venv) << "the venv inside the hidden repository is bound on top of the cover";
  EXPECT_GE(find_seq(a, {"--ro-bind", "/dev/null", "/opt/secret.txt"}), 0) << "a hidden file is covered by /dev/null";
  // /home/me is under no bind: nothing shows it, nothing to cover.
  EXPECT_LT(index_of(a, "/home/me"), 0);
}

TEST(SandboxArgv, HiddenPathInsideTheWorkspaceIsCovered) {
  auto s = sample();
  s.hidden.push_back({"/work/ws/private", true});
  s.hidden.push_back({"/work/ws", true});  // the workspace itself stays bound
  auto a = bwrap_argv(s, {"/bin/true"});
  long ws = find_seq(a, {"--bind", "/work/ws", "/work/ws"});
  long priv = find_seq(a, {"--tmpfs", "/work/ws/private"});
  ASSERT_GE(priv, 0);
  EXPECT_LT(ws, priv);
  EXPECT_LT(find_seq(a, {"--tmpfs", "/work/ws"}), 0);
}

TEST(SandboxArgv, FoldersAboveMountPointsArePassable) {
  auto s = sample();
  s.workspace = "/tmp/private/deep/ws";
  auto a = bwrap_argv(s, {"/bin/true"});
  long tmp = find_seq(a, {"--tmpfs", "/tmp"});
  long ws = find_seq(a, {"--bind", "/tmp/private/deep/ws", "/tmp/private/deep/ws"});
  for (const char* d : {"/tmp", "/tmp/private", "/tmp/private/deep", "/opt/repo", "/dev/nvidia-caps"}) {
    long i = find_seq(a, {"--perms", "0755", "--dir", d});
    ASSERT_GE(i, 0) << d;
    EXPECT_GT(i, tmp) << d << " is made after the tmpfs it lies in";
    EXPECT_LT(i, ws) << d;
  }
  EXPECT_GT(find_seq(a, {"--perms", "0755", "--dir", "/opt/repo"}), find_seq(a, {"--tmpfs", "/opt/repo"}));
  EXPECT_LT(find_seq(a, {"--dir", "/"}), 0);
}

TEST(SandboxArgv, GpuNodesAreDeviceBoundAfterTheMinimalDev) {
  auto a = bwrap_argv(sample(), {"/bin/true"});
  long dev = find_seq(a, {"--dev", "/dev"});
  for (const char* d : {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-caps/nvidia-cap1"}) {
    long i = find_seq(a, {"--dev-bind-try", d, d});
    EXPECT_GT(i, dev) << d;
  }
  EXPECT_EQ(std::count(a.begin(), a.end(), "--dev-bind-try"), 3);
}

TEST(SandboxArgv, EnvironmentIsClearedThenSet) {
  auto a = bwrap_argv(sample(), {"/bin/true"});
  long clear = index_of(a, "--clearenv");
  long path = find_seq(a, {"--setenv", "PATH", "/opt/repo/.venv/bin:/usr/bin"});
  long home = find_seq(a, {"--setenv", "HOME", "/work/ws"});
  ASSERT_GE(clear, 0);
  EXPECT_GT(path, clear);
  EXPECT_GT(home, clear);
  EXPECT_EQ(std::count(a.begin(), a.end(), "--setenv"), 2);
}

TEST(SandboxArgv, LimitsAreSetInsideBeforeTheCommand) {
  auto s = sample();
  s.limits.processes = 64;
  s.limits.file_bytes = 1 << 20;
  s.limits.memory_bytes = 512ull << 20;
  s.limits.cpu_seconds = 30;
  s.limits.open_files = 256;
  s.limits.tmp_bytes = 1 << 30;
  auto a = bwrap_argv(s, {"/bin/bash", "-c", "make"});
  long sep = index_of(a, "--");
  ASSERT_GE(sep, 0);
  ASSERT_EQ(a.size(), static_cast<std::size_t>(sep) + 8);
  EXPECT_EQ(a[sep + 1], "/bin/bash");
  EXPECT_EQ(a[sep + 2], "-c");
  const auto& script = a[sep + 3];
  for (const char* part : {"ulimit -c 0", "ulimit -u 64", "ulimit -f 1024", "ulimit -t 30", "ulimit -n 256",
                           "ulimit -d 524288", "exec \"$@\"", "exit 125"})
    EXPECT_NE(script.find(part), std::string::npos) << part << " in " << script;
  EXPECT_EQ(script, ulimit_script(s.limits) + "; exec \"$@\"");
  EXPECT_EQ(a[sep + 4], "d2k-sandbox");  // $0 of the limits script; the command is "$@"
  EXPECT_EQ(Argv(a.begin() + sep + 5, a.end()), (Argv{"/bin/bash", "-c", "make"}));
  long size = find_seq(a, {"--size", std::to_string(1 << 30), "--perms", "1777", "--tmpfs", "/tmp"});
  EXPECT_GE(size, 0);
}

TEST(SandboxArgv, NoLimitsNoWrapper) {
  auto s = sample();
  s.limits.no_core_dumps = false;
  EXPECT_EQ(ulimit_script(s.limits), "");
  auto a = bwrap_argv(s, {"/bin/true"});
  EXPECT_EQ(a[a.size() - 2], "--");
  EXPECT_LT(index_of(a, "--size"), 0);
}

TEST(SandboxEnv, SecretNamesAreRecognized) {
  for (const char* n : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_API_KEY", "GITHUB_TOKEN", "HF_TOKEN", "hf_token",
                        "AWS_ACCESS_KEY_ID", "AWS_REGION", "DB_PASSWORD", "CLIENT_SECRET", "SSH_AUTH_SOCK",
                        "GOOGLE_APPLICATION_CREDENTIALS", "SIGNING_KEY", "AZURE_OPENAI_ENDPOINT"})
    EXPECT_TRUE(is_secret_env_name(n)) << n;
  for (const char* n : {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
                        "TRITON_INTERPRET", "KEYBOARD_LAYOUT"})
    EXPECT_FALSE(is_secret_env_name(n)) << n;
  for (const auto& n : default_env_allow_list()) EXPECT_FALSE(is_secret_env_name(n)) << n;
}

TEST(SandboxEnv, FilterKeepsAllowedNonSecretsAndAppliesOverrides) {
  std::vector<std::string> environ = {"PATH=/usr/bin", "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C",
                                      "OPENAI_API_KEY=sk-x", "SOMETHING=else", "MY_TOKEN=t", "TERM=xterm",
                                      "NOEQUALS", "=bad"};
  auto env = filter_environment(environ, {"PATH", "HOME", "LANG", "LC_*", "TERM", "MY_TOKEN"},
                                {{"HOME", "/ws"}, {"TMPDIR", "/tmp"}});
  std::vector<std::pair<std::string, std::string>> want = {
      {"PATH", "/usr/bin"}, {"LANG", "C.UTF-8"}, {"LC_ALL", "C"}, {"TERM", "xterm"}, {"HOME", "/ws"}, {"TMPDIR", "/tmp"}};
  EXPECT_EQ(env, want) << "MY_TOKEN is allowed by name but still a secret; SOMETHING is not allowed";
}

TEST(SandboxKindArg, Parses) {
  EXPECT_EQ(parse_sandbox_kind("bwrap"), SandboxKind::bwrap);
  EXPECT_EQ(parse_sandbox_kind("none"), SandboxKind::none);
  EXPECT_EQ(parse_sandbox_kind("docker"), std::nullopt);
  EXPECT_EQ(parse_sandbox_kind(""), std::nullopt);
}

TEST(SandboxFactory, NoneIsTheLocalRunnerAndSaysSo) {
  SandboxOptions o;
  o.kind = SandboxKind::none;
  std::string said;
  auto r = make_command_runner(o, &said);
  ASSERT_TRUE(r);
  EXPECT_NE(dynamic_cast<LocalCommandRunner*>(r.get()), nullptr);
  EXPECT_NE(said.find("no sandbox"), std::string::npos) << said;
}

TEST(SandboxFactory, UnusableBwrapIsARefusalNamingTheWayOut) {
  SandboxOptions o;
  o.bwrap = "/nonexistent/d2k/bwrap";
  try {
    make_command_runner(o);
    FAIL() << "a bwrap that does not exist must be refused";
  } catch (const SandboxUnavailable& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bubblewrap"), std::string::npos) << m;
    EXPECT_NE(m.find("--sandbox none"), std::string::npos) << m;
    EXPECT_NE(m.find("/nonexistent/d2k/bwrap"), std::string::npos) << m;
  }
}

TEST(SandboxDefaultSpec, HidesTheRepositoryAndShowsTheVenv) {
  ::setenv("D2K_TEST_SANDBOX_API_KEY", "sk-should-not-pass", 1);
  auto s = default_sandbox_spec("/usr/bin/bwrap", fs::temp_directory_path(), {});
  ::unsetenv("D2K_TEST_SANDBOX_API_KEY");
  auto repo = fs::weakly_canonical(d2k::build::source_dir);
  EXPECT_TRUE(std::any_of(s.hidden.begin(), s.hidden.end(), [&](const auto& h) { return h.path == repo; }));
  EXPECT_FALSE(std::any_of(s.binds.begin(), s.binds.end(), [&](const auto& b) { return b.path == repo; }));
  EXPECT_FALSE(std::any_of(s.binds.begin(), s.binds.end(), [](const auto& b) { return b.writable; }));
  fs::path py = d2k::build::python_executable;
  if (fs::exists(py.parent_path().parent_path() / "pyvenv.cfg")) {
    auto venv = py.parent_path().parent_path();
    EXPECT_TRUE(std::any_of(s.binds.begin(), s.binds.end(), [&](const auto& b) { return b.path == venv; }));
  }
  bool home = false;
  for (const auto& [k, v] : s.env) {
    EXPECT_FALSE(is_secret_env_name(k)) << k;
    EXPECT_NE(v, "sk-should-not-pass");
    if (k == "HOME") home = v == fs::weakly_canonical(fs::temp_directory_path()).string();
  }
  EXPECT_TRUE(home) << "HOME is the workspace";
  EXPECT_GT(s.limits.processes, 0u);
  EXPECT_GT(s.limits.memory_bytes, 0u);
}

}  // namespace
