#include "campaign/gpu_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace d2k::campaign {

namespace fs = std::filesystem;

namespace {

int open_lock(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw std::runtime_error("cannot open the GPU lock " + p.string() + ": " + std::strerror(errno));
  return fd;
}

void lock_fd(int fd, int op) {
  while (::flock(fd, op) != 0)
    if (errno != EINTR) throw std::runtime_error(std::string("flock: ") + std::strerror(errno));
}

}  // namespace

GpuLock::GpuLock(const fs::path& path, Mode mode) : path_(path), mode_(mode) {
  auto t0 = std::chrono::steady_clock::now();
  fd_ = open_lock(path_);
  // Turnstile: whoever waits for the GPU lock holds it, so a waiting exclusive holder keeps new shared holders out
  // (flock alone gives a writer no precedence over a stream of readers).
  int turn = open_lock(fs::path(path_.string() + ".turnstile"));
  try {
    lock_fd(turn, LOCK_EX);
    lock_fd(fd_, mode_ == Mode::exclusive ? LOCK_EX : LOCK_SH);
  } catch (...) {
    ::close(turn);
    ::close(fd_);
    throw;
  }
  ::close(turn);  // releases the turnstile
  acquired_ = std::chrono::steady_clock::now();
  waited_s_ = std::chrono::duration<double>(acquired_ - t0).count();
}

GpuLock::~GpuLock() {
  if (fd_ >= 0) ::close(fd_);
}

nlohmann::json GpuLock::record() const {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  return {{"path", path_.string()},
          {"exclusive", mode_ == Mode::exclusive},
          {"waited_s", waited_s_},
          {"held_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - acquired_).count()},
          {"cuda_visible_devices", cvd ? nlohmann::json(cvd) : nlohmann::json(nullptr)}};
}

std::unique_ptr<GpuLock> lock_gpu_from_env(GpuLock::Mode mode) {
  const char* p = std::getenv(kGpuLockEnv);
  if (!p || !*p) return nullptr;
  return std::make_unique<GpuLock>(p, mode);
}

namespace {

class SharedGpuRunner final : public agent::CommandRunner {
 public:
  explicit SharedGpuRunner(std::shared_ptr<agent::CommandRunner> inner) : inner_(std::move(inner)) {}
  agent::CommandResult run(const std::string& command, const fs::path& cwd, std::chrono::seconds timeout,
                           const agent::OutputLimits& limits) override {
    auto lock = lock_gpu_from_env(GpuLock::Mode::shared);
    return inner_->run(command, cwd, timeout, limits);
  }

 private:
  std::shared_ptr<agent::CommandRunner> inner_;
};

}  // namespace

std::shared_ptr<agent::CommandRunner> gpu_shared_runner(std::shared_ptr<agent::CommandRunner> inner) {
  const char* p = std::getenv(kGpuLockEnv);
  if (!p || !*p) return inner;
  return std::make_shared<SharedGpuRunner>(std::move(inner));
}

}  // namespace d2k::campaign
