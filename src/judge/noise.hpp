#pragma once
// Judge noise: the spread of repeated judgments of the same thing (docs/JUDGES.md, "Noise"). Pure.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::judge {

// The scores one item (a level of one judged text, by one judge model) got over its repeats.
struct NoiseItem {
  std::string level;  // "L1", "L2", "L3", or "mean" (the mean over the levels of one repeat)
  std::vector<double> scores;
};

struct NoiseStats {
  int items = 0;          // items with at least two repeats
  int judgments = 0;      // their scores
  int agree = 0;          // items whose repeats all gave the same score
  double mean_sd = 0;     // mean over items of the sample standard deviation of their scores
  double mean_range = 0;  // mean over items of max - min
  double max_range = 0;
};

struct NoiseSummary {
  NoiseStats all;                           // the levels' items (not "mean")
  std::map<std::string, NoiseStats> by_level;  // per level, and "mean"
};

NoiseSummary judge_noise(const std::vector<NoiseItem>& items);
nlohmann::json to_json(const NoiseSummary& s);
// A few lines for humans: "judge noise over N items repeated R times: ..."; says so when nothing was repeated.
std::string format_noise(const NoiseSummary& s);

}  // namespace d2k::judge
