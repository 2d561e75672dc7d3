#include "campaign/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sqlite3.h>
#include <thread>

#include "agent/loop/agent_loop.hpp"
#include "agent/loop/submissions.hpp"
#include "agent/loop/trajectory.hpp"
#include "agent/providers/model_registry.hpp"
#include "core/files.hpp"
#include "eval/cuda_build.hpp"
#include "task/manifest.hpp"
#include "task/prompt.hpp"
#include "task/suite.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Cell::label() const { return fmt::format("{}/{}/{}/r{}", model, task, condition, repeat); }

std::optional<Shard> parse_shard(const std::string& s, std::string& why) {
  std::smatch m;
  static const std::regex re("([0-9]{1,6})/([0-9]{1,6})");
  if (!std::regex_match(s, m, re)) {
    why = fmt::format("--shard must be i/N (for example 1/4), not '{}'", s);
    return std::nullopt;
  }
  Shard sh{std::stoi(m[1]), std::stoi(m[2])};
  if (sh.count < 1 || sh.index < 1 || sh.index > sh.count) {
    why = fmt::format("--shard {}: i must be between 1 and N", s);
    return std::nullopt;
  }
  return sh;
}

namespace {

std::string safe_name(std::string s) {
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '+') c = '-';
  return s;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::optional<std::vector<Cell>> build_matrix(const CampaignConfig& c, Diagnostics& d) {
  const std::string file = c.file.string();
  const std::size_t before = d.size();
  auto suite = load_suite(c.tasks_dir, d);
  if (!suite) {
    d.add(file, 0, "tasks_dir", fmt::format("the suite in {} could not be read (above)", c.tasks_dir.string()));
    return std::nullopt;
  }
  std::vector<std::string> ids = c.tasks;
  if (ids.size() == 1 && ids[0] == "all") ids = suite->folders;
  std::vector<Task> tasks;
  std::set<std::string> names;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string why;
    auto dir = find_task_dir(*suite, ids[i], why);
    if (!dir) {
      d.add(file, 0, fmt::format("tasks[{}]", i), why);
      continue;
    }
    Diagnostics td;
    auto t = load_task(*dir, td);
    if (!t) {
      d.append(td);
      d.add(file, 0, fmt::format("tasks[{}]", i), fmt::format("task '{}' could not be loaded (above)", ids[i]));
      continue;
    }
    if (!names.insert(t->name).second) {
      d.add(file, 0, fmt::format("tasks[{}]", i), fmt::format("task {} is listed twice", t->name));
      continue;
    }
    for (const auto& cond : c.conditions) {
      try {
        close_guidance(*t, parse_guidance_arg(*t, guidance_arg(cond)));
      } catch (const std::invalid_argument& e) {
        d.add(file, 0, "conditions", fmt::format("condition {} cannot be given for task {}: {}", cond, t->name, e.what()));
      }
    }
    tasks.push_back(std::move(*t));
  }
  if (!c.models_file.empty()) {
    Diagnostics md;
    auto reg = agent::load_model_registry(c.models_file, md);
    if (!reg) {
      d.append(md);
      d.add(file, 0, "models_file", fmt::format("the model registry {} could not be read (above)", c.models_file.string()));
    } else {
      for (std::size_t i = 0; i < c.models.size(); ++i) {
        if (reg->find(c.models[i])) continue;
        std::string known;
        for (const auto& m : reg->models) known += (known.empty() ? "" : ", ") + m.name;
        d.add(file, 0, fmt::format("models[{}]", i),
              fmt::format("no model '{}' in {} (it has: {})", c.models[i], c.models_file.string(), known));
      }
    }
  }
  if (d.size() != before) return std::nullopt;
  std::vector<Cell> cells;
  for (const auto& m : c.models)
    for (const auto& t : tasks)
      for (const auto& cond : c.conditions)
        for (int r = 0; r < c.repeats; ++r) {
          Cell cell;
          cell.index = static_cast<int>(cells.size());
          cell.model = m;
          cell.task = t.name;
          cell.condition = cond;
          cell.repeat = r;
          cell.task_dir = fs::absolute(t.dir).lexically_normal();
          cell.run_dir = c.runs_dir / safe_name(m) / safe_name(t.name) / safe_name(cond) / fmt::format("r{}", r);
          cells.push_back(std::move(cell));
        }
  return cells;
}

