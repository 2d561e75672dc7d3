// d2k score DB: the campaign's scores (docs/SCORING.md) against a chosen baseline, as text or JSON.
#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "score/score.hpp"
#include "report/report.hpp"
#ifdef D2K_HAVE_STORE
#include "store/store.hpp"
#endif

namespace d2k::cli {

int run_score(const std::vector<std::string>& args) {
  CLI::App app{"Score a stored campaign: correctness, S_perf, geometric-mean speedups, fast_p, % of "
               "speed-of-light, JS_impl, tokens and cost.", "d2k score"};
  std::string db, campaign, baseline_text = "eager";
  int repeat = 0;
  bool json = false;
  app.add_option("DB", db, "the campaign store (SQLite)")->required();
  app.add_option("--campaign", campaign, "the campaign's name (default: the store's only campaign)");
  app.add_option("--baseline", baseline_text,
                 "eager (default), compile, or first-correct:MODEL (the first correct submission of MODEL's "
                 "unguided run: the paper's protocol)");
  app.add_option("--repeat", repeat, "which repeat to score (default 0)");
  app.add_flag("--json", json, "print JSON");
  if (auto rc = parse_args(app, args)) return *rc;
  std::string err;
  auto baseline = score::parse_baseline(baseline_text, err);
  if (!baseline) {
    fmt::print(stderr, "d2k score: {}\n", err);
    return kUsage;
  }
#ifdef D2K_HAVE_STORE
  try {
    auto st = store::Store::open(db, {.create = false});
    auto c = st.resolve_campaign(campaign);
    auto scores = score::compute_scores(st.load(c.id), *baseline, repeat);
    if (json) {
      auto j = score::to_json(scores);
      j["campaign"] = c.name;
      fmt::print("{}\n", j.dump(2));
      return kOk;
    }
    fmt::print("campaign {} · baseline {} · repeat {} · {} models × {} tasks × {} conditions\n\n", c.name,
               scores.baseline.name(), repeat, scores.models.size(), scores.tasks.size(), scores.conditions.size());
    for (const auto& w : scores.warnings) fmt::print("warning: {}\n", w);
    auto tables = report::build_tables(scores);
    for (const auto& t : tables)
      if (t.id == "table1" || t.id == "scores" || t.id == "table4") fmt::print("{}", report::markdown_table(t));
    return kOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k score: {}\n", e.what());
    return kFailed;
  }
#else
  (void)repeat;
  (void)json;
  fmt::print(stderr, "d2k score: this d2k was built without SQLite (-DD2K_WITH_STORE_AND_HTTP=OFF)\n");
  return kFailed;
#endif
}

}  // namespace d2k::cli
