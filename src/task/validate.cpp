#include "task/validate.hpp"

#include <fmt/format.h>

#include <functional>
#include <regex>
#include <set>

#include "core/expr.hpp"
#include "core/files.hpp"
#include "task/prompt.hpp"
#include "task/solution.hpp"

namespace d2k {
namespace {

constexpr std::array<std::string_view, 2> kLanguages{"triton", "cuda"};
constexpr std::array<std::string_view, 6> kComputeDtypes{"fp64", "fp32", "tf32", "bf16", "fp16", "fp8"};

bool contains(auto const& list, std::string_view v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

void check_names(const Task& t, const std::string& file, Diagnostics& d) {
  static const std::regex name_re("^[a-z0-9_]+$");
  if (!std::regex_match(t.name, name_re)) d.add(file, 0, "name", fmt::format("'{}' must match [a-z0-9_]+", t.name));
  for (const auto& [axis, desc] : t.axes)
    if (!is_valid_identifier(axis))
      d.add(file, 0, "axes." + axis, "not a valid axis name (an identifier that is not a function name)");
  std::set<std::string> names;
  auto unique = [&](const std::string& key, const std::string& n) {
    if (!is_valid_identifier(n)) d.add(file, 0, key, fmt::format("'{}' is not a valid identifier", n));
    if (t.axes.count(n)) d.add(file, 0, key, fmt::format("'{}' is also an axis name", n));
    if (!names.insert(n).second) d.add(file, 0, key, fmt::format("duplicate name '{}'", n));
  };
  for (std::size_t i = 0; i < t.inputs.size(); ++i) unique(fmt::format("inputs[{}].name", i), t.inputs[i].name);
  for (std::size_t i = 0; i < t.outputs.size(); ++i) unique(fmt::format("outputs[{}].name", i), t.outputs[i].name);
  for (std::size_t i = 0; i < t.params.size(); ++i) unique(fmt::format("params[{}].name", i), t.params[i].name);
  if (t.outputs.empty()) d.add(file, 0, "outputs", "a task needs at least one output");
  if (t.inputs.empty()) d.add(file, 0, "inputs", "a task needs at least one input");
}

void check_outputs(const Task& t, const std::string& file, Diagnostics& d) {
  for (std::size_t i = 0; i < t.outputs.size(); ++i) {
    const auto& o = t.outputs[i];
    auto key = [&](std::string_view k) { return fmt::format("outputs[{}].{}", i, k); };
    if (o.tol.atol < 0) d.add(file, 0, key("atol"), "must be >= 0");
    if (o.tol.rtol < 0) d.add(file, 0, key("rtol"), "must be >= 0");
    if (o.tol.atol_norm < 0) d.add(file, 0, key("atol_norm"), "must be >= 0");
    if (!(o.tol.matched_ratio > 0 && o.tol.matched_ratio <= 1)) d.add(file, 0, key("matched_ratio"), "must be in (0, 1]");
    if (o.tol.check != "allclose" && o.tol.check != "custom")
      d.add(file, 0, key("check"), fmt::format("'{}' is not a checker (allclose or custom)", o.tol.check));
    if (o.tol.check == "allclose" && o.tol.atol == 0 && o.tol.rtol == 0 && dtype_is_float(o.dtype))
      d.add(file, 0, key("atol"), "a float output compared with atol = rtol = 0 fails on rounding; give a tolerance");
  }
}

// True when `e` parses over the declared names (with a probe value for each); value errors such as a
// division by zero at the probe values are left to the per-workload checks.
bool parses_over_names(const Task& t, const std::string& e, std::string* error = nullptr) {
  ExprVars probe;
  for (const auto& [a, desc] : t.axes) probe[a] = 7;
  for (const auto& p : t.params) probe[p.name] = p.value;
  try {
    eval_expr(e, probe);
  } catch (const ExprError& err) {
    std::string m = err.what();
    if (m.find("by zero") != std::string::npos) return true;
    if (error) *error = m;
    return false;
  }
  return true;
}

void check_workloads(const Task& t, const std::string& file, Diagnostics& d) {
  if (t.workloads.empty()) d.add(file, 0, "workloads", "a task needs at least one timed workload");
  if (t.correctness.empty()) d.add(file, 0, "correctness", "a task needs correctness workloads (ragged sizes)");
  std::set<std::string> names;
  auto each = [&](const std::vector<Workload>& list, std::string_view kind) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& w = list[i];
      auto key = fmt::format("{}[{}]", kind, i);
      if (!names.insert(w.name).second)
        d.add(file, w.line, key + ".name", fmt::format("duplicate workload name '{}'", w.name));
      bool complete = true;
      for (const auto& [axis, desc] : t.axes)
        if (!w.axes.count(axis)) {
          d.add(file, w.line, key + ".axes", fmt::format("workload '{}' gives no value for axis {}", w.name, axis));
          complete = false;
        }
      for (const auto& [axis, v] : w.axes)
        if (!t.axes.count(axis))
          d.add(file, w.line, fmt::format("{}.axes.{}", key, axis), fmt::format("'{}' is not a declared axis", axis));
      for (const auto& [p, v] : w.params) {
        auto it = std::find_if(t.params.begin(), t.params.end(), [&](const auto& ps) { return ps.name == p; });
        if (it == t.params.end())
          d.add(file, w.line, fmt::format("{}.params.{}", key, p), fmt::format("'{}' is not a declared param", p));
      }
      if (!complete) continue;
      auto vars = t.vars(w);
      bool holds = true;
      for (const auto& c : t.constraints) {
        if (!parses_over_names(t, c)) continue;
        try {
          if (eval_expr(c, vars) == 0) {
            std::string vals;
            for (const auto& [a, v] : w.axes) vals += fmt::format("{}{}={}", vals.empty() ? "" : ", ", a, v);
            d.add(file, w.line, key, fmt::format("workload '{}' breaks constraint '{}' ({})", w.name, c, vals));
            holds = false;
          }
        } catch (const ExprError& e) {
          d.add(file, w.line, key, fmt::format("in workload '{}': {}", w.name, e.what()));
          holds = false;
        }
      }
      if (!holds) continue;  // shapes and sizes of an invalid workload say nothing more
      double total_bytes = 0;
      auto shapes = [&](const auto& specs, std::string_view skind) {
        for (std::size_t j = 0; j < specs.size(); ++j) {
          double elems = 1;
          for (std::size_t k = 0; k < specs[j].shape.size(); ++k) {
            if (!parses_over_names(t, specs[j].shape[k])) continue;
            try {
              elems *= static_cast<double>(eval_dim(specs[j].shape[k], vars));
            } catch (const ExprError& e) {
              d.add(file, w.line, fmt::format("{}[{}].shape[{}]", skind, j, k),
                    fmt::format("in workload '{}': {}", w.name, e.what()));
            }
          }
          total_bytes += elems * static_cast<double>(dtype_size(specs[j].dtype));
        }
      };
      shapes(t.inputs, "inputs");
      shapes(t.outputs, "outputs");
      if (total_bytes > 64.0 * (1ull << 30))
        d.add(file, w.line, key, fmt::format("workload '{}' needs {:.1f} GiB of tensors (limit 64 GiB)", w.name, total_bytes / (1ull << 30)));
      for (const auto* expr : {&t.performance.flops, &t.performance.bytes}) {
        std::string_view pk = expr == &t.performance.flops ? "performance.flops" : "performance.bytes";
        if (expr->empty() || !parses_over_names(t, *expr)) continue;
        try {
          double v = eval_expr(*expr, vars);
          if (v < 0) d.add(file, 0, std::string(pk), fmt::format("negative ({}) in workload '{}'", v, w.name));
          if (pk == "performance.bytes" && v <= 0)
            d.add(file, 0, std::string(pk), fmt::format("must be positive (workload '{}')", w.name));
        } catch (const ExprError& e) {
          d.add(file, 0, std::string(pk), fmt::format("in workload '{}': {}", w.name, e.what()));
        }
      }
    }
  };
  each(t.workloads, "workloads");
  each(t.correctness, "correctness");
}

void check_guidance(const Task& t, const std::string& file, Diagnostics& d) {
  static const std::regex level_re("^L[1-9]$");
  if (t.guidance.empty()) d.add(file, 0, "guidance", "a task needs guidance levels ([guidance.L1] ...)");
  for (const auto& g : t.guidance) {
    auto key = "guidance." + g.id;
    if (!std::regex_match(g.id, level_re)) d.add(file, 0, key, "level ids are L1 .. L9");
    for (const auto& dep : g.depends) {
      if (!t.level(dep)) d.add(file, 0, key + ".depends", fmt::format("'{}' is not a guidance level of this task", dep));
      if (dep == g.id) d.add(file, 0, key + ".depends", "a level cannot depend on itself");
    }
  }
  // Cycles: depth-first search with colours.
  std::map<std::string, int> colour;
  std::vector<std::string> stack;
  std::function<void(const GuidanceLevel&)> visit = [&](const GuidanceLevel& g) {
    colour[g.id] = 1;
    stack.push_back(g.id);
    for (const auto& dep : g.depends) {
      const auto* n = t.level(dep);
      if (!n || dep == g.id) continue;
      if (colour[dep] == 1) {
        auto from = std::find(stack.begin(), stack.end(), dep);
        std::string cycle;
        for (auto it = from; it != stack.end(); ++it) cycle += *it + " -> ";
        d.add(file, 0, "guidance." + g.id + ".depends", fmt::format("dependency cycle: {}{}", cycle, dep));
      } else if (colour[dep] == 0) {
        visit(*n);
      }
    }
    stack.pop_back();
    colour[g.id] = 2;
  };
  for (const auto& g : t.guidance)
    if (colour[g.id] == 0) visit(g);
}

void check_other(const Task& t, const std::string& file, Diagnostics& d) {
  if (t.requirements.languages.empty()) d.add(file, 0, "requirements.languages", "list at least one of triton, cuda");
  for (const auto& l : t.requirements.languages)
    if (!contains(kLanguages, l))
      d.add(file, 0, "requirements.languages", fmt::format("unknown language '{}' (triton, cuda)", l));
  if (t.requirements.text.find_first_not_of(" \n\t") == std::string::npos)
    d.add(file, 0, "requirements.text", "must say what a solution may and may not do");
  if (t.performance.bound != "memory" && t.performance.bound != "compute")
    d.add(file, 0, "performance.bound", fmt::format("'{}' is not memory or compute", t.performance.bound));
  if (!contains(kComputeDtypes, t.performance.compute_dtype))
    d.add(file, 0, "performance.compute_dtype",
          fmt::format("'{}' is not one of {}", t.performance.compute_dtype, fmt::join(kComputeDtypes, " ")));
  if (t.evaluation.reference_precision != "float64" && t.evaluation.reference_precision != "float32")
    d.add(file, 0, "evaluation.reference_precision",
          fmt::format("'{}' is not float64 or float32", t.evaluation.reference_precision));
  // Every expression must at least parse over the declared names (workload checks say which values fail).
  auto parses = [&](const std::string& key, const std::string& e) {
    std::string err;
    if (!parses_over_names(t, e, &err)) d.add(file, 0, key, err);
  };
  for (std::size_t i = 0; i < t.constraints.size(); ++i) parses(fmt::format("constraints[{}]", i), t.constraints[i]);
  for (std::size_t i = 0; i < t.inputs.size(); ++i)
    for (std::size_t k = 0; k < t.inputs[i].shape.size(); ++k)
      parses(fmt::format("inputs[{}].shape[{}]", i, k), t.inputs[i].shape[k]);
  for (std::size_t i = 0; i < t.outputs.size(); ++i)
    for (std::size_t k = 0; k < t.outputs[i].shape.size(); ++k)
      parses(fmt::format("outputs[{}].shape[{}]", i, k), t.outputs[i].shape[k]);
  parses("performance.flops", t.performance.flops);
  parses("performance.bytes", t.performance.bytes);
}

void require_file(const std::filesystem::path& p, Diagnostics& d, std::string_view why) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) {
    d.add(p.string(), 0, "", fmt::format("missing ({})", why));
    return;
  }
  auto text = read_file(p, 4u << 20);
  if (!text) {
    d.add(p.string(), 0, "", "unreadable or larger than 4 MiB");
  } else if (!is_valid_utf8(*text)) {
    d.add(p.string(), 0, "", "not valid UTF-8");
  } else if (text->find_first_not_of(" \n\t\r") == std::string::npos) {
    d.add(p.string(), 0, "", fmt::format("empty ({})", why));
  }
}

