#pragma once
// Findings about a task or solution: where (file, line, key) and why. Validation returns these, never exits.
#include <string>
#include <vector>

namespace d2k {

struct Diagnostic {
  std::string file;  // path as given by the caller
  int line = 0;      // 0: unknown
  std::string key;   // TOML key path like workloads[2].axes.T; empty if none
  std::string message;

  std::string to_string() const;  // "file:line: key: message"
};

class Diagnostics {
 public:
  void add(std::string file, int line, std::string key, std::string message);
  void append(const Diagnostics& other);
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }

 private:
  std::vector<Diagnostic> items_;
};

}  // namespace d2k
