// d2k eval: evaluate a solution on a task, or the expert (or another) solutions over the suite.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "agent/sandbox/worker_jail.hpp"
#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "eval/evaluator.hpp"
#include "eval/targets.hpp"
#include "task/manifest.hpp"

namespace d2k::cli {

// d2k-worker sits beside the d2k binary.
std::filesystem::path worker_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : p.parent_path()) / "d2k-worker";
}

namespace {

std::string fmt_ms(const std::optional<Timing>& t) { return t ? fmt::format("{:.4f}", t->median_ms) : "-"; }

// "a,b,,c" -> {a, b, c}: the names of a comma-separated list, empty ones skipped.
std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= s.size();) {
    auto end = s.find(',', start);
    auto name = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!name.empty()) out.push_back(name);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

// The end-of-run table (also what the agent's evaluate and submit tools answer).
std::string format_table(const Task& task, const Solution& sol, const EvalResult& ev) {
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out, "\n{} / {} ({})\n", task.name, sol.name, language_name(sol.language));
  fmt::format_to(out, "{:<26} {:<20} {:>11} {:>10} {:>11} {:>8} {:>11} {:>8} {:>9} {:>6}\n", "workload", "status",
                 "median_ms", "iqr_ms", "eager_ms", "speedup", "compile_ms", "vs_comp", "GB/s", "%SOL");
  for (const auto& t : ev.traces) {
    std::string speed = "-", gbs = "-", iqr = "-", vs_compile = "-";
    if (t.timing) {
      iqr = fmt::format("{:.4f}", t.timing->q3_ms - t.timing->q1_ms);
      if (t.timing->median_ms > 0) gbs = fmt::format("{:.0f}", t.bytes / (t.timing->median_ms * 1e-3) * 1e-9);
      if (t.eager && t.timing->median_ms > 0) speed = fmt::format("{:.2f}x", t.eager->median_ms / t.timing->median_ms);
      if (t.compiled && t.timing->median_ms > 0)
        vs_compile = fmt::format("{:.2f}x", t.compiled->median_ms / t.timing->median_ms);
    }
    // Never print a time for an output that was not checked and passed.
    if (!t.skipped.empty()) {
      fmt::format_to(out, "{:<26} skipped: {}\n", t.workload, t.skipped);
      continue;
    }
    double pct = t.pct_speed_of_light();
    bool ok = t.status == Status::passed;
    fmt::format_to(out, "{:<26} {:<20} {:>11} {:>10} {:>11} {:>8} {:>11} {:>8} {:>9} {:>6}\n", t.workload,
                   status_name(t.status), ok ? fmt_ms(t.timing) : "-", iqr, fmt_ms(t.eager), ok ? speed : "-",
                   fmt_ms(t.compiled), ok ? vs_compile : "-", gbs, pct > 0 ? fmt::format("{:.0f}", pct) : "-");
  }
  if (double g = geomean_speedup(ev); g > 0) fmt::format_to(out, "geometric-mean speedup vs eager: {:.2f}x\n", g);
  // Why each failure failed; a reason shared by every workload (a static violation, a compile error) once.
  std::set<std::string> said;
  for (const auto& t : ev.traces)
    if (t.skipped.empty() && t.status != Status::passed && said.insert(t.message).second)
      fmt::format_to(out, "  {}: {}\n", t.workload, t.message.substr(0, 1500));
  return o;
}

namespace {

}  // namespace

