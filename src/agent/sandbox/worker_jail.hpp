#pragma once
// The evaluator's solution worker inside the bubblewrap sandbox, through the evaluator's seam (EvalOptions::jail):
// the worker sees the system read-only, its own folder, its inputs and outputs, the solution snapshot, the worker
// binary and the harness; not the repository (tasks, expert solutions), the d2k cache, the expected outputs or
// $HOME; no network; resource limits. docs/SANDBOX.md.
#include <filesystem>
#include <optional>
#include <string>

#include "agent/sandbox/sandbox.hpp"
#include "eval/evaluator.hpp"

namespace d2k::agent {

enum class WorkerSandboxMode { automatic, bwrap, none };

// "auto", "bwrap" or "none"; nullopt for anything else.
std::optional<WorkerSandboxMode> parse_worker_sandbox_mode(const std::string& text);

// The limits inside the worker's sandbox: the agent's defaults, with files as large as a workload's outputs
// (64 GiB) and no CPU-time limit (the supervisor's timeouts bound each call).
SandboxLimits worker_sandbox_limits();

// `launch` wrapped in bwrap: argv runs bwrap, env is bwrap's own; the worker's environment is set inside.
WorkerLaunch jail_worker(const std::filesystem::path& bwrap, const WorkerLaunch& launch, const SandboxLimits& limits);

// Sets opt.jail (bwrap, probed once per process) or opt.jail_note (why there is none). automatic: bwrap when it
// can build a sandbox here, else none with the reason; bwrap: required, throws SandboxUnavailable when it cannot.
void confine_solution_worker(EvalOptions& opt, WorkerSandboxMode mode);

}  // namespace d2k::agent
