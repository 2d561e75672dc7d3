#include "agent/tools/public_files.hpp"

#include "core/files.hpp"
#include "task/prompt.hpp"

namespace d2k::agent {

std::vector<std::string> populate_workspace(const Task& task, const std::vector<std::string>& levels,
                                            const std::filesystem::path& include_dir,
                                            const std::filesystem::path& workspace) {
  namespace fs = std::filesystem;
  std::vector<std::string> written;
  fs::create_directories(workspace);
  auto put = [&](const fs::path& rel, const std::string& content) {
    auto dst = workspace / rel;
    std::error_code ec;
    if (fs::exists(dst, ec)) return;
    fs::create_directories(dst.parent_path());
    write_file_atomic(dst, content);
    written.push_back(rel.string());
  };
  auto copy = [&](const fs::path& src, const fs::path& rel) {
    if (auto text = read_file(src)) put(rel, *text);
  };
  put("TASK.md", render_prompt(task, levels));
  if (auto text = read_file(task.dir / "README.md")) put("README.md", public_readme(*text));
  copy(task.dir / "reference.py", "reference.py");
  for (const auto& l : task.requirements.languages) {
    auto name = l == "triton" ? "solution.py" : "solution.cu";
    copy(task.dir / "template" / name, fs::path("template") / name);
  }
  for (const auto& id : levels) copy(task.dir / "guidance" / (id + ".md"), fs::path("guidance") / (id + ".md"));
  copy(include_dir / "d2k" / "solution.h", fs::path("d2k") / "solution.h");
  return written;
}

}  // namespace d2k::agent
