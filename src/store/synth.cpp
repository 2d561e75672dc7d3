#include "store/synth.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace d2k::store {

using nlohmann::json;

namespace {

const char* const kConditions[] = {"none", "L1", "L1+L2", "all"};
const double kGuidanceGain[] = {0.0, 0.22, 0.30, 0.38};  // added log-speedup per condition

json timing(double ms) { return {{"median_ms", ms}, {"mean_ms", ms * 1.01}, {"samples", 50}}; }

}  // namespace

std::int64_t synthesize(Store& store, const SynthOptions& opt) {
  if (opt.models < 1 || opt.tasks < 1 || opt.conditions < 1 || opt.conditions > 4 || opt.repeats < 1)
    throw StoreError("synth: models, tasks and repeats must be >= 1 and conditions in 1..4");
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::normal_distribution<double> n01(0.0, 1.0);

  std::vector<std::string> models, tasks, conds;
  for (int m = 0; m < opt.models; ++m) models.push_back(fmt::format("model-{}", static_cast<char>('a' + m % 26)) +
                                                        (m >= 26 ? std::to_string(m / 26) : ""));
  for (int t = 0; t < opt.tasks; ++t) tasks.push_back(fmt::format("{:03}_task", t + 1));
  // With fewer than four conditions: unguided first, then guided, then the ablations.
  const int order[] = {0, 3, 1, 2};
  for (int c = 0; c < opt.conditions; ++c) conds.push_back(kConditions[order[c]]);

  // Per task: workloads with eager times and torch.compile times; per model: a skill.
  struct TaskFacts {
    std::vector<std::string> workloads;
    std::vector<double> eager_ms, compile_ms, floor_ms;
    double difficulty;
  };
  std::vector<TaskFacts> facts;
  for (int t = 0; t < opt.tasks; ++t) {
    TaskFacts f;
    int nw = 2 + static_cast<int>(u01(rng) * 3);  // 2..4 timed workloads, + one correctness workload
    f.difficulty = u01(rng);
    for (int w = 0; w < nw; ++w) {
      f.workloads.push_back(fmt::format("w{}", w));
      double e = std::exp(n01(rng) * 1.2) * 0.5;
      f.eager_ms.push_back(e);
      f.compile_ms.push_back(u01(rng) < 0.05 ? -1.0 : e * (0.55 + 0.45 * u01(rng)));
      f.floor_ms.push_back(e / (4.0 + 6.0 * u01(rng)));
    }
    facts.push_back(std::move(f));
  }
  std::vector<double> skill;
  for (int m = 0; m < opt.models; ++m) skill.push_back(0.9 - 0.12 * m + 0.1 * n01(rng));

  json config = {{"models", models}, {"tasks", tasks}, {"conditions", conds}, {"repeats", opt.repeats},
                 {"synthetic", true}, {"seed", opt.seed}};
  auto cid = store.add_campaign({0, opt.campaign, config, "synthetic", ""});

  for (int m = 0; m < opt.models; ++m)
    for (int c = 0; c < opt.conditions; ++c)
      for (int t = 0; t < opt.tasks; ++t)
        for (int r = 0; r < opt.repeats; ++r) {
          const auto& f = facts[t];
          int ci = order[c];
          Store::Transaction tx(store);
          RunRow run;
          run.campaign_id = cid;
          run.model = models[m];
          run.task = tasks[t];
          run.condition = conds[c];
          run.repeat = r;
          run.status = "running";
          run.id = store.add_run(run);

          double p_correct = std::clamp(0.80 + 0.06 * skill[m] + 0.05 * (ci > 0) + 0.03 * ci - 0.1 * f.difficulty, 0.3, 0.995);
          double mean_log = 0.35 * skill[m] + kGuidanceGain[ci] * (0.6 + 0.8 * skill[m]) - 0.3 * f.difficulty;
          int nsub = 1 + static_cast<int>(u01(rng) * 5);
          int last_correct = -1;
          std::vector<std::int64_t> sub_ids;
          for (int s = 0; s < nsub; ++s) {
            bool correct = u01(rng) < (s + 1 == nsub ? p_correct : 0.6 + 0.3 * p_correct);
            SubmissionRow sr;
            sr.run_id = run.id;
            sr.seq = s;
            sr.turn = 10 + 30 * s + static_cast<int>(u01(rng) * 20);
            sr.kind = "submit";
            sr.language = "triton";
            sr.sha256 = fmt::format("{:016x}{:016x}", rng(), rng());
            sr.source_path = fmt::format("runs/{}/{}/{}/{}/submissions/{}/solution.py", run.model, run.task,
                                         run.condition, r, s);
            auto sid = store.add_submission(sr);
            sub_ids.push_back(sid);
            // Later submissions are faster on average.
            double log_speed = mean_log - 0.25 * (nsub - 1 - s) + 0.35 * n01(rng);
            json traces = json::array();
            for (size_t w = 0; w < f.workloads.size(); ++w) {
              double sol = std::max(f.eager_ms[w] / std::exp(log_speed + 0.15 * n01(rng)), f.floor_ms[w] * 1.05);
              json perf = {{"eager", timing(f.eager_ms[w])}, {"flops", 1e9}, {"bytes", 1e8}, {"bound", "memory"}};
              if (f.compile_ms[w] > 0) perf["torch_compile"] = timing(f.compile_ms[w]);
              if (correct) {
                perf["solution"] = timing(sol);
                perf["speedup_vs_eager"] = f.eager_ms[w] / sol;
                if (f.compile_ms[w] > 0) perf["speedup_vs_compile"] = f.compile_ms[w] / sol;
                perf["ceiling"] = 4000.0;
                perf["pct_speed_of_light"] = 100.0 * f.floor_ms[w] / sol;
              }
              traces.push_back({{"task", run.task}, {"workload", f.workloads[w]}, {"timed", true},
                                {"solution", {{"name", "solution"}, {"language", "triton"}, {"sha256", sr.sha256}}},
                                {"status", correct ? "passed" : (w == 0 ? "incorrect_numerics" : "passed")},
                                {"skipped", ""}, {"message", ""}, {"performance", perf}});
            }
            traces.push_back({{"task", run.task}, {"workload", "ragged"}, {"timed", false},
                              {"status", correct ? "passed" : "incorrect_numerics"}, {"performance", json::object()}});
            store.add_evaluation(sid, "official", {{"environment", {{"gpu", "synthetic"}}}, {"traces", traces}});
            if (correct) last_correct = s;
          }
          int fin = last_correct >= 0 ? last_correct : nsub - 1;
          store.set_final_submission(run.id, sub_ids[fin]);

          double scale = 1.0 + 0.3 * (ci > 0) + 0.05 * ci;
          run.status = "finished";
          run.turns = 40 + static_cast<int>(u01(rng) * 200);
          run.input_tokens = static_cast<long long>(run.turns * 30000 * scale * (0.8 + 0.4 * u01(rng)));
          run.cached_tokens = static_cast<long long>(run.input_tokens * (0.7 + 0.2 * u01(rng)));
          run.output_tokens = static_cast<long long>(run.turns * 900 * (0.8 + 0.4 * u01(rng)));
          run.reasoning_tokens = run.output_tokens / 3;
          double price_in = 1.0 + 2.0 * (opt.models - m) / opt.models, price_out = price_in * 5;
          run.cost_usd = ((run.input_tokens - run.cached_tokens) * price_in + run.cached_tokens * price_in * 0.1 +
                          run.output_tokens * price_out) / 1e6;
          run.wall_s = run.turns * (20 + 20 * u01(rng));
          run.trajectory_path = fmt::format("runs/{}/{}/{}/{}/trajectory.json", run.model, run.task, run.condition, r);
          store.update_run(run);

          if (opt.judgments) {
            bool fin_correct = last_correct >= 0;
            for (int l = 0; l < 3; ++l) {
              double q = (fin_correct ? 0.45 : 0.2) + 0.25 * (mean_log) + 0.08 * ci - 0.08 * l + 0.15 * n01(rng);
              double score = std::clamp(std::round(q * 4) * 25, 0.0, 100.0);
              JudgmentRow j;
              j.run_id = run.id;
              j.submission_id = sub_ids[fin];
              j.kind = "impl";
              j.level = fmt::format("L{}", l + 1);
              j.valid = u01(rng) > 0.03;
              j.score = j.valid ? score : 0;
              j.citations = json::array({{{"file", "solution.py"}, {"start_line", 10}, {"end_line", 14},
                                          {"quote", "tl.dot(a, b)"}, {"verified", j.valid}}});
              j.reasoning = "synthetic";
              j.raw_output = json{{"score", j.score}}.dump();
              j.judge_model = "judge-synthetic";
              store.add_judgment(j);
            }
          }
          tx.commit();
        }
  return cid;
}

}  // namespace d2k::store
