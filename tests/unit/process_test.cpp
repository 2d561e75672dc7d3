#include "eval/process.hpp"

#include <gtest/gtest.h>

#include "core/files.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<ChildProcess> sh(const test::TempDir& tmp, const std::string& script) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", script},
                                        std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}},
                                        tmp.path() / "child.log");
}

TEST(Process, RequestAndResponse) {
  test::TempDir tmp;
  auto p = sh(tmp, "read line; echo \"{\\\"got\\\": $line}\" >&3; echo chatter");
  ASSERT_TRUE(p->send({{"x", 1}}));
  auto r = p->receive(5s);
  ASSERT_EQ(r.outcome, ChildProcess::Outcome::response);
  EXPECT_EQ(r.body["got"]["x"], 1);
  auto e = p->wait();
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 0);
  EXPECT_NE(p->log_tail().find("chatter"), std::string::npos);
}

TEST(Process, TimeoutThenKill) {
  test::TempDir tmp;
  auto p = sh(tmp, "sleep 30");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p->receive(300ms).outcome, ChildProcess::Outcome::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  p->kill();
  auto e = p->wait();
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGKILL);
}

TEST(Process, CrashIsClosedWithTheSignal) {
  test::TempDir tmp;
  auto p = sh(tmp, "kill -SEGV $$");
  EXPECT_EQ(p->receive(5s).outcome, ChildProcess::Outcome::closed);
  auto e = p->wait();
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_NE(e.describe().find("signal 11"), std::string::npos);
}

TEST(Process, GarbledAndExit) {
  test::TempDir tmp;
  auto p = sh(tmp, "echo 'passed!!' >&3; echo '[1,2]' >&3; exit 7");
  EXPECT_EQ(p->receive(5s).outcome, ChildProcess::Outcome::garbled);
  EXPECT_EQ(p->receive(5s).outcome, ChildProcess::Outcome::garbled);  // JSON, but not an object
  EXPECT_EQ(p->receive(5s).outcome, ChildProcess::Outcome::closed);
  auto e = p->wait();
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 7);
}

TEST(Process, GrandchildrenDieWithTheGroup) {
  test::TempDir tmp;
  auto pidfile = tmp.path() / "grandchild.pid";
  auto p = sh(tmp, "sleep 60 & echo $! > '" + pidfile.string() + "'; echo '{}' >&3; wait");
  ASSERT_EQ(p->receive(5s).outcome, ChildProcess::Outcome::response);
  p->kill();
  p->wait();
  auto pid = std::stoi(read_file(pidfile).value());
  std::this_thread::sleep_for(100ms);
  // Dead means gone, or a zombie waiting for its new parent to reap it.
  auto status = read_file("/proc/" + std::to_string(pid) + "/status").value_or("");
  bool dead = ::kill(pid, 0) != 0 || status.find("State:\tZ") != std::string::npos;
  EXPECT_TRUE(dead) << "the grandchild survived:\n" << status.substr(0, 200);
}

// A worker does not outlive d2k: when the process that started it dies (a `timeout` ending an evaluation), it is
// killed, rather than left running a hung solution on the GPU under the next evaluation.
TEST(Process, ChildDiesWithItsParent) {
  test::TempDir tmp;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {  // stands for d2k: starts a worker, reports its pid, dies without cleaning up
    ::close(fds[0]);
    auto p = sh(tmp, "echo '{}' >&3; sleep 60");
    if (p->receive(5s).outcome != ChildProcess::Outcome::response) _exit(2);
    pid_t w = p->pid();
    (void)!::write(fds[1], &w, sizeof w);
    _exit(0);  // no destructor runs: the worker is not killed by us
  }
  ::close(fds[1]);
  pid_t worker = 0;
  ASSERT_EQ(::read(fds[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(middle, &st, 0);
  bool dead = false;
  for (int i = 0; i < 50 && !dead; ++i) {
    auto status = read_file("/proc/" + std::to_string(worker) + "/status").value_or("");
    dead = ::kill(worker, 0) != 0 || status.find("State:\tZ") != std::string::npos;
    if (!dead) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(dead) << "the worker outlived the process that started it";
  if (!dead) ::kill(worker, SIGKILL);
}

}  // namespace
}  // namespace d2k
