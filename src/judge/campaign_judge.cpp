#include "judge/campaign_judge.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/files.hpp"

namespace d2k::judge {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A prepared statement over the store's connection (reads only; writes go through Store).
class Query {
 public:
  Query(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK)
      throw store::StoreError(fmt::format("judge: {}: {}", sql, sqlite3_errmsg(db)));
  }
  ~Query() { sqlite3_finalize(st_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& bind(int i, long long v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  Query& bind(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw store::StoreError(fmt::format("judge: reading the store: {}", sqlite3_errmsg(db_)));
  }
  long long i64(int c) { return sqlite3_column_int64(st_, c); }
  double dbl(int c) { return sqlite3_column_double(st_, c); }
  bool null(int c) { return sqlite3_column_type(st_, c) == SQLITE_NULL; }
  std::string text(int c) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c))) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// (run, submission or -1, kind, level, repeat)
using Key = std::tuple<long long, long long, std::string, std::string, int>;

std::set<Key> existing(store::Store& st, const std::string& judge_model) {
  std::set<Key> out;
  Query q(st.handle(), "SELECT run_id, COALESCE(submission_id, -1), kind, level, repeat FROM judgments WHERE judge_model=?");
  q.bind(1, judge_model);
  while (q.step()) out.emplace(q.i64(0), q.i64(1), q.text(2), q.text(3), static_cast<int>(q.i64(4)));
  return out;
}

struct FinalSub {
  long long id = 0;
  std::string source_path;
};

std::map<long long, FinalSub> final_submissions(store::Store& st, long long campaign_id) {
  std::map<long long, FinalSub> out;
  Query q(st.handle(),
          "SELECT s.run_id, s.id, s.source_path FROM submissions s JOIN runs r ON r.id = s.run_id "
          "WHERE r.campaign_id=? AND s.final=1");
  q.bind(1, campaign_id);
  while (q.step()) out[q.i64(0)] = {q.i64(1), q.text(2)};
  return out;
}

bool fatal(const agent::ProviderError& e) {
  using K = agent::ErrorKind;
  return e.kind() == K::config || e.kind() == K::auth || e.kind() == K::not_found;
}

std::string safe_name(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (o.empty() || o == "." || o == "..") o = "_" + o;
  return o;
}

class Runner {
 public:
  Runner(store::Store& st, const CampaignJudgeOptions& opt, CampaignJudgeResult& res)
      : st_(st), opt_(opt), res_(res), judge_(*opt.judge, opt.prompts), done_(existing(st, opt.judge_model)) {}

  void log(const std::string& s) {
    if (opt_.log) opt_.log(s);
  }
  void fail(const std::string& what) {
    ++res_.failed;
    res_.errors.push_back(what);
    log("error: " + what);
  }

  const Task* task(const std::string& name) {
    auto it = tasks_.find(name);
    if (it != tasks_.end()) return it->second ? &*it->second : nullptr;
    std::string why;
    auto t = opt_.load_task ? opt_.load_task(name, why) : std::nullopt;
    if (!t) fail(fmt::format("task '{}': {}", name, why.empty() ? "cannot be loaded" : why));
    auto& slot = tasks_[name];
    slot = std::move(t);
    return slot ? &*slot : nullptr;
  }

  // Judges the missing (level, repeat) pairs of one subject; false when a fatal error stopped everything.
  bool judge_subject(const store::RunRow& run, std::optional<long long> sub_id, const Task& t, const Subject& subj,
                     const json& extra_raw) {
    for (int r = 0; r < opt_.repeats; ++r)
      for (const auto& level : task_levels(t)) {
        Key k{run.id, sub_id.value_or(-1), subj.kind, level, r};
        if (done_.contains(k)) {
          ++res_.skipped;
          continue;
        }
        std::string what = fmt::format("{} {} {} {} {} repeat {}", subj.kind, run.model, run.task, run.condition, level, r);
        LevelJudgment lj;
        try {
          lj = judge_.judge_level(t, level, subj);
        } catch (const agent::ProviderError& e) {
          fail(fmt::format("{}: judge API error ({}): {}", what, agent::error_kind_name(e.kind()), e.what()));
          if (fatal(e)) {
            res_.aborted = true;
            return false;
          }
          continue;
        } catch (const std::exception& e) {
          fail(fmt::format("{}: {}", what, e.what()));
          continue;
        }
        res_.judge_usage += lj.usage;
        store::JudgmentRow row;
        row.run_id = run.id;
        row.submission_id = sub_id;
        row.kind = subj.kind;
        row.level = level;
        row.score = lj.valid ? lj.score : 0;
        row.valid = lj.valid;
        row.citations = lj.citations_json();
        row.reasoning = lj.reasoning;
        json raw = lj.raw_json();
        for (auto it = extra_raw.begin(); it != extra_raw.end(); ++it) raw[it.key()] = it.value();
        row.raw_output = raw.dump();
        row.judge_model = opt_.judge_model;
        row.repeat = r;
        st_.add_judgment(row);
        done_.insert(k);
        ++res_.judged;
        if (!lj.valid) ++res_.invalid;
        log(fmt::format("{}: {}{}", what, lj.valid ? fmt::format("{:g}", lj.score) : "invalid (0)",
                        lj.attempts.size() > 1 ? " after a re-ask" : ""));
      }
    return true;
  }

