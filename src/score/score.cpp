#include "score/score.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

namespace d2k::score {

using nlohmann::json;

std::string canonical_condition(const std::string& c) {
  std::string k;
  for (char ch : c)
    if (ch != ' ') k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (k == "none" || k == "unguided" || k == "") return "none";
  if (k == "all" || k == "guided" || k == "l1+l2+l3" || k == "l1,l2,l3") return "all";
  if (k == "l1") return "L1";
  if (k == "l1+l2" || k == "l1,l2") return "L1+L2";
  return c;
}

std::string condition_label(const std::string& canonical) {
  if (canonical == "none") return "unguided";
  if (canonical == "all") return "guided";
  return canonical;
}

int condition_order(const std::string& canonical) {
  if (canonical == "none") return 0;
  if (canonical == "L1") return 1;
  if (canonical == "L1+L2") return 2;
  if (canonical == "all") return 3;
  return 4;
}

std::string Baseline::name() const {
  switch (kind) {
    case BaselineKind::eager: return "eager";
    case BaselineKind::compile: return "compile";
    case BaselineKind::first_correct: return "first-correct:" + model;
  }
  return "?";
}

std::optional<Baseline> parse_baseline(const std::string& text, std::string& error) {
  if (text == "eager") return Baseline{BaselineKind::eager, {}};
  if (text == "compile" || text == "torch.compile") return Baseline{BaselineKind::compile, {}};
  const std::string prefix = "first-correct:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size())
    return Baseline{BaselineKind::first_correct, text.substr(prefix.size())};
  error = fmt::format("unknown baseline '{}': expected eager, compile or first-correct:MODEL", text);
  return std::nullopt;
}

double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) s += std::log(x);
  return std::exp(s / static_cast<double>(xs.size()));
}

std::vector<double> average_ranks(const std::vector<double>& xs) {
  std::vector<size_t> idx(xs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
  std::vector<double> r(xs.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && xs[idx[j + 1]] == xs[idx[i]]) ++j;
    double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = rank;
    i = j + 1;
  }
  return r;
}

std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 3) return std::nullopt;
  auto rx = average_ranks(x), ry = average_ranks(y);
  double n = static_cast<double>(x.size());
  double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n, my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

const GroupScore* Scores::group(const std::string& model, const std::string& condition) const {
  for (const auto& g : groups)
    if (g.model == model && g.condition == condition) return &g;
  return nullptr;
}

