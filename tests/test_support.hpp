#pragma once
// Shared helpers for the tests: fixture paths, temporary folders, running the d2k binary.
#include <array>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <sys/wait.h>

namespace d2k::test {

inline std::filesystem::path fixtures() { return D2K_TEST_FIXTURES; }
inline std::filesystem::path base_task() { return fixtures() / "base" / "001_toy_scale"; }

// A fresh folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("d2k_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    if (std::getenv("D2K_TEST_KEEP")) return;  // keep the files of a failing test for a look
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct RunResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line; stdout and stderr together.
inline RunResult run_shell(const std::string& command) {
  std::string cmd = command + " 2>&1";
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the d2k binary with a shell-quoted argument string.
inline RunResult run_d2k(const std::string& args, const std::string& env = "") {
  return run_shell(env + (env.empty() ? "" : " ") + "'" + std::string(D2K_BINARY) + "' " + args);
}

}  // namespace d2k::test
