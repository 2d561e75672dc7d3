// The ToolBox's file tools, argument checking, evaluate/submit delegation and the call budget.
#include <gtest/gtest.h>

#include <fstream>

#include "agent/tools/toolbox.hpp"
#include "core/files.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using d2k::agent::ToolBox;
using d2k::agent::ToolBoxOptions;
using d2k::agent::ToolResult;
using d2k::agent::Workspace;
using d2k::test::TempDir;
using nlohmann::json;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct ToolBoxTest : ::testing::Test {
  TempDir tmp;
  fs::path root = tmp.path() / "ws";
  void SetUp() override {
    fs::create_directories(root);
    fs::create_directories(tmp.path() / "outside");
  }
  ToolBox make(ToolBoxOptions o = {}) { return ToolBox(Workspace(root), std::move(o)); }
  std::string content(const std::string& rel) { return d2k::read_file(root / rel).value_or("<missing>"); }
};

TEST_F(ToolBoxTest, SpecsNameEveryToolWithObjectSchemas) {
  auto tb = make();
  std::vector<std::string> names;
  for (const auto& s : tb.specs()) {
    names.push_back(s.name);
    EXPECT_EQ(s.input_schema["type"], "object") << s.name;
    EXPECT_FALSE(s.description.empty()) << s.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"read_file", "write_file", "edit_file", "list_files", "bash",
                                             "evaluate", "submit"}));
}

