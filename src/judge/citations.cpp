#include "judge/citations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include "core/files.hpp"

namespace d2k::judge {

namespace fs = std::filesystem;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t e = text.find('\n', pos);
    std::string line = text.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return out;
}

void Snapshot::add(const std::string& path, const std::string& text) { files[path] = split_lines(text); }

Snapshot snapshot_solution(const fs::path& path) {
  static const std::set<std::string> kSourceExt{".py", ".cu", ".cuh", ".h", ".hpp", ".c", ".cc", ".cpp", ".inc", ".toml"};
  Snapshot s;
  std::error_code ec;
  auto take = [&](const fs::path& file, const std::string& rel) {
    auto text = read_file(file, 4u << 20);
    if (!text) throw std::runtime_error(fmt::format("cannot read {} (absent, unreadable or over 4 MiB)", file.string()));
    s.add(rel, *text);
  };
  if (fs::is_regular_file(path, ec)) {
    take(path, path.filename().string());
  } else if (fs::is_directory(path, ec)) {
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() > 3) it.disable_recursion_pending();
      if (!it->is_regular_file(ec)) continue;
      auto name = it->path().filename().string();
      if (name.starts_with(".") || name == "evaluation.json") continue;
      if (!kSourceExt.contains(it->path().extension().string())) continue;
      if (it->path().string().find("__pycache__") != std::string::npos) continue;
      found.push_back(it->path());
    }
    std::sort(found.begin(), found.end());
    for (const auto& f : found) take(f, f.lexically_relative(path).generic_string());
    bool has_solution = s.files.contains("solution.py") || s.files.contains("solution.cu");
    if (!has_solution)
      throw std::runtime_error(fmt::format("{} holds no solution.py or solution.cu", path.string()));
  } else {
    throw std::runtime_error(fmt::format("no solution at {}", path.string()));
  }
  if (s.empty()) throw std::runtime_error(fmt::format("no source files in {}", path.string()));
  return s;
}

std::string render_numbered(const Snapshot& s) {
  std::string o;
  for (const auto& [name, lines] : s.files) {
    o += fmt::format("### {} ({} lines)\n\n```\n", name, lines.size());
    int width = static_cast<int>(std::to_string(std::max<std::size_t>(lines.size(), 1)).size());
    for (std::size_t i = 0; i < lines.size(); ++i) o += fmt::format("{:>{}}| {}\n", i + 1, width, lines[i]);
    o += "```\n\n";
  }
  return o;
}

std::string normalize_ws(const std::string& s) {
  std::string o;
  bool space = false;
  for (char ch : s) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = true;
      continue;
    }
    if (space && !o.empty()) o += ' ';
    space = false;
    o += ch;
  }
  return o;
}

nlohmann::json Citation::to_json() const {
  nlohmann::json j{{"file", file}, {"start_line", start_line}, {"end_line", end_line}, {"quote", quote},
                   {"verified", verified}};
  if (!why.empty()) j["why"] = why;
  return j;
}

namespace {

// "  12| code" -> "code" on every line, when every non-blank line carries such a prefix.
std::string strip_line_numbers(const std::string& quote) {
  auto lines = split_lines(quote);
  std::vector<std::string> out;
  bool all = false;
  for (const auto& l : lines) {
    std::size_t i = 0;
    while (i < l.size() && (l[i] == ' ' || l[i] == '\t')) ++i;
    if (i == l.size()) {
      out.push_back("");
      continue;
    }
    std::size_t d = i;
    while (d < l.size() && std::isdigit(static_cast<unsigned char>(l[d]))) ++d;
    if (d == i) return quote;
    std::size_t p = d;
    while (p < l.size() && l[p] == ' ') ++p;
    if (p >= l.size() || l[p] != '|') return quote;
    out.push_back(l.substr(p + 1));
    all = true;
  }
  if (!all) return quote;
  std::string joined;
  for (const auto& l : out) joined += l + "\n";
  return joined;
}

}  // namespace

void verify_citation(Citation& c, const Snapshot& s) {
  c.verified = false;
  c.why.clear();
  std::string file = c.file;
  while (file.starts_with("./")) file = file.substr(2);
  fs::path p(file);
  if (file.empty()) {
    c.why = "the citation names no file";
    return;
  }
  bool up = false;
  for (const auto& part : p) up = up || part == "..";
  if (p.is_absolute() || up) {
    c.why = fmt::format("file '{}' is not a path inside the judged snapshot", c.file);
    return;
  }
  auto it = s.files.find(p.lexically_normal().generic_string());
  if (it == s.files.end()) {
    std::string names;
    for (const auto& [n, l] : s.files) names += (names.empty() ? "" : ", ") + n;
    c.why = fmt::format("file '{}' is not in the judged snapshot (files: {})", c.file, names);
    return;
  }
  const auto& lines = it->second;
  long long n = static_cast<long long>(lines.size());
  if (c.start_line < 1 || c.end_line < c.start_line || c.end_line > n) {
    c.why = fmt::format("lines {}-{} are not a valid range of {} ({} lines)", c.start_line, c.end_line, c.file, n);
    return;
  }
  if (c.end_line - c.start_line + 1 > kMaxCitedLines) {
    c.why = fmt::format("lines {}-{} span more than {} lines; cite the lines that show the property", c.start_line,
                        c.end_line, kMaxCitedLines);
    return;
  }
  std::string cited;
  for (long long i = c.start_line; i <= c.end_line; ++i) cited += lines[static_cast<std::size_t>(i - 1)] + "\n";
  std::string nc = normalize_ws(cited), nq = normalize_ws(strip_line_numbers(c.quote));
  if (nq.empty()) {
    c.why = "the quote is empty";
    return;
  }
  if (nc.find(nq) == std::string::npos) {
    c.why = fmt::format("the quote does not occur in {} lines {}-{} (compared with whitespace collapsed; quote "
                        "the code exactly, without '...')",
                        c.file, c.start_line, c.end_line);
    return;
  }
  if (nq.size() < kMinQuoteChars && nq != nc) {
    c.why = fmt::format("the quote '{}' is too short to identify the code ({} characters at least, or the whole "
                        "cited text)",
                        nq, kMinQuoteChars);
    return;
  }
  c.verified = true;
}

}  // namespace d2k::judge
