// The judges' pure parts: citation verification, verdict parsing and rules, prompts, noise, snapshots.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "core/files.hpp"
#include "judge/citations.hpp"
#include "judge/noise.hpp"
#include "judge/prompts.hpp"
#include "judge/verdict.hpp"

namespace fs = std::filesystem;
using namespace d2k::judge;

namespace {

Snapshot snap() {
  Snapshot s;
  s.add("solution.py",
        "import triton\n"
        "\n"
        "@triton.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    x = tl.load(x_ptr + offs,   mask=offs < n)\n"
        "    return x\n");
  return s;
}

Citation cite(std::string file, long long a, long long b, std::string quote) {
  Citation c;
  c.file = std::move(file);
  c.start_line = a;
  c.end_line = b;
  c.quote = std::move(quote);
  return c;
}

}  // namespace

TEST(JudgeCitations, SplitAndNormalize) {
  EXPECT_EQ(split_lines("a\r\nb\n").size(), 2u);
  EXPECT_EQ(split_lines("a\n\nb").size(), 3u);
  EXPECT_EQ(split_lines("a\r\nb\n")[0], "a");
  EXPECT_EQ(normalize_ws("  a \t b\n\nc  "), "a b c");
  EXPECT_EQ(normalize_ws(" \n\t"), "");
}

TEST(JudgeCitations, ExactAndWhitespaceTolerantQuotesVerify) {
  auto s = snap();
  auto c = cite("solution.py", 5, 6, "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n x = tl.load(x_ptr + offs, mask=offs < n)");
  verify_citation(c, s);
  EXPECT_TRUE(c.verified) << c.why;
  auto d = cite("./solution.py", 6, 6, "tl.load(x_ptr    +   offs, mask=offs < n)");  // a fragment, other spacing
  verify_citation(d, s);
  EXPECT_TRUE(d.verified) << d.why;
  // Line-number prefixes copied from the numbered rendering are tolerated.
  auto e = cite("solution.py", 5, 6, "5|     offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n6|     x = tl.load(x_ptr + offs,   mask=offs < n)");
  verify_citation(e, s);
  EXPECT_TRUE(e.verified) << e.why;
}

TEST(JudgeCitations, FabricatedOrMisplacedQuotesFail) {
  auto s = snap();
  auto c = cite("solution.py", 5, 6, "tl.atomic_cas(flags + tile, 0, 1)");  // not in the file at all
  verify_citation(c, s);
  EXPECT_FALSE(c.verified);
  EXPECT_NE(c.why.find("does not occur"), std::string::npos) << c.why;
  auto d = cite("solution.py", 1, 2, "x = tl.load(x_ptr + offs");  // in the file, not in the cited lines
  verify_citation(d, s);
  EXPECT_FALSE(d.verified);
  auto e = cite("solution.py", 5, 6, "offs = ... mask=offs < n)");  // elided
  verify_citation(e, s);
  EXPECT_FALSE(e.verified);
}

TEST(JudgeCitations, PathsOutsideTheSnapshotFail) {
  auto s = snap();
  for (const char* f : {"other.py", "/etc/passwd", "../solution.py", "sub/../../solution.py", "", "evaluation.json"}) {
    auto c = cite(f, 1, 1, "import triton");
    verify_citation(c, s);
    EXPECT_FALSE(c.verified) << f;
    EXPECT_FALSE(c.why.empty()) << f;
  }
}

TEST(JudgeCitations, LineRangesAreChecked) {
  auto s = snap();
  struct R { long long a, b; };
  for (R r : {R{0, 1}, R{-3, 1}, R{3, 2}, R{7, 8}, R{8, 8}}) {
    auto c = cite("solution.py", r.a, r.b, "import triton");
    verify_citation(c, s);
    EXPECT_FALSE(c.verified) << r.a << "-" << r.b;
    EXPECT_NE(c.why.find("valid range"), std::string::npos) << c.why;
  }
  auto ok = cite("solution.py", 7, 7, "return x");  // the last line; short but the whole cited text
  verify_citation(ok, s);
  EXPECT_TRUE(ok.verified) << ok.why;
  Snapshot big;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + "\n";
  big.add("solution.py", text);
  auto wide = cite("solution.py", 1, 150, "line 0");
  verify_citation(wide, big);
  EXPECT_FALSE(wide.verified);
  EXPECT_NE(wide.why.find("span"), std::string::npos);
}