TEST_F(ToolBoxTest, WriteThenReadNumberedLines) {
  auto tb = make();
  auto w = tb.call("write_file", {{"path", "sub/dir/k.py"}, {"content", "a\nb\nc\n"}});
  ASSERT_FALSE(w.is_error) << w.text;
  EXPECT_TRUE(has(w.text, "created sub/dir/k.py")) << w.text;
  EXPECT_EQ(content("sub/dir/k.py"), "a\nb\nc\n");
  auto r = tb.call("read_file", {{"path", "sub/dir/k.py"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.text, "     1\ta\n     2\tb\n     3\tc\n");
  auto part = tb.call("read_file", {{"path", "sub/dir/k.py"}, {"offset", 2}, {"limit", 1}});
  ASSERT_FALSE(part.is_error) << part.text;
  EXPECT_EQ(part.text, "     2\tb\n[lines 2-2 of 3; pass offset=3 to read on]\n");
  auto w2 = tb.call("write_file", {{"path", "sub/dir/k.py"}, {"content", "z"}});
  EXPECT_TRUE(has(w2.text, "overwrote")) << w2.text;
}

TEST_F(ToolBoxTest, ReadErrors) {
  auto tb = make();
  EXPECT_TRUE(has(tb.call("read_file", {{"path", "nope.txt"}}).text, "does not exist"));
  fs::create_directories(root / "d");
  EXPECT_TRUE(has(tb.call("read_file", {{"path", "d"}}).text, "is a folder"));
  { std::ofstream(root / "bin", std::ios::binary) << std::string("a\0b", 3); }
  EXPECT_TRUE(has(tb.call("read_file", {{"path", "bin"}}).text, "binary"));
  { std::ofstream(root / "two") << "1\n2\n"; }
  auto past = tb.call("read_file", {{"path", "two"}, {"offset", 5}});
  EXPECT_TRUE(past.is_error);
  EXPECT_TRUE(has(past.text, "past its end")) << past.text;
  auto out = tb.call("read_file", {{"path", "../outside/x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(has(out.text, "outside the workspace")) << out.text;
}

TEST_F(ToolBoxTest, ReadAndWriteSizeLimits) {
  d2k::agent::WorkspaceLimits lim;
  lim.max_read_bytes = 100;
  lim.max_write_bytes = 50;
  ToolBox tb(Workspace(root, lim));
  auto w = tb.call("write_file", {{"path", "big"}, {"content", std::string(51, 'x')}});
  EXPECT_TRUE(w.is_error);
  EXPECT_TRUE(has(w.text, "more than the 50")) << w.text;
  { std::ofstream(root / "big") << std::string(200, 'y'); }
  auto r = tb.call("read_file", {{"path", "big"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(has(r.text, "200 bytes")) << r.text;
}

TEST_F(ToolBoxTest, WriteOutsideOrThroughSymlinkIsRefused) {
  auto tb = make();
  fs::create_directory_symlink(tmp.path() / "outside", root / "out");
  EXPECT_TRUE(tb.call("write_file", {{"path", "out/evil"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(tb.call("write_file", {{"path", "/tmp/d2k_evil_write"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(tb.call("write_file", {{"path", "../evil"}, {"content", "x"}}).is_error);
  fs::create_directory_symlink(tmp.path() / "outside" / "made", root / "dangling_dir");
  EXPECT_TRUE(tb.call("write_file", {{"path", "dangling_dir/sub/evil"}, {"content", "x"}}).is_error);
  EXPECT_FALSE(fs::exists(tmp.path() / "outside" / "made"));
  EXPECT_FALSE(fs::exists(tmp.path() / "outside" / "evil"));
  EXPECT_FALSE(fs::exists(tmp.path() / "evil"));
}

TEST_F(ToolBoxTest, EditExactUniqueReplacement) {
  auto tb = make();
  { std::ofstream(root / "f.py") << "x = 1\ny = 2\nx = 1\n"; }
  auto dup = tb.call("edit_file", {{"path", "f.py"}, {"old_string", "x = 1"}, {"new_string", "x = 3"}});
  EXPECT_TRUE(dup.is_error);
  EXPECT_TRUE(has(dup.text, "occurs 2 times")) << dup.text;
  auto missing = tb.call("edit_file", {{"path", "f.py"}, {"old_string", "z = 9"}, {"new_string", "q"}});
  EXPECT_TRUE(missing.is_error);
  EXPECT_TRUE(has(missing.text, "not found")) << missing.text;
  auto one = tb.call("edit_file", {{"path", "f.py"}, {"old_string", "y = 2"}, {"new_string", "y = 20"}});
  ASSERT_FALSE(one.is_error) << one.text;
  EXPECT_TRUE(has(one.text, "replaced 1 occurrence in f.py (first at line 2)")) << one.text;
  auto all = tb.call("edit_file",
                     {{"path", "f.py"}, {"old_string", "x = 1"}, {"new_string", "x = 3"}, {"replace_all", true}});
  ASSERT_FALSE(all.is_error) << all.text;
  EXPECT_EQ(content("f.py"), "x = 3\ny = 20\nx = 3\n");
  EXPECT_TRUE(tb.call("edit_file", {{"path", "f.py"}, {"old_string", ""}, {"new_string", "q"}}).is_error);
  EXPECT_TRUE(tb.call("edit_file", {{"path", "nope"}, {"old_string", "a"}, {"new_string", "b"}}).is_error);
}

TEST_F(ToolBoxTest, ListFilesRecursiveWithSizesAndCap) {
  ToolBoxOptions o;
  o.list_max_entries = 3;
  auto tb = make();
  { std::ofstream(root / "a.txt") << "12345"; }
  fs::create_directories(root / "sub");
  { std::ofstream(root / "sub" / "b.txt") << "xy"; }
  auto r = tb.call("list_files", json::object());
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.text, "         5  a.txt\n       dir  sub/\n         2  sub/b.txt\n");
  auto sub = tb.call("list_files", {{"path", "sub"}});
  EXPECT_EQ(sub.text, "         2  sub/b.txt\n");
  auto capped = make(o);
  { std::ofstream(root / "c.txt") << ""; }
  auto c = capped.call("list_files", json::object());
  EXPECT_TRUE(has(c.text, "[... 1 more entries not shown")) << c.text;
  EXPECT_TRUE(tb.call("list_files", {{"path", "missing"}}).is_error);
  EXPECT_TRUE(tb.call("list_files", {{"path", ".."}}).is_error);
}

TEST_F(ToolBoxTest, ArgumentsAreCheckedNotThrown) {
  auto tb = make();
  auto missing = tb.call("write_file", {{"path", "x"}});
  EXPECT_TRUE(missing.is_error);
  EXPECT_TRUE(has(missing.text, "missing argument `content`")) << missing.text;
  auto extra = tb.call("read_file", {{"path", "x"}, {"bogus", 1}});
  EXPECT_TRUE(has(extra.text, "unknown argument `bogus`")) << extra.text;
  auto typed = tb.call("read_file", {{"path", 3}});
  EXPECT_TRUE(has(typed.text, "argument `path` must be string, not integer")) << typed.text;
  auto range = tb.call("bash", {{"command", "true"}, {"timeout_s", 5000}});
  EXPECT_TRUE(has(range.text, "at most 1800")) << range.text;
  auto not_obj = tb.call("bash", json::array({1}));
  EXPECT_TRUE(has(not_obj.text, "must be an object")) << not_obj.text;
  auto unknown = tb.call("rm_rf", json::object());
  EXPECT_TRUE(unknown.is_error);
  EXPECT_TRUE(has(unknown.text, "unknown tool `rm_rf`")) << unknown.text;
}

TEST_F(ToolBoxTest, EvaluateAndSubmitDelegateOrAreUnavailable) {
  auto none = make();
  auto e = none.call("evaluate", json::object());
  EXPECT_TRUE(e.is_error);
  EXPECT_EQ(e.text, "evaluate is not available in this session");
  EXPECT_EQ(none.call("submit", json::object()).text, "submit is not available in this session");
  std::vector<bool> seen;
  ToolBoxOptions o;
  o.evaluate = [&](bool official) {
    seen.push_back(official);
    return ToolResult{official ? "submitted" : "3/3 correct", false};
  };
  auto tb = make(o);
  EXPECT_EQ(tb.call("evaluate", json::object()).text, "3/3 correct");
  EXPECT_EQ(tb.call("submit", nullptr).text, "submitted");
  EXPECT_EQ(seen, (std::vector<bool>{false, true}));
}

TEST_F(ToolBoxTest, BudgetCountsCallsOfKnownTools) {
  ToolBoxOptions o;
  o.max_calls = 2;
  auto tb = make(o);
  EXPECT_FALSE(tb.call("list_files", json::object()).is_error);
  EXPECT_TRUE(tb.call("read_file", json::object()).is_error);  // invalid, but counted
  auto over = tb.call("list_files", json::object());
  EXPECT_TRUE(over.is_error);
  EXPECT_TRUE(has(over.text, "budget exhausted")) << over.text;
  EXPECT_EQ(tb.calls_made(), 2u);
}

}  // namespace
