#include "judge/noise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace d2k::judge {

namespace {

void add(NoiseStats& st, const std::vector<double>& v) {
  double n = static_cast<double>(v.size());
  double mean = 0;
  for (double x : v) mean += x;
  mean /= n;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  double sd = std::sqrt(ss / (n - 1));
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  double range = *hi - *lo;
  // running means
  st.mean_sd = (st.mean_sd * st.items + sd) / (st.items + 1);
  st.mean_range = (st.mean_range * st.items + range) / (st.items + 1);
  st.max_range = std::max(st.max_range, range);
  st.items += 1;
  st.judgments += static_cast<int>(v.size());
  if (range == 0) st.agree += 1;
}

nlohmann::json stats_json(const NoiseStats& s) {
  return {{"items", s.items}, {"judgments", s.judgments}, {"agree", s.agree},
          {"agree_share", s.items ? static_cast<double>(s.agree) / s.items : 0.0},
          {"mean_sd", s.mean_sd}, {"mean_range", s.mean_range}, {"max_range", s.max_range}};
}

std::string stats_line(const std::string& what, const NoiseStats& s) {
  return fmt::format("  {:<6} {:>5} items  all repeats agree {:>5.1f}%  mean sd {:>5.1f}  mean range {:>5.1f}  max range {:>5.1f}\n",
                     what, s.items, s.items ? 100.0 * s.agree / s.items : 0.0, s.mean_sd, s.mean_range, s.max_range);
}

}  // namespace

NoiseSummary judge_noise(const std::vector<NoiseItem>& items) {
  NoiseSummary s;
  for (const auto& it : items) {
    if (it.scores.size() < 2) continue;
    add(s.by_level[it.level], it.scores);
    if (it.level != "mean") add(s.all, it.scores);
  }
  return s;
}

nlohmann::json to_json(const NoiseSummary& s) {
  nlohmann::json j{{"all", stats_json(s.all)}, {"by_level", nlohmann::json::object()}};
  for (const auto& [l, st] : s.by_level) j["by_level"][l] = stats_json(st);
  return j;
}

std::string format_noise(const NoiseSummary& s) {
  if (s.all.items == 0) return "judge noise: no item was judged more than once (use --repeats N, N >= 2)\n";
  std::string o = fmt::format("judge noise (spread of repeated judgments of the same text, scores 0-100):\n");
  o += stats_line("levels", s.all);
  for (const auto& [l, st] : s.by_level) o += stats_line(l, st);
  return o;
}

}  // namespace d2k::judge