void check_files(const Task& t, Diagnostics& d) {
  const auto& dir = t.dir;
  require_file(dir / "README.md", d, "the task description an agent reads");
  require_file(dir / "reference.py", d, "the input generator and the PyTorch reference");
  if (auto ref = read_file(dir / "reference.py", 4u << 20)) {
    for (std::string_view fn : {"generate_inputs", "reference"})
      if (ref->find(fmt::format("def {}(", fn)) == std::string::npos)
        d.add((dir / "reference.py").string(), 0, "", fmt::format("defines no function {}()", fn));
    bool custom = std::any_of(t.outputs.begin(), t.outputs.end(), [](const auto& o) { return o.tol.check == "custom"; });
    if (custom && ref->find("def check(") == std::string::npos)
      d.add((dir / "reference.py").string(), 0, "", "an output has check = \"custom\" but no check() is defined");
  }
  for (const auto& g : t.guidance) require_file(dir / "guidance" / (g.id + ".md"), d, "guidance text of level " + g.id);
  for (const auto& l : t.requirements.languages) {
    if (l == "triton") require_file(dir / "template" / "solution.py", d, "the Triton template");
    if (l == "cuda") require_file(dir / "template" / "solution.cu", d, "the CUDA C++ template");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir / "expert", ec)) {
    d.add((dir / "expert").string(), 0, "", "missing: a task needs an expert solution (expert/solution.py or .cu)");
  } else if (auto s = load_solution(dir / "expert", d)) {
    if (!contains(t.requirements.languages, language_name(s->language)))
      d.add(s->source.string(), 0, "", fmt::format("the expert solution's language ({}) is not allowed by the task",
                                                   language_name(s->language)));
  }
  if (std::filesystem::is_directory(dir / "naive", ec)) load_solution(dir / "naive", d);
  if (std::filesystem::is_directory(dir / "wrong", ec)) {
    for (const auto& e : std::filesystem::directory_iterator(dir / "wrong", ec)) {
      if (!e.is_directory()) continue;
      if (auto s = load_solution(e.path(), d); s && (!s->expect || *s->expect == Status::passed))
        d.add((e.path() / "solution.toml").string(), 0, "expect",
              "a wrong/ solution must say which failing status the evaluator must give it");
    }
  }
}

}  // namespace