  bool all_done(const store::RunRow& run, std::optional<long long> sub_id, const std::string& kind, const Task& t) {
    for (int r = 0; r < opt_.repeats; ++r)
      for (const auto& level : task_levels(t))
        if (!done_.contains(Key{run.id, sub_id.value_or(-1), kind, level, r})) return false;
    return true;
  }

  bool impl(const std::vector<store::RunRow>& runs, long long campaign_id) {
    auto finals = final_submissions(st_, campaign_id);
    for (const auto& run : runs) {
      auto f = finals.find(run.id);
      if (f == finals.end()) {
        log(fmt::format("impl {} {} {}: no final submission, not judged", run.model, run.task, run.condition));
        continue;
      }
      const Task* t = task(run.task);
      if (!t) continue;
      if (all_done(run, f->second.id, "impl", *t)) {
        res_.skipped += opt_.repeats * static_cast<int>(task_levels(*t).size());
        continue;
      }
      fs::path src = f->second.source_path;
      if (src.is_relative() && !opt_.base_dir.empty() && !fs::exists(src)) src = opt_.base_dir / src;
      Subject subj;
      try {
        subj.snapshot = snapshot_solution(src);
      } catch (const std::exception& e) {
        fail(fmt::format("impl {} {} {}: the final submission: {}", run.model, run.task, run.condition, e.what()));
        continue;
      }
      json extra{{"source_path", f->second.source_path}};
      if (!judge_subject(run, f->second.id, *t, subj, extra)) return false;
    }
    return true;
  }

  // The proposal of (model, task): the kept file, else one recorded with an earlier design judgment, else asked.
  std::optional<std::string> proposal(const store::RunRow& run, const Task& t, const std::string& campaign) {
    fs::path dir = opt_.proposals_dir / safe_name(campaign) / safe_name(run.model) / safe_name(run.task);
    fs::path file = dir / kProposalFile;
    if (auto text = read_file(file)) return *text;
    {
      Query q(st_.handle(), "SELECT raw_output FROM judgments WHERE run_id=? AND kind='design' ORDER BY id LIMIT 1");
      q.bind(1, run.id);
      if (q.step()) {
        json raw = json::parse(q.text(0), nullptr, false);
        if (raw.is_object() && raw.contains("proposal") && raw["proposal"].is_string()) {
          std::string p = raw["proposal"].get<std::string>();
          fs::create_directories(dir);
          write_file_atomic(file, p);
          return p;
        }
      }
    }
    std::unique_ptr<agent::Provider> model;
    try {
      if (!opt_.model_provider) throw std::runtime_error("no model registry to reach the models under test");
      model = opt_.model_provider(run.model);
    } catch (const std::exception& e) {
      fail(fmt::format("design {} {}: {}", run.model, run.task, e.what()));
      return std::nullopt;
    }
    try {
      Proposal p = propose_design(*model, t, opt_.prompts);
      ++res_.proposals;
      res_.design_usage += p.usage;
      fs::create_directories(dir);
      write_file_atomic(file, p.text);
      write_file_atomic(dir / "proposal.json",
                        json{{"model", run.model}, {"task", run.task}, {"stop_reason", p.stop_reason},
                             {"usage", agent::to_json(p.usage)}, {"prompt_sha256", opt_.prompts.sha256()}}
                            .dump(2));
      log(fmt::format("design {} {}: proposal written to {}", run.model, run.task, file.string()));
      return p.text;
    } catch (const agent::ProviderError& e) {
      fail(fmt::format("design {} {}: API error of the model under test ({}): {}", run.model, run.task,
                       agent::error_kind_name(e.kind()), e.what()));
      // A missing key for one model under test does not stop the others; the judge's own errors do.
    } catch (const std::exception& e) {
      fail(fmt::format("design {} {}: {}", run.model, run.task, e.what()));
    }
    return std::nullopt;
  }

