#include "task/solution.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>

#include "core/files.hpp"

namespace d2k {

std::string_view language_name(Language l) { return l == Language::triton ? "triton" : "cuda"; }

std::optional<Solution> load_solution(const std::filesystem::path& dir, Diagnostics& diags) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    diags.add(dir.string(), 0, "", "not a folder (a solution is a folder holding solution.py or solution.cu)");
    return std::nullopt;
  }
  bool py = std::filesystem::is_regular_file(dir / "solution.py", ec);
  bool cu = std::filesystem::is_regular_file(dir / "solution.cu", ec);
  if (py == cu) {
    diags.add(dir.string(), 0, "",
              py ? "holds both solution.py and solution.cu (keep exactly one)" : "holds neither solution.py nor solution.cu");
    return std::nullopt;
  }
  Solution s;
  s.dir = dir;
  s.language = py ? Language::triton : Language::cuda;
  s.source = dir / (py ? "solution.py" : "solution.cu");
  s.name = dir.filename().string();
  auto meta_path = dir / "solution.toml";
  if (std::filesystem::exists(meta_path, ec)) {
    auto file = meta_path.string();
    auto text = read_file(meta_path, 1u << 16);
    if (!text || !is_valid_utf8(*text)) {
      diags.add(file, 0, "", "unreadable, over 64 KiB or not UTF-8");
      return std::nullopt;
    }
    try {
      auto t = toml::parse(*text, file);
      bool ok = true;
      for (auto&& [k, v] : t) {
        auto key = k.str();
        int line = static_cast<int>(v.source().begin.line);
        if (key != "name" && key != "description" && key != "expect") {
          diags.add(file, line, std::string(key), "unknown key (allowed: name, description, expect)");
          ok = false;
        } else if (!v.is_string()) {
          diags.add(file, line, std::string(key), "must be a string");
          ok = false;
        }
      }
      if (auto v = t["name"].value<std::string>()) s.name = *v;
      if (auto v = t["description"].value<std::string>()) s.description = *v;
      if (auto v = t["expect"].value<std::string>()) {
        s.expect = parse_status(*v);
        if (!s.expect) {
          diags.add(file, 0, "expect", fmt::format("unknown status '{}' (known: {})", *v, fmt::join(kStatusNames, ", ")));
          ok = false;
        }
      }
      if (!ok) return std::nullopt;
    } catch (const toml::parse_error& e) {
      diags.add(file, static_cast<int>(e.source().begin.line), "", fmt::format("TOML syntax: {}", e.description()));
      return std::nullopt;
    }
  }
  return s;
}

}  // namespace d2k
