// d2k show: exactly what an agent is shown for a task.
#include <fmt/format.h>

#include <stdexcept>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "task/manifest.hpp"
#include "task/prompt.hpp"

namespace d2k::cli {

int run_show(const std::vector<std::string>& args) {
  CLI::App app{"Print exactly what an agent is shown for a task: description, interface, workloads, "
               "requirements, templates, and the guidance levels asked for (with the levels they depend on).",
               "d2k show"};
  std::string root, id, guidance = "none";
  app.add_option("TASK", id, "task name, folder name, number, or a path to a task folder")->required();
  app.add_option("--guidance", guidance, "none, all, or a comma list of levels such as L1,L2 (dependencies are added)");
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  if (auto rc = parse_args(app, args)) return *rc;

  std::filesystem::path dir;
  if (id.find('/') != std::string::npos) {
    dir = id;
  } else {
    auto suite = load_suite_or_report(root);
    if (!suite) return kFailed;
    std::string why;
    auto found = find_task_dir(*suite, id, why);
    if (!found) {
      fmt::print(stderr, "d2k show: {}\n", why);
      return kUsage;
    }
    dir = *found;
  }
  Diagnostics d;
  auto task = load_task(dir, d);
  if (!task) {
    print_diagnostics(d);
    return kFailed;
  }
  std::vector<std::string> levels;
  try {
    levels = close_guidance(*task, parse_guidance_arg(*task, guidance));
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "d2k show: {}\n", e.what());
    return kUsage;
  }
  fmt::print("{}", render_prompt(*task, levels));
  return kOk;
}

}  // namespace d2k::cli