namespace {

std::optional<double> mean_of(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Per task: the per-workload baseline times of the protocol baseline (the first correct, timed submission of
// the chosen model's unguided run).
using BaselineTimes = std::map<std::string, std::map<std::string, double>>;  // task -> workload -> ms

bool fully_timed(const Evaluation& e) {
  bool any = false;
  for (const auto& w : e.workloads) {
    if (!w.timed) continue;
    if (!w.median_ms || *w.median_ms <= 0) return false;
    any = true;
  }
  return any;
}

BaselineTimes first_correct_times(const std::vector<const Run*>& runs, const std::string& model,
                                  std::vector<std::string>& warnings) {
  BaselineTimes out;
  bool model_seen = false;
  for (const Run* r : runs) {
    if (r->model != model) continue;
    model_seen = true;
    if (canonical_condition(r->condition) != "none") continue;
    for (const auto& s : r->submissions) {  // by seq
      if (!s.evaluation || !s.evaluation->correct || !fully_timed(*s.evaluation)) continue;
      auto& m = out[r->task];
      for (const auto& w : s.evaluation->workloads)
        if (w.timed && w.median_ms) m[w.workload] = *w.median_ms;
      break;
    }
  }
  if (!model_seen) warnings.push_back(fmt::format("baseline model '{}' has no runs; eager is used instead", model));
  return out;
}

TaskScore score_task(const std::string& task, const Run* run, const Baseline& baseline,
                     const BaselineTimes& protocol) {
  TaskScore t;
  t.task = task;
  if (!run) return t;
  t.has_run = true;
  // JS_impl per level: the mean over repeated judgments.
  for (size_t l = 0; l < kLevels.size(); ++l) {
    std::vector<double> v;
    for (const auto& j : run->judgments)
      if (j.kind == "impl" && j.level == kLevels[l]) v.push_back(j.valid ? j.score : 0.0);
    t.js_level[l] = mean_of(v);
  }
  if (t.js_level[0] && t.js_level[1] && t.js_level[2])
    t.js_impl = (*t.js_level[0] + *t.js_level[1] + *t.js_level[2]) / 3.0;
  for (size_t l = 0; l < kLevels.size(); ++l) {  // JS_design: the same over design judgments
    std::vector<double> v;
    for (const auto& j : run->judgments)
      if (j.kind == "design" && j.level == kLevels[l]) v.push_back(j.valid ? j.score : 0.0);
    t.js_design_level[l] = mean_of(v);
  }
  if (t.js_design_level[0] && t.js_design_level[1] && t.js_design_level[2])
    t.js_design = (*t.js_design_level[0] + *t.js_design_level[1] + *t.js_design_level[2]) / 3.0;

  const Submission* fin = run->final_submission();
  if (!fin || !fin->evaluation || !fin->evaluation->correct) return t;
  t.correct = true;
  const auto& ev = *fin->evaluation;
  if (!fully_timed(ev)) return t;
  const std::map<std::string, double>* proto = nullptr;
  if (baseline.kind == BaselineKind::first_correct) {
    auto it = protocol.find(task);
    if (it != protocol.end()) proto = &it->second;
  }
  std::vector<double> speedups, sol;
  for (const auto& w : ev.workloads) {
    if (!w.timed) continue;
    std::optional<double> base;
    switch (baseline.kind) {
      case BaselineKind::eager: base = w.eager_ms; break;
      case BaselineKind::compile: base = w.compile_ms; break;
      case BaselineKind::first_correct:
        if (proto)
          if (auto it = proto->find(w.workload); it != proto->end()) base = it->second;
        break;
    }
    if (baseline.kind != BaselineKind::eager && (!base || *base <= 0)) {
      base = w.eager_ms;
      ++t.baseline_fallbacks;
    }
    if (!base || *base <= 0) return t;  // no baseline at all: correct but untimed
    speedups.push_back(*base / *w.median_ms);
    if (w.pct_sol) sol.push_back(*w.pct_sol);
  }
  t.timed = true;
  t.speedup = geomean(speedups);
  t.score = t.speedup;
  t.pct_sol = mean_of(sol);
  return t;
}

}  // namespace

Scores compute_scores(const CampaignData& data, const Baseline& baseline, int repeat) {
  Scores s;
  s.baseline = baseline;
  s.repeat = repeat;
  std::vector<const Run*> runs;
  std::set<std::string> models, tasks, conds;
  for (const auto& r : data.runs) {
    if (r.repeat != repeat) continue;
    runs.push_back(&r);
    models.insert(r.model);
    tasks.insert(r.task);
    conds.insert(canonical_condition(r.condition));
  }
  s.models.assign(models.begin(), models.end());
  s.tasks.assign(tasks.begin(), tasks.end());
  s.conditions.assign(conds.begin(), conds.end());
  std::stable_sort(s.conditions.begin(), s.conditions.end(), [](const std::string& a, const std::string& b) {
    return condition_order(a) != condition_order(b) ? condition_order(a) < condition_order(b) : a < b;
  });
  if (conds.count("none") && conds.count("all"))
    s.paired_conditions = {"none", "all"};
  else
    s.paired_conditions = s.conditions;

  std::map<std::tuple<std::string, std::string, std::string>, const Run*> index;
  for (const Run* r : runs) {
    auto key = std::make_tuple(r->model, canonical_condition(r->condition), r->task);
    if (index.count(key))
      s.warnings.push_back(fmt::format("two runs of {} / {} / {} (repeat {}); the later one is scored", r->model,
                                       r->task, r->condition, repeat));
    index[key] = r;
  }

  BaselineTimes protocol;
  if (baseline.kind == BaselineKind::first_correct) {
    protocol = first_correct_times(runs, baseline.model, s.warnings);
    for (const auto& t : s.tasks)
      if (!protocol.count(t) && models.count(baseline.model))
        s.warnings.push_back(fmt::format("task {}: {} has no correct, timed submission in its unguided run; "
                                         "eager is the baseline for this task", t, baseline.model));
  }

  int missing = 0;
  for (const auto& m : s.models) {
    for (const auto& c : s.conditions) {
      GroupScore g;
      g.model = m;
      g.condition = c;
      std::vector<double> perf_terms, all_speedups, sols;
      std::array<std::vector<double>, 3> js, jsd;
      bool all_timed = true;
      for (const auto& t : s.tasks) {
        auto it = index.find({m, c, t});
        const Run* r = it == index.end() ? nullptr : it->second;
        if (!r) ++missing;
        auto ts = score_task(t, r, baseline, protocol);
        if (r) {
          ++g.runs;
          g.input_tokens += r->input_tokens;
          g.cached_tokens += r->cached_tokens;
          g.output_tokens += r->output_tokens;
          g.reasoning_tokens += r->reasoning_tokens;
          g.cost_usd += r->cost_usd;
          g.wall_s += r->wall_s;
          g.turns += r->turns;
        }
        ++g.pairs;
        if (ts.correct) ++g.correct;
        if (ts.correct && !ts.timed) ++g.untimed_correct;
        if (!ts.correct || ts.timed) perf_terms.push_back(ts.score);
        if (ts.timed) {
          all_speedups.push_back(ts.speedup);
          for (size_t p = 0; p < kFastP.size(); ++p)
            if (ts.speedup > kFastP[p]) g.fast_p[p] += 1;
          if (ts.pct_sol) sols.push_back(*ts.pct_sol);
        } else {
          all_timed = false;
        }
        for (size_t l = 0; l < 3; ++l)
          if (ts.js_level[l]) js[l].push_back(*ts.js_level[l]);
        for (size_t l = 0; l < 3; ++l)
          if (ts.js_design_level[l]) jsd[l].push_back(*ts.js_design_level[l]);
        g.tasks.push_back(std::move(ts));
      }
      g.correctness = g.pairs ? static_cast<double>(g.correct) / g.pairs : 0;
      for (auto& f : g.fast_p) f = g.pairs ? f / g.pairs : 0;
      if (!perf_terms.empty()) g.s_perf = geomean(perf_terms);
      if (all_timed && !all_speedups.empty()) g.geomean_speedup = geomean(all_speedups);
      g.pct_sol = mean_of(sols);
      for (size_t l = 0; l < 3; ++l) g.js_level[l] = mean_of(js[l]);
      if (g.js_level[0] && g.js_level[1] && g.js_level[2])
        g.js_impl = (*g.js_level[0] + *g.js_level[1] + *g.js_level[2]) / 3.0;
      for (size_t l = 0; l < 3; ++l) g.js_design_level[l] = mean_of(jsd[l]);
      if (g.js_design_level[0] && g.js_design_level[1] && g.js_design_level[2])
        g.js_design = (*g.js_design_level[0] + *g.js_design_level[1] + *g.js_design_level[2]) / 3.0;
      s.groups.push_back(std::move(g));
    }
  }
  if (missing)
    s.warnings.push_back(fmt::format("{} (model, task, condition) cells have no run with repeat {}; they count "
                                     "as incorrect", missing, repeat));

  // Eligible models (Table 4) and the tasks every model gets right.
  for (const auto& m : s.models) {
    bool ok = true;
    for (const auto& c : s.paired_conditions) {
      const auto* g = s.group(m, c);
      if (!g || !g->geomean_speedup) ok = false;
    }
    if (ok) s.eligible_models.push_back(m);
  }
  for (size_t ti = 0; ti < s.tasks.size(); ++ti) {
    bool ok = !s.models.empty();
    for (const auto& m : s.models)
      for (const auto& c : s.paired_conditions) {
        const auto* g = s.group(m, c);
        if (!g || !g->tasks[ti].timed) ok = false;
      }
    if (ok) s.common_tasks.push_back(s.tasks[ti]);
  }
  for (auto& g : s.groups) {
    std::vector<double> v;
    for (const auto& t : g.tasks)
      if (std::find(s.common_tasks.begin(), s.common_tasks.end(), t.task) != s.common_tasks.end() && t.timed)
        v.push_back(t.speedup);
    if (!v.empty()) g.geomean_speedup_common = geomean(v);
  }

  for (const auto& c : s.conditions) {
    ConditionSummary cs;
    cs.condition = c;
    std::vector<double> sp, jsi, elig;
    std::array<std::vector<double>, 3> jl;
    for (const auto& g : s.groups) {
      if (g.condition != c) continue;
      cs.pairs += g.pairs;
      cs.correct += g.correct;
      if (g.s_perf) sp.push_back(*g.s_perf);
      if (g.js_impl) jsi.push_back(*g.js_impl);
      for (size_t l = 0; l < 3; ++l)
        if (g.js_level[l]) jl[l].push_back(*g.js_level[l]);
      cs.input_tokens += g.input_tokens;
      cs.cached_tokens += g.cached_tokens;
      cs.output_tokens += g.output_tokens;
      cs.cost_usd += g.cost_usd;
      if (std::find(s.eligible_models.begin(), s.eligible_models.end(), g.model) != s.eligible_models.end())
        for (const auto& t : g.tasks)
          if (t.timed) elig.push_back(t.speedup);
    }
    cs.correctness = cs.pairs ? static_cast<double>(cs.correct) / cs.pairs : 0;
    cs.s_perf_mean = mean_of(sp);
    cs.js_impl_mean = mean_of(jsi);
    for (size_t l = 0; l < 3; ++l) cs.js_level_mean[l] = mean_of(jl[l]);
    if (!elig.empty()) cs.geomean_speedup_eligible = geomean(elig);
    s.summary.push_back(std::move(cs));
  }

  // Judge scores against measured speedups, over judged runs whose final submission is correct and timed.
  for (int which = -1; which < 3; ++which) {
    Correlation corr;
    corr.what = which < 0 ? "JS_impl" : kLevels[which];
    std::vector<double> x, y;
    for (const auto& g : s.groups)
      for (const auto& t : g.tasks) {
        auto v = which < 0 ? t.js_impl : t.js_level[which];
        if (t.timed && v) {
          x.push_back(*v);
          y.push_back(t.speedup);
        }
      }
    corr.n = static_cast<int>(x.size());
    corr.rho = spearman(x, y);
    s.correlations.push_back(corr);
  }
  // The same per model, pooled over that model's conditions.
  for (const auto& m : s.models)
    for (int which = -1; which < 3; ++which) {
      Correlation corr;
      corr.what = which < 0 ? "JS_impl" : kLevels[which];
      corr.model = m;
      std::vector<double> x, y;
      for (const auto& g : s.groups) {
        if (g.model != m) continue;
        for (const auto& t : g.tasks) {
          auto v = which < 0 ? t.js_impl : t.js_level[which];
          if (t.timed && v) {
            x.push_back(*v);
            y.push_back(t.speedup);
          }
        }
      }
      corr.n = static_cast<int>(x.size());
      corr.rho = spearman(x, y);
      s.model_correlations.push_back(corr);
    }
  return s;
}

namespace {
json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json opt3(const std::array<std::optional<double>, 3>& v) {
  return {{"L1", opt(v[0])}, {"L2", opt(v[1])}, {"L3", opt(v[2])}};
}
}  // namespace

json to_json(const Scores& s) {
  json j = {{"baseline", s.baseline.name()}, {"repeat", s.repeat},        {"models", s.models},
            {"tasks", s.tasks},              {"conditions", s.conditions}, {"paired_conditions", s.paired_conditions},
            {"eligible_models", s.eligible_models}, {"common_tasks", s.common_tasks}, {"warnings", s.warnings}};
  j["groups"] = json::array();
  for (const auto& g : s.groups) {
    json jt = json::array();
    for (const auto& t : g.tasks)
      jt.push_back({{"task", t.task}, {"has_run", t.has_run}, {"correct", t.correct}, {"timed", t.timed},
                    {"speedup", t.timed ? json(t.speedup) : json(nullptr)}, {"score", t.correct && !t.timed ? json(nullptr) : json(t.score)},
                    {"pct_sol", opt(t.pct_sol)}, {"baseline_fallbacks", t.baseline_fallbacks},
                    {"js_impl", opt(t.js_impl)}, {"js_level", opt3(t.js_level)},
                    {"js_design", opt(t.js_design)}});
    j["groups"].push_back(
        {{"model", g.model}, {"condition", g.condition}, {"condition_label", condition_label(g.condition)},
         {"pairs", g.pairs}, {"correct", g.correct}, {"untimed_correct", g.untimed_correct},
         {"correctness", g.correctness}, {"s_perf", opt(g.s_perf)},
         {"fast_p", {{"fast_1", g.fast_p[0]}, {"fast_1.5", g.fast_p[1]}, {"fast_2", g.fast_p[2]}}},
         {"geomean_speedup", opt(g.geomean_speedup)}, {"geomean_speedup_common", opt(g.geomean_speedup_common)},
         {"pct_sol", opt(g.pct_sol)}, {"runs", g.runs},
         {"tokens", {{"input", g.input_tokens}, {"cached", g.cached_tokens}, {"output", g.output_tokens},
                     {"reasoning", g.reasoning_tokens}}},
         {"cost_usd", g.cost_usd}, {"wall_s", g.wall_s}, {"turns", g.turns},
         {"js_impl", opt(g.js_impl)}, {"js_level", opt3(g.js_level)},
         {"js_design", opt(g.js_design)}, {"js_design_level", opt3(g.js_design_level)}, {"tasks", jt}});
  }
  j["summary"] = json::array();
  for (const auto& c : s.summary)
    j["summary"].push_back({{"condition", c.condition}, {"condition_label", condition_label(c.condition)},
                            {"pairs", c.pairs}, {"correct", c.correct}, {"correctness", c.correctness},
                            {"s_perf_mean", opt(c.s_perf_mean)},
                            {"geomean_speedup_eligible", opt(c.geomean_speedup_eligible)},
                            {"js_impl_mean", opt(c.js_impl_mean)}, {"js_level_mean", opt3(c.js_level_mean)},
                            {"tokens", {{"input", c.input_tokens}, {"cached", c.cached_tokens}, {"output", c.output_tokens}}},
                            {"cost_usd", c.cost_usd}});
  j["correlations"] = json::array();
  for (const auto& c : s.correlations) j["correlations"].push_back({{"what", c.what}, {"n", c.n}, {"spearman", opt(c.rho)}});
  j["model_correlations"] = json::array();
  for (const auto& c : s.model_correlations)
    j["model_correlations"].push_back({{"model", c.model}, {"what", c.what}, {"n", c.n}, {"spearman", opt(c.rho)}});
  return j;
}

}  // namespace d2k::score
