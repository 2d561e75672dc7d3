// `d2k store`, `d2k score` and `d2k report` end to end on a synthetic campaign, and their errors on bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Result {
  int rc;
  std::string out;
};

Result d2k(const std::string& args, bool merge_stderr = true) {
  auto cmd = fmt::format("{} {}{}", D2K_BINARY, args, merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class StoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / fmt::format("d2k-store-cli-{:08x}{:08x}", rd(), rd());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(StoreCli, SynthScoreReportExport) {
  auto db = (dir_ / "c.sqlite").string();
  auto r = d2k(fmt::format("store synth {} --models 2 --tasks 3 --conditions 4 --seed 7", db));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = d2k("store info " + db);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("schema version 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs"), std::string::npos);
  r = d2k("store check " + db);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(": ok"), std::string::npos);

  r = d2k("score " + db + " --json", false);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["campaign"], "synthetic");
  EXPECT_EQ(j["groups"].size(), 8u);  // 2 models x 4 conditions
  EXPECT_EQ(j["conditions"], json({"none", "L1", "L1+L2", "all"}));
  for (const auto& g : j["groups"]) {
    EXPECT_EQ(g["pairs"], 3);
    EXPECT_GE(g["correctness"].get<double>(), 0.0);
    EXPECT_LE(g["correctness"].get<double>(), 1.0);
    EXPECT_EQ(g["runs"], 3);
  }
  // The same store, the same scores: deterministic.
  auto again = d2k("score " + db + " --json", false);
  EXPECT_EQ(again.out, r.out);
  // A different baseline changes the figures.
  auto compile = json::parse(d2k("score " + db + " --json --baseline compile", false).out);
  EXPECT_EQ(compile["baseline"], "compile");
  EXPECT_NE(compile["groups"][0]["s_perf"], j["groups"][0]["s_perf"]);
  auto text = d2k("score " + db + " --baseline first-correct:model-a");
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("Table 1"), std::string::npos);
  EXPECT_NE(text.out.find("first-correct:model-a"), std::string::npos);

  auto out = dir_ / "report";
  r = d2k(fmt::format("report {} --out {}", db, out.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* f : {"report.md", "report.html", "scores.json"}) EXPECT_TRUE(fs::exists(out / f)) << f;
  std::ifstream in(out / "report.html");
  std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_NE(html.find("Figure 3"), std::string::npos);

  r = d2k(fmt::format("store export {} --format csv --out {}", db, (dir_ / "csv").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* f : {"campaigns.csv", "runs.csv", "submissions.csv", "evaluations.csv", "workload_results.csv",
                        "judgments.csv"})
    EXPECT_TRUE(fs::exists(dir_ / "csv" / f)) << f;
  r = d2k(fmt::format("store export {} --format json --out {}", db, (dir_ / "json").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream rin(dir_ / "json" / "runs.json");
  EXPECT_EQ(json::parse(rin).size(), 24u);  // 2 x 3 x 4
}

TEST_F(StoreCli, BadInputGetsClearErrors) {
  auto junk = dir_ / "junk.sqlite";
  std::ofstream(junk) << "this is not a database, not even close; " << std::string(2000, 'z');
  auto r = d2k("score " + junk.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("not a d2k store"), std::string::npos) << r.out;
  r = d2k("report " + junk.string() + " --out " + (dir_ / "r").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("not a d2k store"), std::string::npos) << r.out;
  r = d2k("score " + (dir_ / "absent.sqlite").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("no such store"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "absent.sqlite"));
  auto db = (dir_ / "c.sqlite").string();
  ASSERT_EQ(d2k("store synth " + db + " --models 1 --tasks 1 --conditions 1").rc, 0);
  r = d2k("score " + db + " --baseline fastest");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("unknown baseline 'fastest'"), std::string::npos) << r.out;
  r = d2k("score " + db + " --campaign nope");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("no campaign named 'nope'"), std::string::npos) << r.out;
  r = d2k("store export " + db + " --format xml --out " + (dir_ / "x").string());
  EXPECT_EQ(r.rc, 2) << r.out;
}

}  // namespace
