// d2k validate: lint task folders (all of the suite by default).
#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "task/validate.hpp"

namespace d2k::cli {

int run_validate(const std::vector<std::string>& args) {
  CLI::App app{"Lint task folders: the suite index, each manifest, the files beside it, workloads against "
               "constraints, expressions, guidance dependencies, expert and wrong solutions.",
               "d2k validate"};
  std::string root;
  std::vector<std::string> ids;
  app.add_option("TASK", ids, "tasks to check (name, folder, number or path); default: the whole suite");
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  if (auto rc = parse_args(app, args)) return *rc;

  Diagnostics d;
  std::size_t checked = 0;
  if (ids.empty()) {
    auto suite = load_suite_or_report(root);
    if (!suite) return kFailed;
    validate_suite(*suite, d);
    checked = suite->folders.size();
  } else {
    std::optional<Suite> suite;
    for (const auto& id : ids) {
      std::filesystem::path dir;
      if (id.find('/') != std::string::npos) {
        dir = id;
      } else {
        if (!suite) suite = load_suite_or_report(root);
        if (!suite) return kFailed;
        std::string why;
        auto found = find_task_dir(*suite, id, why);
        if (!found) {
          fmt::print(stderr, "d2k validate: {}\n", why);
          return kUsage;
        }
        dir = *found;
      }
      validate_task(dir, d);
      ++checked;
    }
  }
  print_diagnostics(d);
  if (d.empty()) {
    fmt::print("ok: {} task{} valid\n", checked, checked == 1 ? "" : "s");
    return kOk;
  }
  fmt::print(stderr, "{} problem{} in {} task{}\n", d.size(), d.size() == 1 ? "" : "s", checked, checked == 1 ? "" : "s");
  return kFailed;
}

}  // namespace d2k::cli
