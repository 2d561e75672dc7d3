#include "report/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace d2k::report {

using score::condition_label;
using score::GroupScore;
using score::Scores;

std::string fmt_pct(double share) { return fmt::format("{:.1f}%", 100.0 * share); }
std::string fmt_ratio(double x) { return fmt::format("{:.2f}", x); }
std::string fmt_speedup(double x) { return fmt::format("{:.2f}×", x); }
std::string fmt_count(long long n) {
  double a = std::fabs(static_cast<double>(n));
  if (a >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return std::to_string(n);
}
std::string fmt_usd(double x) { return fmt::format("${:.2f}", x); }

namespace {

const std::string kDash = "–";

std::string opt_ratio(const std::optional<double>& v) { return v ? fmt_ratio(*v) : kDash; }
std::string opt_speedup(const std::optional<double>& v) { return v ? fmt_speedup(*v) : kDash; }
std::string opt_score(const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : kDash; }
std::string opt_pct_value(const std::optional<double>& v) { return v ? fmt::format("{:.1f}%", *v) : kDash; }
std::string signed_pct(double rel) { return fmt::format("{:+.1f}%", 100.0 * rel); }

bool has(const Scores& s, const std::string& c) {
  return std::find(s.conditions.begin(), s.conditions.end(), c) != s.conditions.end();
}

// The two conditions the paper's paired tables compare: unguided and guided when both exist.
std::vector<std::string> pair_of(const Scores& s) { return s.paired_conditions; }

bool paired(const Scores& s) { return has(s, "none") && has(s, "all"); }

Table table1(const Scores& s) {
  Table t{"table1", "Table 1: correctness and S_perf per model",
          fmt::format("Correctness: share of (model, task) pairs whose final submission passed every workload. "
                      "S_perf: geometric mean over tasks of the per-task speedup against the {} baseline; an "
                      "incorrect task scores 0.5.", s.baseline.name()),
          {"Model"}, {}, "No runs in the store."};
  auto conds = pair_of(s);
  for (const auto& c : conds) t.header.push_back("Correct " + condition_label(c));
  if (paired(s)) t.header.push_back("Δ correct");
  for (const auto& c : conds) t.header.push_back("S_perf " + condition_label(c));
  if (paired(s)) t.header.push_back("Δ S_perf");
  auto row_for = [&](const std::string& name, auto get_corr, auto get_sperf) {
    std::vector<std::string> row{name};
    std::vector<std::optional<double>> cs, ss;
    for (const auto& c : conds) cs.push_back(get_corr(c));
    for (const auto& c : conds) ss.push_back(get_sperf(c));
    for (auto& v : cs) row.push_back(v ? fmt_pct(*v) : kDash);
    if (paired(s)) row.push_back(cs[0] && cs[1] ? fmt::format("{:+.1f} pp", 100.0 * (*cs[1] - *cs[0])) : kDash);
    for (auto& v : ss) row.push_back(opt_ratio(v));
    if (paired(s)) row.push_back(ss[0] && ss[1] ? signed_pct(*ss[1] / *ss[0] - 1) : kDash);
    t.rows.push_back(row);
  };
  for (const auto& m : s.models)
    row_for(
        m,
        [&](const std::string& c) -> std::optional<double> {
          auto* g = s.group(m, c);
          return g ? std::optional<double>(g->correctness) : std::nullopt;
        },
        [&](const std::string& c) -> std::optional<double> {
          auto* g = s.group(m, c);
          return g ? g->s_perf : std::nullopt;
        });
  if (!s.models.empty())
    row_for(
        "All models",
        [&](const std::string& c) -> std::optional<double> {
          for (const auto& x : s.summary)
            if (x.condition == c) return x.correctness;
          return std::nullopt;
        },
        [&](const std::string& c) -> std::optional<double> {
          for (const auto& x : s.summary)
            if (x.condition == c) return x.s_perf_mean;
          return std::nullopt;
        });
  return t;
}

Table all_scores(const Scores& s) {
  Table t{"scores", "Scores per model and condition",
          fmt::format("fast_p: share of pairs correct and more than p× faster than the baseline. Geomean (all "
                      "correct): over every task, shown when the model is correct and timed on all of them. Geomean "
                      "(common): over the {} tasks every model gets right. % SOL: mean % of speed-of-light over "
                      "timed tasks.", s.common_tasks.size()),
          {"Model", "Condition", "Correct", "S_perf", "fast_1", "fast_1.5", "fast_2", "Geomean (all correct)",
           "Geomean (common)", "% SOL"},
          {}, "No runs in the store."};
  for (const auto& g : s.groups)
    t.rows.push_back({g.model, condition_label(g.condition), fmt::format("{}/{}", g.correct, g.pairs),
                      opt_ratio(g.s_perf), fmt_pct(g.fast_p[0]), fmt_pct(g.fast_p[1]), fmt_pct(g.fast_p[2]),
                      opt_speedup(g.geomean_speedup), opt_speedup(g.geomean_speedup_common), opt_pct_value(g.pct_sol)});
  return t;
}

bool any_judgments(const Scores& s) {
  for (const auto& g : s.groups)
    for (const auto& v : g.js_level)
      if (v) return true;
  return false;
}

Table table2(const Scores& s) {
  Table t{"table2", "Table 2: JS_impl per guidance level",
          "Runtime-blind judge scores (0–100) of the design properties the final submission implements, per level; "
          "JS_impl is the mean of the three levels. Invalid judgments (citations that failed verification) count 0.",
          {"Model"}, {},
          "No judgments yet: run the judges (d2k judge, issue 6) over this campaign to fill this table."};
  if (!any_judgments(s)) return t;
  auto conds = pair_of(s);
  for (const auto& l : score::kLevels)
    for (const auto& c : conds) t.header.push_back(l + " " + condition_label(c));
  for (const auto& c : conds) t.header.push_back("JS_impl " + condition_label(c));
  for (const auto& m : s.models) {
    std::vector<std::string> row{m};
    for (size_t l = 0; l < 3; ++l)
      for (const auto& c : conds) {
        auto* g = s.group(m, c);
        row.push_back(g ? opt_score(g->js_level[l]) : kDash);
      }
    for (const auto& c : conds) {
      auto* g = s.group(m, c);
      row.push_back(g ? opt_score(g->js_impl) : kDash);
    }
    t.rows.push_back(row);
  }
  std::vector<std::string> row{"Mean"};
  for (size_t l = 0; l < 3; ++l)
    for (const auto& c : conds)
      for (const auto& x : s.summary)
        if (x.condition == c) row.push_back(opt_score(x.js_level_mean[l]));
  for (const auto& c : conds)
    for (const auto& x : s.summary)
      if (x.condition == c) row.push_back(opt_score(x.js_impl_mean));
  t.rows.push_back(row);
  return t;
}

// JS_design: the judges' scores of each model's own design proposal (no guidance, no tools), per level.
Table table_design(const Scores& s) {
  Table t{"design", "JS_design: design proposals without guidance",
          "Judge scores (0–100) of the L1/L2/L3 design each model proposed for each task with no guidance and no "
          "tools, against the expert guidance of that level; the mean over tasks. JS_design is the mean of the "
          "three levels. Invalid judgments count 0.",
          {"Model", "L1", "L2", "L3", "JS_design", "Tasks"}, {},
          "No design proposals judged yet: run d2k judge STORE --kind design (or both) over this campaign to fill this table."};
  std::array<std::vector<double>, 4> all;
  for (const auto& m : s.models) {
    const score::GroupScore* g = nullptr;  // design judgments sit on the unguided run; any group that has them
    for (const auto& x : s.groups)
      if (x.model == m && (x.js_design_level[0] || x.js_design_level[1] || x.js_design_level[2]) &&
          (!g || x.condition == "none"))
        g = &x;
    if (!g) continue;
    int tasks = 0;
    for (const auto& ts : g->tasks)
      if (ts.js_design_level[0] || ts.js_design_level[1] || ts.js_design_level[2]) ++tasks;
    t.rows.push_back({m, opt_score(g->js_design_level[0]), opt_score(g->js_design_level[1]),
                      opt_score(g->js_design_level[2]), opt_score(g->js_design), std::to_string(tasks)});
    for (size_t l = 0; l < 3; ++l)
      if (g->js_design_level[l]) all[l].push_back(*g->js_design_level[l]);
    if (g->js_design) all[3].push_back(*g->js_design);
  }
  if (t.rows.size() > 1) {
    std::vector<std::string> row{"Mean"};
    for (const auto& v : all) {
      if (v.empty()) {
        row.push_back(kDash);
        continue;
      }
      double sum = 0;
      for (double x : v) sum += x;
      row.push_back(fmt::format("{:.1f}", sum / static_cast<double>(v.size())));
    }
    row.push_back("");
    t.rows.push_back(row);
  }
  return t;
}

Table table4(const Scores& s) {
  Table t{"table4", "Table 4: geometric-mean speedups of the models correct on every task",
          fmt::format("Geometric mean over all {} tasks of the per-task speedup against the {} baseline, for the models "
                      "correct (and timed) on every task in every compared condition.",
                      s.tasks.size(), s.baseline.name()),
          {"Model"}, {},
          "No model is correct on every task in every compared condition; see the common-task geomeans in the scores "
          "table."};
  auto conds = pair_of(s);
  for (const auto& c : conds) t.header.push_back(condition_label(c));
  if (paired(s)) t.header.push_back("Gain");
  auto add = [&](const std::string& name, std::vector<std::optional<double>> v) {
    std::vector<std::string> row{name};
    for (auto& x : v) row.push_back(opt_speedup(x));
    if (paired(s)) row.push_back(v[0] && v[1] ? signed_pct(*v[1] / *v[0] - 1) : kDash);
    t.rows.push_back(row);
  };
  for (const auto& m : s.eligible_models) {
    std::vector<std::optional<double>> v;
    for (const auto& c : conds) {
      auto* g = s.group(m, c);
      v.push_back(g ? g->geomean_speedup : std::nullopt);
    }
    add(m, v);
  }
  if (!s.eligible_models.empty()) {
    std::vector<std::optional<double>> v;
    for (const auto& c : conds)
      for (const auto& x : s.summary)
        if (x.condition == c) v.push_back(x.geomean_speedup_eligible);
    add(fmt::format("All {} models", s.eligible_models.size()), v);
  }
  return t;
}

Table table6(const Scores& s) {
  Table t{"table6", "Table 6: tokens and cost",
          "Sums over the runs of each model and condition. Input includes cached input; Δ cost is against the "
          "model's unguided runs.",
          {"Model", "Condition", "Runs", "Input", "Cached", "Output", "Cost", "Δ cost"}, {}, "No runs in the store."};
  for (const auto& g : s.groups) {
    auto* base = s.group(g.model, "none");
    std::string delta = kDash;
    if (base && g.condition != "none" && base->cost_usd > 0) delta = signed_pct(g.cost_usd / base->cost_usd - 1);
    t.rows.push_back({g.model, condition_label(g.condition), std::to_string(g.runs), fmt_count(g.input_tokens),
                      fmt_count(g.cached_tokens), fmt_count(g.output_tokens), fmt_usd(g.cost_usd), delta});
  }
  for (const auto& x : s.summary) {
    auto base = std::find_if(s.summary.begin(), s.summary.end(), [](auto& y) { return y.condition == "none"; });
    std::string delta = kDash;
    if (base != s.summary.end() && x.condition != "none" && base->cost_usd > 0)
      delta = signed_pct(x.cost_usd / base->cost_usd - 1);
    int runs = 0;
    for (const auto& g : s.groups)
      if (g.condition == x.condition) runs += g.runs;
    t.rows.push_back({"All models", condition_label(x.condition), std::to_string(runs), fmt_count(x.input_tokens),
                      fmt_count(x.cached_tokens), fmt_count(x.output_tokens), fmt_usd(x.cost_usd), delta});
  }
  return t;
}

Table ablation(const Scores& s) {
  Table t{"ablation", "Figure 3: guidance-level ablation (S_perf)",
          "S_perf per model with no guidance, L1 only, L1+L2 and all levels.", {"Model"}, {},
          "No runs in the store."};
  for (const auto& c : s.conditions) t.header.push_back(condition_label(c));
  for (const auto& m : s.models) {
    std::vector<std::string> row{m};
    for (const auto& c : s.conditions) {
      auto* g = s.group(m, c);
      row.push_back(g ? opt_ratio(g->s_perf) : kDash);
    }
    t.rows.push_back(row);
  }
  if (!s.models.empty()) {
    std::vector<std::string> row{"Mean"};
    for (const auto& x : s.summary) row.push_back(opt_ratio(x.s_perf_mean));
    t.rows.push_back(row);
  }
  return t;
}

std::string cell_text(const score::TaskScore& t) {
  if (!t.has_run) return "·";
  if (!t.correct) return "✗";
  if (!t.timed) return "✓";
  return fmt_ratio(t.speedup);
}

Table heatmap(const Scores& s) {
  Table t{"heatmap", "Per-task speedups",
          fmt::format("Speedup of the final submission against the {} baseline; ✗ incorrect, ✓ correct but untimed, "
                      "· no run.", s.baseline.name()),
          {"Task"}, {}, "No runs in the store."};
  for (const auto& g : s.groups) t.header.push_back(g.model + " " + condition_label(g.condition));
  for (size_t i = 0; i < s.tasks.size(); ++i) {
    std::vector<std::string> row{s.tasks[i]};
    for (const auto& g : s.groups) row.push_back(cell_text(g.tasks[i]));
    t.rows.push_back(row);
  }
  return t;
}

Table correlation(const Scores& s) {
  Table t{"correlation", "Judge score against measured speedup",
          "Spearman rank correlation over runs whose final submission is correct, timed and judged.",
          {"Judge score", "Runs", "Spearman ρ"}, {},
          "No judgments yet: the rank correlation needs judged, correct and timed runs."};
  if (!any_judgments(s)) return t;
  for (const auto& c : s.correlations)
    t.rows.push_back({c.what, std::to_string(c.n), c.rho ? fmt::format("{:.3f}", *c.rho) : kDash});
  for (const auto& c : s.model_correlations)  // per model (issue 6)
    t.rows.push_back({fmt::format("{} · {}", c.what, c.model), std::to_string(c.n),
                      c.rho ? fmt::format("{:.3f}", *c.rho) : kDash});
  return t;
}

// ---- Markdown --------------------------------------------------------------------------------------------

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += '\\';
    o += c;
  }
  return o;
}

