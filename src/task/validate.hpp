#pragma once
// `d2k validate`: every check a task folder must pass before the evaluator or an agent sees it.
#include <filesystem>

#include "core/diagnostics.hpp"
#include "task/manifest.hpp"
#include "task/suite.hpp"

namespace d2k {

// Checks one task folder: the manifest, the files beside it, workloads against constraints, expressions,
// guidance dependencies, expert and wrong solutions. Returns the task if the manifest parsed.
std::optional<Task> validate_task(const std::filesystem::path& dir, Diagnostics& diags);

// Semantic checks of a parsed manifest alone (no files), used by validate_task and the fuzz tests.
void check_manifest(const Task& task, const std::string& file, Diagnostics& diags);

// Checks the suite index and every task in it, including names unique across the suite.
void validate_suite(const Suite& suite, Diagnostics& diags);

}  // namespace d2k
