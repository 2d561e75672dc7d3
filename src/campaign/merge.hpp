#pragma once
// `d2k campaign merge OUT IN...`: copies the campaigns, runs, submissions, evaluations and judgments of shard
// stores into one store. Rows match on (campaign name, model, task, condition, repeat) and a submission's seq;
// ids are per store and are renumbered. A run present in both with the same content is skipped (merging twice
// changes nothing); with different content it is a conflict, and the whole merge is refused (one transaction:
// OUT is left as it was).
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace d2k::campaign {

struct MergeConflict : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MergeStats {
  int campaigns = 0, runs = 0, identical = 0, submissions = 0, evaluations = 0, judgments = 0;
};

// Throws MergeConflict (conflicting duplicates, campaigns of the same name with other protocols) or
// store::StoreError (a store that cannot be read).
MergeStats merge_stores(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs);

}  // namespace d2k::campaign