std::string md_table(const Table& t) {
  std::string o = fmt::format("## {}\n\n{}\n\n", t.title, t.caption);
  if (t.rows.empty()) return o + "_" + t.empty_text + "_\n\n";
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = "|";
    for (const auto& c : cells) l += " " + md_escape(c) + " |";
    return l + "\n";
  };
  o += line(t.header);
  o += "|";
  for (size_t i = 0; i < t.header.size(); ++i) o += i == 0 ? " --- |" : " ---: |";
  o += "\n";
  for (const auto& r : t.rows) o += line(r);
  return o + "\n";
}

// ---- HTML ------------------------------------------------------------------------------------------------

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  return o;
}

std::string html_table(const Table& t, const std::string& figure = "") {
  std::string o = fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"cap\">{}</p>\n", t.id, esc(t.title), esc(t.caption));
  o += figure;
  if (t.rows.empty()) return o + fmt::format("<p class=\"empty\">{}</p></section>\n", esc(t.empty_text));
  o += "<table><thead><tr>";
  for (const auto& h : t.header) o += "<th>" + esc(h) + "</th>";
  o += "</tr></thead><tbody>\n";
  for (const auto& r : t.rows) {
    o += "<tr>";
    for (size_t i = 0; i < r.size(); ++i) o += (i == 0 ? "<th>" : "<td>") + esc(r[i]) + (i == 0 ? "</th>" : "</td>");
    o += "</tr>\n";
  }
  return o + "</tbody></table></section>\n";
}

