// d2k agent: runs an agent on a task under budgets, into a run directory (docs/AGENTS.md).
//   d2k agent run --task T --model M ...        the built-in loop against a model of the registry
//   d2k agent run --task T --agent-cmd '...'    an external agent CLI through d2k's MCP server
//   d2k agent run --resume DIR                  continues a killed or interrupted built-in run
//   d2k agent status DIR                        the run's final record (or "interrupted" when it has none)
#include <fmt/format.h>

#include "agent/sandbox/worker_jail.hpp"
#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"

#ifdef D2K_WITH_AGENT_LOOP
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "agent/loop/agent_loop.hpp"
#include "agent/loop/external_agent.hpp"
#include "agent/loop/submissions.hpp"
#include "agent/loop/trajectory.hpp"
#include "agent/providers/provider.hpp"
#include "agent/sandbox/sandbox.hpp"
#include "agent/tools/public_files.hpp"
#include "agent/tools/toolbox.hpp"
#ifdef D2K_WITH_CAMPAIGN
#include "campaign/gpu_lock.hpp"  // $D2K_GPU_LOCK: a GPU shared by a campaign's runs
#endif
#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "eval/evaluator.hpp"
#include "task/prompt.hpp"
#include "task/solution.hpp"
#endif

namespace d2k::cli {

#ifndef D2K_WITH_AGENT_LOOP
int run_agent(const std::vector<std::string>&) {
  fmt::print(stderr, "d2k agent: this d2k was built without libcurl (D2K_WITH_STORE_AND_HTTP=OFF), so it has no "
                     "model providers and no agent loop\n");
  return kFailed;
}
#else

std::string format_table(const Task& task, const Solution& sol, const EvalResult& ev);

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The instructions every built-in run starts with; the task itself is the first user message.
constexpr const char* kSystemPrompt =
    "You are an expert GPU kernel engineer. You work in a workspace folder through tools: read_file, "
    "write_file, edit_file, list_files, bash (run commands in the workspace), evaluate (feedback on the public "
    "workloads: compile errors, correctness, timings) and submit (an official, recorded evaluation). The task "
    "is in TASK.md; templates are in template/. Write the solution as solution.py (Triton) or solution.cu "
    "(CUDA C++) at the workspace root. Submit every correct improvement: the last correct submission counts. "
    "When you are done, reply without calling a tool.";

std::atomic<int> g_signals{0};

void on_signal(int sig) {
  // The first SIGINT/SIGTERM stops the run cleanly at the next step; a second one kills it at once (the run
  // is then found without a final record and reported as interrupted).
  if (g_signals.fetch_add(1) >= 1) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string utc_stamp(const char* format) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string self_binary() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("d2k") : p.string();
}

// Holds an exclusive lock on RUN/lock for the run's life: a second process on the same run directory is refused,
// and the kernel drops the lock when this process dies, however it dies.
class RunLock {
 public:
  explicit RunLock(const fs::path& run_dir) {
    fd_ = ::open((run_dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0)
      throw std::runtime_error("run directory " + run_dir.string() + " is in use by another d2k process");
  }
  ~RunLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

bool lock_is_held(const fs::path& run_dir) {
  int fd = ::open((run_dir / "lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

// evaluate: the public workloads, one seed, short timing. submit: the official evaluation, recorded in the
// submissions folder (outside the workspace) as `d2k mcp` records it.
agent::ToolResult evaluate_workspace(const Task& task, const fs::path& workspace, const fs::path& records,
                                     bool official) {
  Diagnostics d;
  auto sol = load_solution(workspace, d);
  if (!sol) {
    std::string why;
    for (const auto& i : d.items()) why += i.message + "\n";
    return {"no solution to evaluate: " + why + "write solution.py (Triton) or solution.cu (CUDA C++) at the "
            "workspace root (templates in template/)", true};
  }
  EvalOptions eo;
  eo.worker = worker_path();
  agent::confine_solution_worker(eo, agent::WorkerSandboxMode::automatic);  // bwrap when it works here
  eo.include_dir = fs::path(build::source_dir) / "include";
  if (!official) {
    eo.seeds = 1;
    eo.compile_baseline = false;
    eo.max_time_per_workload_s = 2;
  }
  EvalResult ev;
  json gpu_lock;  // a campaign's shared GPU: official evaluations hold it exclusively, other work shared
  try {
#ifdef D2K_WITH_CAMPAIGN
    auto lock = campaign::lock_gpu_from_env(official ? campaign::GpuLock::Mode::exclusive : campaign::GpuLock::Mode::shared);
#endif
    ev = evaluate(task, *sol, eo);
#ifdef D2K_WITH_CAMPAIGN
    if (lock) gpu_lock = lock->record();
#endif
  } catch (const std::exception& e) {
    return {std::string("the evaluation could not run: ") + e.what(), true};
  }
  std::string text = format_table(task, *sol, ev);
  bool all_passed = std::all_of(ev.traces.begin(), ev.traces.end(),
                                [](const auto& t) { return !t.skipped.empty() || t.status == Status::passed; });
  if (official) {
    auto j = ev.to_json();
    j["d2k_version"] = build::version;
    if (!gpu_lock.is_null()) j["gpu_lock"] = gpu_lock;
    int n = agent::record_submission(records, sol->source, j);
    text += fmt::format("\nsubmission {} recorded\n", n);
  }
  return {text, !all_passed};
}

struct RunSetup {
  fs::path run_dir, workspace, submissions, trajectory;
  std::optional<Task> task;
  std::vector<std::string> levels;
  std::string guidance_shown;
  agent::Budgets budgets;
  agent::FinalPolicy policy = agent::FinalPolicy::last;
  bool auto_submit = true;
  double condense_fraction = 0.75;
  std::string sandbox = "bwrap";  // where the bash tool runs: bwrap or none (as `d2k mcp --sandbox`)
  bool sandbox_given = false;     // external agents: passed on to `d2k mcp` only when asked for
};

std::string levels_text(const std::vector<std::string>& levels) {
  std::string s;
  for (const auto& l : levels) s += (s.empty() ? "" : ",") + l;
  return s.empty() ? "none" : s;
}

// The bash tool's runner, made once per run (the bwrap probe runs here): throws SandboxUnavailable.
std::shared_ptr<agent::CommandRunner> make_runner(const RunSetup& s) {
  agent::SandboxOptions so;
  so.kind = agent::parse_sandbox_kind(s.sandbox).value_or(agent::SandboxKind::bwrap);
  // Hidden from the agent: the suite (expert solutions) and the run directory (trajectory, submissions, logs);
  // the workspace inside it is bound on top.
  so.hidden = {s.task->dir.parent_path(), s.run_dir};
  std::string chosen;
  std::shared_ptr<agent::CommandRunner> r = agent::make_command_runner(so, &chosen);
  fmt::print(stderr, "d2k agent: sandbox for bash: {}\n", chosen);
  return r;
}

std::shared_ptr<agent::CommandRunner> runner_or_report(const RunSetup& s) {
  try {
    return make_runner(s);
  } catch (const agent::SandboxUnavailable& e) {
    fmt::print(stderr, "d2k agent: {}\n", e.what());
    return nullptr;
  }
}

agent::ToolBox make_toolbox(const RunSetup& s, std::shared_ptr<agent::CommandRunner> runner) {
  agent::ToolBoxOptions opt;
  opt.runner = runner ? std::move(runner) : std::make_shared<agent::LocalCommandRunner>();
#ifdef D2K_WITH_CAMPAIGN
  opt.runner = campaign::gpu_shared_runner(std::move(opt.runner));  // bash waits while an official timing runs
#endif
  const Task* task = &*s.task;
  opt.evaluate = [task, ws = s.workspace, records = s.submissions](bool official) {
    return evaluate_workspace(*task, ws, records, official);
  };
  return agent::ToolBox(agent::Workspace(s.workspace), opt);
}

// 0: the run ended as runs should (finished, or a budget); 1: the API, the agent or its tool calls failed;
// 130: interrupted.
int exit_code(agent::RunStatus st) {
  switch (st) {
    case agent::RunStatus::interrupted: return 130;
    case agent::RunStatus::api_error:
    case agent::RunStatus::agent_error:
    case agent::RunStatus::format_errors: return kFailed;
    default: return kOk;
  }
}

void print_final(const json& fin) {
  const auto& t = fin.value("totals", json::object());
  fmt::print(stderr, "d2k agent: status {} ({}); {} turns, {} tokens, ${:.4f}, {:.1f} s; ", fin.value("status", "?"),
             fin.value("detail", ""), t.value("turns", 0), t.value("tokens", 0LL), t.value("cost_usd", 0.0),
             fin.value("wall_s", 0.0));
  const auto& f = fin.value("final_submission", json());
  if (f.is_object())
    fmt::print(stderr, "final submission {} (correct)\n", f.value("number", 0));
  else
    fmt::print(stderr, "no correct submission ({} made)\n", fin.value("submissions", json::array()).size());
}

// The built-in loop, fresh or resumed; the caller holds the run lock.
int drive_loop(RunSetup& s, const agent::ModelConfig& model, std::shared_ptr<agent::CommandRunner> runner,
               const std::vector<json>* resume_records) {
  auto retry_log = std::make_shared<agent::RetryLog>();
  agent::ProviderDeps deps;
  deps.on_retry = [retry_log](const agent::RetryEvent& e) {
    retry_log->add(e);
    fmt::print(stderr, "d2k agent: {} on attempt {}; retrying in {} ms\n", e.reason, e.attempt, e.wait.count());
  };
  auto provider = agent::make_provider(model, deps);
  agent::ToolBox tools = make_toolbox(s, std::move(runner));
  agent::TrajectoryWriter traj(s.trajectory);
  agent::LoopOptions lo;
  lo.budgets = s.budgets;
  lo.condense_fraction = s.condense_fraction;
  lo.retry_log = retry_log;
  lo.interrupted = [] { return g_signals.load() > 0; };
  lo.progress = [](const std::string& line) { fmt::print(stderr, "d2k agent: {}\n", line); };
  agent::AgentLoop loop(*provider, tools, traj, lo);
  agent::LoopResult result;
  const std::vector<agent::Message> initial{agent::Message::system(kSystemPrompt),
                                            agent::Message::user(render_prompt(*s.task, s.levels))};
  if (resume_records)
    result = loop.resume_or_restart(*resume_records, initial);
  else
    result = loop.run(initial);
  agent::FinalizeOptions fo{s.auto_submit, s.policy, s.workspace, s.submissions};
  json fin = agent::finalize_run(traj, tools, result, fo);
  print_final(fin);
  fmt::print("{}\n", s.run_dir.string());
  return exit_code(result.status);
}

std::map<std::string, std::string> placeholders(const fs::path& run_dir) {
  return {{"mcp_config", (run_dir / "mcp.json").string()}, {"workspace", (run_dir / "workspace").string()},
          {"prompt_file", (run_dir / "prompt.md").string()}, {"run_dir", run_dir.string()}};
}

int drive_external(RunSetup& s, const std::string& agent_cmd) {
  agent::TrajectoryWriter traj(s.trajectory);
  std::vector<std::string> args{"mcp", "--task", s.task->dir.string(), "--workspace", s.workspace.string(),
                                "--submissions", s.submissions.string(), "--guidance", s.guidance_shown};
  if (s.budgets.max_turns > 0) args.insert(args.end(), {"--max-tool-calls", std::to_string(s.budgets.max_turns)});
  if (s.sandbox_given) args.insert(args.end(), {"--sandbox", s.sandbox});
  fs::path mcp_config = s.run_dir / "mcp.json";
  write_file_atomic(mcp_config, agent::mcp_config_json(self_binary(), args).dump(2) + "\n");
  fs::path prompt_file = s.run_dir / "prompt.md";
  write_file_atomic(prompt_file, render_prompt(*s.task, s.levels));
  std::string command = agent::substitute_placeholders(agent_cmd, placeholders(s.run_dir));
  traj.append({{"type", "agent_cmd"}, {"command", command}, {"template", agent_cmd},
               {"mcp_config", mcp_config.string()}, {"wall_s", 0.0}});
  agent::ExternalAgentOptions eo;
  eo.command = command;
  eo.cwd = s.workspace;
  eo.log = s.run_dir / "agent.log";
  eo.max_wall_s = s.budgets.max_wall_s;
  eo.env = {{"D2K_RUN_DIR", s.run_dir.string()}, {"D2K_MCP_CONFIG", mcp_config.string()},
            {"D2K_WORKSPACE", s.workspace.string()}, {"D2K_PROMPT_FILE", prompt_file.string()}};
  eo.interrupted = [] { return g_signals.load() > 0; };
  fmt::print(stderr, "d2k agent: running the agent command in {} (log: {})\n", s.workspace.string(), eo.log.string());
  auto r = agent::run_external_agent(eo);
  traj.append({{"type", "agent_exit"}, {"started", r.started}, {"error", r.error}, {"exited", r.exited},
               {"exit_code", r.exit_code}, {"signal", r.signal}, {"timed_out", r.timed_out},
               {"interrupted", r.interrupted}, {"wall_s", r.wall_s}});
  agent::LoopResult result;
  result.totals.wall_s = r.wall_s;
  if (!r.started) {
    result.status = agent::RunStatus::agent_error;
    result.detail = r.error;
  } else if (r.timed_out) {
    result.status = agent::RunStatus::budget_wall;
    result.detail = fmt::format("{:.1f} s of {:.1f} s", r.wall_s, s.budgets.max_wall_s);
  } else if (r.interrupted) {
    result.status = agent::RunStatus::interrupted;
    result.detail = "interrupted by a signal";
  } else if (r.exited && r.exit_code == 0) {
    result.status = agent::RunStatus::finished;
    result.detail = "the agent command exited 0";
  } else {
    result.status = agent::RunStatus::agent_error;
    result.detail = r.exited ? fmt::format("the agent command exited {}", r.exit_code)
                             : fmt::format("the agent command was killed by signal {}", r.signal);
  }
  agent::ToolBox tools = make_toolbox(s, nullptr);  // only submit is called: no bash, no sandbox needed
  json fin = agent::finalize_run(traj, tools, result, {s.auto_submit, s.policy, s.workspace, s.submissions});
  print_final(fin);
  fmt::print("{}\n", s.run_dir.string());
  return exit_code(result.status);
}

std::string sanitize(std::string s) {
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  return s;
}

int agent_status(const std::string& dir, bool as_json) {
  fs::path traj = fs::path(dir) / "trajectory.jsonl";
  if (!fs::exists(traj)) {
    fmt::print(stderr, "d2k agent status: no trajectory.jsonl in {}\n", dir);
    return kUsage;
  }
  auto s = agent::summarize_run(traj);
  json out = s.final;
  if (!s.has_final && lock_is_held(dir)) {
    out["status"] = "running";
    out["detail"] = "a d2k process holds the run's lock";
  }
  if (!s.error.empty()) out["trajectory_error"] = s.error;
  if (s.torn_tail) out["torn_tail"] = true;
  if (as_json) {
    fmt::print("{}\n", out.dump(2));
  } else {
    const auto& t = out.value("totals", json::object());
    fmt::print("run        {}\n", dir);
    if (s.start.is_object())
      fmt::print("task       {} (guidance {}), {}\n", s.start.value("task", "?"), s.start.value("guidance", "?"),
                 s.start.value("mode", "") == "external" ? "external agent"
                                                          : "model " + s.start.value("model", json::object()).value("name", "?"));
    fmt::print("status     {}{}\n", out.value("status", "?"),
               out.value("detail", "").empty() ? "" : " (" + out.value("detail", "") + ")");
    fmt::print("turns      {}\ntokens     {} (cached {})\ncost       ${:.4f}\nwall       {:.1f} s\n", t.value("turns", 0),
               t.value("tokens", 0LL), t.value("usage", json::object()).value("cached_input_tokens", 0LL),
               t.value("cost_usd", 0.0), out.value("wall_s", 0.0));
    const auto& f = out.value("final_submission", json());
    fmt::print("submitted  {}\nfinal      {}\n", out.value("submissions", json::array()).size(),
               f.is_object() ? fmt::format("submission {} (correct)", f.value("number", 0)) : "none correct");
    if (!s.error.empty()) fmt::print("warning    {}\n", s.error);
  }
  return kOk;
}

}  // namespace

int run_agent(const std::vector<std::string>& args) {
  CLI::App app{"Run an agent on a task under budgets into a run directory, resume a killed run, or show a run's "
               "outcome (docs/AGENTS.md).",
               "d2k agent"};
  app.require_subcommand(1);
  auto* run = app.add_subcommand("run", "run the built-in agent loop (--model) or an external agent (--agent-cmd)");
  std::string root, id, model_name, models_file, agent_cmd, guidance = "none", out_dir, resume_dir, final_policy = "last";
  RunSetup s;
  bool no_auto_submit = false;
  run->add_option("--task", id, "task name, folder name, number, or a path to a task folder");
  run->add_option("--model", model_name, "a model of the registry (--models)");
  run->add_option("--models", models_file, "the model registry (default: $D2K_MODELS)");
  run->add_option("--agent-cmd", agent_cmd,
                  "an external agent's command line; {mcp_config}, {workspace}, {prompt_file}, {run_dir} are "
                  "replaced by shell-quoted paths");
  run->add_option("--guidance", guidance, "none, all, or a comma list of levels such as L1,L2 (dependencies are added)");
  run->add_option("--turns", s.budgets.max_turns, "model generations allowed (0: no limit)")->capture_default_str();
  run->add_option("--max-tokens", s.budgets.max_tokens, "input + output tokens allowed over the run (0: no limit)");
  run->add_option("--max-cost", s.budgets.max_cost_usd, "US dollars allowed, from the registry's prices (0: no limit)");
  run->add_option("--max-wall", s.budgets.max_wall_s, "seconds of wall time allowed (0: no limit)");
  run->add_option("--max-format-errors", s.budgets.max_format_errors,
                  "malformed or unknown tool calls in a row before the run ends")->capture_default_str();
  run->add_option("--final", final_policy, "which submission counts: last (the last correct one) or best (the "
                                           "fastest correct one)")->capture_default_str();
  run->add_flag("--no-auto-submit", no_auto_submit, "do not submit the workspace's solution when the run ends");
  run->add_option("--condense-at", s.condense_fraction,
                  "condense older tool outputs when the conversation passes this share of the context window")
      ->capture_default_str();
  run->add_option("--out", out_dir, "the run directory (default: runs/TASK_MODEL_GUIDANCE_TIME)");
  run->add_option("--resume", resume_dir, "continue the built-in run in this directory from its trajectory");
  auto* sandbox_opt = run->add_option("--sandbox", s.sandbox,
                                      "where bash runs: bwrap (bubblewrap: no network, only the workspace writable, "
                                      "the suite and the run directory hidden; refused if bwrap cannot run here) or none")
                          ->check(CLI::IsMember({"bwrap", "none"}))
                          ->capture_default_str();
  run->add_option("--tasks", root, "tasks folder (default: $D2K_TASKS or the source tree's tasks/)");
  auto* status = app.add_subcommand("status", "print a run's outcome: its final record, or interrupted when it has none");
  std::string status_dir;
  bool status_json = false;
  status->add_option("DIR", status_dir, "the run directory")->required();
  status->add_flag("--json", status_json, "print the final record as JSON");
  if (auto rc = parse_args(app, args)) return *rc;

  if (status->parsed()) return agent_status(status_dir, status_json);

  install_signal_handlers();
  int rc = kOk;
  if (!resume_dir.empty()) {
    s.run_dir = fs::absolute(resume_dir);
    s.trajectory = s.run_dir / "trajectory.jsonl";
    if (!fs::exists(s.trajectory)) {
      fmt::print(stderr, "d2k agent: no trajectory.jsonl in {}\n", s.run_dir.string());
      return kUsage;
    }
    RunLock lock(s.run_dir);
    auto sum = agent::summarize_run(s.trajectory);
    if (!sum.error.empty()) {
      fmt::print(stderr, "d2k agent: cannot resume: {}\n", sum.error);
      return kFailed;
    }
    if (!sum.start.is_object()) {
      fmt::print(stderr, "d2k agent: cannot resume: the trajectory has no start record\n");
      return kFailed;
    }
    if (sum.has_final && sum.final.value("status", "") != "interrupted") {
      fmt::print(stderr, "d2k agent: the run already ended with status {}; nothing to resume\n",
                 sum.final.value("status", "?"));
      return kFailed;
    }
    const json& st = sum.start;
    if (st.value("mode", "") != "loop") {
      fmt::print(stderr, "d2k agent: external agent runs cannot be resumed (the agent's own state is not "
                         "recorded); `d2k agent status` reports this one as interrupted\n");
      return kFailed;
    }
    s.task = load_task_arg("", st.at("task_dir").get<std::string>(), "agent", rc);
    if (!s.task) return rc;
    s.levels = st.at("levels").get<std::vector<std::string>>();
    s.guidance_shown = levels_text(s.levels);
    s.workspace = st.at("workspace").get<std::string>();
    s.submissions = st.at("submissions").get<std::string>();
    s.budgets = agent::Budgets::from_json(st.at("budgets"));
    s.policy = agent::parse_final_policy(st.value("final_policy", "last")).value_or(agent::FinalPolicy::last);
    s.auto_submit = st.value("auto_submit", true);
    s.condense_fraction = st.value("condense_at", 0.75);
    s.sandbox = st.value("sandbox", "bwrap");
    auto model = agent::model_config_from_json(st.at("model"));
    auto read = agent::read_trajectory(s.trajectory);
    fmt::print(stderr, "d2k agent: resuming {} ({} records{})\n", s.run_dir.string(), read.records.size(),
               read.torn_tail ? ", a torn last line dropped" : "");
    auto runner = runner_or_report(s);
    if (!runner) return kFailed;
    return drive_loop(s, model, runner, &read.records);
  }

  if (id.empty()) {
    fmt::print(stderr, "d2k agent run: --task is required (or --resume DIR)\n");
    return kUsage;
  }
  if (model_name.empty() == agent_cmd.empty()) {
    fmt::print(stderr, "d2k agent run: give exactly one of --model (the built-in loop) and --agent-cmd\n");
    return kUsage;
  }
  auto policy = agent::parse_final_policy(final_policy);
  if (!policy) {
    fmt::print(stderr, "d2k agent run: --final must be last or best, not '{}'\n", final_policy);
    return kUsage;
  }
  s.policy = *policy;
  s.auto_submit = !no_auto_submit;
  s.sandbox_given = sandbox_opt->count() > 0;
  s.task = load_task_arg(root, id, "agent", rc);
  if (!s.task) return rc;
  auto found_levels = guidance_levels_arg(*s.task, guidance, "agent", rc);
  if (!found_levels) return rc;
  s.levels = *found_levels;
  s.guidance_shown = levels_text(s.levels);

  std::optional<agent::ModelConfig> model;
  if (!model_name.empty()) {
    if (models_file.empty()) {
      const char* env = std::getenv("D2K_MODELS");
      if (env) models_file = env;
    }
    if (models_file.empty()) {
      fmt::print(stderr, "d2k agent run: no model registry: pass --models FILE or set D2K_MODELS "
                         "(example: tests/fixtures/models/example.toml)\n");
      return kUsage;
    }
    Diagnostics d;
    auto reg = agent::load_model_registry(models_file, d);
    if (!reg) {
      print_diagnostics(d);
      return kFailed;
    }
    const auto* m = reg->find(model_name);
    if (!m) {
      std::string names;
      for (const auto& mm : reg->models) names += (names.empty() ? "" : ", ") + mm.name;
      fmt::print(stderr, "d2k agent run: no model '{}' in {} (it has: {})\n", model_name, models_file, names);
      return kUsage;
    }
    model = *m;
  }

  if (out_dir.empty())
    out_dir = fmt::format("runs/{}_{}_{}_{}", sanitize(s.task->name), sanitize(model ? model->name : "external"),
                          sanitize(s.guidance_shown), utc_stamp("%Y%m%dT%H%M%SZ"));
  s.run_dir = fs::absolute(out_dir);
  if (!agent_cmd.empty()) {
    try {
      agent::substitute_placeholders(agent_cmd, placeholders(s.run_dir));  // a typo fails before anything is made
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "d2k agent run: {}\n", e.what());
      return kUsage;
    }
  }
  std::shared_ptr<agent::CommandRunner> runner;
  if (model) {
    runner = runner_or_report(s);  // before anything is written: a run that cannot start leaves nothing behind
    if (!runner) return kFailed;
  }
  std::error_code ec;
  if (fs::exists(s.run_dir) && !fs::is_empty(s.run_dir, ec)) {
    fmt::print(stderr, "d2k agent run: {} exists and is not empty (a run's records are never overwritten; "
                       "--resume continues a run)\n", s.run_dir.string());
    return kUsage;
  }
  fs::create_directories(s.run_dir);
  RunLock lock(s.run_dir);
  s.workspace = s.run_dir / "workspace";
  s.submissions = s.run_dir / "workspace.submissions";  // WORKSPACE.submissions, as `d2k mcp` does
  s.trajectory = s.run_dir / "trajectory.jsonl";
  agent::populate_workspace(*s.task, s.levels, fs::path(build::source_dir) / "include", s.workspace);

  json start{{"type", "start"},
             {"trajectory_version", agent::kTrajectoryVersion},
             {"d2k_version", build::version},
             {"mode", model ? "loop" : "external"},
             {"task", s.task->name},
             {"task_dir", fs::absolute(s.task->dir).string()},
             {"guidance", s.guidance_shown},
             {"levels", s.levels},
             {"budgets", s.budgets.to_json()},
             {"final_policy", agent::final_policy_name(s.policy)},
             {"auto_submit", s.auto_submit},
             {"condense_at", s.condense_fraction},
             {"sandbox", s.sandbox},
             {"workspace", s.workspace.string()},
             {"submissions", s.submissions.string()},
             {"started_at", utc_stamp("%Y-%m-%dT%H:%M:%SZ")},
             {"wall_s", 0.0}};
  if (model) start["model"] = agent::model_config_to_json(*model);
  if (!model) start["agent_cmd"] = agent_cmd;
  {
    agent::TrajectoryWriter traj(s.trajectory);
    traj.append(start);
  }
  fmt::print(stderr, "d2k agent: run {} (task {}, guidance {}, {})\n", s.run_dir.string(), s.task->name,
             s.guidance_shown, model ? "model " + model->name : "external agent");
  if (model) return drive_loop(s, *model, runner, nullptr);
  return drive_external(s, agent_cmd);
}

#endif

}  // namespace d2k::cli
