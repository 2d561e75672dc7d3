#include "eval/compliance_triton.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "eval/process.hpp"

namespace d2k {

std::vector<Violation> check_triton_source(const std::filesystem::path& source, const Task& task,
                                           const std::filesystem::path& scratch) {
  auto checker = std::filesystem::path(build::source_dir) / "python" / "d2k_static_check.py";
  nlohmann::json req = {{"source_path", source.string()},
                        {"filename", source.filename().string()},
                        {"reference_path", (task.dir / "reference.py").string()},
                        {"requirements",
                         {{"forbidden_calls", task.requirements.forbidden_calls},
                          {"allowed_torch_ops", task.requirements.allowed_torch_ops}}}};
  auto log = scratch / "static-check.log";
  std::map<std::string, std::string> env{{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  ChildProcess p({build::python_executable, "-I", checker.string()}, env, log);
  p.send(req);
  p.close_stdin();
  p.receive(std::chrono::seconds(60));  // the checker answers on stdout (the log) and exits; fd 3 just closes
  auto exit = p.wait();
  auto out = read_file(log).value_or("");
  nlohmann::json answer;
  for (std::size_t start = 0; start < out.size();) {
    auto end = out.find('\n', start);
    auto line = out.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.rfind("{\"violations\"", 0) == 0) answer = nlohmann::json::parse(line, nullptr, false);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!exit.exited || exit.code != 0 || !answer.is_object() || !answer["violations"].is_array())
    throw std::runtime_error(fmt::format("the Triton static checker failed ({}): {}", exit.describe(), out.substr(0, 2000)));
  std::vector<Violation> v;
  for (const auto& j : answer["violations"])
    v.push_back(Violation{j.value("rule", "?"), j.value("file", source.filename().string()), j.value("line", 0),
                          j.value("message", "")});
  return v;
}

}  // namespace d2k