const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"};

std::string bar_chart(const Scores& s) {
  if (s.models.empty()) return "";
  const double W = 760, H = 300, left = 50, bottom = 40, top = 20;
  double ymax = 1.0;
  for (const auto& g : s.groups)
    if (g.s_perf) ymax = std::max(ymax, *g.s_perf);
  ymax = std::ceil(ymax * 2) / 2;
  size_t nm = s.models.size(), nc = s.conditions.size();
  double groupw = (W - left - 10) / static_cast<double>(nm);
  double barw = groupw * 0.8 / static_cast<double>(nc);
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - v / ymax); };
  std::string o = fmt::format("<svg class=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
                              "aria-label=\"S_perf by guidance level\">", W, H + 20, W, H + 20);
  for (double v = 0; v <= ymax + 1e-9; v += 0.5)
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
                     "y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{:.1f}</text>", left, W - 10, y(v), y(v), left - 4,
                     y(v) + 4, v);
  o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>",
                   left, W - 10, y(1), y(1));
  for (size_t m = 0; m < nm; ++m) {
    double gx = left + groupw * static_cast<double>(m) + groupw * 0.1;
    for (size_t c = 0; c < nc; ++c) {
      auto* g = s.group(s.models[m], s.conditions[c]);
      if (!g || !g->s_perf) continue;
      double x = gx + barw * static_cast<double>(c);
      o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} {}: "
                       "S_perf {:.2f}</title></rect>", x, y(*g->s_perf), barw * 0.92, y(0) - y(*g->s_perf),
                       kPalette[c % 7], esc(g->model), esc(condition_label(g->condition)), *g->s_perf);
    }
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"middle\">{}</text>",
                     gx + groupw * 0.4, H - bottom + 16, esc(s.models[m]));
  }
  for (size_t c = 0; c < nc; ++c)
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" "
                     "class=\"ax\">{}</text>", left + 110 * c, H + 2, kPalette[c % 7], left + 110 * c + 16, H + 12,
                     esc(condition_label(s.conditions[c])));
  return o + "</svg>\n";
}

