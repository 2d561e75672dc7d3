#pragma once
// Synthetic campaigns for benchmarks and demos (`d2k store synth`): models x tasks x conditions x repeats runs
// with submissions, evaluator-shaped traces, judgments and usage, written through the store's ordinary write
// path. Deterministic for a seed. Figures are invented; nothing here is a measurement.
#include <cstdint>
#include <string>

#include "store/store.hpp"

namespace d2k::store {

struct SynthOptions {
  std::string campaign = "synthetic";
  int models = 5, tasks = 26, conditions = 4, repeats = 1;
  std::uint64_t seed = 1;
  bool judgments = true;
};

// Writes the campaign (one transaction per run, as a campaign runner would). Returns the campaign's id.
std::int64_t synthesize(Store& store, const SynthOptions& opt);

}  // namespace d2k::store
