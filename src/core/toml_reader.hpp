#pragma once
// Typed reads out of one TOML table (toml++) for d2k's manifests and registries: every problem becomes a
// diagnostic with the file, the line and the key's full path, and reading goes on to report them all.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.hpp"

namespace d2k {

class TomlReader {
 public:
  TomlReader(const toml::table& t, std::string path, const std::string& file, Diagnostics& d)
      : t_(t), path_(std::move(path)), file_(file), d_(d) {}

  std::string key(std::string_view k) const { return path_.empty() ? std::string(k) : path_ + "." + std::string(k); }
  int line_of(const toml::node& n) const { return static_cast<int>(n.source().begin.line); }
  int line() const { return static_cast<int>(t_.source().begin.line); }
  void error(std::string_view k, const toml::node* n, std::string msg) const {
    d_.add(file_, n ? line_of(*n) : line(), key(k), std::move(msg));
  }
  const toml::node* get(std::string_view k) const { return t_.get(k); }

  std::optional<std::string> str(std::string_view k, bool required) {
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, "missing (a string is required)");
      return std::nullopt;
    }
    if (!n->is_string()) {
      error(k, n, "must be a string");
      return std::nullopt;
    }
    return n->as_string()->get();
  }
  std::optional<long long> integer(std::string_view k, bool required) {
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, "missing (an integer is required)");
      return std::nullopt;
    }
    if (!n->is_integer()) {
      error(k, n, "must be an integer");
      return std::nullopt;
    }
    return n->as_integer()->get();
  }
  // Integers are accepted where a number is expected; booleans (as 1 and 0) only with allow_bool.
  std::optional<double> number(std::string_view k, bool required, bool allow_bool = false) {
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, "missing (a number is required)");
      return std::nullopt;
    }
    if (n->is_integer()) return static_cast<double>(n->as_integer()->get());
    if (n->is_floating_point()) {
      double v = n->as_floating_point()->get();
      if (!std::isfinite(v)) {
        error(k, n, "must be finite");
        return std::nullopt;
      }
      return v;
    }
    if (allow_bool && n->is_boolean()) return n->as_boolean()->get() ? 1.0 : 0.0;
    error(k, n, "must be a number");
    return std::nullopt;
  }
  std::vector<std::string> strings(std::string_view k, bool required) {
    std::vector<std::string> out;
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, "missing (an array of strings is required)");
      return out;
    }
    const auto* a = n->as_array();
    if (!a) {
      error(k, n, "must be an array of strings");
      return out;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* e = a->get(i);
      if (!e->is_string()) {
        d_.add(file_, line_of(*e), fmt::format("{}[{}]", key(k), i), "must be a string");
        continue;
      }
      out.push_back(e->as_string()->get());
    }
    return out;
  }
  const toml::table* table(std::string_view k, bool required) {
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, "missing (a table is required)");
      return nullptr;
    }
    if (!n->is_table()) {
      error(k, n, "must be a table");
      return nullptr;
    }
    return n->as_table();
  }
  // Arrays of tables ([[inputs]]): returns the tables; a missing key is an empty list.
  std::vector<const toml::table*> tables(std::string_view k, bool required) {
    std::vector<const toml::table*> out;
    const auto* n = get(k);
    if (!n) {
      if (required) error(k, nullptr, fmt::format("missing (write at least one [[{}]])", k));
      return out;
    }
    const auto* a = n->as_array();
    if (!a) {
      error(k, n, fmt::format("must be an array of tables ([[{}]])", k));
      return out;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* e = a->get(i);
      if (!e->is_table()) {
        d_.add(file_, line_of(*e), fmt::format("{}[{}]", key(k), i), "must be a table");
        continue;
      }
      out.push_back(e->as_table());
    }
    return out;
  }
  void only_keys(std::initializer_list<std::string_view> allowed) {
    for (auto&& [k, v] : t_) {
      bool ok = false;
      for (auto a : allowed) ok = ok || k.str() == a;
      if (!ok) error(k.str(), &v, fmt::format("unknown key (allowed: {})", fmt::join(allowed, ", ")));
    }
  }

 private:
  const toml::table& t_;
  std::string path_;
  const std::string& file_;
  Diagnostics& d_;
};

}  // namespace d2k