  bool design(const std::vector<store::RunRow>& runs, const std::string& campaign) {
    // One design per (model, task), recorded against its unguided run of lowest repeat (else its first run).
    std::map<std::pair<std::string, std::string>, const store::RunRow*> anchor;
    for (const auto& r : runs) {
      auto& a = anchor[{r.model, r.task}];
      bool unguided = r.condition == "none" || r.condition == "unguided";
      bool a_unguided = a && (a->condition == "none" || a->condition == "unguided");
      if (!a || (unguided && !a_unguided) || (unguided == a_unguided && r.repeat < a->repeat)) a = &r;
    }
    for (const auto& [key, run] : anchor) {
      const Task* t = task(run->task);
      if (!t) continue;
      if (all_done(*run, std::nullopt, "design", *t)) {
        res_.skipped += opt_.repeats * static_cast<int>(task_levels(*t).size());
        continue;
      }
      auto text = proposal(*run, *t, campaign);
      if (!text) continue;
      json extra{{"proposal", *text}, {"proposal_model", run->model}};
      if (!judge_subject(*run, std::nullopt, *t, design_subject(*text), extra)) return false;
    }
    return true;
  }

 private:
  store::Store& st_;
  const CampaignJudgeOptions& opt_;
  CampaignJudgeResult& res_;
  Judge judge_;
  std::set<Key> done_;
  std::map<std::string, std::optional<Task>> tasks_;
};

}  // namespace

CampaignJudgeResult judge_campaign(store::Store& st, const CampaignJudgeOptions& opt) {
  if (!opt.judge) throw std::invalid_argument("judge_campaign: no judge provider");
  if (opt.repeats < 1) throw std::invalid_argument("judge_campaign: repeats must be at least 1");
  CampaignJudgeResult res;
  auto camp = st.resolve_campaign(opt.campaign);
  auto runs = st.runs(camp.id);
  Runner r(st, opt, res);
  if (opt.impl && !r.impl(runs, camp.id)) return res;
  if (opt.design) r.design(runs, camp.name);
  return res;
}

NoiseSummary stored_noise(store::Store& st, std::int64_t campaign_id, const std::string& judge_model) {
  // (judge model, run, submission, kind) -> level -> repeat -> score
  std::map<std::tuple<std::string, long long, long long, std::string>, std::map<std::string, std::map<int, double>>> g;
  Query q(st.handle(),
          "SELECT j.judge_model, j.run_id, COALESCE(j.submission_id, -1), j.kind, j.level, j.repeat, j.score, j.valid "
          "FROM judgments j JOIN runs r ON r.id = j.run_id WHERE r.campaign_id=? AND (?='' OR j.judge_model=?)");
  q.bind(1, static_cast<long long>(campaign_id)).bind(2, judge_model).bind(3, judge_model);
  while (q.step())
    g[{q.text(0), q.i64(1), q.i64(2), q.text(3)}][q.text(4)][static_cast<int>(q.i64(5))] = q.i64(7) ? q.dbl(6) : 0.0;
  std::vector<NoiseItem> items;
  for (const auto& [key, levels] : g) {
    std::map<int, std::vector<double>> per_repeat;
    for (const auto& [level, reps] : levels) {
      NoiseItem it{level, {}};
      for (const auto& [r, s] : reps) {
        it.scores.push_back(s);
        per_repeat[r].push_back(s);
      }
      items.push_back(std::move(it));
    }
    NoiseItem mean{"mean", {}};
    for (const auto& [r, v] : per_repeat) {
      if (v.size() != levels.size()) continue;  // a repeat missing a level
      double s = 0;
      for (double x : v) s += x;
      mean.scores.push_back(s / static_cast<double>(v.size()));
    }
    items.push_back(std::move(mean));
  }
  return judge_noise(items);
}

}  // namespace d2k::judge