TEST(JudgeCitations, QuotesMustIdentifyTheCode) {
  auto s = snap();
  auto c = cite("solution.py", 5, 6, "(0)");  // occurs, but too short to identify anything
  verify_citation(c, s);
  EXPECT_FALSE(c.verified);
  EXPECT_NE(c.why.find("too short"), std::string::npos);
  auto e = cite("solution.py", 5, 6, "  \n ");
  verify_citation(e, s);
  EXPECT_FALSE(e.verified);
  EXPECT_NE(e.why.find("empty"), std::string::npos);
}

TEST(JudgeVerdict, ParsesPlainFencedAndWrappedJson) {
  std::string err;
  auto a = parse_verdict(R"({"reasoning": "r", "score": 75, "citations": [{"file": "solution.py", "start_line": 1, "end_line": 1, "quote": "import triton"}]})", err);
  ASSERT_TRUE(a) << err;
  EXPECT_EQ(*a->score, 75);
  ASSERT_EQ(a->citations.size(), 1u);
  EXPECT_EQ(a->citations[0].start_line, 1);
  auto b = parse_verdict("Here is my judgment:\n```json\n{\"reasoning\": \"r\", \"score\": 0, \"citations\": []}\n```\n", err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(*b->score, 0);
  auto c = parse_verdict("My answer: {\"reasoning\": \"r\", \"score\": 50} -- done", err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(*c->score, 50);
}

TEST(JudgeVerdict, MalformedRepliesSayWhy) {
  std::string err;
  EXPECT_FALSE(parse_verdict("I think it deserves 75.", err));
  EXPECT_NE(err.find("no JSON object"), std::string::npos);
  EXPECT_FALSE(parse_verdict("{\"reasoning\": \"r\", \"score\": 75, \"citations\": [", err));  // truncated
  EXPECT_FALSE(parse_verdict(R"({"reasoning": "r", "score": "75"})", err));
  EXPECT_NE(err.find("must be a number"), std::string::npos);
  EXPECT_FALSE(parse_verdict(R"({"reasoning": "r"})", err));
  EXPECT_NE(err.find("no \"score\""), std::string::npos);
  EXPECT_FALSE(parse_verdict(R"({"score": 25, "citations": [{"file": "a", "quote": "b"}]})", err));
  EXPECT_NE(err.find("citations[0]"), std::string::npos);
  EXPECT_FALSE(parse_verdict(R"({"score": 25, "citations": {"file": "a"}})", err));
  EXPECT_FALSE(parse_verdict(R"({"score": 25, "citations": [{"file": "solution.py", "start_line": 1.5, "end_line": 2, "quote": "q"}]})", err));
}

TEST(JudgeVerdict, RulesOfTheScale) {
  auto s = snap();
  auto check = [&](double score, std::vector<Citation> cs, std::string reasoning = "because") {
    Verdict v;
    v.score = score;
    v.reasoning = reasoning;
    v.citations = std::move(cs);
    return check_verdict(v, s);
  };
  auto good = cite("solution.py", 1, 1, "import triton");
  EXPECT_TRUE(check(75, {good}).empty());
  EXPECT_TRUE(check(0, {}).empty());  // 0 may go without a citation
  auto p = check(150, {good});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("outside 0..100"), std::string::npos);
  EXPECT_EQ(check(-25, {good}).size(), 1u);
  p = check(60, {good});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("not an anchor"), std::string::npos);
  p = check(50, {});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("at least one citation"), std::string::npos);
  EXPECT_EQ(check(50, {good, good, good, good, good}).size(), 1u);  // five citations
  p = check(100, {good, cite("solution.py", 2, 3, "tl.atomic_add(counter, 1)")});  // one fabricated
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("citations[1] failed verification"), std::string::npos);
  EXPECT_EQ(check(25, {good}, "  ").size(), 1u);  // no reasoning
}

