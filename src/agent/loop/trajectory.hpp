#pragma once
// A run's trajectory: one JSON object per line (JSONL), appended and fsync'ed after every step, so that a run
// killed at any point keeps everything up to its last complete line. docs/AGENTS.md lists the record types.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/providers/conversation.hpp"

namespace d2k::agent {

inline constexpr int kTrajectoryVersion = 1;

class TrajectoryWriter {
 public:
  // Opens `path` for appending (created if missing). A torn last line (a crash mid-write) is cut off first,
  // so that appended records start on a line of their own. Throws std::runtime_error when it cannot open.
  explicit TrajectoryWriter(const std::filesystem::path& path);
  ~TrajectoryWriter();
  TrajectoryWriter(const TrajectoryWriter&) = delete;
  TrajectoryWriter& operator=(const TrajectoryWriter&) = delete;

  // Writes `record` as one line and fsyncs it before returning. Throws std::runtime_error on I/O failure
  // (a run that cannot record must stop rather than go on unrecorded).
  void append(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

struct TrajectoryRead {
  std::vector<nlohmann::json> records;
  bool torn_tail = false;  // the last line was incomplete or not JSON (a crash mid-write); it was skipped
  std::string error;       // non-empty: a line other than the last is not JSON (the file was damaged)
};

// Reads every complete record. Never throws for bad content: `error` says what is wrong.
TrajectoryRead read_trajectory(const std::filesystem::path& path);

// Messages with everything needed to send them again (arguments_text included, unlike to_json(Message)).
nlohmann::json message_to_json(const Message& m);
Message message_from_json(const nlohmann::json& j);  // throws std::runtime_error on a malformed record
Usage usage_from_json(const nlohmann::json& j);

}  // namespace d2k::agent
