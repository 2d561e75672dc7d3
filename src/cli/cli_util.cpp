#include "cli/cli_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/verb_table.hpp"

namespace d2k::cli {

std::optional<int> parse_args(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  return std::nullopt;
}

void print_diagnostics(const Diagnostics& d) {
  for (const auto& item : d.items()) fmt::print(stderr, "{}\n", item.to_string());
}

std::optional<Suite> load_suite_or_report(const std::string& root) {
  Diagnostics d;
  auto suite = load_suite(root.empty() ? default_tasks_root() : std::filesystem::path(root), d);
  if (!suite) print_diagnostics(d);
  return suite;
}

}  // namespace d2k::cli
