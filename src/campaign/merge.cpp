#include "campaign/merge.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <map>
#include <nlohmann/json.hpp>

#include "store/store.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A prepared statement over the store's handle (read-only use).
class Query {
 public:
  Query(store::Store& st, const char* sql) : db_(st.handle()) {
    if (sqlite3_prepare_v2(db_, sql, -1, &q_, nullptr) != SQLITE_OK)
      throw store::StoreError(fmt::format("{}: {}", st.path().string(), sqlite3_errmsg(db_)));
  }
  ~Query() { sqlite3_finalize(q_); }
  Query& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(q_, i, v);
    return *this;
  }
  bool step() { return sqlite3_step(q_) == SQLITE_ROW; }
  std::int64_t i64(int c) { return sqlite3_column_int64(q_, c); }
  double dbl(int c) { return sqlite3_column_double(q_, c); }
  bool null(int c) { return sqlite3_column_type(q_, c) == SQLITE_NULL; }
  std::string text(int c) {
    const unsigned char* t = sqlite3_column_text(q_, c);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* q_ = nullptr;
};

struct Sub {
  std::int64_t id;
  store::SubmissionRow row;
  std::vector<std::pair<std::string, std::string>> evaluations;  // kind, trace_json
};

std::vector<Sub> submissions_of(store::Store& st, std::int64_t run_id) {
  std::vector<Sub> out;
  Query q(st, "SELECT id, seq, turn, kind, language, sha256, source_path, final FROM submissions WHERE run_id=? ORDER BY seq");
  q.bind(1, run_id);
  while (q.step()) {
    Sub s;
    s.id = q.i64(0);
    s.row.run_id = run_id;
    s.row.seq = static_cast<int>(q.i64(1));
    s.row.turn = static_cast<int>(q.i64(2));
    s.row.kind = q.text(3);
    s.row.language = q.text(4);
    s.row.sha256 = q.text(5);
    s.row.source_path = q.text(6);
    s.row.final = q.i64(7) != 0;
    out.push_back(std::move(s));
  }
  for (auto& s : out) {
    Query e(st, "SELECT kind, trace_json FROM evaluations WHERE submission_id=? ORDER BY id");
    e.bind(1, s.id);
    while (e.step()) s.evaluations.emplace_back(e.text(0), e.text(1));
  }
  return out;
}

std::vector<store::JudgmentRow> judgments_of(store::Store& st, std::int64_t run_id) {
  std::vector<store::JudgmentRow> out;
  Query q(st, "SELECT submission_id, kind, level, score, valid, citations, reasoning, raw_output, judge_model, "
              "repeat FROM judgments WHERE run_id=? ORDER BY id");
  q.bind(1, run_id);
  while (q.step()) {
    store::JudgmentRow j;
    j.run_id = run_id;
    if (!q.null(0)) j.submission_id = q.i64(0);
    j.kind = q.text(1);
    j.level = q.text(2);
    j.score = q.dbl(3);
    j.valid = q.i64(4) != 0;
    j.citations = json::parse(q.text(5), nullptr, false);
    j.reasoning = q.text(6);
    j.raw_output = q.text(7);
    j.judge_model = q.text(8);
    j.repeat = static_cast<int>(q.i64(9));
    out.push_back(std::move(j));
  }
  return out;
}

