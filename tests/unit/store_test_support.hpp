#pragma once
// A tiny campaign whose scores are computed by hand in score_test.cpp (and checked again through the store and
// the report): models A and B, tasks t1 and t2, conditions none and all. Each evaluation has two timed workloads
// (w0, w1) and one untimed correctness workload.
//   eager   t1: w0 4 ms, w1 9 ms      t2: w0 8 ms, w1 2 ms
//   compile t1: w0 2 ms, w1 absent    t2: w0 4 ms, w1 1 ms
// Final submissions (solution ms w0, w1):
//   A none: t1 (2, 3) after an incorrect seq 0;  t2 (8, 1) after a correct, slower seq 0 (16, 2)
//   A all:  t1 (1, 1);  t2 (2, 0.5)
//   B none: t1 incorrect;  t2 (16, 2)
//   B all:  t1 (4, 3);  t2 (2, 1)
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "score/data.hpp"

namespace d2k::testing {

struct TinySub {
  bool correct;
  double w0_ms, w1_ms;
};
struct TinyRun {
  std::string model, task, condition;
  std::vector<TinySub> subs;  // the last is final
  std::vector<std::pair<std::string, double>> judgments;  // level, score; a negative score = invalid (0)
  long long input, cached, output;
  double cost;
};

inline std::vector<TinyRun> tiny_runs(bool with_judgments = true) {
  std::vector<TinyRun> r{
      {"A", "t1", "none", {{false, 0, 0}, {true, 2, 3}}, {{"L1", 50}, {"L2", 25}, {"L3", 0}}, 1000, 400, 100, 1.0},
      {"A", "t2", "none", {{true, 16, 2}, {true, 8, 1}}, {{"L1", 75}, {"L2", 50}, {"L2", 100}, {"L3", -1}}, 2000, 500, 200, 2.0},
      {"A", "t1", "all", {{true, 1, 1}}, {{"L1", 100}, {"L2", 75}, {"L3", 50}}, 3000, 1500, 300, 3.0},
      {"A", "t2", "all", {{true, 2, 0.5}}, {{"L1", 100}, {"L2", 100}, {"L3", 75}}, 4000, 2000, 400, 4.0},
      {"B", "t1", "none", {{false, 0, 0}}, {{"L1", 0}, {"L2", 0}, {"L3", 0}}, 500, 0, 50, 0.5},
      {"B", "t2", "none", {{true, 16, 2}}, {{"L1", 25}, {"L2", 25}, {"L3", 25}}, 600, 100, 60, 0.75},
      {"B", "t1", "all", {{true, 4, 3}}, {{"L1", 50}, {"L2", 50}, {"L3", 50}}, 700, 200, 70, 1.25},
      {"B", "t2", "all", {{true, 2, 1}}, {{"L1", 75}, {"L2", 75}, {"L3", 25}}, 800, 300, 80, 1.5},
  };
  if (!with_judgments)
    for (auto& x : r) x.judgments.clear();
  return r;
}

inline double eager_ms(const std::string& task, int w) { return task == "t1" ? (w ? 9 : 4) : (w ? 2 : 8); }
inline std::optional<double> compile_ms(const std::string& task, int w) {
  if (task == "t1") return w ? std::nullopt : std::optional<double>(2);
  return w ? 1 : 4;
}

// The evaluator-shaped trace (docs/EVALUATOR.md) of one submission.
inline nlohmann::json tiny_trace(const std::string& task, const TinySub& s) {
  nlohmann::json traces = nlohmann::json::array();
  for (int w = 0; w < 2; ++w) {
    nlohmann::json perf = {{"eager", {{"median_ms", eager_ms(task, w)}}}, {"bound", "memory"}};
    if (auto c = compile_ms(task, w)) perf["torch_compile"] = {{"median_ms", *c}};
    else perf["torch_compile_skipped"] = "timeout";
    if (s.correct) {
      double ms = w ? s.w1_ms : s.w0_ms;
      perf["solution"] = {{"median_ms", ms}};
      perf["pct_speed_of_light"] = 10.0 * eager_ms(task, w) / ms;
    }
    traces.push_back({{"task", task}, {"workload", "w" + std::to_string(w)}, {"timed", true},
                      {"status", s.correct || w == 1 ? "passed" : "incorrect_numerics"}, {"performance", perf}});
  }
  traces.push_back({{"task", task}, {"workload", "ragged"}, {"timed", false},
                    {"status", s.correct ? "passed" : "incorrect_numerics"}, {"performance", nlohmann::json::object()}});
  return {{"environment", {{"gpu", "test"}}}, {"traces", traces}};
}

// The same campaign as CampaignData, built by hand (no trace parsing).
inline score::CampaignData tiny_campaign(bool with_judgments = true) {
  score::CampaignData d;
  d.name = "tiny";
  for (const auto& tr : tiny_runs(with_judgments)) {
    score::Run r;
    r.model = tr.model;
    r.task = tr.task;
    r.condition = tr.condition;
    r.status = "finished";
    r.input_tokens = tr.input;
    r.cached_tokens = tr.cached;
    r.output_tokens = tr.output;
    r.cost_usd = tr.cost;
    for (size_t i = 0; i < tr.subs.size(); ++i) {
      const auto& s = tr.subs[i];
      score::Submission sub;
      sub.seq = static_cast<int>(i);
      sub.final = i + 1 == tr.subs.size();
      score::Evaluation e;
      e.correct = s.correct;
      e.status = s.correct ? "passed" : "incorrect_numerics";
      for (int w = 0; w < 2; ++w) {
        score::WorkloadResult wr;
        wr.workload = "w" + std::to_string(w);
        wr.timed = true;
        wr.status = s.correct || w == 1 ? "passed" : "incorrect_numerics";
        wr.eager_ms = eager_ms(tr.task, w);
        wr.compile_ms = compile_ms(tr.task, w);
        if (s.correct) {
          wr.median_ms = w ? s.w1_ms : s.w0_ms;
          wr.pct_sol = 10.0 * eager_ms(tr.task, w) / *wr.median_ms;
        }
        e.workloads.push_back(wr);
      }
      e.workloads.push_back({"ragged", false, s.correct ? "passed" : "incorrect_numerics", {}, {}, {}, {}});
      sub.evaluation = e;
      r.submissions.push_back(sub);
    }
    for (const auto& [level, sc] : tr.judgments) r.judgments.push_back({"impl", level, sc < 0 ? 0 : sc, sc >= 0});
    d.runs.push_back(std::move(r));
  }
  return d;
}

}  // namespace d2k::testing