TEST(JudgePrompts, EmbeddedSetIsCompleteAndRenders) {
  auto p = embedded_prompts();
  for (const char* n : kPromptNames) EXPECT_FALSE(p.get(n).empty()) << n;
  EXPECT_EQ(p.sha256().size(), 64u);
  // The anchors define all five scores.
  for (const char* a : {"- 100:", "- 75:", "- 50:", "- 25:", "- 0:"}) {
    EXPECT_NE(p.get("anchors_impl").find(a), std::string::npos) << a;
    EXPECT_NE(p.get("anchors_design").find(a), std::string::npos) << a;
  }
  std::map<std::string, std::string> vars{{"task", "T"},      {"level", "L1"},  {"level_title", "t"},
                                          {"depends", ""},    {"guidance", "G"}, {"anchors", "A"},
                                          {"files", "F"},     {"output_format", "O"}, {"reasons", "R"}};
  for (const char* n : {"impl_level", "design_level", "reask", "design_propose"}) {
    auto out = render_template(p.get(n), vars);
    EXPECT_EQ(out.find("{{"), std::string::npos) << n;
  }
  EXPECT_THROW(render_template("a {{nope}} b", vars), std::runtime_error);
  EXPECT_EQ(render_template("x{{level}}y{{task}}", vars), "xL1yT");
}

