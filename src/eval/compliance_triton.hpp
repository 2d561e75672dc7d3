#pragma once
// Static checks of a Triton solution: python/d2k_static_check.py parses it with Python's own ast (it never
// imports or runs it), in a child process of the supervisor.
#include <filesystem>
#include <string>
#include <vector>

#include "eval/compliance.hpp"
#include "task/manifest.hpp"

namespace d2k {

// Throws std::runtime_error when the checker itself cannot run (no Python, a garbled answer): the caller
// must then refuse to evaluate rather than skip the checks.
std::vector<Violation> check_triton_source(const std::filesystem::path& source, const Task& task,
                                           const std::filesystem::path& scratch);

}  // namespace d2k
