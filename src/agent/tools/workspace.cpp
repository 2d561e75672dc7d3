#include "agent/tools/workspace.hpp"

#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace d2k::agent {

Workspace::Workspace(const fs::path& root, WorkspaceLimits limits) : limits_(limits) {
  std::error_code ec;
  root_ = fs::canonical(root, ec);
  if (ec || !fs::is_directory(root_))
    throw std::invalid_argument("workspace " + root.string() + " is not an existing directory");
}

bool Workspace::contains(const fs::path& abs) const {
  auto r = root_.begin();
  auto p = abs.begin();
  for (; r != root_.end(); ++r, ++p) {
    if (p == abs.end() || *p != *r) return false;
  }
  return true;
}

std::string Workspace::relative(const fs::path& abs) const {
  auto rel = abs.lexically_relative(root_).string();
  return rel.empty() ? "." : rel;
}

std::optional<fs::path> Workspace::resolve(const std::string& arg, std::string& why) const {
  if (arg.empty()) {
    why = "the path is empty";
    return std::nullopt;
  }
  if (arg.find('\0') != std::string::npos) {
    why = "the path contains a NUL character";
    return std::nullopt;
  }
  fs::path given(arg);
  fs::path joined = given.is_absolute() ? given : root_ / given;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(joined, ec);
  if (ec) {
    why = "cannot resolve " + arg + ": " + ec.message();
    return std::nullopt;
  }
  resolved = resolved.lexically_normal();
  if (!resolved.empty() && resolved.filename().empty()) resolved = resolved.parent_path();  // trailing slash
  if (!contains(resolved)) {
    why = "the path " + arg + " is outside the workspace (paths are relative to the workspace root)";
    return std::nullopt;
  }
  // weakly_canonical follows the links that resolve; a dangling link stays in the path, and a write (or the
  // folders write_file creates) would follow it wherever it points.
  fs::path walk = root_;
  for (const auto& part : resolved.lexically_relative(root_)) {
    if (part == ".") continue;
    walk /= part;
    auto st = fs::symlink_status(walk, ec);
    if (ec) break;  // does not exist: nothing further down exists either
    if (fs::is_symlink(st)) {
      why = "the path " + arg + " goes through a symlink that leads nowhere inside the workspace";
      return std::nullopt;
    }
  }
  return resolved;
}

}  // namespace d2k::agent
