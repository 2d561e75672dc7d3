#include "task/suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <toml++/toml.h>

#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "task/manifest.hpp"

namespace d2k {

std::filesystem::path default_tasks_root() {
  if (const char* env = std::getenv("D2K_TASKS"); env && *env) return env;
  return std::filesystem::path(build::source_dir) / "tasks";
}

std::optional<Suite> load_suite(const std::filesystem::path& root, Diagnostics& diags) {
  auto path = root / kSuiteFile;
  auto file = path.string();
  auto text = read_file(path, 1u << 20);
  if (!text) {
    diags.add(file, 0, "", "missing or unreadable (the suite index: version and tasks)");
    return std::nullopt;
  }
  if (!is_valid_utf8(*text)) {
    diags.add(file, 0, "", "not valid UTF-8");
    return std::nullopt;
  }
  toml::table t;
  try {
    t = toml::parse(*text, file);
  } catch (const toml::parse_error& e) {
    diags.add(file, static_cast<int>(e.source().begin.line), "", fmt::format("TOML syntax: {}", e.description()));
    return std::nullopt;
  }
  Suite s;
  s.root = root;
  bool ok = true;
  for (auto&& [k, v] : t) {
    if (k.str() != "version" && k.str() != "tasks") {
      diags.add(file, static_cast<int>(v.source().begin.line), std::string(k.str()), "unknown key (allowed: version, tasks)");
      ok = false;
    }
  }
  if (auto v = t["version"].value<std::string>()) {
    s.version = *v;
  } else {
    diags.add(file, 0, "version", "missing (a string such as \"0.1.0\")");
    ok = false;
  }
  const auto* arr = t["tasks"].as_array();
  if (!arr) {
    diags.add(file, 0, "tasks", "missing (an array of task folder names, in order)");
    return std::nullopt;
  }
  std::set<std::string> seen;
  int last_number = 0;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto key = fmt::format("tasks[{}]", i);
    const auto* e = arr->get(i);
    auto line = static_cast<int>(e->source().begin.line);
    if (!e->is_string()) {
      diags.add(file, line, key, "must be a string");
      ok = false;
      continue;
    }
    std::string folder = e->as_string()->get();
    if (folder.size() < 5 || folder.find('/') != std::string::npos || folder.find("..") != std::string::npos ||
        !std::isdigit(static_cast<unsigned char>(folder[0])) || !std::isdigit(static_cast<unsigned char>(folder[1])) ||
        !std::isdigit(static_cast<unsigned char>(folder[2])) || folder[3] != '_') {
      diags.add(file, line, key, fmt::format("'{}' is not a task folder name (NNN_name)", folder));
      ok = false;
      continue;
    }
    if (!seen.insert(folder).second) {
      diags.add(file, line, key, fmt::format("'{}' is listed twice", folder));
      ok = false;
    }
    int number = std::stoi(folder.substr(0, 3));
    if (number <= last_number) {
      diags.add(file, line, key, fmt::format("'{}' is out of order (numbers must increase)", folder));
      ok = false;
    }
    last_number = number;
    std::error_code ec;
    if (!std::filesystem::is_directory(root / folder, ec)) {
      diags.add(file, line, key, fmt::format("no folder {}", (root / folder).string()));
      ok = false;
    }
    s.folders.push_back(folder);
  }
  if (!ok) return std::nullopt;
  return s;
}

std::optional<std::filesystem::path> find_task_dir(const Suite& suite, const std::string& id, std::string& why) {
  std::error_code ec;
  std::filesystem::path p(id);
  if (id.find('/') != std::string::npos || id == "." || id == "..") {
    if (std::filesystem::is_regular_file(p / kManifestFile, ec)) return p;
    why = fmt::format("{} is not a task folder (no {})", id, kManifestFile);
    return std::nullopt;
  }
  bool numeric = !id.empty() && id.size() <= 3 && std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  for (const auto& f : suite.folders) {
    if (f == id || f.substr(4) == id) return suite.root / f;
    if (numeric && std::stoi(f.substr(0, 3)) == std::stoi(id)) return suite.root / f;
  }
  why = fmt::format("no task '{}' in {} (run `d2k tasks`)", id, (suite.root / kSuiteFile).string());
  return std::nullopt;
}

}  // namespace d2k
