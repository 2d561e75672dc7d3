// The report: the tables' numbers against the tiny campaign's hand-computed values, the HTML's
// self-containment, and a rendering by headless Chromium to a PNG.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "report/report.hpp"
#include "score/score.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace d2k::report;

namespace {

const Table& find(const std::vector<Table>& ts, const std::string& id) {
  for (const auto& t : ts)
    if (t.id == id) return t;
  throw std::runtime_error("no table " + id);
}

std::vector<std::string> row(const Table& t, const std::string& first, size_t nth = 0) {
  for (const auto& r : t.rows)
    if (r[0] == first && nth-- == 0) return r;
  return {};
}

TEST(ReportFormat, Numbers) {
  EXPECT_EQ(fmt_pct(0.931), "93.1%");
  EXPECT_EQ(fmt_ratio(1.4567), "1.46");
  EXPECT_EQ(fmt_speedup(1.69), "1.69×");
  EXPECT_EQ(fmt_count(12345678), "12.35M");
  EXPECT_EQ(fmt_count(999), "999");
  EXPECT_EQ(fmt_usd(12.345), "$12.35");
}

TEST(ReportTables, Table1CorrectnessAndSperf) {
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  auto ts = build_tables(s);
  const auto& t = find(ts, "table1");
  EXPECT_EQ(t.header, (std::vector<std::string>{"Model", "Correct unguided", "Correct guided", "Δ correct",
                                                "S_perf unguided", "S_perf guided", "Δ S_perf"}));
  // A: 100% -> 100%; S_perf 12^(1/4) = 1.861 -> sqrt(24) = 4.899 (+163.2%).
  EXPECT_EQ(row(t, "A"), (std::vector<std::string>{"A", "100.0%", "100.0%", "+0.0 pp", "1.86", "4.90", "+163.2%"}));
  // B: 50% -> 100%; S_perf 0.595 -> 2.213 (+272.2%).
  EXPECT_EQ(row(t, "B"), (std::vector<std::string>{"B", "50.0%", "100.0%", "+50.0 pp", "0.59", "2.21", "+272.2%"}));
  // All models: pooled correctness 3/4 -> 4/4; mean S_perf 1.228 -> 3.556 (+189.6%).
  EXPECT_EQ(row(t, "All models"),
            (std::vector<std::string>{"All models", "75.0%", "100.0%", "+25.0 pp", "1.23", "3.56", "+189.6%"}));
}

TEST(ReportTables, ScoresTable4Table6AblationHeatmap) {
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  auto ts = build_tables(s);
  // fast_p for A unguided: 100%, 50%, 50%; geomean over the common task t2: sqrt(2).
  auto a = row(find(ts, "scores"), "A");
  EXPECT_EQ(a, (std::vector<std::string>{"A", "unguided", "2/2", "1.86", "100.0%", "50.0%", "50.0%", "1.86×",
                                          "1.41×", "20.0%"}));
  auto b = row(find(ts, "scores"), "B");
  EXPECT_EQ(b[2], "1/2");
  EXPECT_EQ(b[7], "–");  // not correct everywhere
  const auto& t4 = find(ts, "table4");
  ASSERT_EQ(t4.rows.size(), 2u);  // A and the "All 1 models" row
  EXPECT_EQ(row(t4, "A"), (std::vector<std::string>{"A", "1.86×", "4.90×", "+163.2%"}));
  const auto& t6 = find(ts, "table6");
  // A unguided: 3000 input, 900 cached, 300 output, $3.00; guided $7.00 = +133.3%.
  EXPECT_EQ(row(t6, "A"), (std::vector<std::string>{"A", "unguided", "2", "3.0k", "900", "300", "$3.00", "–"}));
  EXPECT_EQ(row(t6, "A", 1), (std::vector<std::string>{"A", "guided", "2", "7.0k", "3.5k", "700", "$7.00", "+133.3%"}));
  const auto& ab = find(ts, "ablation");
  EXPECT_EQ(ab.header, (std::vector<std::string>{"Model", "unguided", "guided"}));
  EXPECT_EQ(row(ab, "Mean"), (std::vector<std::string>{"Mean", "1.23", "3.56"}));
  const auto& hm = find(ts, "heatmap");
  EXPECT_EQ(row(hm, "t1"), (std::vector<std::string>{"t1", "2.45", "6.00", "✗", "1.73"}));
  EXPECT_EQ(row(hm, "t2"), (std::vector<std::string>{"t2", "1.41", "4.00", "0.71", "2.83"}));
}

TEST(ReportTables, DesignTableFromDesignJudgments) {
  auto data = d2k::testing::tiny_campaign();
  // Design judgments on A's unguided runs: t1 L1 80, L2 40, L3 0; t2 L1 60, L2 20, L3 invalid (0).
  // A: L1 70, L2 30, L3 0, JS_design 33.3 over 2 tasks. B has none: no row.
  for (auto& r : data.runs) {
    if (r.model != "A" || r.condition != "none") continue;
    bool t1 = r.task == "t1";
    r.judgments.push_back({"design", "L1", t1 ? 80.0 : 60.0, true});
    r.judgments.push_back({"design", "L2", t1 ? 40.0 : 20.0, true});
    r.judgments.push_back({"design", "L3", 0.0, t1});
  }
  auto s = d2k::score::compute_scores(data, {});
  auto tables = build_tables(s);
  const auto& t = find(tables, "design");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(row(t, "A"), (std::vector<std::string>{"A", "70.0", "30.0", "0.0", "33.3", "2"}));
  auto md = render_markdown({"tiny", "t.sqlite", &s});
  EXPECT_NE(md.find("JS_design: design proposals without guidance"), std::string::npos);
}

TEST(ReportTables, Table2AndCorrelationFromJudgments) {
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  auto ts = build_tables(s);
  const auto& t2 = find(ts, "table2");
  ASSERT_FALSE(t2.rows.empty());
  EXPECT_EQ(t2.header[1], "L1 unguided");
  // A unguided: L1 62.5, L2 50, L3 0, JS_impl 37.5; guided: L1 100, L2 87.5, L3 62.5, JS_impl 83.3.
  EXPECT_EQ(row(t2, "A"), (std::vector<std::string>{"A", "62.5", "100.0", "50.0", "87.5", "0.0", "62.5", "37.5",
                                                     "83.3"}));
  const auto& c = find(ts, "correlation");
  EXPECT_EQ(row(c, "JS_impl"), (std::vector<std::string>{"JS_impl", "7", "0.800"}));

  EXPECT_TRUE(find(ts, "design").rows.empty());  // the tiny campaign has JS_impl judgments only

  auto none = d2k::score::compute_scores(d2k::testing::tiny_campaign(false), {});
  auto tn = build_tables(none);
  EXPECT_TRUE(find(tn, "table2").rows.empty());
  auto md = render_markdown({"tiny", "t.sqlite", &none});
  EXPECT_NE(md.find("_No judgments yet"), std::string::npos);
  auto html = render_html({"tiny", "t.sqlite", &none});
  EXPECT_NE(html.find("class=\"empty\">No judgments yet"), std::string::npos);
}

TEST(ReportRender, MarkdownAndSelfContainedHtml) {
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  ReportInput in{"tiny <campaign>", "t.sqlite", &s};
  auto md = render_markdown(in);
  EXPECT_NE(md.find("| A | 100.0% | 100.0% | +0.0 pp | 1.86 | 4.90 | +163.2% |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Table 4"), std::string::npos);
  auto html = render_html(in);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("tiny &lt;campaign&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("tiny <campaign>"), std::string::npos);
  // Nothing fetched: no scripts, links, external URLs or images by reference.
  for (const char* bad : {"http://", "https://", "<script", "<link", "<img", "@import", "url("})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  // Three inline charts: the ablation bars, the heat map, the judge scatter (seven points).
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);
  size_t dots = 0;
  for (size_t p = html.find("<circle"); p != std::string::npos; p = html.find("<circle", p + 1)) ++dots;
  EXPECT_EQ(dots, 7u);
  EXPECT_NE(html.find("<td>+163.2%</td>"), std::string::npos);
}

// ---- headless Chromium ----------------------------------------------------------------------------------

std::string chromium_binary() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    std::string cmd = fmt::format("command -v {} >/dev/null 2>&1", c);
    if (std::system(cmd.c_str()) == 0) return c;
  }
  return "";
}

