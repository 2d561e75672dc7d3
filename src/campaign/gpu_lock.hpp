#pragma once
// A GPU shared by several agent runs of a campaign (more runs than GPUs, docs/CAMPAIGNS.md): a lock file per GPU
// (flock), named by $D2K_GPU_LOCK in each run's environment. An official evaluation holds it exclusively; the
// agent's other GPU work (bash commands, check evaluations) holds it shared, so it waits while an official timing
// runs, and a waiting official evaluation keeps new shared holders out (a turnstile file gives it precedence).
// The kernel drops the locks however the process dies.
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/tools/command_runner.hpp"

namespace d2k::campaign {

inline constexpr const char* kGpuLockEnv = "D2K_GPU_LOCK";

class GpuLock {
 public:
  enum class Mode { shared, exclusive };
  // Blocks until held. Throws std::runtime_error when the lock file cannot be opened.
  GpuLock(const std::filesystem::path& path, Mode mode);
  ~GpuLock();
  GpuLock(const GpuLock&) = delete;
  GpuLock& operator=(const GpuLock&) = delete;

  double waited_s() const { return waited_s_; }
  // {"path", "exclusive", "waited_s", "held_s", "cuda_visible_devices"}: what a trace records.
  nlohmann::json record() const;

 private:
  std::filesystem::path path_;
  Mode mode_;
  int fd_ = -1;
  double waited_s_ = 0;
  std::chrono::steady_clock::time_point acquired_;
};

// The lock $D2K_GPU_LOCK names, taken in `mode`; null (no lock) when the variable is unset or empty.
std::unique_ptr<GpuLock> lock_gpu_from_env(GpuLock::Mode mode);

// Runs each command of `inner` while holding the GPU lock shared (when $D2K_GPU_LOCK is set).
std::shared_ptr<agent::CommandRunner> gpu_shared_runner(std::shared_ptr<agent::CommandRunner> inner);

}  // namespace d2k::campaign
