// Workspace confinement: every path resolves inside the root; .., absolute paths and symlinks cannot leave it.
#include <gtest/gtest.h>

#include <fstream>

#include "agent/tools/workspace.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using d2k::agent::Workspace;
using d2k::test::TempDir;

namespace {

struct WorkspaceTest : ::testing::Test {
  TempDir tmp;
  fs::path root = tmp.path() / "ws";
  fs::path outside = tmp.path() / "outside";
  void SetUp() override {
    fs::create_directories(root / "src");
    fs::create_directories(outside);
    std::ofstream(outside / "secret.txt") << "secret";
    std::ofstream(root / "src" / "a.py") << "x = 1\n";
  }
};

TEST_F(WorkspaceTest, RelativePathsResolveInside) {
  Workspace ws(root);
  std::string why;
  auto p = ws.resolve("src/a.py", why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(*p, fs::canonical(root / "src" / "a.py"));
  EXPECT_EQ(ws.relative(*p), "src/a.py");
  auto np = ws.resolve("new/dir/file.cu", why);
  ASSERT_TRUE(np) << why;
  EXPECT_EQ(ws.relative(*np), "new/dir/file.cu");
  auto r = ws.resolve(".", why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(*r, ws.root());
  auto inner = ws.resolve("src/../src/./a.py", why);
  ASSERT_TRUE(inner) << why;
  EXPECT_EQ(ws.relative(*inner), "src/a.py");
}

TEST_F(WorkspaceTest, DotDotEscapesAreRefused) {
  Workspace ws(root);
  std::string why;
  EXPECT_FALSE(ws.resolve("../outside/secret.txt", why));
  EXPECT_NE(why.find("outside the workspace"), std::string::npos) << why;
  EXPECT_FALSE(ws.resolve("src/../../outside", why));
  EXPECT_FALSE(ws.resolve("..", why));
  EXPECT_FALSE(ws.resolve("does/not/../../../exist", why));
}

TEST_F(WorkspaceTest, AbsolutePathsOnlyInside) {
  Workspace ws(root);
  std::string why;
  EXPECT_FALSE(ws.resolve("/etc/passwd", why));
  EXPECT_FALSE(ws.resolve((outside / "secret.txt").string(), why));
  auto in = ws.resolve((root / "src" / "a.py").string(), why);
  ASSERT_TRUE(in) << why;
  EXPECT_EQ(ws.relative(*in), "src/a.py");
}

TEST_F(WorkspaceTest, SiblingWithSharedPrefixIsOutside) {
  fs::create_directories(tmp.path() / "ws2");
  Workspace ws(root);
  std::string why;
  EXPECT_FALSE(ws.resolve((tmp.path() / "ws2" / "x").string(), why));
  EXPECT_FALSE(ws.resolve("../ws2/x", why));
}

TEST_F(WorkspaceTest, SymlinksLeadingOutAreRefused) {
  fs::create_symlink(outside / "secret.txt", root / "link_file");
  fs::create_directory_symlink(outside, root / "link_dir");
  fs::create_symlink(outside / "missing.txt", root / "dangling");
  fs::create_symlink(root / "src" / "a.py", root / "inner_link");
  Workspace ws(root);
  std::string why;
  EXPECT_FALSE(ws.resolve("link_file", why));
  EXPECT_FALSE(ws.resolve("link_dir/secret.txt", why));
  EXPECT_FALSE(ws.resolve("link_dir/new_file", why));
  EXPECT_FALSE(ws.resolve("dangling", why));
  fs::create_directory_symlink(outside / "missing_dir", root / "dangling_dir");
  EXPECT_FALSE(ws.resolve("dangling_dir/x/y.txt", why));
  EXPECT_NE(why.find("symlink"), std::string::npos) << why;
  auto ok = ws.resolve("inner_link", why);
  ASSERT_TRUE(ok) << why;
  EXPECT_EQ(ws.relative(*ok), "src/a.py");
}

TEST_F(WorkspaceTest, RootThroughASymlinkIsCanonicalized) {
  fs::create_directory_symlink(root, tmp.path() / "ws_link");
  Workspace ws(tmp.path() / "ws_link");
  EXPECT_EQ(ws.root(), fs::canonical(root));
  std::string why;
  EXPECT_TRUE(ws.resolve("src/a.py", why)) << why;
}

TEST_F(WorkspaceTest, EmptyPathAndMissingRoot) {
  Workspace ws(root);
  std::string why;
  EXPECT_FALSE(ws.resolve("", why));
  EXPECT_THROW(Workspace(tmp.path() / "nope"), std::invalid_argument);
}

}  // namespace
