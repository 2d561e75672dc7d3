#pragma once
// A solution folder: exactly one of solution.py (Triton) or solution.cu (CUDA C++), and an optional solution.toml.
#include <filesystem>
#include <optional>
#include <string>

#include "core/diagnostics.hpp"
#include "core/status.hpp"

namespace d2k {

enum class Language { triton, cuda };
std::string_view language_name(Language l);

struct Solution {
  std::filesystem::path dir;
  std::filesystem::path source;  // dir/solution.py or dir/solution.cu
  Language language = Language::triton;
  std::string name;  // from solution.toml, else the folder name
  std::string description;
  std::optional<Status> expect;  // wrong/ solutions: the status the evaluator must give
};

std::optional<Solution> load_solution(const std::filesystem::path& dir, Diagnostics& diags);

}  // namespace d2k
