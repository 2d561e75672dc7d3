// read_file, write_file, edit_file, list_files: the ToolBox's file tools, confined to the workspace.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "agent/tools/toolbox.hpp"
#include "core/files.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace d2k::agent {
namespace {

ToolResult fail(std::string text) { return {std::move(text), true}; }

// Reads a regular text file of at most max_bytes, or says why not.
std::optional<std::string> load_text(const fs::path& p, const std::string& shown, std::size_t max_bytes,
                                     std::string& why) {
  std::error_code ec;
  auto st = fs::status(p, ec);
  if (ec || !fs::exists(st)) {
    why = fmt::format("{} does not exist", shown);
    return std::nullopt;
  }
  if (fs::is_directory(st)) {
    why = fmt::format("{} is a folder (use list_files)", shown);
    return std::nullopt;
  }
  if (!fs::is_regular_file(st)) {
    why = fmt::format("{} is not a regular file", shown);
    return std::nullopt;
  }
  auto size = fs::file_size(p, ec);
  if (!ec && size > max_bytes) {
    why = fmt::format("{} has {} bytes, more than the {} this tool reads (use bash: head, sed -n, grep)", shown,
                      size, max_bytes);
    return std::nullopt;
  }
  auto text = d2k::read_file(p, max_bytes);
  if (!text) {
    why = fmt::format("cannot read {}", shown);
    return std::nullopt;
  }
  if (text->find('\0') != std::string::npos) {
    why = fmt::format("{} is a binary file", shown);
    return std::nullopt;
  }
  return text;
}

std::size_t count_lines(const std::string& s) {
  if (s.empty()) return 0;
  auto n = static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
  return s.back() == '\n' ? n : n + 1;
}

}  // namespace

ToolResult ToolBox::read_file(const json& a) {
  std::string why;
  auto path = workspace_.resolve(a["path"].get<std::string>(), why);
  if (!path) return fail(why);
  std::string shown = workspace_.relative(*path);
  auto text = load_text(*path, shown, workspace_.limits().max_read_bytes, why);
  if (!text) return fail(why);
  if (text->empty()) return {fmt::format("({} is empty)", shown), false};

  std::size_t offset = a.contains("offset") ? a["offset"].get<std::size_t>() : 1;
  std::size_t limit = a.contains("limit") ? a["limit"].get<std::size_t>() : opt_.read_default_lines;
  std::size_t total = count_lines(*text);
  if (offset > total) return fail(fmt::format("{} has {} lines; offset {} is past its end", shown, total, offset));

  std::string out;
  std::istringstream in(*text);
  std::string line;
  std::size_t n = 0, last = 0;
  while (std::getline(in, line)) {
    ++n;
    if (n < offset) continue;
    if (n >= offset + limit) break;
    if (line.size() > opt_.read_max_line_chars)
      line = line.substr(0, opt_.read_max_line_chars) +
             fmt::format(" [... line cut, {} more characters]", line.size() - opt_.read_max_line_chars);
    out += fmt::format("{:>6}\t{}\n", n, line);
    last = n;
  }
  if (offset > 1 || last < total)
    out += fmt::format("[lines {}-{} of {}{}]\n", offset, last, total,
                       last < total ? fmt::format("; pass offset={} to read on", last + 1) : "");
  return {out, false};
}

ToolResult ToolBox::write_file(const json& a) {
  std::string why;
  auto path = workspace_.resolve(a["path"].get<std::string>(), why);
  if (!path) return fail(why);
  std::string shown = workspace_.relative(*path);
  const auto& content = a["content"].get_ref<const std::string&>();
  if (content.size() > workspace_.limits().max_write_bytes)
    return fail(fmt::format("content has {} bytes, more than the {} allowed", content.size(),
                            workspace_.limits().max_write_bytes));
  if (*path == workspace_.root()) return fail("cannot write to the workspace root itself");
  std::error_code ec;
  if (fs::is_directory(*path, ec)) return fail(fmt::format("{} is a folder", shown));
  fs::create_directories(path->parent_path(), ec);
  if (ec) return fail(fmt::format("cannot create the folder for {}: {}", shown, ec.message()));
  // The parent may now exist through a symlink made meanwhile; resolve again before writing.
  auto again = workspace_.resolve(shown, why);
  if (!again || *again != *path) return fail(why.empty() ? "the path changed while writing" : why);
  bool existed = fs::exists(*path, ec);
  d2k::write_file_atomic(*path, content);
  return {fmt::format("{} {} ({} bytes, {} lines)", existed ? "overwrote" : "created", shown, content.size(),
                      count_lines(content)),
          false};
}

