#include "core/diagnostics.hpp"

#include <fmt/format.h>

namespace d2k {

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (line > 0) out += fmt::format(":{}", line);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

void Diagnostics::add(std::string file, int line, std::string key, std::string message) {
  items_.push_back(Diagnostic{std::move(file), line, std::move(key), std::move(message)});
}

void Diagnostics::append(const Diagnostics& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

}  // namespace d2k
