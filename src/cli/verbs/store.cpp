// d2k store info|check|migrate|export|synth: the campaign store's upkeep (docs/SCORING.md, "Store").
#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#ifdef D2K_HAVE_STORE
#include "store/store.hpp"
#include "store/synth.hpp"
#endif

namespace d2k::cli {

int run_store(const std::vector<std::string>& args) {
  CLI::App app{"The campaign store (SQLite, WAL): inspect, check, migrate, export to JSON or CSV.", "d2k store"};
  app.require_subcommand(1);
  std::string db, out, format = "json";
  auto* info = app.add_subcommand("info", "schema version, campaigns and row counts");
  info->add_option("DB", db, "the store")->required();
  auto* check = app.add_subcommand("check", "SQLite's integrity check (exit 1 when it finds damage)");
  check->add_option("DB", db, "the store")->required();
  auto* migrate = app.add_subcommand("migrate", "migrate the store to this build's schema version");
  migrate->add_option("DB", db, "the store")->required();
  auto* exp = app.add_subcommand("export", "write every table as JSON (<table>.json) or CSV (<table>.csv)");
  exp->add_option("DB", db, "the store")->required();
  exp->add_option("--format", format, "json or csv")->check(CLI::IsMember({"json", "csv"}));
  exp->add_option("--out", out, "output folder")->required();
#ifdef D2K_HAVE_STORE
  store::SynthOptions so;
#else
  struct {
    std::string campaign;
    int models = 0, tasks = 0, conditions = 0, repeats = 0;
    unsigned long long seed = 0;
  } so;
#endif
  bool no_judgments = false;
  auto* synth = app.add_subcommand("synth", "(development) write a synthetic campaign, for benchmarks and demos");
  synth->group("");  // hidden from --help
  synth->add_option("DB", db, "the store (created if absent)")->required();
  synth->add_option("--campaign", so.campaign, "campaign name (default: synthetic)");
  synth->add_option("--models", so.models, "models (default 5)");
  synth->add_option("--tasks", so.tasks, "tasks (default 26)");
  synth->add_option("--conditions", so.conditions, "conditions, 1..4: unguided, guided, L1, L1+L2 (default 4)");
  synth->add_option("--repeats", so.repeats, "repeats (default 1)");
  synth->add_option("--seed", so.seed, "random seed (default 1)");
  synth->add_flag("--no-judgments", no_judgments, "write no judgments");
  if (auto rc = parse_args(app, args)) return *rc;
#ifdef D2K_HAVE_STORE
  try {
    if (*synth) {
      auto st = store::Store::open(db);
      so.judgments = !no_judgments;
      auto id = store::synthesize(st, so);
      fmt::print("wrote synthetic campaign '{}' (id {}) to {}\n", so.campaign, id, db);
      return kOk;
    }
    auto st = store::Store::open(db, {.create = false});
    if (*info || *migrate) {
      fmt::print("{}: schema version {}\n", db, st.schema_version());
      if (*migrate) return kOk;
      for (const auto& c : st.campaigns()) fmt::print("campaign {} '{}' created {}\n", c.id, c.name, c.created_at);
      for (const auto& [t, n] : st.counts()) fmt::print("  {:<18} {}\n", t, n);
      return kOk;
    }
    if (*check) {
      auto r = st.integrity_check();
      fmt::print("{}: {}\n", db, r);
      return r == "ok" ? kOk : kFailed;
    }
    auto files = format == "csv" ? st.export_csv(out) : st.export_json(out);
    for (const auto& f : files) fmt::print("wrote {}\n", f.string());
    return kOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k store: {}\n", e.what());
    return kFailed;
  }
#else
  (void)no_judgments;
  fmt::print(stderr, "d2k store: this d2k was built without SQLite (-DD2K_WITH_STORE_AND_HTTP=OFF)\n");
  return kFailed;
#endif
}

}  // namespace d2k::cli