std::vector<Cell> shard_cells(const std::vector<Cell>& cells, const Shard& s) {
  std::vector<Cell> out;
  for (const auto& c : cells)
    if (c.index % s.count == s.index - 1) out.push_back(c);
  return out;
}

namespace {

// The entries of the campaign's CUDA_VISIBLE_DEVICES as CUDA reads them (empty ones skipped, stop at -1);
// nullopt when it is not set.
std::optional<std::vector<std::string>> visible_entries() {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) return std::nullopt;
  std::vector<std::string> out;
  std::string s = cvd;
  for (std::size_t pos = 0; pos <= s.size();) {
    std::size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    std::string item = s.substr(pos, e - pos);
    if (item == "-1") break;
    if (!item.empty()) out.push_back(item);
    pos = e + 1;
  }
  return out;
}

}  // namespace

std::string visible_device(int index) {
  auto entries = visible_entries();
  if (entries && index >= 0 && static_cast<std::size_t>(index) < entries->size()) return (*entries)[index];
  return std::to_string(index);  // not set, or past the list: CUDA will refuse it, as it would the index
}

std::vector<int> detect_gpus() {
  std::vector<int> out;
  if (auto entries = visible_entries()) {
    // The runs see the devices the campaign sees; CUDA numbers them 0.. in the listed order.
    for (std::size_t i = 0; i < entries->size(); ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  std::error_code ec;
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    out.push_back(n++);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Ingesting a run directory

namespace {

struct RunState {
  bool has_start = false, has_final = false;
  std::string final_status;
  agent::RunSummary summary;
};

RunState run_state(const fs::path& run_dir) {
  RunState s;
  fs::path traj = run_dir / "trajectory.jsonl";
  if (!fs::exists(traj)) return s;
  s.summary = agent::summarize_run(traj);
  s.has_start = s.summary.start.is_object() && !s.summary.start.empty();
  s.has_final = s.summary.has_final;
  if (s.has_final) s.final_status = s.summary.final.value("status", "");
  return s;
}

bool lock_held(const fs::path& run_dir) {
  int fd = ::open((run_dir / "lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

std::string store_status(const std::string& agent_status) {
  if (agent_status == "finished" || agent_status.rfind("budget_", 0) == 0) return "finished";
  if (agent_status == "interrupted" || agent_status.empty()) return "interrupted";
  return "failed";
}

std::map<int, std::int64_t> stored_submissions(store::Store& st, std::int64_t run_id) {
  std::map<int, std::int64_t> out;
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(st.handle(), "SELECT seq, id FROM submissions WHERE run_id=?", -1, &q, nullptr) != SQLITE_OK)
    throw store::StoreError(std::string("reading submissions: ") + sqlite3_errmsg(st.handle()));
  sqlite3_bind_int64(q, 1, run_id);
  while (sqlite3_step(q) == SQLITE_ROW) out[sqlite3_column_int(q, 0)] = sqlite3_column_int64(q, 1);
  sqlite3_finalize(q);
  return out;
}

}  // namespace

std::string ingest_run(store::Store& st, std::int64_t run_id, const fs::path& run_dir, const std::string& note) {
  auto row = st.run(run_id);
  if (!row) throw store::StoreError(fmt::format("run {} is not in {}", run_id, st.path().string()));
  RunState rs = run_state(run_dir);
  // A run killed before its final record has none: read its fields from an empty object, never from null.
  const json fin = rs.summary.final.is_object() ? rs.summary.final : json::object();
  std::string status = rs.has_final ? store_status(rs.final_status) : "interrupted";
  std::vector<std::string> errors;
  if (!note.empty()) errors.push_back(note);
  if (rs.has_final && status == "failed")
    errors.push_back(fmt::format("{}: {}", rs.final_status, fin.value("detail", "")));
  if (!rs.summary.error.empty()) errors.push_back("trajectory: " + rs.summary.error);

  // The turn of each submission, from the submit tool results ("submission N recorded") and the auto-submit.
  std::map<int, int> turn_of;
  std::set<int> auto_submitted;
  static const std::regex recorded("submission ([0-9]+) recorded");
  if (fs::exists(run_dir / "trajectory.jsonl")) {
    for (const auto& r : agent::read_trajectory(run_dir / "trajectory.jsonl").records) {
      std::string type = r.value("type", "");
      std::string text;
      if (type == "tool" && r.value("name", "") == "submit" && r.contains("result"))
        text = r["result"].value("text", "");
      else if (type == "auto_submit" && r.contains("result") && r["result"].is_object())
        text = r["result"].value("text", "");
      std::smatch m;
      if (!text.empty() && std::regex_search(text, m, recorded)) {
        int n = std::stoi(m[1]);
        turn_of[n] = type == "tool" ? r.value("turn", 0) : fin.value("totals", json::object()).value("turns", 0);
        if (type == "auto_submit") auto_submitted.insert(n);
      }
    }
  }

  store::Store::Transaction tx(st);
  auto have = stored_submissions(st, run_id);
  for (const auto& rec : agent::list_submissions(run_dir / "workspace.submissions")) {
    if (have.count(rec.number)) continue;
    store::SubmissionRow s;
    s.run_id = run_id;
    s.seq = rec.number;
    s.turn = turn_of.count(rec.number) ? turn_of[rec.number] : 0;
    s.kind = auto_submitted.count(rec.number) ? "auto_submit" : "submit";
    s.source_path = rec.solution.string();
    s.language = rec.solution.extension() == ".cu" ? "cuda" : rec.solution.extension() == ".py" ? "triton" : "";
    if (auto src = read_file(rec.solution)) s.sha256 = sha256_hex(*src);
    std::int64_t sid = st.add_submission(s);
    have[rec.number] = sid;
    auto text = read_file(rec.dir / "evaluation.json");
    if (!text) {
      errors.push_back(fmt::format("submission {}: no evaluation.json", rec.number));
      continue;
    }
    try {
      store::Store::Transaction inner(st);  // a garbled trace loses only itself
      st.add_evaluation(sid, "official", json::parse(*text));
      inner.commit();
    } catch (const std::exception& e) {
      errors.push_back(fmt::format("submission {}: evaluation not stored: {}", rec.number, e.what()));
    }
  }
  if (rs.has_final) {
    const json& f = fin.value("final_submission", json());
    if (f.is_object() && f.contains("number")) {
      int n = f["number"].get<int>();
      if (have.count(n))
        st.set_final_submission(run_id, have[n]);
      else
        errors.push_back(fmt::format("final submission {} has no record", n));
    }
  }
  const json totals = fin.value("totals", json::object());
  const json usage = totals.value("usage", json::object());
  row->status = status;
  row->input_tokens = usage.value("input_tokens", 0LL);
  row->cached_tokens = usage.value("cached_input_tokens", 0LL);
  row->cache_write_tokens = usage.value("cache_write_tokens", 0LL);
  row->output_tokens = usage.value("output_tokens", 0LL);
  row->reasoning_tokens = usage.value("reasoning_tokens", 0LL);
  row->cost_usd = totals.value("cost_usd", usage.value("cost_usd", 0.0));
  row->wall_s = totals.value("wall_s", fin.value("wall_s", 0.0));
  row->turns = totals.value("turns", 0);
  row->trajectory_path = (run_dir / "trajectory.jsonl").string();
  std::string err;
  for (const auto& e : errors) err += (err.empty() ? "" : "; ") + e;
  row->error = err;
  if (rs.has_start) row->started_at = rs.summary.start.value("started_at", row->started_at);
  row->finished_at = rs.has_final && status != "interrupted" ? fin.value("ended_at", utc_now()) : "";
  st.update_run(*row);
  tx.commit();
  return status;
}

// ---------------------------------------------------------------------------------------------------------------
// Running

namespace {

struct Active {
  Cell cell;
  std::int64_t run_id = 0;
  pid_t pid = -1;
  int slot = 0;
  Clock::time_point started;
  bool resumed = false;
};

std::string fmt_tokens(long long t) {
  if (t >= 10'000'000) return fmt::format("{:.1f}M", t / 1e6);
  if (t >= 10'000) return fmt::format("{:.1f}k", t / 1e3);
  return std::to_string(t);
}

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long long n = std::llround(s);
  if (n >= 3600) return fmt::format("{}h{:02}m", n / 3600, (n % 3600) / 60);
  if (n >= 60) return fmt::format("{}m{:02}s", n / 60, n % 60);
  return fmt::format("{}s", n);
}

// Refuses to continue a campaign stored with another protocol (budgets, matrix, policy): its runs would not be
// comparable. Returns the campaign's id.
std::int64_t open_campaign(store::Store& st, const CampaignConfig& c, const std::string& suite_version) {
  json proto = c.protocol_json();
  if (auto existing = st.campaign(c.name)) {
    json stored = existing->config.value("protocol", json());
    if (!stored.is_null() && stored != proto) {
      std::string diffs;
      for (auto it = proto.begin(); it != proto.end(); ++it)
        if (!stored.contains(it.key()) || stored[it.key()] != it.value())
          diffs += fmt::format("\n  {}: stored {}, file {}", it.key(),
                               stored.contains(it.key()) ? stored[it.key()].dump() : "(absent)", it.value().dump());
      throw std::runtime_error(fmt::format(
          "campaign '{}' in {} was started with another configuration; its runs would not be comparable (give the "
          "campaign a new name, or restore the file):{}",
          c.name, st.path().string(), diffs));
    }
    return existing->id;
  }
  store::CampaignRow row;
  row.name = c.name;
  row.config = {{"protocol", proto}, {"file", c.file.string()}};
  row.suite_version = suite_version;
  return st.add_campaign(row);
}

}  // namespace

RunnerResult run_campaign(const CampaignConfig& c, const std::vector<Cell>& cells, const RunnerOptions& opt) {
  RunnerResult res;
  res.cells = static_cast<int>(cells.size());
  std::FILE* log = opt.log ? opt.log : stderr;
  fs::create_directories(c.store.parent_path());
  fs::create_directories(c.runs_dir);
  auto st = store::Store::open(c.store);
  std::string suite_version;
  {
    Diagnostics d;
    if (auto s = load_suite(c.tasks_dir, d)) suite_version = s->version;
  }
  const std::int64_t campaign_id = open_campaign(st, c, suite_version);

  // GPUs: one per concurrent run when there are enough; else runs share GPUs and take the lock file per GPU.
  std::vector<int> gpus = opt.gpus ? *opt.gpus : c.gpus ? *c.gpus : detect_gpus();
  int jobs = opt.jobs > 0 ? opt.jobs : c.jobs > 0 ? c.jobs : std::max<int>(1, static_cast<int>(gpus.size()));
  const bool shared_gpus = !gpus.empty() && jobs > static_cast<int>(gpus.size());
  fs::path lock_dir = c.runs_dir / ".gpu-locks";
  if (shared_gpus) fs::create_directories(lock_dir);

  // Totals for the progress display: the runs stored before, and those finished now.
  long long tokens = 0;
  double cost = 0;
  std::vector<Cell> todo;
  for (const auto& cell : cells) {
    auto r = st.find_run(campaign_id, cell.model, cell.task, cell.condition, cell.repeat);
    if (r && (r->status == "finished" || r->status == "failed")) {
      ++res.skipped;
      tokens += r->input_tokens + r->output_tokens;
      cost += r->cost_usd;
      continue;
    }
    todo.push_back(cell);
  }
  fmt::print(log, "d2k campaign: {} '{}': {} runs in this shard ({}/{}), {} already done, {} to run; {} at once{}\n",
             c.file.filename().string(), c.name, res.cells, opt.shard.index, opt.shard.count, res.skipped, todo.size(),
             jobs,
             gpus.empty() ? ", no GPU"
                          : shared_gpus ? fmt::format(", sharing {} GPU(s) (official evaluations lock their GPU)", gpus.size())
                                        : fmt::format(", one GPU each (of {})", gpus.size()));
  std::fflush(log);

  std::vector<Active> active;
  std::vector<bool> slot_busy(static_cast<std::size_t>(jobs), false);
  std::size_t next = 0;
  int signals_seen = 0;
  std::vector<double> durations;
  auto last_draw = Clock::now() - std::chrono::seconds(10);
  bool line_drawn = false;

  auto clear_line = [&] {
    if (opt.tty && line_drawn) {
      fmt::print(log, "\r\033[K");
      line_drawn = false;
    }
  };
  auto say = [&](const std::string& s) {
    clear_line();
    fmt::print(log, "d2k campaign: {}\n", s);
    std::fflush(log);
  };
  auto eta = [&]() -> std::string {
    if (durations.empty()) return "?";
    double mean = 0;
    for (double x : durations) mean += x;
    mean /= static_cast<double>(durations.size());
    double remaining = static_cast<double>(todo.size() - next) + 0.5 * static_cast<double>(active.size());
    return fmt_duration(mean * remaining / jobs);
  };
  auto done_count = [&] { return res.skipped + res.finished + res.failed; };
  auto draw = [&](bool force) {
    if (!opt.tty) return;
    auto now = Clock::now();
    if (!force && now - last_draw < std::chrono::milliseconds(500)) return;
    last_draw = now;
    fmt::print(log, "\r\033[K[{}] {}/{} done, {} running, {} failed, {} interrupted | {} tokens | ${:.2f} | ETA {}",
               c.name, done_count(), res.cells, active.size(), res.failed, res.interrupted, fmt_tokens(tokens), cost,
               eta());
    std::fflush(log);
    line_drawn = true;
  };

  auto launch = [&](const Cell& cell, int slot) -> bool {
    // The store row first (status running), then the process.
    auto existing = st.find_run(campaign_id, cell.model, cell.task, cell.condition, cell.repeat);
    std::int64_t run_id;
    if (!existing) {
      store::RunRow r;
      r.campaign_id = campaign_id;
      r.model = cell.model;
      r.task = cell.task;
      r.condition = cell.condition;
      r.repeat = cell.repeat;
      r.status = "running";
      r.started_at = utc_now();
      r.trajectory_path = (cell.run_dir / "trajectory.jsonl").string();
      run_id = st.add_run(r);
    } else {
      run_id = existing->id;
      if (existing->status != "running") {
        existing->status = "running";
        st.update_run(*existing);
      }
    }
    std::vector<std::string> args;
    bool resumed = false;
    std::error_code ec;
    if (fs::exists(cell.run_dir) && !fs::is_empty(cell.run_dir, ec)) {
      if (lock_held(cell.run_dir)) {
        say(fmt::format("{}: its run directory is in use by another process; left alone", cell.label()));
        ++res.busy;
        return false;
      }
      RunState rs = run_state(cell.run_dir);
      if (rs.has_final && rs.final_status != "interrupted") {
        // The run ended but the runner died before storing it.
        std::string s = ingest_run(st, run_id, cell.run_dir);
        say(fmt::format("{}: stored the run that had ended ({})", cell.label(), s));
        if (s == "finished") ++res.finished;
        else if (s == "failed") ++res.failed;
        else ++res.interrupted;
        if (auto row = st.run(run_id)) {
          tokens += row->input_tokens + row->output_tokens;
          cost += row->cost_usd;
        }
        return false;
      }
      if (rs.has_start && rs.summary.start.value("mode", "") == "loop" && rs.summary.error.empty()) {
        args = {"agent", "run", "--resume", cell.run_dir.string()};
        resumed = true;
      } else {
        // Died before its start record (or damaged): keep it aside, never delete, and start afresh.
        fs::path aside;
        for (int k = 1;; ++k) {
          aside = cell.run_dir.string() + fmt::format(".abandoned-{}", k);
          if (!fs::exists(aside)) break;
        }
        fs::rename(cell.run_dir, aside);
        say(fmt::format("{}: a run directory without a usable trajectory was moved to {}", cell.label(), aside.string()));
      }
    }
    if (!resumed) {
      fs::create_directories(cell.run_dir.parent_path());
      args = {"agent", "run", "--task", cell.task_dir.string(), "--model", cell.model, "--models",
              c.models_file.string(), "--guidance", guidance_arg(cell.condition), "--turns", std::to_string(c.turns),
              "--max-tokens", std::to_string(c.max_tokens), "--max-cost", fmt::format("{}", c.max_cost),
              "--max-wall", fmt::format("{}", c.max_wall), "--max-format-errors", std::to_string(c.max_format_errors),
              "--final", c.final_policy, "--condense-at", fmt::format("{}", c.condense_at), "--sandbox", c.sandbox,
              "--out", cell.run_dir.string()};
      if (!c.auto_submit) args.push_back("--no-auto-submit");
    }
    std::string gpu_env, lock_env;
    if (!gpus.empty()) {
      int g = gpus[static_cast<std::size_t>(slot) % gpus.size()];
      gpu_env = visible_device(g);
      if (shared_gpus) lock_env = (lock_dir / fmt::format("gpu{}.lock", g)).string();
    }
    fs::path log_file = cell.run_dir.string() + ".log";
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);                      // its own group: a terminal's Ctrl-C reaches the campaign only
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);   // the campaign killed: its runs die with it, to be resumed
      if (::getppid() != parent) ::_exit(127);
      int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      int nul = ::open("/dev/null", O_RDONLY);
      if (nul >= 0) ::dup2(nul, 0);
      if (!gpu_env.empty()) ::setenv("CUDA_VISIBLE_DEVICES", gpu_env.c_str(), 1);
      if (!lock_env.empty()) ::setenv("D2K_GPU_LOCK", lock_env.c_str(), 1);
      else ::unsetenv("D2K_GPU_LOCK");
      ::setenv("D2K_CAMPAIGN", c.name.c_str(), 1);
      std::vector<std::string> full;
      full.push_back(opt.d2k_binary.string());
      full.insert(full.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : full) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(opt.d2k_binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    active.push_back({cell, run_id, pid, slot, Clock::now(), resumed});
    slot_busy[static_cast<std::size_t>(slot)] = true;
    say(fmt::format("{} {}{} (log {})", resumed ? "resume" : "start", cell.label(),
                    gpu_env.empty() ? "" : fmt::format(" on GPU {}{}", gpu_env, shared_gpus ? " (shared, locked)" : ""),
                    log_file.string()));
    return true;
  };

  auto finish = [&](std::size_t i, int wstatus) {
    Active a = active[i];
    active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
    slot_busy[static_cast<std::size_t>(a.slot)] = false;
    std::string how = WIFEXITED(wstatus) ? fmt::format("exit {}", WEXITSTATUS(wstatus))
                                         : fmt::format("killed by signal {}", WTERMSIG(wstatus));
    RunState rs = run_state(a.cell.run_dir);
    std::string note;
    if (!rs.has_final) {
      std::string tail = read_file(a.cell.run_dir.string() + ".log").value_or("");
      if (tail.size() > 400) tail = "..." + tail.substr(tail.size() - 400);
      note = fmt::format("the agent process ended ({}) without a final record: {}", how, tail);
    }
    std::string s = ingest_run(st, a.run_id, a.cell.run_dir, note);
    double secs = std::chrono::duration<double>(Clock::now() - a.started).count();
    auto row = st.run(a.run_id);
    if (row) {
      tokens += row->input_tokens + row->output_tokens;
      cost += row->cost_usd;
    }
    if (s == "finished") {
      ++res.finished;
      durations.push_back(secs);
    } else if (s == "failed") {
      ++res.failed;
      durations.push_back(secs);
    } else {
      ++res.interrupted;
    }
    bool correct = false;
    if (rs.has_final) correct = rs.summary.final.value("correct", false);
    say(fmt::format("{} {}: {} ({}), {} turns, {} tokens, ${:.4f}, {:.1f} s, {}; {}/{} done, ETA {}", s, a.cell.label(),
                    rs.has_final ? rs.final_status : "no final record", how, row ? row->turns : 0,
                    row ? fmt_tokens(row->input_tokens + row->output_tokens) : "0", row ? row->cost_usd : 0.0, secs,
                    correct ? "correct" : "not correct", done_count(), res.cells, eta()));
  };

  while (true) {
    int sig = opt.signals ? opt.signals->load() : 0;
    if (sig > signals_seen) {
      if (signals_seen == 0) {
        say(fmt::format("stopping: {} run(s) asked to stop (SIGTERM); nothing new starts", active.size()));
        for (const auto& a : active) ::kill(-a.pid, SIGTERM);
      }
      if (sig >= 2) {
        say("second signal: killing the runs (they will be resumed next time)");
        for (const auto& a : active) ::kill(-a.pid, SIGKILL);
      }
      signals_seen = sig;
      res.stopped = true;
    }
    while (!res.stopped && next < todo.size() && static_cast<int>(active.size()) < jobs) {
      int slot = 0;
      while (slot_busy[static_cast<std::size_t>(slot)]) ++slot;
      launch(todo[next++], slot);
      draw(true);
    }
    if (active.empty() && (res.stopped || next >= todo.size())) break;
    bool reaped = false;
    for (std::size_t i = 0; i < active.size();) {
      int ws = 0;
      pid_t r = ::waitpid(active[i].pid, &ws, WNOHANG);
      if (r == active[i].pid) {
        finish(i, ws);
        reaped = true;
        continue;
      }
      ++i;
    }
    draw(reaped);
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  clear_line();
  fmt::print(log, "d2k campaign: '{}': {} finished, {} failed, {} interrupted now; {} were done before; {} of {} done{}\n",
             c.name, res.finished, res.failed, res.interrupted, res.skipped, done_count(), res.cells,
             res.complete() ? "" : " (run the same command again to resume the rest)");
  std::fflush(log);
  return res;
}

}  // namespace d2k::campaign