void check_manifest(const Task& t, const std::string& file, Diagnostics& d) {
  check_names(t, file, d);
  check_outputs(t, file, d);
  check_workloads(t, file, d);
  check_guidance(t, file, d);
  check_other(t, file, d);
}

std::optional<Task> validate_task(const std::filesystem::path& dir, Diagnostics& diags) {
  auto task = load_task(dir, diags);
  if (!task) return std::nullopt;
  auto file = (dir / kManifestFile).string();
  check_manifest(*task, file, diags);
  static const std::regex folder_re(R"(^\d{3}_([a-z0-9_]+)$)");
  std::smatch m;
  if (!std::regex_match(task->folder, m, folder_re))
    diags.add(dir.string(), 0, "", fmt::format("folder name '{}' is not NNN_name", task->folder));
  else if (m[1].str() != task->name)
    diags.add(file, 0, "name", fmt::format("'{}' differs from the folder's name '{}'", task->name, m[1].str()));
  check_files(*task, diags);
  return task;
}

void validate_suite(const Suite& suite, Diagnostics& diags) {
  std::map<std::string, std::string> names;
  for (const auto& f : suite.folders) {
    auto task = validate_task(suite.root / f, diags);
    if (!task) continue;
    auto [it, fresh] = names.emplace(task->name, f);
    if (!fresh)
      diags.add((suite.root / f / kManifestFile).string(), 0, "name",
                fmt::format("task name '{}' is also used by {}", task->name, it->second));
  }
}

}  // namespace d2k
