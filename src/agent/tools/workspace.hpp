#pragma once
// The folder an agent works in. Every path a tool is given is resolved inside it: absolute paths outside it,
// `..` escapes and symlinks that lead out are refused with a message the model can act on.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace d2k::agent {

struct WorkspaceLimits {
  std::size_t max_read_bytes = 8u << 20;   // read_file / edit_file refuse larger files
  std::size_t max_write_bytes = 4u << 20;  // write_file / edit_file refuse to write more
};

class Workspace {
 public:
  // `root` must exist and be a directory; it is canonicalized once (throws std::invalid_argument otherwise).
  explicit Workspace(const std::filesystem::path& root, WorkspaceLimits limits = {});

  const std::filesystem::path& root() const { return root_; }
  const WorkspaceLimits& limits() const { return limits_; }

  // The absolute, symlink-resolved path for `arg` (relative to the root, or absolute inside it), or nullopt
  // with `why` set. The path need not exist; the part that exists is resolved through its symlinks, and a
  // dangling symlink as the last component is refused (writing through it could land outside).
  std::optional<std::filesystem::path> resolve(const std::string& arg, std::string& why) const;

  // `abs` relative to the root, for messages ("." for the root itself).
  std::string relative(const std::filesystem::path& abs) const;

  // True when `abs` (already canonical) is the root or below it.
  bool contains(const std::filesystem::path& abs) const;

 private:
  std::filesystem::path root_;
  WorkspaceLimits limits_;
};

}  // namespace d2k::agent
