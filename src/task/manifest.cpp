#include "task/manifest.hpp"

#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>
#include <toml++/toml.h>

#include "core/expr.hpp"
#include "core/toml_reader.hpp"
#include "core/files.hpp"

namespace d2k {

const GuidanceLevel* Task::level(std::string_view id) const {
  for (const auto& g : guidance)
    if (g.id == id) return &g;
  return nullptr;
}

const Workload* Task::workload(std::string_view wname) const {
  for (const auto* list : {&workloads, &correctness})
    for (const auto& w : *list)
      if (w.name == wname) return &w;
  return nullptr;
}

std::map<std::string, double, std::less<>> Task::vars(const Workload& w) const {
  std::map<std::string, double, std::less<>> v;
  for (const auto& p : params) v[p.name] = p.value;
  for (const auto& [k, val] : w.params) v[k] = val;
  for (const auto& [k, val] : w.axes) v[k] = static_cast<double>(val);
  return v;
}

namespace {


DType read_dtype(TomlReader& r, std::string_view k, bool param) {
  auto s = r.str(k, true);
  if (!s) return DType::float32;
  auto t = parse_dtype(*s);
  if (!t) {
    r.error(k, r.get(k), fmt::format("unknown dtype '{}' (known: {})", *s, dtype_names_list()));
    return DType::float32;
  }
  if (param && !dtype_is_param_type(*t)) {
    r.error(k, r.get(k), fmt::format("dtype '{}' cannot be a scalar param (float64 float32 int64 int32 bool)", *s));
    return DType::float32;
  }
  return *t;
}

void read_tensor(TomlReader& r, TensorSpec& t) {
  if (auto s = r.str("name", true)) t.name = *s;
  t.dtype = read_dtype(r, "dtype", false);
  if (!r.get("shape")) {
    r.error("shape", nullptr, "missing (an array of expressions; [] for a scalar tensor)");
  } else if (const auto* a = r.get("shape")->as_array()) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* e = a->get(i);
      if (e->is_string())
        t.shape.push_back(e->as_string()->get());
      else if (e->is_integer())
        t.shape.push_back(std::to_string(e->as_integer()->get()));
      else
        r.error(fmt::format("shape[{}]", i), e, "must be an expression string or an integer");
    }
  } else {
    r.error("shape", r.get("shape"), "must be an array");
  }
  if (auto s = r.str("description", false)) t.description = *s;
}

Workload read_workload(const toml::table& tbl, const std::string& path, const std::string& file, Diagnostics& d,
                       bool timed) {
  TomlReader r(tbl, path, file, d);
  r.only_keys({"name", "axes", "params", "description"});
  Workload w;
  w.timed = timed;
  w.line = r.line();
  if (auto s = r.str("name", true)) w.name = *s;
  if (const auto* axes = r.table("axes", true)) {
    TomlReader ar(*axes, r.key("axes"), file, d);
    for (auto&& [k, v] : *axes) {
      if (!v.is_integer()) {
        ar.error(k.str(), &v, "axis values must be integers");
        continue;
      }
      long long val = v.as_integer()->get();
      if (val < 0 || val >= (1LL << 40)) {
        ar.error(k.str(), &v, fmt::format("axis value {} outside [0, 2^40)", val));
        continue;
      }
      w.axes[std::string(k.str())] = val;
    }
  }
  if (const auto* params = r.table("params", false)) {
    TomlReader pr(*params, r.key("params"), file, d);
    for (auto&& [k, v] : *params)
      if (auto x = pr.number(k.str(), true, true)) w.params[std::string(k.str())] = *x;
  }
  return w;
}

}  // namespace