std::string heat_color(const score::TaskScore& t) {
  if (!t.has_run) return "#f4f4f4";
  if (!t.correct) return "#9e9e9e";
  if (!t.timed) return "#e0e0e0";
  // log2 speedup in [-2, 2]: red (slower) .. white (1x) .. blue (faster)
  double v = std::clamp(std::log2(t.speedup) / 2.0, -1.0, 1.0);
  int r, g, b;
  if (v >= 0) {
    r = static_cast<int>(255 - v * (255 - 33));
    g = static_cast<int>(255 - v * (255 - 102));
    b = static_cast<int>(255 - v * (255 - 172));
  } else {
    r = static_cast<int>(255 + v * (255 - 178));
    g = static_cast<int>(255 + v * (255 - 24));
    b = static_cast<int>(255 + v * (255 - 43));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

// Cells far from 1x are dark: their label is white.
bool dark_cell(const score::TaskScore& t) { return t.timed && std::fabs(std::log2(t.speedup)) > 1.2; }

std::string heatmap_svg(const Scores& s) {
  if (s.groups.empty() || s.tasks.empty()) return "";
  const double cw = 46, ch = 18, left = 110, top = 110;
  double W = left + cw * static_cast<double>(s.groups.size()) + 10, H = top + ch * static_cast<double>(s.tasks.size()) + 10;
  std::string o = fmt::format("<svg class=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
                              "aria-label=\"per-task speedup heat map\">", W, H, W, H);
  for (size_t j = 0; j < s.groups.size(); ++j) {
    double x = left + cw * static_cast<double>(j) + cw / 2;
    o += fmt::format("<text transform=\"translate({:.1f},{}) rotate(-55)\" class=\"ax\">{} {}</text>", x, top - 6,
                     esc(s.groups[j].model), esc(condition_label(s.groups[j].condition)));
  }
  for (size_t i = 0; i < s.tasks.size(); ++i) {
    double y = top + ch * static_cast<double>(i);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{}</text>", left - 4, y + 13,
                     esc(s.tasks[i]));
    for (size_t j = 0; j < s.groups.size(); ++j) {
      const auto& t = s.groups[j].tasks[i];
      double x = left + cw * static_cast<double>(j);
      o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#fff\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"cell\" text-anchor=\"middle\"{}>{}</text>", x, y, cw, ch,
                       heat_color(t), x + cw / 2, y + 13, dark_cell(t) ? " style=\"fill:#fff\"" : "", esc(cell_text(t)));
    }
  }
  return o + "</svg>\n";
}

