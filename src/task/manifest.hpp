#pragma once
// The in-memory form of a task folder's task.toml (docs/TASK_FORMAT.md).
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"
#include "core/dtype.hpp"

namespace d2k {

struct TensorSpec {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::string> shape;  // one expression per dimension
  std::string description;
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double matched_ratio = 1.0;
  double atol_norm = 0;          // atol += atol_norm * rms(expected)
  std::string check = "allclose";  // or "custom"
};

struct OutputSpec : TensorSpec {
  Tolerance tol;
};

struct ParamSpec {
  std::string name;
  DType dtype = DType::float32;
  double value = 0;  // bools as 0/1, integers exactly up to 2^53
  std::string description;
};

struct Workload {
  std::string name;
  std::map<std::string, long long, std::less<>> axes;
  std::map<std::string, double, std::less<>> params;  // overrides of ParamSpec::value
  bool timed = true;  // false: a correctness-only workload
  int line = 0;
};

struct Requirements {
  std::vector<std::string> languages;
  std::string text;
  std::vector<std::string> forbidden_calls;
  std::vector<std::string> forbidden_libraries;
  std::vector<std::string> allowed_torch_ops;
};

struct Performance {
  std::string flops;
  std::string bytes;
  std::string bound = "memory";
  std::string compute_dtype = "fp32";
  // What the expert solution must reach on the GPU (issue 8): the geometric-mean speedup over eager, and the
  // share of speed-of-light on the largest workload.
  double target_speedup = 3.0;
  double target_sol = 0.4;
};

struct GuidanceLevel {
  std::string id;  // L1, L2, L3
  std::string title;
  std::vector<std::string> depends;
};

struct Evaluation {
  int seeds = 3;
  std::string reference_precision = "float64";
};

struct Task {
  std::filesystem::path dir;
  std::string folder;  // NNN_name
  int number = 0;
  int schema = 1;
  std::string name, summary, category;
  std::map<std::string, std::string, std::less<>> axes;  // name -> description
  std::vector<std::string> constraints;
  std::vector<TensorSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<ParamSpec> params;
  std::vector<Workload> workloads;    // timed
  std::vector<Workload> correctness;  // checked only
  Evaluation evaluation;
  Requirements requirements;
  Performance performance;
  std::vector<GuidanceLevel> guidance;  // in level order

  const GuidanceLevel* level(std::string_view id) const;
  const Workload* workload(std::string_view name) const;  // either list
  // Axis values plus params of a workload, for expression evaluation.
  std::map<std::string, double, std::less<>> vars(const Workload& w) const;
};

constexpr int kSchemaVersion = 1;
constexpr const char* kManifestFile = "task.toml";

// Parses `text` as a task.toml. Structural problems (syntax, types, unknown keys, missing keys) become
// diagnostics naming `file`; the result is empty when any were found.
std::optional<Task> parse_manifest(const std::string& text, const std::string& file, Diagnostics& diags);

// Reads dir/task.toml and parses it; fills dir, folder and number from the folder name.
std::optional<Task> load_task(const std::filesystem::path& dir, Diagnostics& diags);

}  // namespace d2k