std::optional<Task> parse_manifest(const std::string& text, const std::string& file, Diagnostics& diags) {
  Diagnostics d;
  if (!is_valid_utf8(text)) {
    diags.add(file, 0, "", "not valid UTF-8");
    return std::nullopt;
  }
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    diags.add(file, static_cast<int>(e.source().begin.line), "", fmt::format("TOML syntax: {}", e.description()));
    return std::nullopt;
  }

  Task task;
  TomlReader r(root, "", file, d);
  r.only_keys({"schema", "name", "summary", "category", "constraints", "axes", "inputs", "outputs", "params",
               "workloads", "correctness", "evaluation", "requirements", "performance", "guidance"});
  if (auto v = r.integer("schema", true)) {
    task.schema = static_cast<int>(*v);
    if (*v != kSchemaVersion)
      r.error("schema", r.get("schema"), fmt::format("unsupported schema {} (this d2k reads {})", *v, kSchemaVersion));
  }
  if (auto s = r.str("name", true)) task.name = *s;
  if (auto s = r.str("summary", true)) task.summary = *s;
  if (auto s = r.str("category", true)) task.category = *s;
  task.constraints = r.strings("constraints", false);

  if (const auto* axes = r.table("axes", true)) {
    TomlReader ar(*axes, "axes", file, d);
    for (auto&& [k, v] : *axes) {
      if (!v.is_string()) {
        ar.error(k.str(), &v, "an axis is declared with its description (a string)");
        continue;
      }
      task.axes[std::string(k.str())] = v.as_string()->get();
    }
  }

  auto tensor_list = [&](std::string_view k, auto& out, bool is_output) {
    auto tbls = r.tables(k, true);
    for (std::size_t i = 0; i < tbls.size(); ++i) {
      TomlReader tr(*tbls[i], fmt::format("{}[{}]", k, i), file, d);
      if (is_output) {
        tr.only_keys({"name", "dtype", "shape", "description", "atol", "rtol", "matched_ratio", "atol_norm", "check"});
      } else {
        tr.only_keys({"name", "dtype", "shape", "description"});
      }
      typename std::remove_reference_t<decltype(out)>::value_type t;
      read_tensor(tr, t);
      if constexpr (std::is_same_v<decltype(t), OutputSpec>) {
        if (auto v = tr.number("atol", true, true)) t.tol.atol = *v;
        if (auto v = tr.number("rtol", true, true)) t.tol.rtol = *v;
        if (auto v = tr.number("matched_ratio", false, true)) t.tol.matched_ratio = *v;
        if (auto v = tr.number("atol_norm", false, true)) t.tol.atol_norm = *v;
        if (auto v = tr.str("check", false)) t.tol.check = *v;
      }
      out.push_back(std::move(t));
    }
  };
  tensor_list("inputs", task.inputs, false);
  tensor_list("outputs", task.outputs, true);

  for (const auto* pt : r.tables("params", false)) {
    TomlReader pr(*pt, fmt::format("params[{}]", task.params.size()), file, d);
    pr.only_keys({"name", "dtype", "value", "description"});
    ParamSpec p;
    if (auto s = pr.str("name", true)) p.name = *s;
    p.dtype = read_dtype(pr, "dtype", true);
    if (auto v = pr.number("value", true, true)) p.value = *v;
    if (auto s = pr.str("description", false)) p.description = *s;
    task.params.push_back(std::move(p));
  }

  auto wl = r.tables("workloads", true);
  for (std::size_t i = 0; i < wl.size(); ++i)
    task.workloads.push_back(read_workload(*wl[i], fmt::format("workloads[{}]", i), file, d, true));
  auto cl = r.tables("correctness", true);
  for (std::size_t i = 0; i < cl.size(); ++i)
    task.correctness.push_back(read_workload(*cl[i], fmt::format("correctness[{}]", i), file, d, false));

  if (const auto* ev = r.table("evaluation", false)) {
    TomlReader er(*ev, "evaluation", file, d);
    er.only_keys({"seeds", "reference_precision"});
    if (auto v = er.integer("seeds", false)) {
      if (*v < 1 || *v > 64)
        er.error("seeds", er.get("seeds"), fmt::format("{} outside [1, 64]", *v));
      else
        task.evaluation.seeds = static_cast<int>(*v);
    }
    if (auto s = er.str("reference_precision", false)) task.evaluation.reference_precision = *s;
  }

  if (const auto* rq = r.table("requirements", true)) {
    TomlReader qr(*rq, "requirements", file, d);
    qr.only_keys({"languages", "text", "forbidden_calls", "forbidden_libraries", "allowed_torch_ops"});
    task.requirements.languages = qr.strings("languages", true);
    if (auto s = qr.str("text", true)) task.requirements.text = *s;
    task.requirements.forbidden_calls = qr.strings("forbidden_calls", false);
    task.requirements.forbidden_libraries = qr.strings("forbidden_libraries", false);
    task.requirements.allowed_torch_ops = qr.strings("allowed_torch_ops", false);
  }

  if (const auto* pf = r.table("performance", true)) {
    TomlReader fr(*pf, "performance", file, d);
    fr.only_keys({"flops", "bytes", "bound", "compute_dtype", "target_speedup", "target_sol"});
    if (auto v = fr.number("target_speedup", false)) {
      if (*v <= 0)
        fr.error("target_speedup", fr.get("target_speedup"), "must be positive (a speedup over eager)");
      else
        task.performance.target_speedup = *v;
    }
    if (auto v = fr.number("target_sol", false)) {
      if (*v <= 0 || *v > 1)
        fr.error("target_sol", fr.get("target_sol"), "must be in (0, 1] (a share of speed-of-light)");
      else
        task.performance.target_sol = *v;
    }
    if (auto s = fr.str("flops", true)) task.performance.flops = *s;
    if (auto s = fr.str("bytes", true)) task.performance.bytes = *s;
    if (auto s = fr.str("bound", false)) task.performance.bound = *s;
    if (auto s = fr.str("compute_dtype", false)) task.performance.compute_dtype = *s;
  }

  if (const auto* gd = r.table("guidance", true)) {
    TomlReader gr(*gd, "guidance", file, d);
    for (auto&& [k, v] : *gd) {
      GuidanceLevel g;
      g.id = std::string(k.str());
      const auto* lt = v.as_table();
      if (!lt) {
        gr.error(k.str(), &v, "must be a table ([guidance.L1])");
        continue;
      }
      TomlReader lr(*lt, gr.key(k.str()), file, d);
      lr.only_keys({"title", "depends"});
      if (auto s = lr.str("title", true)) g.title = *s;
      g.depends = lr.strings("depends", false);
      task.guidance.push_back(std::move(g));
    }
    // toml++ tables are ordered by key; L1 < L2 < L3 sorts right, but be explicit.
    std::sort(task.guidance.begin(), task.guidance.end(),
              [](const auto& a, const auto& b) { return a.id < b.id; });
  }

  diags.append(d);
  if (!d.empty()) return std::nullopt;
  return task;
}

std::optional<Task> load_task(const std::filesystem::path& dir, Diagnostics& diags) {
  auto path = dir / kManifestFile;
  auto text = read_file(path, 1u << 20);
  if (!text) {
    std::error_code ec;
    diags.add(path.string(), 0, "",
              std::filesystem::exists(path, ec) ? "cannot be read (or larger than 1 MiB)" : "missing");
    return std::nullopt;
  }
  auto task = parse_manifest(*text, path.string(), diags);
  if (!task) return std::nullopt;
  task->dir = dir;
  task->folder = dir.filename().string();
  static const std::regex folder_re(R"(^(\d{3})_([a-z0-9_]+)$)");
  std::smatch m;
  if (std::regex_match(task->folder, m, folder_re)) task->number = std::stoi(m[1].str());
  return task;
}

}  // namespace d2k
