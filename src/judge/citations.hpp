#pragma once
// Code evidence for judge scores (docs/JUDGES.md, "Verification"): a snapshot of the judged text (the solution's
// source files, or a design proposal), its rendering with numbered lines, and the mechanical check of a citation
// {file, start_line, end_line, quote} against the snapshot. Pure: no I/O but snapshot_solution().
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d2k::judge {

// The judged files, by relative path ("solution.py"), each as its lines (no line ends).
struct Snapshot {
  std::map<std::string, std::vector<std::string>> files;

  void add(const std::string& path, const std::string& text);
  bool empty() const { return files.empty(); }
};

// Splits on '\n' (a trailing '\r' is dropped from each line); a final line end makes no extra empty line.
std::vector<std::string> split_lines(const std::string& text);

// The snapshot of a submitted solution: `path` is a solution file (solution.py, solution.cu) or a folder holding
// one. From a folder only source files are taken (.py .cu .cuh .h .hpp .c .cc .cpp .inc .toml), never the
// evaluator's records (evaluation.json, logs): the judge is runtime-blind. Throws std::runtime_error when there
// is nothing to read.
Snapshot snapshot_solution(const std::filesystem::path& path);

// Every file with numbered lines ("### solution.py (N lines)", then "  12| code"), for the judge's prompt.
std::string render_numbered(const Snapshot& s);

// Collapses every run of whitespace to one space and trims both ends.
std::string normalize_ws(const std::string& s);

struct Citation {
  std::string file;
  long long start_line = 0, end_line = 0;
  std::string quote;
  bool verified = false;
  std::string why;  // when not verified: the reason, said so that the judge can fix it

  nlohmann::json to_json() const;
};

inline constexpr long long kMaxCitedLines = 80;  // one citation spans at most this many lines
inline constexpr std::size_t kMinQuoteChars = 8;  // a shorter quote must be the whole cited text

// Checks one citation against the snapshot and sets `verified` and `why`:
//  - `file` names a file of the snapshot (relative, no "..", no absolute path; "./" accepted);
//  - 1 <= start_line <= end_line <= the file's line count, at most kMaxCitedLines lines;
//  - the quote, whitespace-normalized (and with "NN| " line-number prefixes the judge may have copied from the
//    numbered rendering removed), is non-empty and occurs in the cited lines joined and whitespace-normalized;
//    it has at least kMinQuoteChars characters unless it is the whole cited text.
void verify_citation(Citation& c, const Snapshot& s);

}  // namespace d2k::judge
