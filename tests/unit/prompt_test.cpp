#include "task/prompt.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace d2k {
namespace {

Task toy() {
  Diagnostics d;
  auto t = load_task(test::base_task(), d);
  EXPECT_TRUE(t);
  return *t;
}

TEST(Prompt, GuidanceArgs) {
  auto t = toy();
  EXPECT_TRUE(parse_guidance_arg(t, "none").empty());
  EXPECT_EQ(parse_guidance_arg(t, "all"), (std::vector<std::string>{"L1", "L2"}));
  EXPECT_EQ(parse_guidance_arg(t, "L2"), (std::vector<std::string>{"L2"}));
  EXPECT_THROW(parse_guidance_arg(t, "L3"), std::invalid_argument);
  EXPECT_THROW(parse_guidance_arg(t, "L1,,L2"), std::invalid_argument);
}

TEST(Prompt, DependenciesArePulledIn) {
  auto t = toy();
  EXPECT_EQ(close_guidance(t, {"L2"}), (std::vector<std::string>{"L1", "L2"}));
  EXPECT_EQ(close_guidance(t, {"L1"}), (std::vector<std::string>{"L1"}));
  EXPECT_TRUE(close_guidance(t, {}).empty());
}

TEST(Prompt, UnguidedShowsNoGuidance) {
  auto t = toy();
  auto p = render_prompt(t, {});
  EXPECT_NE(p.find("Scale a float32 vector"), std::string::npos);
  EXPECT_NE(p.find("| big | N=1048576 |"), std::string::npos);
  EXPECT_NE(p.find("| ragged | N=1023 |"), std::string::npos);
  EXPECT_NE(p.find("def solve(x, y, *, alpha)"), std::string::npos);
  EXPECT_NE(p.find("d2k_solve"), std::string::npos);
  EXPECT_NE(p.find("def generate_inputs"), std::string::npos);
  EXPECT_NE(p.find("Forbidden calls: torch.mul"), std::string::npos);
  EXPECT_EQ(p.find("Expert guidance"), std::string::npos);
  EXPECT_EQ(p.find("16 bytes per thread"), std::string::npos);
  // The expert solution and wrong solutions never leak.
  EXPECT_EQ(p.find("_scale[(triton.cdiv"), std::string::npos);
}

TEST(Prompt, GuidedShowsTheLevelsInOrder) {
  auto t = toy();
  auto p = render_prompt(t, close_guidance(t, {"L2"}));
  auto l1 = p.find("### L1: Vector loads");
  auto l2 = p.find("### L2: Grid-stride loop");
  ASSERT_NE(l1, std::string::npos);
  ASSERT_NE(l2, std::string::npos);
  EXPECT_LT(l1, l2);
  EXPECT_NE(p.find("16 bytes per thread"), std::string::npos);
  EXPECT_NE(p.find("(builds on L1)"), std::string::npos);
}

}  // namespace
}  // namespace d2k

namespace d2k {
namespace {

TEST(Prompt, MaintainersSectionOfTheReadmeIsNeverShown) {
  std::string readme = "# Task\n\nWhat to compute.\n\n<!-- d2k:maintainers -->\n## Measured\nexpert 1.2 ms\n";
  EXPECT_EQ(public_readme(readme), "# Task\n\nWhat to compute.\n");
  // Only a line of its own counts: a mention inside a sentence keeps the text.
  std::string inline_mention = "Write `<!-- d2k:maintainers -->` nowhere.\nexpert 1.2 ms\n";
  EXPECT_EQ(public_readme(inline_mention), inline_mention);
  EXPECT_EQ(public_readme("no marker\n"), "no marker\n");
  // The real task 008 keeps its figures out of the prompt.
  Diagnostics d;
  auto task = load_task(test::fixtures().parent_path().parent_path() / "tasks" / "008_muon_newton_schulz", d);
  ASSERT_TRUE(task);
  auto prompt = render_prompt(*task, {});
  EXPECT_EQ(prompt.find("d2k:maintainers"), std::string::npos);
  EXPECT_EQ(prompt.find("Measured (for maintainers"), std::string::npos);
}

}  // namespace
}  // namespace d2k
