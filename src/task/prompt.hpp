#pragma once
// What an agent is shown for a task: `d2k show` prints it, the agent runtime sends it.
#include <string>
#include <vector>

#include "task/manifest.hpp"

namespace d2k {

// Parses a --guidance value: "none", "all", or a comma list of level ids ("L1,L3").
// Returns the requested ids; throws std::invalid_argument with a precise message.
std::vector<std::string> parse_guidance_arg(const Task& task, const std::string& arg);

// The requested levels plus every level they depend on, transitively, in level order.
std::vector<std::string> close_guidance(const Task& task, const std::vector<std::string>& requested);

// The full prompt: description, interface, workloads, requirements, templates, and the given guidance levels.
std::string render_prompt(const Task& task, const std::vector<std::string>& levels);

// A task README up to the line `<!-- d2k:maintainers -->`: what follows it (measured figures of the expert and
// naive solutions) is for maintainers and never shown to agents.
inline constexpr const char* kMaintainersMarker = "<!-- d2k:maintainers -->";
std::string public_readme(const std::string& readme);

}  // namespace d2k
