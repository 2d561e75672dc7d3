#pragma once
// Helpers shared by verb handlers: CLI11 parsing of an argument vector, loading the suite.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "task/suite.hpp"

namespace d2k::cli {

// Parses args with app; on --help prints it and returns 0, on errors prints them and returns kUsage.
std::optional<int> parse_args(CLI::App& app, const std::vector<std::string>& args);

// Loads the suite at root (or the default), printing diagnostics to stderr on failure.
std::optional<Suite> load_suite_or_report(const std::string& root);

void print_diagnostics(const Diagnostics& d);

// d2k-worker, beside the running d2k binary.
std::filesystem::path worker_path();

}  // namespace d2k::cli
