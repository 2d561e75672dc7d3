#pragma once
// The supervisor: evaluates a solution on a task's workloads through worker processes and owns the verdict.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.hpp"
#include "eval/compare.hpp"
#include "task/manifest.hpp"
#include "task/solution.hpp"

namespace d2k {

// A confinement around the solution worker on top of privilege separation (the bubblewrap sandbox, which the
// CLI supplies: agent/sandbox/worker_jail.hpp). `wrap` turns the worker's launch into the confining one.
struct WorkerLaunch {
  std::vector<std::string> argv;                  // the command
  std::map<std::string, std::string> env;         // its whole environment
  std::filesystem::path home;                     // its own folder: read-write, the working directory
  std::vector<std::filesystem::path> writable;    // also read-write (the outputs)
  std::vector<std::filesystem::path> readable;    // also read-only (inputs, the solution, the worker and harness)
  int uid = -1;                                   // the user it runs as when d2k is root, or -1
};
struct WorkerJail {
  std::string name;                                     // recorded in the trace ("bwrap")
  std::function<WorkerLaunch(const WorkerLaunch&)> wrap;  // argv and env of the confining process
  bool required = false;  // a worker that cannot start inside fails the evaluation (else it runs without)
};

// The reference's inputs and expected outputs of one task, kept for the next evaluation of the same task by a
// trusted solution (the suite's naive kernel after its expert, in one `d2k eval` run): the reference is the
// costliest part of evaluating a large task (float64 over gigabytes), and both kernels are judged on the same
// inputs. Never shared with an untrusted solution: it would meet inputs that another evaluation already saw.
struct SharedReference {
  std::string task;
  std::filesystem::path scratch;  // the evaluations' common scratch folder, removed with this object
  std::vector<int> seeds, timing_seeds;
  std::map<std::string, std::vector<nlohmann::json>> ref_files, timing_ref_files;  // workload -> {inputs, expected}
  SharedReference() = default;
  SharedReference(const SharedReference&) = delete;
  SharedReference& operator=(const SharedReference&) = delete;
  ~SharedReference();
};

struct EvalOptions {
  std::vector<std::string> workloads;   // names to run; empty: all (timed and correctness)
  bool correctness_only = false;        // only the task's correctness workloads (untimed), e.g. for known-bad solutions
  int seeds = 0;                        // 0: the task's evaluation.seeds
  bool static_checks = true;            // off only to test the runtime defenses on known cheats
  // Off only to measure what the integrity layer costs (bench/timing_agreement.py): no static checks, no kernel
  // profile, no deferred-write window, one timing input set without rotation, no bracket or floor check.
  bool defenses = true;
  bool baselines = true;                // time the PyTorch reference (eager, and torch.compile)
  bool compile_baseline = true;
  std::string timing_mode = "cold";     // cold or graph
  double max_rel_stderr = 0.005;
  double max_time_per_workload_s = 5;
  int timing_sets = 2;             // input sets of fresh seeds for the timed calls (at least 2)
  double bracket_slack_ms = 0.02;  // absolute slack of the whole-device bracket check
  std::filesystem::path worker;         // the d2k-worker binary
  std::filesystem::path scratch;        // per-evaluation files; a fresh temp folder if empty
  std::filesystem::path include_dir;    // holds d2k/solution.h
  std::filesystem::path cache_dir;      // cache root (default_cache_dir()): CUDA builds, calibrations
  std::chrono::seconds compile_timeout{300};
  std::chrono::seconds load_timeout{180};
  std::chrono::seconds call_timeout{120};   // one checked call (includes Triton's first JIT compile)
  std::chrono::seconds timing_timeout{300};
  std::chrono::seconds compile_baseline_timeout{120};  // torch.compile of the reference, then its timing
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
  // The solution worker's sandbox; without one it gets privilege separation, its own network namespace and
  // rlimits only. `jail_note` says why there is none (recorded in the trace).
  std::optional<WorkerJail> jail;
  std::string jail_note;
  std::shared_ptr<SharedReference> shared_reference;  // set: reuse (and fill) a trusted pair's reference run
};

struct Timing {
  std::vector<double> samples_ms;
  double median_ms = 0, mean_ms = 0, q1_ms = 0, q3_ms = 0, rel_stderr = 0;
  int throttled = 0;
  std::string stop_reason;
  nlohmann::json raw;  // everything the worker reported
};

struct WorkloadTrace {
  std::string task, workload, solution, language, solution_hash;
  bool timed = false;
  Status status = Status::passed;
  std::string message;
  std::string skipped;  // non-empty: not run, and why (e.g. a CUDA solution without a GPU); status is moot
  std::vector<int> seeds_checked;
  std::vector<OutputCheck> checks;  // the worst seed's checks (all passing when status is passed)
  std::optional<Timing> timing;
  std::optional<Timing> eager, compiled;
  std::string compiled_skipped;
  nlohmann::json kernels;  // GPU kernels the first check call ran (a list), or why they are unknown (a string)
  double flops = 0, bytes = 0;
  std::string bound;              // memory or compute: which ceiling % of speed-of-light uses
  double ceiling = 0;             // GB/s or TFLOP/s from `d2k calibrate`; 0 when not calibrated
  nlohmann::json environment;
  nlohmann::json to_json() const;
  // Achieved share of the ceiling, from the manifest's bytes or flops; 0 when unknown.
  double pct_speed_of_light() const;
};

struct EvalResult {
  std::vector<WorkloadTrace> traces;
  nlohmann::json environment;           // the reference worker's: GPU, clocks, driver, versions
  nlohmann::json solution_environment;  // the solution worker's (its network namespace, for one)
  std::string compile_log;
  nlohmann::json violations = nlohmann::json::array();  // static check findings {rule, file, line, message}
  nlohmann::json timeline = nlohmann::json::array();    // {at_s, step}: where an evaluation's time went
  // total, solution_build (nvcc; 0 on a cache hit), torch_compile (compiling the baseline, its first call),
  // beyond_compilation (total minus both): the figure of the evaluator's overhead target
  nlohmann::json seconds = nlohmann::json::object();
  bool gpu = false;
  nlohmann::json to_json() const;
};

// Evaluates `solution` on `task`. Never throws for a bad solution: its failures are statuses in the traces.
// Throws std::runtime_error only for problems of the task or the harness (the reference fails, no worker).
EvalResult evaluate(const Task& task, const Solution& solution, const EvalOptions& opt);

// Measures the device's ceilings (copy bandwidth, dense bf16/fp16/fp32 matrix rates) in a worker and caches
// them under cache_dir/calibration/<device>.json; returns the record. Throws without a GPU.
nlohmann::json calibrate_device(const EvalOptions& opt, bool force);

// The cached calibration of the device described by `environment` (a worker's), if any.
std::optional<nlohmann::json> load_calibration(const std::filesystem::path& cache_dir, const nlohmann::json& environment);

// The geometric mean of the speedups over the eager baseline of the timed, passed workloads; 0 if none.
double geomean_speedup(const EvalResult& e);

}  // namespace d2k
