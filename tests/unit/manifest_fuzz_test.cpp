// Mutation fuzzing of the manifest parser and checks: random byte edits, truncations, huge numbers,
// invalid UTF-8 and deep nesting must give diagnostics, never a crash or a hang (run under ASan in CI).
#include <gtest/gtest.h>

#include <random>

#include "core/files.hpp"
#include "task/manifest.hpp"
#include "task/validate.hpp"
#include "test_support.hpp"

namespace d2k {
namespace {

std::string mutate(const std::string& base, std::mt19937_64& rng) {
  std::string s = base;
  static const std::vector<std::string> tokens = {
      "99999999999999999999", "1e308",  "-1e308", "nan", "inf", "\xff\xfe", "\xc0\x80", "[[", "]]", "{", "}", "\"",
      "\"\"\"", "= ", "\n", "0x7fffffffffffffff", "N * N * N * N * N * N", "cdiv(N, 0)", "-9223372036854775808",
      "[[workloads]]\nname = \"w\"\naxes = { N = 1099511627775 }\n", "\n[guidance.L9]\ntitle = \"x\"\ndepends = [\"L9\"]\n"};
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    std::size_t pos = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[pos] = static_cast<char>(rng() % 256); break;
      case 1: s.erase(pos, 1 + rng() % 20); break;
      case 2: s.insert(pos, tokens[rng() % tokens.size()]); break;
      case 3: s.resize(pos); break;
      default: s.insert(pos, s.substr(rng() % s.size(), rng() % 64)); break;
    }
  }
  return s;
}

TEST(ManifestFuzz, MutationsNeverCrash) {
  auto base = read_file(test::base_task() / "task.toml");
  ASSERT_TRUE(base);
  std::mt19937_64 rng(20261202);
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    auto text = mutate(*base, rng);
    Diagnostics d;
    auto t = parse_manifest(text, "fuzz.toml", d);
    if (t) {
      check_manifest(*t, "fuzz.toml", d);
      ++parsed;
    } else {
      ++rejected;
      EXPECT_FALSE(d.empty()) << "rejected without a diagnostic:\n" << text;
    }
  }
  // Both paths must have been exercised for the test to mean anything.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

TEST(ManifestFuzz, PathologicalInputs) {
  for (const std::string& text : {std::string(200000, '['), "a = " + std::string(100000, '[') + std::string(100000, ']'),
                                  std::string("name = \"\xed\xa0\x80\""), std::string(1 << 20, 'x'), std::string("\0\0\0", 3),
                                  std::string("[axes]\nN = \"") + std::string(500000, 'n') + "\"\n"}) {
    Diagnostics d;
    auto t = parse_manifest(text, "p.toml", d);
    EXPECT_FALSE(t);
    EXPECT_FALSE(d.empty());
  }
}

}  // namespace
}  // namespace d2k
