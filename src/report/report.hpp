#pragma once
// The campaign report (docs/SCORING.md, "Report"): the paper's tables from Scores, as Markdown and as one
// self-contained HTML page (inline CSS, inline SVG charts, no external resources).
#include <string>
#include <vector>

#include "score/score.hpp"

namespace d2k::report {

struct Table {
  std::string id, title, caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string empty_text;  // shown instead of the table when rows is empty
};

struct ReportInput {
  std::string campaign;
  std::string source;  // the store's path, as shown
  const score::Scores* scores = nullptr;
};

// The tables both renderings share, in report order: table1 (correctness, S_perf), scores (every metric per
// model and condition), table2 (JS_impl per level), table4 (geometric-mean speedups), table6 (tokens and cost),
// ablation (Figure 3), heatmap (per-task speedups), correlation (judge vs speedup).
std::vector<Table> build_tables(const score::Scores& s);

std::string render_markdown(const ReportInput& in);
std::string markdown_table(const Table& t);
std::string render_html(const ReportInput& in);

// Formatting used in the tables (exposed for tests).
std::string fmt_pct(double share);          // 0.931 -> "93.1%"
std::string fmt_ratio(double x);            // 1.4567 -> "1.46"
std::string fmt_speedup(double x);          // 1.69 -> "1.69x"
std::string fmt_count(long long n);         // 12345678 -> "12.35M"
std::string fmt_usd(double x);              // 12.345 -> "$12.35"

}  // namespace d2k::report
