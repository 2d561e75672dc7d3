#pragma once
// What an agent's workspace starts with: exactly the task's public files, and the guidance it was granted.
#include <filesystem>
#include <string>
#include <vector>

#include "task/manifest.hpp"

namespace d2k::agent {

// Copies into `workspace` (created if missing): TASK.md (the rendered prompt), README.md, reference.py,
// template/solution.{py,cu} for the allowed languages, guidance/<level>.md for `levels`, and d2k/solution.h
// (the CUDA ABI, so `#include "d2k/solution.h"` builds with -I.). Never the expert, naive or wrong solutions.
// Existing files are left alone (a resumed workspace keeps the agent's work). Returns the files written.
std::vector<std::string> populate_workspace(const Task& task, const std::vector<std::string>& levels,
                                            const std::filesystem::path& include_dir,
                                            const std::filesystem::path& workspace);

}  // namespace d2k::agent