ToolResult ToolBox::edit_file(const json& a) {
  std::string why;
  auto path = workspace_.resolve(a["path"].get<std::string>(), why);
  if (!path) return fail(why);
  std::string shown = workspace_.relative(*path);
  const auto& old_s = a["old_string"].get_ref<const std::string&>();
  const auto& new_s = a["new_string"].get_ref<const std::string&>();
  bool all = a.value("replace_all", false);
  if (old_s.empty()) return fail("old_string is empty; to create or overwrite a file use write_file");
  if (old_s == new_s) return fail("old_string and new_string are the same; nothing to change");
  auto text = load_text(*path, shown, workspace_.limits().max_read_bytes, why);
  if (!text) return fail(why);

  std::vector<std::size_t> at;
  for (auto pos = text->find(old_s); pos != std::string::npos; pos = text->find(old_s, pos + old_s.size()))
    at.push_back(pos);
  if (at.empty()) return fail(fmt::format("old_string was not found in {} (it must match exactly, whitespace "
                                          "included)", shown));
  if (at.size() > 1 && !all)
    return fail(fmt::format("old_string occurs {} times in {}; add surrounding text to make it unique, or set "
                            "replace_all to true", at.size(), shown));
  std::string out;
  out.reserve(text->size() + at.size() * new_s.size());
  std::size_t prev = 0;
  for (auto pos : at) {
    out.append(*text, prev, pos - prev);
    out += new_s;
    prev = pos + old_s.size();
  }
  out.append(*text, prev);
  if (out.size() > workspace_.limits().max_write_bytes)
    return fail(fmt::format("the edited file would have {} bytes, more than the {} allowed", out.size(),
                            workspace_.limits().max_write_bytes));
  d2k::write_file_atomic(*path, out);
  std::size_t first_line = 1 + static_cast<std::size_t>(std::count(text->begin(), text->begin() + at[0], '\n'));
  return {fmt::format("replaced {} occurrence{} in {} (first at line {})", at.size(), at.size() == 1 ? "" : "s",
                      shown, first_line),
          false};
}

ToolResult ToolBox::list_files(const json& a) {
  std::string why;
  auto path = workspace_.resolve(a.value("path", std::string(".")), why);
  if (!path) return fail(why);
  std::string shown = workspace_.relative(*path);
  std::error_code ec;
  auto st = fs::status(*path, ec);
  if (ec || !fs::exists(st)) return fail(fmt::format("{} does not exist", shown));
  if (!fs::is_directory(st)) {
    return {fmt::format("{:>10}  {}\n", fs::file_size(*path, ec), shown), false};
  }
  std::vector<std::pair<std::string, std::string>> rows;  // (relative path, size column)
  std::size_t skipped = 0;
  for (auto it = fs::recursive_directory_iterator(*path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (rows.size() >= opt_.list_max_entries) {
      ++skipped;
      continue;
    }
    const auto& e = *it;
    std::string rel = e.path().lexically_relative(workspace_.root()).string();
    std::error_code e2;
    if (e.is_symlink(e2)) {
      rows.emplace_back(rel + " -> " + fs::read_symlink(e.path(), e2).string(), "link");
    } else if (e.is_directory(e2)) {
      rows.emplace_back(rel + "/", "dir");
    } else {
      auto size = e.file_size(e2);
      rows.emplace_back(rel, e2 ? "?" : std::to_string(size));
    }
  }
  std::sort(rows.begin(), rows.end());
  if (rows.empty()) return {fmt::format("({} is empty)", shown), false};
  std::string out;
  for (const auto& [rel, size] : rows) out += fmt::format("{:>10}  {}\n", size, rel);
  if (skipped) out += fmt::format("[... {} more entries not shown; list a subfolder]\n", skipped);
  return {out, false};
}

ToolResult ToolBox::bash(const json& a) {
  const auto& command = a["command"].get_ref<const std::string&>();
  int timeout = a.contains("timeout_s") ? a["timeout_s"].get<int>() : opt_.bash_default_timeout_s;
  auto r = opt_.runner->run(command, workspace_.root(), std::chrono::seconds(timeout), opt_.bash_output);
  if (!r.started) return fail("the command could not be started: " + r.error);
  std::string head;
  bool error = true;
  if (r.timed_out) {
    head = fmt::format("timed out after {} s; the command and its process group were killed", timeout);
  } else if (r.exited) {
    head = fmt::format("exit code {}", r.exit_code);
    error = r.exit_code != 0;
  } else {
    head = fmt::format("killed by signal {}", r.signal);
  }
  std::string out = r.output.empty() ? "(no output)\n" : r.output;
  if (out.back() != '\n') out += '\n';
  return {head + "\n" + out, error};
}

}  // namespace d2k::agent
