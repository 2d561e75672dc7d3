#include "agent/tools/toolbox.hpp"

#include <fmt/format.h>

#include <utility>

namespace d2k::agent {

using nlohmann::json;

namespace {

json object_schema(json properties, std::vector<std::string> required) {
  return json{{"type", "object"},
              {"properties", std::move(properties)},
              {"required", std::move(required)},
              {"additionalProperties", false}};
}

std::vector<ToolSpec> build_specs(const ToolBoxOptions& o) {
  std::vector<ToolSpec> s;
  s.push_back({"read_file",
               fmt::format("Read a text file in the workspace. Returns its lines numbered like `cat -n` (number, "
                           "tab, line); at most {} lines unless `limit` says otherwise, lines longer than {} "
                           "characters are cut. Use `offset` to read on.",
                           o.read_default_lines, o.read_max_line_chars),
               object_schema({{"path", {{"type", "string"}, {"description", "path relative to the workspace"}}},
                              {"offset", {{"type", "integer"}, {"minimum", 1},
                                          {"description", "first line to show, counting from 1 (default 1)"}}},
                              {"limit", {{"type", "integer"}, {"minimum", 1},
                                         {"description", "how many lines to show"}}}},
                             {"path"})});
  s.push_back({"write_file",
               "Create or overwrite a file in the workspace with `content` (parent folders are created).",
               object_schema({{"path", {{"type", "string"}, {"description", "path relative to the workspace"}}},
                              {"content", {{"type", "string"}, {"description", "the whole new content"}}}},
                             {"path", "content"})});
  s.push_back({"edit_file",
               "Replace an exact string in a file. `old_string` must occur exactly once unless `replace_all` is "
               "true; include enough surrounding text to make it unique.",
               object_schema({{"path", {{"type", "string"}, {"description", "path relative to the workspace"}}},
                              {"old_string", {{"type", "string"}, {"description", "the exact text to replace"}}},
                              {"new_string", {{"type", "string"}, {"description", "the text to put in its place"}}},
                              {"replace_all", {{"type", "boolean"},
                                               {"description", "replace every occurrence (default false)"}}}},
                             {"path", "old_string", "new_string"})});
  s.push_back({"list_files",
               fmt::format("List files under a folder of the workspace, recursively, with sizes in bytes (at "
                           "most {} entries).",
                           o.list_max_entries),
               object_schema({{"path", {{"type", "string"},
                                        {"description", "folder relative to the workspace (default: the root)"}}}},
                             {})});
  s.push_back({"bash",
               fmt::format("Run a command with `bash -c` in the workspace folder (stdin is empty). Returns the exit "
                           "code and stdout+stderr; long output keeps its first {} and last {} bytes. The command "
                           "and everything it started are killed after `timeout_s` seconds (default {}, at most "
                           "{}) and when the shell exits.",
                           o.bash_output.head_bytes, o.bash_output.tail_bytes, o.bash_default_timeout_s,
                           o.bash_max_timeout_s),
               object_schema({{"command", {{"type", "string"}, {"description", "the bash command line"}}},
                              {"timeout_s", {{"type", "integer"}, {"minimum", 1}, {"maximum", o.bash_max_timeout_s},
                                             {"description", "seconds before the command is killed"}}}},
                             {"command"})});
  s.push_back({"evaluate",
               "Evaluate the current solution in the workspace on the public workloads: compile errors, "
               "correctness and timings, as compact text. Not recorded as a submission.",
               object_schema(json::object(), {})});
  s.push_back({"submit",
               "Submit the current solution for an official, recorded evaluation. Several submissions are "
               "allowed.",
               object_schema(json::object(), {})});
  return s;
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::null: return "null";
    default: return "unknown";
  }
}

bool has_type(const json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
  if (t == "number") return v.is_number();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return true;
}

}  // namespace

std::optional<std::string> check_args(const json& schema, const json& args) {
  if (!args.is_object()) return fmt::format("arguments must be an object, not {}", type_name(args));
  const json& props = schema.value("properties", json::object());
  std::vector<std::string> problems;
  for (const auto& req : schema.value("required", json::array()))
    if (!args.contains(req.get<std::string>())) problems.push_back(fmt::format("missing argument `{}`", req.get<std::string>()));
  for (const auto& [key, value] : args.items()) {
    if (!props.contains(key)) {
      std::string known;
      for (const auto& [k, _] : props.items()) known += (known.empty() ? "" : ", ") + k;
      problems.push_back(fmt::format("unknown argument `{}` (this tool takes: {})", key, known.empty() ? "none" : known));
      continue;
    }
    const json& p = props[key];
    std::string t = p.value("type", "");
    if (!t.empty() && !has_type(value, t)) {
      problems.push_back(fmt::format("argument `{}` must be {}, not {}", key, t, type_name(value)));
      continue;
    }
    if (t == "integer") {
      auto n = value.is_number_float() ? static_cast<long long>(value.get<double>()) : value.get<long long>();
      if (p.contains("minimum") && n < p["minimum"].get<long long>())
        problems.push_back(fmt::format("argument `{}` must be at least {}", key, p["minimum"].get<long long>()));
      if (p.contains("maximum") && n > p["maximum"].get<long long>())
        problems.push_back(fmt::format("argument `{}` must be at most {}", key, p["maximum"].get<long long>()));
    }
  }
  if (problems.empty()) return std::nullopt;
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "; ") + p;
  return out;
}

ToolBox::ToolBox(Workspace workspace, ToolBoxOptions options)
    : workspace_(std::move(workspace)), opt_(std::move(options)) {
  if (!opt_.runner) opt_.runner = std::make_shared<LocalCommandRunner>();
  specs_ = build_specs(opt_);
}

std::vector<ToolSpec> ToolBox::specs() const { return specs_; }

bool ToolBox::has(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return true;
  return false;
}

ToolResult ToolBox::call(const std::string& name, const json& args_in) {
  const ToolSpec* spec = nullptr;
  for (const auto& s : specs_)
    if (s.name == name) spec = &s;
  if (!spec) {
    std::string known;
    for (const auto& s : specs_) known += (known.empty() ? "" : ", ") + s.name;
    return {fmt::format("unknown tool `{}` (tools: {})", name, known), true};
  }
  if (opt_.max_calls > 0 && calls_ >= opt_.max_calls)
    return {fmt::format("budget exhausted: this session allows {} tool calls", opt_.max_calls), true};
  ++calls_;
  const json args = args_in.is_null() ? json::object() : args_in;
  if (auto why = check_args(spec->input_schema, args)) return {fmt::format("{}: {}", name, *why), true};
  try {
    if (name == "read_file") return read_file(args);
    if (name == "write_file") return write_file(args);
    if (name == "edit_file") return edit_file(args);
    if (name == "list_files") return list_files(args);
    if (name == "bash") return bash(args);
    if (name == "evaluate") return evaluate(false);
    if (name == "submit") return evaluate(true);
  } catch (const std::exception& e) {
    return {fmt::format("{} failed: {}", name, e.what()), true};
  }
  return {fmt::format("tool `{}` has no implementation", name), true};
}

ToolResult ToolBox::evaluate(bool official) {
  const char* name = official ? "submit" : "evaluate";
  if (!opt_.evaluate) return {fmt::format("{} is not available in this session", name), true};
  return opt_.evaluate(official);
}

}  // namespace d2k::agent
