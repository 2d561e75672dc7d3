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

  int rc = kOk;
  auto task = load_task_arg(root, id, "show", rc);
  if (!task) return rc;
  auto found_levels = guidance_levels_arg(*task, guidance, "show", rc);
  if (!found_levels) return rc;
  const auto& levels = *found_levels;
  fmt::print("{}", render_prompt(*task, levels));
  return kOk;
}

}  // namespace d2k::cli