std::string scatter_svg(const Scores& s) {
  std::vector<std::tuple<double, double, size_t>> pts;  // js, speedup, condition index
  for (const auto& g : s.groups) {
    size_t ci = static_cast<size_t>(std::find(s.conditions.begin(), s.conditions.end(), g.condition) - s.conditions.begin());
    for (const auto& t : g.tasks)
      if (t.timed && t.js_impl) pts.emplace_back(*t.js_impl, t.speedup, ci);
  }
  if (pts.empty()) return "";
  const double W = 560, H = 360, left = 60, right = 20, top = 20, bottom = 50;
  double lo = 0, hi = 0;
  for (auto& p : pts) {
    lo = std::min(lo, std::log2(std::get<1>(p)));
    hi = std::max(hi, std::log2(std::get<1>(p)));
  }
  lo = std::floor(lo);
  hi = std::ceil(hi);
  if (hi <= lo) hi = lo + 1;
  auto X = [&](double js) { return left + (W - left - right) * js / 100.0; };
  auto Y = [&](double sp) { return top + (H - top - bottom) * (1 - (std::log2(sp) - lo) / (hi - lo)); };
  std::string o = fmt::format("<svg class=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
                              "aria-label=\"JS_impl against speedup\">", W, H, W, H);
  for (int v = 0; v <= 100; v += 25)
    o += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/><text x=\"{0:.1f}\" "
                     "y=\"{3}\" class=\"ax\" text-anchor=\"middle\">{4}</text>", X(v), top, H - bottom, H - bottom + 14, v);
  for (double e = lo; e <= hi + 1e-9; e += 1)
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1f}\" "
                     "class=\"ax\" text-anchor=\"end\">{}×</text>", left, W - right, Y(std::exp2(e)), Y(std::exp2(e)),
                     left - 4, Y(std::exp2(e)) + 4, fmt_ratio(std::exp2(e)));
  for (auto& [js, sp, ci] : pts)
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.6\"/>", X(js), Y(sp),
                     kPalette[ci % 7]);
  o += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">JS_impl (0–100)</text>",
                   (left + W - right) / 2, H - 12);
  o += fmt::format("<text transform=\"translate(14,{}) rotate(-90)\" class=\"ax\" text-anchor=\"middle\">speedup "
                   "(log scale)</text>", (top + H - bottom) / 2);
  return o + "</svg>\n";
}

