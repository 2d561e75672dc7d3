// The bash tool under the real bubblewrap sandbox: no network, no writes outside the workspace, no view of the
// expert solutions or hidden paths, no secrets in the environment, limits that hold, timeouts that end the whole
// tree, and Python with torch still working. Skipped, with bwrap's reason, where no sandbox can be built (bwrap
// missing, or no permission to create namespaces, as in some unprivileged containers).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "agent/sandbox/sandbox.hpp"
#include "agent/tools/toolbox.hpp"
#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace d2k::agent;
using d2k::test::TempDir;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string unique_name(const std::string& stem) {
  std::random_device rd;
  return stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

// Probed once: the reason no sandbox can be built here, or "".
const std::string& skip_reason() {
  static const std::string why = [] {
    auto r = probe_bwrap({});
    return r ? *r : std::string();
  }();
  return why;
}

struct Sandboxed : ::testing::Test {
  TempDir tmp;
  void SetUp() override {
    if (!skip_reason().empty()) GTEST_SKIP() << "no bubblewrap sandbox on this machine: " << skip_reason();
  }
  ToolBox make(SandboxOptions o = {}) {
    ToolBoxOptions t;
    t.runner = std::shared_ptr<CommandRunner>(make_command_runner(o));
    return ToolBox(Workspace(tmp.path()), t);
  }
  ToolBox local() { return ToolBox(Workspace(tmp.path()), {}); }
  std::string content(const std::string& rel) { return d2k::read_file(tmp.path() / rel).value_or("<missing>"); }
};

// A TCP listener on 127.0.0.1 outside the sandbox.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) return;
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

TEST_F(Sandboxed, NoNetwork) {
  Listener l;
  ASSERT_GT(l.port, 0);
  std::string connect = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(l.port) + " && echo CONNECTED";
  // Control: without the sandbox the same command reaches the listener, so the check below can fail.
  auto outside = local().call("bash", {{"command", connect}});
  ASSERT_TRUE(has(outside.text, "CONNECTED")) << outside.text;

  auto tb = make();
  auto inside = tb.call("bash", {{"command", connect}});
  EXPECT_TRUE(inside.is_error) << inside.text;
  EXPECT_FALSE(has(inside.text, "CONNECTED")) << inside.text;
  EXPECT_TRUE(has(inside.text, "refused")) << inside.text;  // the sandbox's own, empty loopback

  auto world = tb.call("bash", {{"command", "exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED"}, {"timeout_s", 20}});
  EXPECT_TRUE(world.is_error) << world.text;
  EXPECT_FALSE(has(world.text, "CONNECTED")) << world.text;
  EXPECT_TRUE(has(world.text, "unreachable")) << world.text;

  auto ifaces = tb.call("bash", {{"command", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"}});
  ASSERT_FALSE(ifaces.is_error) << ifaces.text;
  EXPECT_EQ(ifaces.text, "exit code 0\nlo\n") << "only a loopback interface";
}

TEST_F(Sandboxed, WritesOnlyLandInTheWorkspace) {
  auto tb = make();
  auto kept = tb.call("bash", {{"command", "echo data > kept.txt && mkdir -p sub && echo deep > sub/f.txt"}});
  ASSERT_FALSE(kept.is_error) << kept.text;
  EXPECT_EQ(content("kept.txt"), "data\n");
  EXPECT_EQ(content("sub/f.txt"), "deep\n");

  // d2k's own writes (write_file) stay editable from inside.
  ASSERT_FALSE(tb.call("write_file", {{"path", "from_tool.txt"}, {"content", "one\n"}}).is_error);
  auto append = tb.call("bash", {{"command", "echo two >> from_tool.txt"}});
  EXPECT_FALSE(append.is_error) << append.text;
  EXPECT_EQ(content("from_tool.txt"), "one\ntwo\n");

  fs::path repo = fs::weakly_canonical(d2k::build::source_dir);
  const char* home_env = std::getenv("HOME");
  std::vector<fs::path> outside = {repo / unique_name("escape"), fs::path("/tmp") / unique_name("escape"),
                                   fs::path("/usr") / unique_name("escape"), fs::path("/etc") / unique_name("escape"),
                                   repo / ".venv" / unique_name("escape")};
  if (home_env && *home_env) outside.push_back(fs::path(home_env) / unique_name("escape"));
  for (const auto& p : outside) {
    auto r = tb.call("bash", {{"command", "echo x > '" + p.string() + "'"}});
    EXPECT_FALSE(fs::exists(p)) << p << " was written from inside: " << r.text;
    std::error_code ec;
    fs::remove(p, ec);
    if (p.parent_path() != "/tmp") {
      EXPECT_TRUE(r.is_error) << p << ": " << r.text;
    }
  }
}

TEST_F(Sandboxed, ExpertSolutionsAndTheRepositoryAreInvisible) {
  fs::path expert = fs::path(D2K_TASKS_DIR) / "001_varlen_segmented_scan" / "expert" / "solution.cu";
  ASSERT_TRUE(fs::exists(expert)) << "the test needs " << expert;
  auto tb = make();
  auto r = tb.call("bash", {{"command", "cat '" + expert.string() + "'; test -e '" + expert.string() +
                                            "' && echo VISIBLE || echo ABSENT"}});
  EXPECT_TRUE(has(r.text, "ABSENT")) << r.text;
  EXPECT_TRUE(has(r.text, "No such file")) << r.text;
  auto expert_text = d2k::read_file(expert).value_or("");
  ASSERT_GT(expert_text.size(), 100u);
  EXPECT_FALSE(has(r.text, expert_text.substr(0, 100)));

  // The repository shows nothing but the Python environment it holds.
  fs::path repo = fs::weakly_canonical(d2k::build::source_dir);
  auto ls = tb.call("bash", {{"command", "ls -A '" + repo.string() + "' 2>&1; find / -name task.toml 2>/dev/null | head"}});
  EXPECT_FALSE(has(ls.text, "tasks")) << ls.text;
  EXPECT_FALSE(has(ls.text, "src")) << ls.text;
  EXPECT_FALSE(has(ls.text, "task.toml")) << ls.text;
}

TEST_F(Sandboxed, HiddenPathsAreCoveredEvenInsideBinds) {
  // A private folder inside the workspace, hidden by the options: empty inside, intact outside.
  fs::create_directories(tmp.path() / "private");
  {
    std::ofstream(tmp.path() / "private" / "seed.txt") << "secret-seed-1234\n";
  }
  TempDir extra;
  {
    std::ofstream(extra.path() / "tool.txt") << "readable\n";
  }
  SandboxOptions o;
  o.hidden = {tmp.path() / "private"};
  o.read_only = {extra.path()};
  auto tb = make(o);
  auto r = tb.call("bash", {{"command", "cat private/seed.txt; ls -A private | wc -l"}});
  EXPECT_FALSE(has(r.text, "secret-seed-1234")) << r.text;
  EXPECT_TRUE(has(r.text, "No such file")) << r.text;
  auto ro = tb.call("bash", {{"command", "cat '" + (extra.path() / "tool.txt").string() + "' && echo y > '" +
                                             (extra.path() / "new.txt").string() + "'"}});
  EXPECT_TRUE(has(ro.text, "readable")) << ro.text;
  EXPECT_TRUE(ro.is_error) << ro.text;
  EXPECT_FALSE(fs::exists(extra.path() / "new.txt"));
  EXPECT_EQ(d2k::read_file(tmp.path() / "private" / "seed.txt").value_or(""), "secret-seed-1234\n");
}

TEST_F(Sandboxed, SecretsInTheParentEnvironmentDoNotReachTheCommand) {
  ::setenv("D2K_TEST_SECRET_TOKEN", "hunter2-token-value", 1);
  ::setenv("OPENAI_API_KEY", "sk-test-d2k-sandbox", 1);
  ::setenv("D2K_TEST_PLAIN_SETTING", "plain-value-77", 1);
  std::string cmd = "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'";
  auto outside = local().call("bash", {{"command", cmd}});
  auto tb = make();
  auto inside = tb.call("bash", {{"command", cmd}});
  ::unsetenv("D2K_TEST_SECRET_TOKEN");
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("D2K_TEST_PLAIN_SETTING");
  ASSERT_TRUE(has(outside.text, "hunter2-token-value")) << "control: the local runner inherits the environment";
  for (const char* v : {"hunter2-token-value", "sk-test-d2k-sandbox", "plain-value-77"})
    EXPECT_FALSE(has(inside.text, v)) << v << " reached the sandbox:\n" << inside.text;
  EXPECT_TRUE(has(inside.text, "HOME=" + fs::weakly_canonical(tmp.path()).string())) << inside.text;
  EXPECT_TRUE(has(inside.text, "PATH=")) << inside.text;
}

TEST_F(Sandboxed, WorkspaceUnderPrivateFoldersWorks) {
  // A workspace of mode 0700 under a 0700 folder (pytest's tmp_path, a home folder): bound and entered all the same.
  fs::path ws = tmp.path() / "private" / "ws";
  fs::create_directories(ws);
  fs::permissions(tmp.path() / "private", fs::perms::owner_all);
  fs::permissions(ws, fs::perms::owner_all);
  ToolBoxOptions t;
  t.runner = std::shared_ptr<CommandRunner>(make_command_runner({}));
  ToolBox tb(Workspace(ws), t);
  auto r = tb.call("bash", {{"command", "pwd && echo ok > f.txt && cat f.txt"}});
  EXPECT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(has(r.text, fs::weakly_canonical(ws).string() + "\nok\n")) << r.text;
  EXPECT_EQ(d2k::read_file(ws / "f.txt").value_or(""), "ok\n");
}

TEST_F(Sandboxed, NoCapabilitiesAndNotRoot) {
  auto tb = make();
  auto r = tb.call("bash", {{"command", "grep CapEff /proc/self/status; id -u; hostname"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(has(r.text, "CapEff:\t0000000000000000")) << r.text;
  EXPECT_TRUE(has(r.text, "d2k-sandbox")) << r.text;
  if (::geteuid() == 0) {
    auto uid = std::to_string(sandbox_uid_base + ::getpid() % 65536);
    EXPECT_TRUE(has(r.text, "\n" + uid + "\n")) << "as root the command runs as uid " << uid << ": " << r.text;
    auto owner = tb.call("bash", {{"command", "touch mine && stat -c %u mine"}});
    EXPECT_TRUE(has(owner.text, uid)) << owner.text;
  }
}

SandboxOptions small_limits() {
  SandboxOptions o;
  SandboxLimits l;
  l.processes = 64;
  l.file_bytes = 1 << 20;
  l.memory_bytes = 1ull << 30;
  l.cpu_seconds = 2;
  l.open_files = 256;
  l.tmp_bytes = 2 << 20;
  o.limits = l;
  return o;
}

TEST_F(Sandboxed, ProcessLimitStopsForking) {
  auto tb = make(small_limits());
  auto r = tb.call("bash", {{"command",
                             "python3 -c \"\nimport os, time\nn = 0\ntry:\n    for i in range(500):\n"
                             "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
                             "        n += 1\nexcept OSError as e:\n    print('blocked after', n)\n\""},
                            {"timeout_s", 60}});
  EXPECT_TRUE(has(r.text, "blocked after")) << r.text;
  auto at = r.text.find("blocked after ");
  if (at != std::string::npos) {
    EXPECT_LT(std::stoi(r.text.substr(at + 14)), 64) << r.text;
  }

  // A fork bomb ends with the call (the timeout), and the machine can still start processes after it.
  auto t0 = std::chrono::steady_clock::now();
  auto bomb = tb.call("bash", {{"command", "b() { b | b & }; b"}, {"timeout_s", 3}});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15)) << bomb.text.substr(0, 500);
  auto after = tb.call("bash", {{"command", "echo alive"}});
  EXPECT_FALSE(after.is_error) << after.text;
}

TEST_F(Sandboxed, FileSizeMemoryAndCpuLimitsHold) {
  auto tb = make(small_limits());
  auto big = tb.call("bash", {{"command", "head -c 3000000 /dev/zero > big.bin"}});
  EXPECT_TRUE(big.is_error) << big.text;
  ASSERT_TRUE(fs::exists(tmp.path() / "big.bin"));
  EXPECT_LE(fs::file_size(tmp.path() / "big.bin"), 1u << 20);

  auto mem = tb.call("bash", {{"command", "python3 -c 'b = bytearray(3 << 30); print(\"ALLOCATED\")'"}});
  EXPECT_TRUE(mem.is_error) << mem.text;
  EXPECT_TRUE(has(mem.text, "MemoryError")) << mem.text;
  EXPECT_FALSE(has(mem.text, "ALLOCATED")) << mem.text;

  auto t0 = std::chrono::steady_clock::now();
  auto cpu = tb.call("bash", {{"command", "bash -c 'while :; do :; done'; echo ended $?"}, {"timeout_s", 60}});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << cpu.text;
  EXPECT_TRUE(has(cpu.text, "ended 137") || has(cpu.text, "ended 152")) << cpu.text;  // SIGKILL or SIGXCPU

  auto tmpfs = tb.call("bash", {{"command", "head -c 800000 /dev/zero > /tmp/a && head -c 800000 /dev/zero > /tmp/b "
                                            "&& head -c 800000 /dev/zero > /tmp/c && echo FITS"}});
  EXPECT_FALSE(has(tmpfs.text, "FITS")) << "a 2 MiB /tmp holds 2.4 MB: " << tmpfs.text;
}

TEST_F(Sandboxed, TimeoutEndsTheWholeTreeAndBackgroundJobsEndWithTheCall) {
  auto tb = make();
  auto t0 = std::chrono::steady_clock::now();
  auto r = tb.call("bash", {{"command", "echo started; (sleep 3; echo late > late.txt) & sleep 30"}, {"timeout_s", 1}});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(6));
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(has(r.text, "timed out after 1 s")) << r.text;
  EXPECT_TRUE(has(r.text, "started")) << r.text;

  auto bg = tb.call("bash", {{"command", "(sleep 2; echo bg > bg.txt) & echo quick"}});
  EXPECT_FALSE(bg.is_error) << bg.text;
  EXPECT_TRUE(has(bg.text, "quick")) << bg.text;
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_FALSE(fs::exists(tmp.path() / "late.txt")) << "the timed-out command's background job lived on";
  EXPECT_FALSE(fs::exists(tmp.path() / "bg.txt")) << "a background job outlived its call";
}

TEST_F(Sandboxed, PythonWithTorchAndTheToolchainWork) {
  auto tb = make();
  auto r = tb.call("bash", {{"command", "python3 -c 'import sys, torch, triton; print(sys.prefix); "
                                        "print(\"torch\", torch.__version__, \"triton\", triton.__version__)'"},
                            {"timeout_s", 300}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(has(r.text, "torch ")) << r.text;
  fs::path py = d2k::build::python_executable;
  if (fs::exists(py.parent_path().parent_path() / "pyvenv.cfg")) {
    EXPECT_TRUE(has(r.text, py.parent_path().parent_path().string() + "\n")) << "python3 is the venv's: " << r.text;
  }
  if (std::system("command -v nvcc >/dev/null 2>&1") == 0) {
    auto nvcc = tb.call("bash", {{"command", "nvcc --version && printf '__global__ void k(){}\\n' > k.cu && "
                                             "nvcc -c k.cu -o k.o && echo BUILT"},
                                 {"timeout_s", 300}});
    EXPECT_TRUE(has(nvcc.text, "BUILT")) << nvcc.text;
  }
  for (const auto& e : fs::directory_iterator("/dev")) {
    auto n = e.path().filename().string();
    if (n.rfind("nvidia", 0) != 0) continue;
    auto dev = tb.call("bash", {{"command", "test -c " + e.path().string() + " && echo PRESENT"}});
    EXPECT_TRUE(has(dev.text, "PRESENT")) << e.path() << ": " << dev.text;
  }
}

}  // namespace
