// d2k report DB --out DIR: report.md, report.html (self-contained) and scores.json for a stored campaign.
#include <filesystem>

#include <fmt/format.h>

#include "cli/cli_util.hpp"
#include "cli/verb_table.hpp"
#include "core/files.hpp"
#include "report/report.hpp"
#include "score/score.hpp"
#ifdef D2K_HAVE_STORE
#include "store/store.hpp"
#endif

namespace d2k::cli {

int run_report(const std::vector<std::string>& args) {
  CLI::App app{"Write a campaign's report: report.md, report.html (inline CSS and SVG, nothing fetched) and "
               "scores.json.", "d2k report"};
  std::string db, out, campaign, baseline_text = "eager";
  int repeat = 0;
  app.add_option("DB", db, "the campaign store (SQLite)")->required();
  app.add_option("--out", out, "output folder")->required();
  app.add_option("--campaign", campaign, "the campaign's name (default: the store's only campaign)");
  app.add_option("--baseline", baseline_text, "eager (default), compile, or first-correct:MODEL");
  app.add_option("--repeat", repeat, "which repeat to report (default 0)");
  if (auto rc = parse_args(app, args)) return *rc;
  std::string err;
  auto baseline = score::parse_baseline(baseline_text, err);
  if (!baseline) {
    fmt::print(stderr, "d2k report: {}\n", err);
    return kUsage;
  }
#ifdef D2K_HAVE_STORE
  try {
    auto st = store::Store::open(db, {.create = false});
    auto c = st.resolve_campaign(campaign);
    auto scores = score::compute_scores(st.load(c.id), *baseline, repeat);
    report::ReportInput in{c.name, db, &scores};
    std::filesystem::create_directories(out);
    auto dir = std::filesystem::path(out);
    write_file_atomic(dir / "report.md", report::render_markdown(in));
    write_file_atomic(dir / "report.html", report::render_html(in));
    auto j = score::to_json(scores);
    j["campaign"] = c.name;
    write_file_atomic(dir / "scores.json", j.dump(2) + "\n");
    fmt::print("wrote {}, {}, {}\n", (dir / "report.md").string(), (dir / "report.html").string(),
               (dir / "scores.json").string());
    return kOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k report: {}\n", e.what());
    return kFailed;
  }
#else
  (void)repeat;
  fmt::print(stderr, "d2k report: this d2k was built without SQLite (-DD2K_WITH_STORE_AND_HTTP=OFF)\n");
  return kFailed;
#endif
}

}  // namespace d2k::cli