constexpr const char* kCss = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:.9em}.cap{color:#555;font-size:.9em;max-width:900px}
table{border-collapse:collapse;font-size:.85em;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px}
thead th{background:#f3f5f8;text-align:center}tbody th{text-align:left;font-weight:600;background:#fafafa}
td{text-align:right;font-variant-numeric:tabular-nums}
.empty{font-style:italic;color:#777;background:#fafafa;border:1px dashed #ccc;padding:10px}
.warn{color:#8a5a00;background:#fff8e1;border:1px solid #f0d68a;padding:6px 10px;font-size:.9em}
svg.chart{display:block;margin:8px 0;font-size:11px}svg .ax{font-size:11px;fill:#444}svg .cell{font-size:10px;fill:#111}
.headline{display:flex;gap:16px;flex-wrap:wrap}.kpi{border:1px solid #ddd;border-radius:6px;padding:8px 14px;background:#fafcff}
.kpi b{display:block;font-size:1.4em}
)css";

}  // namespace

std::string markdown_table(const Table& t) { return md_table(t); }

std::vector<Table> build_tables(const Scores& s) {
  return {table1(s),   all_scores(s), table2(s),  table_design(s), table4(s),
          table6(s),   ablation(s),   heatmap(s), correlation(s)};
}

std::string render_markdown(const ReportInput& in) {
  const Scores& s = *in.scores;
  std::string o = fmt::format("# D2K-Bench report: {}\n\n", in.campaign);
  o += fmt::format("Store: `{}`. Baseline: {}. Repeat: {}. {} models × {} tasks × {} conditions.\n\n", in.source,
                   s.baseline.name(), s.repeat, s.models.size(), s.tasks.size(), s.conditions.size());
  for (const auto& w : s.warnings) o += "> Warning: " + w + "\n";
  if (!s.warnings.empty()) o += "\n";
  for (const auto& t : build_tables(s)) o += md_table(t);
  return o;
}

std::string render_html(const ReportInput& in) {
  const Scores& s = *in.scores;
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  o += fmt::format("<title>D2K-Bench report: {}</title><style>{}</style></head><body>\n", esc(in.campaign), kCss);
  o += fmt::format("<h1>D2K-Bench report: {}</h1><p class=\"meta\">Store <code>{}</code> · baseline {} · repeat {} · "
                   "{} models × {} tasks × {} conditions</p>\n", esc(in.campaign), esc(in.source),
                   esc(s.baseline.name()), s.repeat, s.models.size(), s.tasks.size(), s.conditions.size());
  o += "<div class=\"headline\">";
  for (const auto& x : s.summary)
    o += fmt::format("<div class=\"kpi\">{}<b>{} correct</b>S_perf {}</div>", esc(condition_label(x.condition)),
                     fmt_pct(x.correctness), opt_ratio(x.s_perf_mean));
  o += "</div>\n";
  for (const auto& w : s.warnings) o += "<p class=\"warn\">Warning: " + esc(w) + "</p>\n";
  for (const auto& t : build_tables(s)) {
    std::string fig;
    if (t.id == "ablation") fig = bar_chart(s);
    if (t.id == "heatmap") fig = heatmap_svg(s);
    if (t.id == "correlation") fig = scatter_svg(s);
    if (t.id == "heatmap" && !fig.empty())  // the chart carries the numbers; report.md has them as a table
      o += fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"cap\">{}</p>\n{}</section>\n", t.id, esc(t.title),
                       esc(t.caption), fig);
    else
      o += html_table(t, fig);
  }
  o += "</body></html>\n";
  return o;
}

}  // namespace d2k::report
