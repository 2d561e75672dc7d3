#pragma once
// The verdict of one (solution, workload) evaluation: the trace status enum.
#include <array>
#include <optional>
#include <string_view>

namespace d2k {

enum class Status {
  passed,
  compile_error,
  compliance_violation,
  incorrect_shape,
  incorrect_dtype,
  incorrect_numerics,
  runtime_error,
  timeout,
};

inline constexpr std::array<std::string_view, 8> kStatusNames{
    "passed",           "compile_error",      "compliance_violation", "incorrect_shape",
    "incorrect_dtype",  "incorrect_numerics", "runtime_error",        "timeout"};

inline std::string_view status_name(Status s) { return kStatusNames.at(static_cast<std::size_t>(s)); }

inline std::optional<Status> parse_status(std::string_view name) {
  for (std::size_t i = 0; i < kStatusNames.size(); ++i)
    if (kStatusNames[i] == name) return static_cast<Status>(i);
  return std::nullopt;
}

}  // namespace d2k
