#pragma once
// Helpers shared by verb handlers: CLI11 parsing of an argument vector, loading the suite.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "task/manifest.hpp"
#include "task/suite.hpp"

namespace d2k::cli {

// Parses args with app; on --help prints it and returns 0, on errors prints them and returns kUsage.
std::optional<int> parse_args(CLI::App& app, const std::vector<std::string>& args);

// Loads the suite at root (or the default), printing diagnostics to stderr on failure.
std::optional<Suite> load_suite_or_report(const std::string& root);

void print_diagnostics(const Diagnostics& d);

// The task named by a TASK argument (a path to a task folder, or a name, folder or number in the suite at
// `root`), loaded. On failure prints why (as `d2k VERB: ...`) and sets `rc` to the verb's exit code.
std::optional<Task> load_task_arg(const std::string& root, const std::string& id, std::string_view verb, int& rc);

// A --guidance value with the levels it depends on; on failure prints why and sets `rc`.
std::optional<std::vector<std::string>> guidance_levels_arg(const Task& task, const std::string& arg,
                                                            std::string_view verb, int& rc);

// d2k-worker, beside the running d2k binary.
std::filesystem::path worker_path();

}  // namespace d2k::cli
