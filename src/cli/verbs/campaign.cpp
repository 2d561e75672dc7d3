// d2k campaign: the paired experiment at scale (docs/CAMPAIGNS.md).
//   d2k campaign run FILE.toml [--jobs N] [--gpus 0,1] [--shard i/N] [--check]
//   d2k campaign merge OUT.db IN.db...
#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"

#ifdef D2K_WITH_CAMPAIGN
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "campaign/config.hpp"
#include "campaign/merge.hpp"
#include "campaign/runner.hpp"
#endif

namespace d2k::cli {

#ifndef D2K_WITH_CAMPAIGN
int run_campaign(const std::vector<std::string>&) {
  fmt::print(stderr, "d2k campaign: this d2k was built without SQLite and libcurl (D2K_WITH_STORE_AND_HTTP=OFF), "
                     "so it has no store and no agent loop to run campaigns with\n");
  return kFailed;
}
#else

namespace {

namespace fs = std::filesystem;

std::atomic<int> g_campaign_signals{0};

void on_campaign_signal(int) { g_campaign_signals.fetch_add(1); }

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("d2k") : p.string();
}

std::optional<std::vector<int>> parse_gpus(const std::string& s, std::string& why) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    std::string item = s.substr(pos, e - pos);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 4) {
      why = fmt::format("--gpus must be a comma list of GPU indices such as 0,1,2, not '{}'", s);
      return std::nullopt;
    }
    out.push_back(std::stoi(item));
    pos = e + 1;
  }
  return out;
}

}  // namespace

int run_campaign(const std::vector<std::string>& args) {
  CLI::App app{"Run a campaign: models x tasks x conditions x repeats of agent runs into a store, resumable and "
               "sharded; merge the stores of shards (docs/CAMPAIGNS.md).",
               "d2k campaign"};
  app.require_subcommand(1);
  auto* run = app.add_subcommand("run", "run (or resume) a campaign file's runs");
  std::string file, shard_text, gpus_text;
  int jobs = 0;
  bool check_only = false;
  std::string progress = "auto";
  run->add_option("FILE", file, "the campaign file (TOML)")->required();
  run->add_option("--jobs", jobs, "runs at once (default: the file's [parallel] jobs, else one per GPU, 1 without)");
  run->add_option("--gpus", gpus_text, "GPU indices to use, e.g. 0,1 (default: the file's, else those present)");
  run->add_option("--shard", shard_text, "run shard i of N (1-based) of the matrix, e.g. 2/4; merge the stores after");
  run->add_flag("--check", check_only, "check the file and the matrix, print the plan, run nothing");
  run->add_option("--progress", progress, "live progress line: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  auto* merge = app.add_subcommand("merge", "merge campaign stores (shards) into OUT");
  std::string out;
  std::vector<std::string> inputs;
  merge->add_option("OUT", out, "the store to merge into (created if absent)")->required();
  merge->add_option("IN", inputs, "the stores to merge")->required();
  if (auto rc = parse_args(app, args)) return *rc;

  if (merge->parsed()) {
    std::vector<fs::path> in(inputs.begin(), inputs.end());
    try {
      auto s = campaign::merge_stores(out, in);
      fmt::print(stderr, "d2k campaign merge: {} campaign(s), {} run(s), {} submission(s), {} evaluation(s), {} "
                         "judgment(s) merged into {}; {} identical run(s) already there\n",
                 s.campaigns, s.runs, s.submissions, s.evaluations, s.judgments, out, s.identical);
      return kOk;
    } catch (const campaign::MergeConflict& e) {
      fmt::print(stderr, "d2k campaign merge: {}\n", e.what());
      return kFailed;
    } catch (const std::exception& e) {
      fmt::print(stderr, "d2k campaign merge: {}\n", e.what());
      return kFailed;
    }
  }

  Diagnostics d;
  auto cfg = campaign::load_campaign_config(file, d);
  std::optional<std::vector<campaign::Cell>> cells;
  if (cfg) cells = campaign::build_matrix(*cfg, d);
  if (!cfg || !cells) {
    print_diagnostics(d);
    fmt::print(stderr, "d2k campaign run: {}: {} problem(s); nothing was run\n", file, d.size());
    return kUsage;
  }
  campaign::RunnerOptions opt;
  if (!shard_text.empty()) {
    std::string why;
    auto sh = campaign::parse_shard(shard_text, why);
    if (!sh) {
      fmt::print(stderr, "d2k campaign run: {}\n", why);
      return kUsage;
    }
    opt.shard = *sh;
  }
  if (!gpus_text.empty()) {
    std::string why;
    auto g = parse_gpus(gpus_text, why);
    if (!g) {
      fmt::print(stderr, "d2k campaign run: {}\n", why);
      return kUsage;
    }
    opt.gpus = *g;
  }
  if (jobs < 0) {
    fmt::print(stderr, "d2k campaign run: --jobs must be at least 1\n");
    return kUsage;
  }
  auto mine = campaign::shard_cells(*cells, opt.shard);
  if (check_only) {
    fmt::print("campaign {}: {} models x {} tasks x {} conditions x {} repeats = {} runs; shard {}/{}: {} runs\n",
               cfg->name, cfg->models.size(), cells->size() / std::max<std::size_t>(1, cfg->models.size() *
                                                                                        cfg->conditions.size() *
                                                                                        cfg->repeats),
               cfg->conditions.size(), cfg->repeats, cells->size(), opt.shard.index, opt.shard.count, mine.size());
    fmt::print("store {}\nruns  {}\n", cfg->store.string(), cfg->runs_dir.string());
    for (const auto& c : mine) fmt::print("  {} -> {}\n", c.label(), c.run_dir.string());
    return kOk;
  }
  opt.jobs = jobs;
  opt.d2k_binary = self_exe();
  opt.tty = progress == "always" || (progress == "auto" && ::isatty(2));
  opt.signals = &g_campaign_signals;
  struct sigaction sa{};
  sa.sa_handler = on_campaign_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  try {
    auto r = campaign::run_campaign(*cfg, mine, opt);
    if (r.stopped) return 130;
    return r.complete() ? kOk : kFailed;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k campaign run: {}\n", e.what());
    return kFailed;
  }
}

#endif

}  // namespace d2k::cli