// What must agree for two copies of a run to be the same run.
json run_content(store::Store& st, const store::RunRow& r) {
  json subs = json::array();
  std::map<std::int64_t, int> seq_of;
  for (const auto& s : submissions_of(st, r.id)) {
    seq_of[s.id] = s.row.seq;
    json evs = json::array();
    for (const auto& [kind, trace] : s.evaluations) evs.push_back({kind, json::parse(trace, nullptr, false)});
    subs.push_back({{"seq", s.row.seq}, {"turn", s.row.turn}, {"kind", s.row.kind}, {"language", s.row.language},
                    {"sha256", s.row.sha256}, {"final", s.row.final}, {"evaluations", evs}});
  }
  json judg = json::array();
  for (const auto& j : judgments_of(st, r.id))
    judg.push_back({{"submission_seq", j.submission_id && seq_of.count(*j.submission_id) ? json(seq_of[*j.submission_id]) : json()},
                    {"kind", j.kind}, {"level", j.level}, {"score", j.score}, {"valid", j.valid},
                    {"judge_model", j.judge_model}, {"repeat", j.repeat}});
  return {{"status", r.status}, {"input_tokens", r.input_tokens}, {"cached_tokens", r.cached_tokens},
          {"cache_write_tokens", r.cache_write_tokens}, {"output_tokens", r.output_tokens},
          {"reasoning_tokens", r.reasoning_tokens}, {"cost_usd", r.cost_usd}, {"turns", r.turns},
          {"wall_s", r.wall_s}, {"error", r.error}, {"submissions", subs}, {"judgments", judg}};
}

std::string first_difference(const json& a, const json& b) {
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b[it.key()] != it.value())
      return fmt::format("{}: {} vs {}", it.key(), it.value().dump().substr(0, 200),
                         b.contains(it.key()) ? b[it.key()].dump().substr(0, 200) : "(absent)");
  return "(contents differ)";
}

}  // namespace

MergeStats merge_stores(const fs::path& out_path, const std::vector<fs::path>& inputs) {
  MergeStats stats;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::equivalent(in, out_path, ec)) throw MergeConflict(fmt::format("{} is both an input and the output", in.string()));
    if (!fs::exists(in)) throw store::StoreError(fmt::format("{}: no such store", in.string()));
  }
  auto out = store::Store::open(out_path);
  store::Store::Transaction tx(out);
  for (const auto& in_path : inputs) {
    store::OpenOptions oo;
    oo.create = false;
    auto in = store::Store::open(in_path, oo);
    for (const auto& camp : in.campaigns()) {
      std::int64_t out_cid;
      if (auto existing = out.campaign(camp.name)) {
        json a = existing->config.value("protocol", json()), b = camp.config.value("protocol", json());
        if (a != b)
          throw MergeConflict(fmt::format("campaign '{}': {} was run with another configuration than the one in {} "
                                          "({}); nothing was merged",
                                          camp.name, in_path.string(), out_path.string(), first_difference(b, a)));
        out_cid = existing->id;
      } else {
        store::CampaignRow c = camp;
        out_cid = out.add_campaign(c);
        ++stats.campaigns;
      }
      for (const auto& run : in.runs(camp.id)) {
        json content = run_content(in, run);
        if (auto mine = out.find_run(out_cid, run.model, run.task, run.condition, run.repeat)) {
          json other = run_content(out, *mine);
          if (other == content) {
            ++stats.identical;
            continue;
          }
          throw MergeConflict(fmt::format(
              "conflicting duplicate run: campaign '{}', model {}, task {}, condition {}, repeat {} is in {} and "
              "already in {} with other contents ({}); nothing was merged",
              camp.name, run.model, run.task, run.condition, run.repeat, in_path.string(), out_path.string(),
              first_difference(content, other)));
        }
        store::RunRow r = run;
        r.campaign_id = out_cid;
        std::int64_t rid = out.add_run(r);
        ++stats.runs;
        std::map<std::int64_t, std::int64_t> sub_ids;
        for (auto& s : submissions_of(in, run.id)) {
          store::SubmissionRow row = s.row;
          row.run_id = rid;
          std::int64_t sid = out.add_submission(row);
          sub_ids[s.id] = sid;
          ++stats.submissions;
          for (const auto& [kind, trace] : s.evaluations) {
            out.add_evaluation(sid, kind, json::parse(trace));
            ++stats.evaluations;
          }
        }
        for (auto j : judgments_of(in, run.id)) {
          j.run_id = rid;
          if (j.submission_id) j.submission_id = sub_ids.at(*j.submission_id);
          out.add_judgment(j);
          ++stats.judgments;
        }
      }
    }
  }
  tx.commit();
  return stats;
}

}  // namespace d2k::campaign
