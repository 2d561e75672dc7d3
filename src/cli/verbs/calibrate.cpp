// d2k calibrate: measure the GPU's ceilings for speed-of-light figures, cached per device.
#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "eval/cuda_build.hpp"
#include "eval/evaluator.hpp"

namespace d2k::cli {

std::filesystem::path worker_path();

int run_calibrate(const std::vector<std::string>& args) {
  CLI::App app{"Measure the GPU's copy bandwidth and dense bf16, fp16 and fp32 matrix rates (cold, with the "
               "evaluator's timer) and cache them per device; traces then report % of speed-of-light.",
               "d2k calibrate"};
  bool force = false;
  app.add_flag("--force", force, "measure again even if this device has a cached calibration");
  if (auto rc = parse_args(app, args)) return *rc;
  EvalOptions opt;
  opt.worker = worker_path();
  auto rec = calibrate_device(opt, force);
  const auto& env = rec["environment"];
  fmt::print("{} ({} SMs)\n", env.value("gpu", "?"), env.value("sm_count", 0));
  fmt::print("  copy bandwidth   {:8.0f} GB/s (bytes read + written)\n", rec.value("copy_gb_per_s", 0.0));
  for (const char* k : {"bf16", "fp16", "fp32"})
    fmt::print("  {} matmul      {:8.1f} TFLOP/s\n", k, rec.value(std::string(k) + "_tflop_per_s", 0.0));
  fmt::print("cached in {}\n", (default_cache_dir() / "calibration").string());
  return kOk;
}

}  // namespace d2k::cli
