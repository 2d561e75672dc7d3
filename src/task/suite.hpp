#pragma once
// The suite index (tasks/suite.toml) and finding task folders by name, folder or number.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"

namespace d2k {

struct Suite {
  std::filesystem::path root;        // the tasks/ folder
  std::string version;
  std::vector<std::string> folders;  // in order
};

constexpr const char* kSuiteFile = "suite.toml";

// The tasks folder: $D2K_TASKS if set, else the source tree's tasks/.
std::filesystem::path default_tasks_root();

std::optional<Suite> load_suite(const std::filesystem::path& root, Diagnostics& diags);

// A task folder from an id: a path to a folder holding task.toml, a folder name, a task name or a number.
std::optional<std::filesystem::path> find_task_dir(const Suite& suite, const std::string& id, std::string& why);

}  // namespace d2k
