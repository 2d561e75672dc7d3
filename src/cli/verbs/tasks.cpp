// d2k tasks: the suite's tasks and workloads, one line each.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "task/manifest.hpp"

namespace d2k::cli {

int run_tasks(const std::vector<std::string>& args) {
  CLI::App app{"List the suite's tasks and their workloads, one line each.", "d2k tasks"};
  std::string root;
  bool json = false;
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  app.add_flag("--json", json, "print JSON instead of text");
  if (auto rc = parse_args(app, args)) return *rc;

  auto suite = load_suite_or_report(root);
  if (!suite) return kFailed;
  nlohmann::json out = {{"suite_version", suite->version}, {"tasks", nlohmann::json::array()}};
  if (!json) fmt::print("suite {} ({} tasks)\n", suite->version, suite->folders.size());
  int rc = kOk;
  for (const auto& f : suite->folders) {
    Diagnostics d;
    auto task = load_task(suite->root / f, d);
    if (!task) {
      print_diagnostics(d);
      rc = kFailed;
      continue;
    }
    nlohmann::json jt = {{"number", task->number}, {"folder", f},           {"name", task->name},
                         {"category", task->category}, {"summary", task->summary}, {"workloads", nlohmann::json::array()}};
    if (!json) fmt::print("{:03} {:<28} {:<12} {}\n", task->number, task->name, task->category, task->summary);
    for (const auto* list : {&task->workloads, &task->correctness}) {
      for (const auto& w : *list) {
        std::string axes;
        for (const auto& [a, v] : w.axes) axes += fmt::format("{}{}={}", axes.empty() ? "" : " ", a, v);
        jt["workloads"].push_back({{"name", w.name}, {"timed", w.timed}, {"axes", w.axes}});
        if (!json) fmt::print("    {:<28} {:<11} {}\n", w.name, w.timed ? "timed" : "correctness", axes);
      }
    }
    out["tasks"].push_back(std::move(jt));
  }
  if (json) fmt::print("{}\n", out.dump(2));
  return rc;
}

}  // namespace d2k::cli