int run_eval(const std::vector<std::string>& args) {
  CLI::App app{"Evaluate a solution on a task's workloads: correctness against the reference on several secret "
               "seeds, then cold timing beside the PyTorch baselines. Without a GPU, only the correctness "
               "workloads run, on the CPU (Triton's interpreter).",
               "d2k eval"};
  std::string root, task_id, solution_dir, solutions, json_path, timing_mode = "cold";
  int seeds = 0;
  bool no_baselines = false, no_compile = false, correctness_only = false, expect = false, no_static = false,
       no_defenses = false;
  double max_time = 5;
  int call_timeout = 120, load_timeout = 180, compile_baseline_timeout = 120;
  app.add_option("TASK", task_id, "task name, folder, number or path");
  app.add_option("SOLUTION", solution_dir, "solution folder (solution.py or solution.cu)");
  app.add_option("--solutions", solutions,
                 "evaluate over the suite: 'expert' (with the targets), 'naive', 'expert,naive' (the targets, the expert "
                 "against the naive kernel too), 'wrong' (each must get its expected status), 'wrong:NAME,...' (only "
                 "those known-bad solutions), or a folder of solutions");
  std::string workload_list;
  app.add_option("--workloads", workload_list, "workload names, comma-separated (default: all)");
  app.add_option("--seeds", seeds, "input draws per workload (default: the task's)");
  app.add_option("--json", json_path, "write the traces as JSON to this file");
  app.add_option("--timing", timing_mode, "cold (default) or graph (CUDA-graph replay, for short kernels)")
      ->check(CLI::IsMember({"cold", "graph"}));
  app.add_option("--max-time", max_time, "seconds of timing per workload at most");
  app.add_option("--call-timeout", call_timeout, "seconds one checked call may take (default 120)");
  app.add_option("--load-timeout", load_timeout, "seconds a worker may take to start and load the solution (default 180)");
  app.add_flag("--no-baselines", no_baselines, "do not time the PyTorch reference");
  app.add_flag("--no-static-checks", no_static, "skip the static compliance checks (for testing the runtime defenses)");
  app.add_flag("--no-defenses", no_defenses, "measurement only: turn the integrity layer off (see docs/EVALUATOR.md)");
  app.add_flag("--no-compile-baseline", no_compile, "do not time torch.compile of the reference");
  app.add_flag("--correctness-only", correctness_only,
               "only the task's correctness workloads, untimed (known-bad solutions need no timing: --solutions wrong)");
  app.add_option("--compile-baseline-timeout", compile_baseline_timeout,
                 "seconds torch.compile of the reference may take on one workload, timing included (default 120); "
                 "past it the baseline is absent for that workload and for those not compiled yet (the ones compiled before "
                 "are compiled again in a fresh worker)")
      ->check(CLI::PositiveNumber);
  std::string worker_sandbox = "auto";
  app.add_option("--worker-sandbox", worker_sandbox,
                 "the solution worker's sandbox: auto (bubblewrap when it works here, default), bwrap (required), none")
      ->check(CLI::IsMember({"auto", "bwrap", "none"}));
  app.add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  if (auto rc = parse_args(app, args)) return *rc;

  auto suite = load_suite_or_report(root);
  if (!suite) return kFailed;

  // The (task, solution) pairs to evaluate.
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> jobs;
  if (!solutions.empty()) {
    std::vector<std::filesystem::path> task_dirs;
    if (!task_id.empty()) {
      std::string why;
      auto d = find_task_dir(*suite, task_id, why);
      if (!d) {
        fmt::print(stderr, "d2k eval: {}\n", why);
        return kUsage;
      }
      task_dirs.push_back(*d);
    } else {
      for (const auto& f : suite->folders) task_dirs.push_back(suite->root / f);
    }
    // 'wrong:a,b': only the named known-bad solutions (re-running the few a device call did not reach).
    std::vector<std::string> wanted;
    bool wrong = solutions == "wrong";
    if (solutions.starts_with("wrong:")) {
      wrong = true;
      wanted = comma_list(solutions.substr(6));
      if (wanted.empty()) {
        fmt::print(stderr, "d2k eval: --solutions wrong: names no solution (give wrong:NAME[,NAME...])\n");
        return kUsage;
      }
    }
    std::vector<std::string> found;
    for (const auto& td : task_dirs) {
      if (wrong) {
        expect = true;
        std::error_code ec;
        std::vector<std::filesystem::path> dirs;
        for (const auto& e : std::filesystem::directory_iterator(td / "wrong", ec))
          if (e.is_directory()) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        for (const auto& d : dirs) {
          const auto name = d.filename().string();
          if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
          found.push_back(name);
          jobs.emplace_back(td, d);
        }
      } else if (solutions == "expert" || solutions == "naive") {
        jobs.emplace_back(td, td / solutions);
      } else if (solutions == "expert,naive") {  // the targets need both: the expert must beat the naive kernel
        jobs.emplace_back(td, td / "expert");
        jobs.emplace_back(td, td / "naive");
      } else {
        jobs.emplace_back(td, std::filesystem::path(solutions) / td.filename());
      }
    }
    for (const auto& w : wanted)
      if (std::find(found.begin(), found.end(), w) == found.end()) {
        fmt::print(stderr, "d2k eval: no known-bad solution named '{}' in {}\n", w,
                   task_id.empty() ? std::string("the suite") : task_id);
        return kUsage;
      }
  } else {
    if (task_id.empty() || solution_dir.empty()) {
      fmt::print(stderr, "d2k eval: give TASK and SOLUTION, or --solutions expert|naive|wrong|DIR\n");
      return kUsage;
    }
    std::string why;
    auto d = find_task_dir(*suite, task_id, why);
    if (!d) {
      fmt::print(stderr, "d2k eval: {}\n", why);
      return kUsage;
    }
    jobs.emplace_back(*d, solution_dir);
  }

  EvalOptions opt;
  opt.workloads = comma_list(workload_list);
  opt.seeds = seeds;
  opt.baselines = !no_baselines;
  opt.static_checks = !no_static;
  opt.defenses = !no_defenses;
  opt.compile_baseline = !no_compile;
  opt.correctness_only = correctness_only;
  try {
    agent::confine_solution_worker(opt, *agent::parse_worker_sandbox_mode(worker_sandbox));
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k eval: {}\n", e.what());
    return kUsage;
  }
  opt.timing_mode = timing_mode;
  opt.max_time_per_workload_s = max_time;
  opt.call_timeout = std::chrono::seconds(call_timeout);
  opt.load_timeout = std::chrono::seconds(load_timeout);
  opt.compile_baseline_timeout = std::chrono::seconds(compile_baseline_timeout);
  opt.worker = worker_path();
  opt.include_dir = std::filesystem::path(build::source_dir) / "include";
  bool tty = isatty(2);
  opt.progress = [tty](const std::string& line) {
    if (tty)
      fmt::print(stderr, "\r\033[K{}", line.substr(0, 120));
    else
      fmt::print(stderr, "{}\n", line);
  };

  nlohmann::json all = nlohmann::json::array();
  int rc = kOk;
  int targets_judged = 0, targets_met = 0;
  std::map<std::string, std::pair<TargetVerdict, EvalResult>> expert_runs;  // by task, for the naive comparison
  std::shared_ptr<SharedReference> pair_reference;
  // Written after every evaluation (and the table flushed), so a run that is cut short keeps what it did.
  auto save_json = [&] {
    if (!json_path.empty()) write_file_atomic(json_path, all.dump(2));
    std::fflush(stdout);
  };
  for (const auto& [task_dir, sol_dir] : jobs) {
    Diagnostics d;
    auto task = load_task(task_dir, d);
    auto sol = task ? load_solution(sol_dir, d) : std::nullopt;
    if (!task || !sol) {
      print_diagnostics(d);
      rc = kFailed;
      continue;
    }
    EvalResult ev;
    // Beside the expert, the naive kernel is only compared with the expert's medians: its baselines would time
    // the same reference again.
    EvalOptions job_opt = opt;
    if (solutions == "expert,naive" && sol_dir.filename() == "naive") job_opt.baselines = job_opt.compile_baseline = false;
    // The pair (both ours, trusted) shares one reference run: the naive kernel is judged on the expert's inputs.
    if (solutions == "expert,naive") {
      if (sol_dir.filename() == "expert" || !pair_reference || pair_reference->task != task->name)
        pair_reference = std::make_shared<SharedReference>();
      job_opt.shared_reference = pair_reference;
    }
    try {
      ev = evaluate(*task, *sol, job_opt);
    } catch (const std::exception& e) {
      if (tty) fmt::print(stderr, "\r\033[K");
      fmt::print(stderr, "d2k eval: {} / {}: {}\n", task->name, sol->name, e.what());
      rc = kFailed;
      continue;
    }
    if (tty) fmt::print(stderr, "\r\033[K");
    fmt::print("{}", format_table(*task, *sol, ev));
    const bool with_naive = solutions == "expert,naive";
    const bool is_expert = sol_dir.filename() == "expert", is_naive = sol_dir.filename() == "naive";
    if ((solutions == "expert" || with_naive) && is_expert) {
      auto v = judge_targets(*task, ev);
      fmt::print("{}", format_targets(v));
      expert_runs[task->name] = {v, ev};
      if (!with_naive) {
        ++targets_judged;
        if (v.met()) ++targets_met;
      }
    } else if (with_naive && is_naive && expert_runs.count(task->name)) {
      const auto& [v, expert_ev] = expert_runs[task->name];
      auto vs = versus_naive(expert_ev, ev);
      fmt::print("{}", format_versus_naive(vs));
      ++targets_judged;
      if (v.met() && vs.beats_everywhere) ++targets_met;
    }
    auto j = ev.to_json();
    j["d2k_version"] = build::version;
    j["suite_version"] = suite->version;
    all.push_back(j);
    if (expect) {
      // A known-bad solution is caught when some workload gets its expected status.
      bool caught = std::any_of(ev.traces.begin(), ev.traces.end(), [&](const auto& t) {
        return t.skipped.empty() && sol->expect && t.status == *sol->expect;
      });
      fmt::print("{}: expected {}, {}\n", sol->name, sol->expect ? status_name(*sol->expect) : "?",
                 caught ? "got it" : "NOT GOT");
      if (!caught) rc = kFailed;
    } else {
      for (const auto& t : ev.traces)
        if (t.skipped.empty() && t.status != Status::passed) rc = kFailed;
    }
    save_json();
  }
  if (targets_judged > 1)
    fmt::print("\ntargets met on {} of {} tasks{}\n", targets_met, targets_judged,
               solutions == "expert" ? " (beating the naive kernels not judged: --solutions expert,naive)" : "");
  pair_reference.reset();
  save_json();
  return rc;
}

}  // namespace d2k::cli
