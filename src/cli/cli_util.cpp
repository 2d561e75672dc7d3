#include "cli/cli_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/verb_table.hpp"
#include "task/prompt.hpp"

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

std::optional<Task> load_task_arg(const std::string& root, const std::string& id, std::string_view verb, int& rc) {
  std::filesystem::path dir;
  if (id.find('/') != std::string::npos) {
    dir = id;
  } else {
    auto suite = load_suite_or_report(root);
    if (!suite) {
      rc = kFailed;
      return std::nullopt;
    }
    std::string why;
    auto found = find_task_dir(*suite, id, why);
    if (!found) {
      fmt::print(stderr, "d2k {}: {}\n", verb, why);
      rc = kUsage;
      return std::nullopt;
    }
    dir = *found;
  }
  Diagnostics d;
  auto task = load_task(dir, d);
  if (!task) {
    print_diagnostics(d);
    rc = kFailed;
  }
  return task;
}

std::optional<std::vector<std::string>> guidance_levels_arg(const Task& task, const std::string& arg,
                                                            std::string_view verb, int& rc) {
  try {
    return close_guidance(task, parse_guidance_arg(task, arg));
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "d2k {}: {}\n", verb, e.what());
    rc = kUsage;
    return std::nullopt;
  }
}

}  // namespace d2k::cli