struct Png {
  bool ok = false;
  unsigned width = 0, height = 0;
  size_t bytes = 0;
};

Png read_png(const fs::path& p) {
  Png png;
  std::ifstream in(p, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  png.bytes = data.size();
  const std::string sig = "\x89PNG\r\n\x1a\n";
  if (data.size() < 33 || data.compare(0, 8, sig) != 0 || data.compare(12, 4, "IHDR") != 0) return png;
  auto be32 = [&](size_t o) {
    return (static_cast<unsigned>(static_cast<unsigned char>(data[o])) << 24) |
           (static_cast<unsigned>(static_cast<unsigned char>(data[o + 1])) << 16) |
           (static_cast<unsigned>(static_cast<unsigned char>(data[o + 2])) << 8) |
           static_cast<unsigned>(static_cast<unsigned char>(data[o + 3]));
  };
  png.width = be32(16);
  png.height = be32(20);
  png.ok = true;
  return png;
}

int screenshot(const std::string& chromium, const fs::path& html, const fs::path& png, const fs::path& profile) {
  auto cmd = fmt::format(
      "timeout 120 {} --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
      "--disable-extensions --user-data-dir='{}' --window-size=1280,2000 --screenshot='{}' 'file://{}' "
      ">'{}.log' 2>&1",
      chromium, profile.string(), png.string(), html.string(), png.string());
  return std::system(cmd.c_str());
}

TEST(ReportRender, HeadlessChromiumRendersTheHtmlToPng) {
  auto chromium = chromium_binary();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (Debian: apt-get install chromium); the HTML rendering test "
                    "cannot run";
  std::random_device rd;
  auto dir = fs::temp_directory_path() / fmt::format("d2k-report-png-{:08x}", rd());
  fs::create_directories(dir);
  auto s = d2k::score::compute_scores(d2k::testing::tiny_campaign(), {});
  std::ofstream(dir / "report.html") << render_html({"tiny", "t.sqlite", &s});
  std::ofstream(dir / "blank.html") << "<!DOCTYPE html><html><body></body></html>";
  ASSERT_EQ(screenshot(chromium, dir / "report.html", dir / "report.png", dir / "profile"), 0)
      << std::ifstream(dir / "report.png.log").rdbuf();
  ASSERT_EQ(screenshot(chromium, dir / "blank.html", dir / "blank.png", dir / "profile"), 0);
  auto png = read_png(dir / "report.png"), blank = read_png(dir / "blank.png");
  ASSERT_TRUE(png.ok) << "not a PNG: " << (dir / "report.png");
  EXPECT_EQ(png.width, 1280u);
  EXPECT_EQ(png.height, 2000u);
  ASSERT_TRUE(blank.ok);
  // A page of tables and charts compresses far worse than an empty one.
  EXPECT_GT(png.bytes, 5 * blank.bytes) << png.bytes << " vs blank " << blank.bytes;
  // The rendered DOM holds the tables (Chromium parsed the page, not just painted a background).
  auto dom = dir / "dom.html";
  auto cmd = fmt::format("timeout 120 {} --headless --no-sandbox --disable-gpu --user-data-dir='{}' --dump-dom "
                         "'file://{}' >'{}' 2>/dev/null", chromium, (dir / "profile").string(),
                         (dir / "report.html").string(), dom.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(dom);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("Table 1: correctness and S_perf per model"), std::string::npos);
  EXPECT_NE(text.find("<td>+163.2%</td>"), std::string::npos);
  std::error_code ec;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir, ec);
}

}  // namespace
