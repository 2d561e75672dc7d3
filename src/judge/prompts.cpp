#include "judge/prompts.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "core/files.hpp"
#include "eval/cuda_build.hpp"  // sha256_hex

namespace d2k::judge {

const std::map<std::string, std::string>& embedded_prompt_texts();  // generated from prompts/judge/*.md

namespace {
void check_complete(const PromptSet& p) {
  for (const char* n : kPromptNames)
    if (!p.texts.contains(n))
      throw std::runtime_error(fmt::format("prompt set {}: {}.md is missing", p.source, n));
}
}  // namespace

const std::string& PromptSet::get(const std::string& name) const {
  auto it = texts.find(name);
  if (it == texts.end()) throw std::runtime_error(fmt::format("prompt set {}: no {}.md", source, name));
  return it->second;
}

std::string PromptSet::sha256() const {
  std::string all;
  for (const auto& [n, t] : texts) all += n + "\n" + std::to_string(t.size()) + "\n" + t;
  return sha256_hex(all);
}

PromptSet embedded_prompts() {
  PromptSet p;
  p.texts = embedded_prompt_texts();
  check_complete(p);
  return p;
}

PromptSet load_prompts(const std::filesystem::path& dir) {
  PromptSet p;
  p.source = dir.string();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".md") continue;
    auto text = read_file(e.path());
    if (!text) throw std::runtime_error(fmt::format("cannot read {}", e.path().string()));
    p.texts[e.path().stem().string()] = *text;
  }
  if (ec) throw std::runtime_error(fmt::format("cannot read the prompt folder {}: {}", dir.string(), ec.message()));
  check_complete(p);
  return p;
}

std::string render_template(const std::string& tmpl, const std::map<std::string, std::string>& vars) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t a = tmpl.find("{{", pos);
    if (a == std::string::npos) break;
    std::size_t b = tmpl.find("}}", a + 2);
    if (b == std::string::npos) break;
    std::string name = tmpl.substr(a + 2, b - a - 2);
    auto it = vars.find(name);
    if (it == vars.end()) throw std::runtime_error(fmt::format("prompt template: no value for {{{{{}}}}}", name));
    out += tmpl.substr(pos, a - pos);
    out += it->second;
    pos = b + 2;
  }
  out += tmpl.substr(pos);
  return out;
}

}  // namespace d2k::judge
