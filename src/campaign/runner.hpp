#pragma once
// The campaign runner (docs/CAMPAIGNS.md): the matrix models x tasks x conditions x repeats, each cell one
// `d2k agent run` child process in its own run directory, N at once with GPUs handed out (CUDA_VISIBLE_DEVICES,
// and a lock file per GPU when runs share one), every finished run written to the store in one transaction.
// Resumable: cells finished in the store are skipped, interrupted run directories resumed (`--resume`).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "campaign/config.hpp"
#include "core/diagnostics.hpp"
#include "store/store.hpp"

namespace d2k::campaign {

struct Cell {
  int index = 0;  // position in the whole matrix (models, then tasks, then conditions, then repeats)
  std::string model, task, condition;  // task: the task's name; condition: canonical
  int repeat = 0;
  std::filesystem::path task_dir, run_dir;
  std::string label() const;  // model/task/condition/rN
};

struct Shard {
  int index = 1, count = 1;  // 1-based: shard i of N takes the cells whose index % N == i - 1
};
// "i/N" with 1 <= i <= N; nullopt and `why` otherwise.
std::optional<Shard> parse_shard(const std::string& s, std::string& why);

// Resolves the matrix: the suite and each task (with the guidance levels each condition needs) and the models
// in the registry. Problems become diagnostics naming the campaign file and key; nullopt when there are any.
std::optional<std::vector<Cell>> build_matrix(const CampaignConfig& c, Diagnostics& d);
std::vector<Cell> shard_cells(const std::vector<Cell>& cells, const Shard& s);

// The GPUs present: CUDA_VISIBLE_DEVICES when set (its entries' positions), else /proc/driver/nvidia/gpus.
std::vector<int> detect_gpus();

// What a run on GPU `index` gets as CUDA_VISIBLE_DEVICES: the campaign's own CUDA_VISIBLE_DEVICES entry at that
// position when it has one (a child's variable names physical devices, not positions in the parent's list:
// under CUDA_VISIBLE_DEVICES=2,3 the run on GPU 1 must get "3", or a UUID as listed), else the index itself.
std::string visible_device(int index);

struct RunnerOptions {
  std::filesystem::path d2k_binary;   // the `d2k` the agent runs are started with
  int jobs = 0;                       // runs at once; 0: the campaign's [parallel] jobs, else one per GPU (1 without)
  std::optional<std::vector<int>> gpus;  // overrides the campaign's and the detected ones
  Shard shard;
  bool tty = false;                   // a live progress line (else plain log lines)
  std::FILE* log = stderr;
  const std::atomic<int>* signals = nullptr;  // SIGINT/SIGTERM received so far (1: stop cleanly, 2: kill)
};

struct RunnerResult {
  int cells = 0;        // in this shard
  int skipped = 0;      // already finished or failed in the store
  int finished = 0, failed = 0, interrupted = 0;  // by this invocation
  int busy = 0;         // run directories held by another process: left alone
  bool stopped = false; // a signal stopped the campaign
  bool complete() const { return finished + failed + skipped == cells; }
};

// Throws store::StoreError (the store) or std::runtime_error (a campaign stored with another protocol).
RunnerResult run_campaign(const CampaignConfig& c, const std::vector<Cell>& cells, const RunnerOptions& opt);

// Writes one run directory's outcome into the store in one transaction: submissions and their official
// evaluations not yet stored (by seq), the final submission, usage and status. Returns the run's new status.
std::string ingest_run(store::Store& st, std::int64_t run_id, const std::filesystem::path& run_dir,
                       const std::string& note = "");

}  // namespace d2k::campaign
