#pragma once
// The judges' prompts and anchors: the text files of prompts/judge/ (embedded in the binary at configure time, or
// read from a folder with --prompts), and the one template syntax they use: {{name}}.
#include <filesystem>
#include <map>
#include <string>

namespace d2k::judge {

struct PromptSet {
  std::map<std::string, std::string> texts;  // file stem ("system", "impl_level", ...) -> text
  std::string source = "embedded";           // "embedded" or the folder read

  // The named text; throws std::runtime_error naming the missing file.
  const std::string& get(const std::string& name) const;
  // SHA-256 (hex) over the names and texts: recorded with every judgment.
  std::string sha256() const;
};

// The texts that must be present in any prompt set.
inline const char* const kPromptNames[] = {"system",       "anchors_impl", "anchors_design", "output_format",
                                           "impl_level",   "design_level", "reask",          "design_propose"};

PromptSet embedded_prompts();
// Every *.md of `dir`; throws std::runtime_error when one of kPromptNames is missing.
PromptSet load_prompts(const std::filesystem::path& dir);

// Replaces each {{name}} with vars[name]. Throws std::runtime_error for a placeholder without a value (a typo
// in a prompt file must not reach a judge as literal braces).
std::string render_template(const std::string& tmpl, const std::map<std::string, std::string>& vars);

}  // namespace d2k::judge
