#pragma once
// A judge's reply for one level: parsing the JSON it must return and checking it against the rules
// (docs/JUDGES.md): a score on the five-anchor scale, reasoning, 1-4 citations that verify against the snapshot.
// Pure.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "judge/citations.hpp"

namespace d2k::judge {

inline constexpr std::array<int, 5> kAnchors{0, 25, 50, 75, 100};
inline constexpr std::size_t kMaxCitations = 4;

struct Verdict {
  std::optional<double> score;  // as the judge wrote it (checked by check_verdict)
  std::string reasoning;
  std::vector<Citation> citations;
};

// Finds the JSON object in a reply (the whole reply, a ```json fenced block, or the outermost {...}) and reads
// its fields. Returns nullopt and sets `error` when there is no JSON object or a field has the wrong type.
std::optional<Verdict> parse_verdict(const std::string& reply, std::string& error);

// The rule violations of a parsed verdict, each said so that the judge can fix it; empty when it is acceptable.
// Verifies every citation against the snapshot (setting its `verified` and `why`):
//  - the score is one of 0, 25, 50, 75, 100;
//  - reasoning is not empty;
//  - at most 4 citations; at least 1 when the score is above 0;
//  - every citation verifies (a citation that fails invalidates the score it backs).
std::vector<std::string> check_verdict(Verdict& v, const Snapshot& s);

}  // namespace d2k::judge