TEST(JudgePrompts, FolderOverrideNeedsEveryFile) {
  auto dir = fs::temp_directory_path() / ("d2k_judge_prompts_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto p = embedded_prompts();
  for (const auto& [n, t] : p.texts) d2k::write_file_atomic(dir / (n + ".md"), t + (n == "system" ? "\nextra" : ""));
  auto q = load_prompts(dir);
  EXPECT_NE(q.sha256(), p.sha256());
  EXPECT_NE(q.get("system").find("extra"), std::string::npos);
  fs::remove(dir / "reask.md");
  EXPECT_THROW(load_prompts(dir), std::runtime_error);
  fs::remove_all(dir);
}

TEST(JudgeNoise, SpreadOfRepeats) {
  std::vector<NoiseItem> items{{"L1", {50, 50, 50}}, {"L1", {25, 75}}, {"L2", {100, 75, 100}}, {"L3", {0}},
                               {"mean", {50, 60}}};
  auto s = judge_noise(items);
  EXPECT_EQ(s.all.items, 3);  // L3 has one repeat; "mean" is kept apart
  EXPECT_EQ(s.all.judgments, 8);
  EXPECT_EQ(s.all.agree, 1);
  EXPECT_DOUBLE_EQ(s.all.max_range, 50);
  EXPECT_NEAR(s.all.mean_range, (0 + 50 + 25) / 3.0, 1e-12);
  // sample sd: {25,75} -> 35.355..., {100,75,100} -> 14.433...
  EXPECT_NEAR(s.all.mean_sd, (0 + 35.35533905932738 + 14.433756729740644) / 3.0, 1e-9);
  EXPECT_EQ(s.by_level.at("L1").items, 2);
  EXPECT_EQ(s.by_level.at("mean").items, 1);
  EXPECT_FALSE(s.by_level.contains("L3"));
  EXPECT_NE(format_noise(s).find("levels"), std::string::npos);
  EXPECT_NE(format_noise(judge_noise({{"L1", {50}}})).find("no item was judged more than once"), std::string::npos);
  EXPECT_EQ(to_json(s)["all"]["agree"], 1);
}

TEST(JudgeSnapshot, TakesSourcesNeverEvaluatorRecords) {
  auto dir = fs::temp_directory_path() / ("d2k_judge_snap_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  d2k::write_file_atomic(dir / "solution.py", "def solve():\n    pass\n");
  d2k::write_file_atomic(dir / "helper.cuh", "// helper\n");
  d2k::write_file_atomic(dir / "evaluation.json", "{\"median_ms\": 1.5}");
  d2k::write_file_atomic(dir / "worker.log", "speedup 3x");
  d2k::write_file_atomic(dir / "sub" / "trace.json", "{}");
  auto s = snapshot_solution(dir);
  EXPECT_EQ(s.files.size(), 2u);
  EXPECT_TRUE(s.files.contains("solution.py"));
  EXPECT_TRUE(s.files.contains("helper.cuh"));
  auto one = snapshot_solution(dir / "solution.py");
  EXPECT_EQ(one.files.size(), 1u);
  EXPECT_EQ(one.files.at("solution.py").size(), 2u);
  auto text = render_numbered(s);
  EXPECT_NE(text.find("1| def solve():"), std::string::npos) << text;
  EXPECT_EQ(text.find("median_ms"), std::string::npos);
  fs::remove(dir / "solution.py");
  EXPECT_THROW(snapshot_solution(dir), std::runtime_error);  // no solution file
  EXPECT_THROW(snapshot_solution(dir / "absent"), std::runtime_error);
  fs::remove_all(dir);
}

// ---- analysis: judge scores against measured speedups, per model (src/score) -------------------------------

#include "report/report.hpp"
#include "score/score.hpp"
#include "unit/store_test_support.hpp"

TEST(JudgeAnalysis, SpearmanPerModelAndOverall) {
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  ASSERT_EQ(s.correlations.size(), 4u);
  EXPECT_EQ(s.correlations[0].n, 7);  // overall, as before
  ASSERT_EQ(s.model_correlations.size(), 8u);  // 2 models x (JS_impl, L1, L2, L3)
  const auto& a = s.model_correlations[0];
  EXPECT_EQ(a.model, "A");
  EXPECT_EQ(a.what, "JS_impl");
  // A's timed runs: JS_impl 25, 50, 75, 91.7 against speedups 2.45, 1.41, 6, 4: ranks differ by one each way.
  EXPECT_EQ(a.n, 4);
  ASSERT_TRUE(a.rho);
  EXPECT_NEAR(*a.rho, 0.6, 1e-12);
  const auto& b = s.model_correlations[4];
  EXPECT_EQ(b.model, "B");
  EXPECT_EQ(b.n, 3);  // B's unguided t1 is incorrect
  ASSERT_TRUE(b.rho);
  EXPECT_NEAR(*b.rho, 1.0, 1e-12);
  auto j = d2k::score::to_json(s);
  EXPECT_EQ(j["model_correlations"][0]["model"], "A");
  EXPECT_NEAR(j["model_correlations"][0]["spearman"].get<double>(), 0.6, 1e-12);
  auto tables = d2k::report::build_tables(s);
  bool found = false;
  for (const auto& t : tables)
    if (t.id == "correlation")
      for (const auto& r : t.rows) found = found || (r[0] == "JS_impl · A" && r[1] == "4" && r[2] == "0.600");
  EXPECT_TRUE(found);
}

TEST(JudgeAnalysis, JsDesignIsScoredApartFromJsImpl) {
  auto data = d2k::testing::tiny_campaign();
  // Design judgments on A's unguided t1 run (one invalid, counting 0) and t2 run.
  for (auto& r : data.runs) {
    if (r.model != "A" || r.condition != "none") continue;
    bool t1 = r.task == "t1";
    r.judgments.push_back({"design", "L1", t1 ? 100.0 : 50.0, true});
    r.judgments.push_back({"design", "L2", t1 ? 75.0 : 25.0, true});
    r.judgments.push_back({"design", "L3", 50.0, !t1});  // t1: invalid
  }
  auto s = d2k::score::compute_scores(data, {});
  const auto* g = s.group("A", "none");
  ASSERT_TRUE(g);
  ASSERT_TRUE(g->tasks[0].js_design);
  EXPECT_NEAR(*g->tasks[0].js_design, (100 + 75 + 0) / 3.0, 1e-12);
  EXPECT_NEAR(*g->tasks[1].js_design, (50 + 25 + 50) / 3.0, 1e-12);
  ASSERT_TRUE(g->js_design);
  EXPECT_NEAR(*g->js_design, (175.0 / 3 + 125.0 / 3) / 2, 1e-12);
  EXPECT_NEAR(*g->tasks[0].js_impl, 25.0, 1e-12);  // JS_impl unchanged by design judgments
  EXPECT_FALSE(s.group("A", "all")->js_design);
  EXPECT_NEAR(d2k::score::to_json(s)["groups"][0]["js_design"].get<double>(), 50.0, 1e-12);
}
