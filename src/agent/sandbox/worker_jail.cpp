#include "agent/sandbox/worker_jail.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <mutex>

namespace d2k::agent {

namespace fs = std::filesystem;

std::optional<WorkerSandboxMode> parse_worker_sandbox_mode(const std::string& text) {
  if (text == "auto") return WorkerSandboxMode::automatic;
  if (text == "bwrap") return WorkerSandboxMode::bwrap;
  if (text == "none") return WorkerSandboxMode::none;
  return std::nullopt;
}

SandboxLimits worker_sandbox_limits() {
  auto l = default_sandbox_limits();
  l.file_bytes = 64ull << 30;
  l.cpu_seconds = 0;
  l.processes = 4096;  // threads count too: torch's pools, Triton's compiler
  return l;
}

WorkerLaunch jail_worker(const fs::path& bwrap, const WorkerLaunch& launch, const SandboxLimits& limits) {
  SandboxOptions o;
  o.limits = limits;
  auto spec = default_sandbox_spec(bwrap, launch.home, o);
  std::error_code ec;
  for (const auto& p : launch.readable) spec.binds.push_back({fs::weakly_canonical(p, ec), false});
  for (const auto& p : launch.writable) spec.binds.push_back({fs::weakly_canonical(p, ec), true});
  spec.env.assign(launch.env.begin(), launch.env.end());  // the worker's own environment, nothing else
  if (::geteuid() == 0 && launch.uid >= 0) spec.run_as = {launch.uid, launch.uid};
  spec.hostname = "d2k-worker";
  WorkerLaunch out = launch;
  out.argv = bwrap_argv(spec, launch.argv);
  out.env = bwrap_environment(bwrap);
  return out;
}

void confine_solution_worker(EvalOptions& opt, WorkerSandboxMode mode) {
  opt.jail.reset();
  if (mode == WorkerSandboxMode::none) {
    opt.jail_note = "not asked for (--worker-sandbox none)";
    return;
  }
  // One probe per process: an agent run evaluates many times.
  static std::mutex m;
  static std::optional<std::pair<fs::path, std::string>> probed;  // (bwrap, why not)
  {
    std::lock_guard lock(m);
    if (!probed) {
      auto found = find_bwrap();
      SandboxOptions o;
      o.limits = worker_sandbox_limits();
      if (!found)
        probed.emplace(fs::path(), "bwrap (bubblewrap) is not installed");
      else if (auto why = probe_bwrap(o))
        probed.emplace(*found, *why);
      else
        probed.emplace(*found, "");
    }
  }
  if (!probed->second.empty()) {
    if (mode == WorkerSandboxMode::bwrap)
      throw SandboxUnavailable(fmt::format("the solution worker's sandbox is not usable: {}. Install bubblewrap "
                                           "(or scripts/device-deps.sh) or pass --worker-sandbox auto|none",
                                           probed->second));
    opt.jail_note = probed->second;
    return;
  }
  WorkerJail j;
  j.name = "bwrap";
  j.required = mode == WorkerSandboxMode::bwrap;
  fs::path bwrap = probed->first;
  auto limits = worker_sandbox_limits();
  j.wrap = [bwrap, limits](const WorkerLaunch& l) { return jail_worker(bwrap, l, limits); };
  opt.jail = std::move(j);
}

}  // namespace d2k::agent
