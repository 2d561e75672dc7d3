#include "task/prompt.hpp"

#include <fmt/format.h>

#include <set>
#include <stdexcept>

#include "core/files.hpp"

namespace d2k {
namespace {

std::string trim_copy(std::string s) {
  auto b = s.find_first_not_of(" \t\n\r");
  auto e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string file_or_note(const std::filesystem::path& p) {
  auto t = read_file(p, 4u << 20);
  return t ? trim_copy(*t) : fmt::format("({} is missing)", p.filename().string());
}

std::string shape_str(const std::vector<std::string>& shape) { return "[" + fmt::format("{}", fmt::join(shape, ", ")) + "]"; }

std::string workload_line(const Workload& w) {
  std::vector<std::string> parts;
  for (const auto& [a, v] : w.axes) parts.push_back(fmt::format("{}={}", a, v));
  for (const auto& [p, v] : w.params) parts.push_back(fmt::format("{}={}", p, v));
  return fmt::format("| {} | {} |", w.name, fmt::join(parts, ", "));
}

}  // namespace

std::vector<std::string> parse_guidance_arg(const Task& task, const std::string& arg) {
  std::vector<std::string> out;
  if (arg.empty() || arg == "none") return out;
  if (arg == "all") {
    for (const auto& g : task.guidance) out.push_back(g.id);
    return out;
  }
  std::size_t start = 0;
  while (start <= arg.size()) {
    auto end = arg.find(',', start);
    auto id = trim_copy(arg.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (id.empty()) throw std::invalid_argument(fmt::format("--guidance '{}': empty level in the list", arg));
    if (!task.level(id)) {
      std::vector<std::string> ids;
      for (const auto& g : task.guidance) ids.push_back(g.id);
      throw std::invalid_argument(fmt::format("--guidance: task {} has no level '{}' (levels: {}; or none, all)",
                                              task.name, id, fmt::join(ids, ", ")));
    }
    out.push_back(id);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::vector<std::string> close_guidance(const Task& task, const std::vector<std::string>& requested) {
  std::set<std::string> seen;
  std::vector<std::string> todo(requested.begin(), requested.end());
  while (!todo.empty()) {
    auto id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    if (const auto* g = task.level(id))
      for (const auto& dep : g->depends) todo.push_back(dep);
  }
  std::vector<std::string> out;
  for (const auto& g : task.guidance)  // level order
    if (seen.count(g.id)) out.push_back(g.id);
  return out;
}

std::string public_readme(const std::string& readme) {
  std::size_t at = 0;
  while (at < readme.size()) {  // the marker counts only as a line of its own
    auto end = readme.find('\n', at);
    if (end == std::string::npos) end = readme.size();
    std::string_view line(readme.data() + at, end - at);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line == kMaintainersMarker) {
      auto kept = readme.substr(0, at);
      while (!kept.empty() && (kept.back() == '\n' || kept.back() == ' ')) kept.pop_back();
      return kept + "\n";
    }
    at = end + 1;
  }
  return readme;
}

std::string render_prompt(const Task& task, const std::vector<std::string>& levels) {
  std::string o;
  o += fmt::format("# Task {:03}: {}\n\n{}\n\n", task.number, task.name, task.summary);
  o += public_readme(file_or_note(task.dir / "README.md")) + "\n\n";

  o += "## Interface (destination-passing)\n\n";
  o += "The harness allocates every output, fills it with poison, and passes it in; your code must write all of it.\n\n";
  o += "| role | name | dtype | shape |\n| --- | --- | --- | --- |\n";
  for (const auto& t : task.inputs) o += fmt::format("| input | {} | {} | {} |\n", t.name, dtype_name(t.dtype), shape_str(t.shape));
  for (const auto& t : task.outputs) o += fmt::format("| output | {} | {} | {} |\n", t.name, dtype_name(t.dtype), shape_str(t.shape));
  for (const auto& p : task.params) o += fmt::format("| param | {} | {} | default {} |\n", p.name, dtype_name(p.dtype), p.value);
  o += "\nAxes:\n";
  for (const auto& [a, desc] : task.axes) o += fmt::format("- `{}`: {}\n", a, desc);
  if (!task.constraints.empty()) o += fmt::format("\nConstraints: {}\n", fmt::join(task.constraints, "; "));

  o += "\n## Correctness\n\n";
  for (const auto& t : task.outputs) {
    if (t.tol.check == "custom")
      o += fmt::format("- `{}`: checked by the task's own checker (see the description)\n", t.name);
    else
      o += fmt::format("- `{}`: |out - expected| <= {} + {} * |expected| on at least {}% of elements{}; NaN and Inf never pass\n",
                       t.name, t.tol.atol, t.tol.rtol, t.tol.matched_ratio * 100,
                       t.tol.atol_norm > 0 ? fmt::format(" (atol grows by {} x rms(expected))", t.tol.atol_norm) : "");
  }
  o += fmt::format("\nExpected outputs come from the reference in {}; inputs are drawn from seeds you do not know.\n",
                   task.evaluation.reference_precision);

  o += "\n## Workloads (timed)\n\n| name | values |\n| --- | --- |\n";
  for (const auto& w : task.workloads) o += workload_line(w) + "\n";
  o += "\n## Workloads (correctness only)\n\n| name | values |\n| --- | --- |\n";
  for (const auto& w : task.correctness) o += workload_line(w) + "\n";

  o += fmt::format("\n## Reference (reference.py)\n\n```python\n{}\n```\n", file_or_note(task.dir / "reference.py"));

  o += "\n## Requirements\n\n" + trim_copy(task.requirements.text) + "\n\n";
  o += fmt::format("- Languages: {}\n", fmt::join(task.requirements.languages, ", "));
  if (!task.requirements.forbidden_calls.empty())
    o += fmt::format("- Forbidden calls: {}\n", fmt::join(task.requirements.forbidden_calls, ", "));
  if (!task.requirements.forbidden_libraries.empty())
    o += fmt::format("- Forbidden libraries: {}\n", fmt::join(task.requirements.forbidden_libraries, ", "));
  if (!task.requirements.allowed_torch_ops.empty())
    o += fmt::format("- Torch ops allowed (allocation and views only): {}\n", fmt::join(task.requirements.allowed_torch_ops, ", "));

  for (const auto& l : task.requirements.languages) {
    bool tri = l == "triton";
    auto name = tri ? "solution.py" : "solution.cu";
    o += fmt::format("\n## Template: {} ({})\n\n```{}\n{}\n```\n", name, tri ? "Triton" : "CUDA C++",
                     tri ? "python" : "cuda", file_or_note(task.dir / "template" / name));
  }

  if (!levels.empty()) {
    o += "\n## Expert guidance\n\nAn expert's design for this task. Use it.\n";
    for (const auto& id : levels) {
      const auto* g = task.level(id);
      if (!g) continue;
      o += fmt::format("\n### {}: {}\n", g->id, g->title);
      if (!g->depends.empty()) o += fmt::format("(builds on {})\n", fmt::join(g->depends, ", "));
      o += "\n" + file_or_note(task.dir / "guidance" / (id + ".md")) + "\n";
    }
  }
  return o;
}

}  // namespace d2k
