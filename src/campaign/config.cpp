#include "campaign/config.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <regex>
#include <set>

#include "core/toml_reader.hpp"
#include "score/score.hpp"
#include "task/suite.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;
using nlohmann::json;

std::string guidance_arg(const std::string& condition) {
  if (condition == "L1") return "L1";
  if (condition == "L1+L2") return "L1,L2";
  if (condition == "all") return "all";
  return "none";
}

json CampaignConfig::protocol_json() const {
  return {{"name", name},
          {"models", models},
          {"tasks", tasks},
          {"conditions", conditions},
          {"repeats", repeats},
          {"budgets",
           {{"turns", turns}, {"max_tokens", max_tokens}, {"max_cost", max_cost}, {"max_wall", max_wall},
            {"max_format_errors", max_format_errors}}},
          {"agent",
           {{"final", final_policy}, {"auto_submit", auto_submit}, {"sandbox", sandbox}, {"condense_at", condense_at}}}};
}

namespace {

fs::path resolve(const fs::path& base, const std::string& p) {
  fs::path q(p);
  return (q.is_absolute() ? q : base / q).lexically_normal();
}

}  // namespace

std::optional<CampaignConfig> load_campaign_config(const fs::path& file, Diagnostics& d) {
  const std::string fname = file.string();
  const std::size_t before = d.size();
  toml::table root;
  try {
    root = toml::parse_file(fname);
  } catch (const toml::parse_error& e) {
    d.add(fname, static_cast<int>(e.source().begin.line), "", std::string(e.description()));
    return std::nullopt;
  } catch (const std::exception& e) {
    d.add(fname, 0, "", e.what());
    return std::nullopt;
  }
  CampaignConfig c;
  c.file = fs::absolute(file).lexically_normal();
  const fs::path base = c.file.parent_path();
  TomlReader r(root, "", fname, d);
  r.only_keys({"name", "store", "runs_dir", "tasks_dir", "models_file", "models", "tasks", "conditions", "repeats",
               "budgets", "agent", "parallel"});

  if (auto v = r.str("name", true)) {
    c.name = *v;
    if (!std::regex_match(c.name, std::regex("[A-Za-z0-9][A-Za-z0-9._-]*")))
      r.error("name", r.get("name"), "must be letters, digits, '.', '_' or '-' (it names folders)");
  }
  if (auto v = r.str("store", true)) c.store = resolve(base, *v);
  if (auto v = r.str("runs_dir", false))
    c.runs_dir = resolve(base, *v);
  else if (!c.store.empty())
    c.runs_dir = c.store.parent_path() / (c.name + ".runs");
  if (auto v = r.str("tasks_dir", false))
    c.tasks_dir = resolve(base, *v);
  else
    c.tasks_dir = default_tasks_root();
  if (auto v = r.str("models_file", false)) {
    c.models_file = resolve(base, *v);
  } else if (const char* env = std::getenv("D2K_MODELS"); env && *env) {
    c.models_file = env;
  } else {
    r.error("models_file", nullptr, "missing: name the model registry (docs/PROVIDERS.md) or set D2K_MODELS");
  }

  auto unique_list = [&](std::string_view key, std::vector<std::string> v) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!seen.insert(v[i]).second)
        d.add(fname, r.get(key) ? r.line_of(*r.get(key)) : 0, fmt::format("{}[{}]", key, i),
              fmt::format("'{}' is listed twice", v[i]));
    if (r.get(key) && v.empty()) r.error(key, r.get(key), "must not be empty");
    return v;
  };
  c.models = unique_list("models", r.strings("models", true));
  c.tasks = unique_list("tasks", r.strings("tasks", true));
  {
    auto raw = r.strings("conditions", true);
    std::vector<std::string> canon;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      std::string k = score::canonical_condition(raw[i]);
      if (k != "none" && k != "L1" && k != "L1+L2" && k != "all")
        d.add(fname, r.line_of(*r.get("conditions")), fmt::format("conditions[{}]", i),
              fmt::format("unknown condition '{}' (known: unguided, guided, L1, L1+L2; also none, all)", raw[i]));
      canon.push_back(k);
    }
    c.conditions = unique_list("conditions", canon);
  }
  if (auto v = r.integer("repeats", false)) {
    if (*v < 1 || *v > 1000)
      r.error("repeats", r.get("repeats"), "must be between 1 and 1000");
    else
      c.repeats = static_cast<int>(*v);
  }

  auto non_negative = [&](TomlReader& t, std::string_view k, double v) {
    if (v < 0) t.error(k, t.get(k), "must not be negative (0: no limit)");
  };
  if (const auto* b = r.table("budgets", false)) {
    TomlReader br(*b, "budgets", fname, d);
    br.only_keys({"turns", "max_tokens", "max_cost", "max_wall", "max_format_errors"});
    if (auto v = br.integer("turns", false)) non_negative(br, "turns", static_cast<double>(c.turns = static_cast<int>(*v)));
    if (auto v = br.integer("max_tokens", false)) non_negative(br, "max_tokens", static_cast<double>(c.max_tokens = *v));
    if (auto v = br.number("max_cost", false)) non_negative(br, "max_cost", c.max_cost = *v);
    if (auto v = br.number("max_wall", false)) non_negative(br, "max_wall", c.max_wall = *v);
    if (auto v = br.integer("max_format_errors", false)) {
      c.max_format_errors = static_cast<int>(*v);
      if (*v < 1) br.error("max_format_errors", br.get("max_format_errors"), "must be at least 1");
    }
  }
  if (const auto* a = r.table("agent", false)) {
    TomlReader ar(*a, "agent", fname, d);
    ar.only_keys({"final", "auto_submit", "sandbox", "condense_at"});
    if (auto v = ar.str("final", false)) {
      c.final_policy = *v;
      if (*v != "last" && *v != "best") ar.error("final", ar.get("final"), "must be \"last\" or \"best\"");
    }
    if (const auto* n = ar.get("auto_submit")) {
      if (!n->is_boolean())
        ar.error("auto_submit", n, "must be true or false");
      else
        c.auto_submit = n->as_boolean()->get();
    }
    if (auto v = ar.str("sandbox", false)) {
      c.sandbox = *v;
      if (*v != "bwrap" && *v != "none") ar.error("sandbox", ar.get("sandbox"), "must be \"bwrap\" or \"none\"");
    }
    if (auto v = ar.number("condense_at", false)) {
      c.condense_at = *v;
      if (*v <= 0 || *v > 1) ar.error("condense_at", ar.get("condense_at"), "must be in (0, 1]");
    }
  }
  if (const auto* p = r.table("parallel", false)) {
    TomlReader pr(*p, "parallel", fname, d);
    pr.only_keys({"jobs", "gpus"});
    if (auto v = pr.integer("jobs", false)) {
      if (*v < 0 || *v > 1024)
        pr.error("jobs", pr.get("jobs"), "must be between 0 (one per GPU) and 1024");
      else
        c.jobs = static_cast<int>(*v);
    }
    if (const auto* n = pr.get("gpus")) {
      if (n->is_string() && n->as_string()->get() == "auto") {
        // the GPUs present
      } else if (const auto* arr = n->as_array()) {
        std::vector<int> g;
        std::set<int> seen;
        for (std::size_t i = 0; i < arr->size(); ++i) {
          const auto* e = arr->get(i);
          if (!e->is_integer() || e->as_integer()->get() < 0) {
            d.add(fname, pr.line_of(*e), fmt::format("parallel.gpus[{}]", i), "must be a GPU index (0, 1, ...)");
            continue;
          }
          int idx = static_cast<int>(e->as_integer()->get());
          if (!seen.insert(idx).second)
            d.add(fname, pr.line_of(*e), fmt::format("parallel.gpus[{}]", i), fmt::format("GPU {} is listed twice", idx));
          g.push_back(idx);
        }
        if (g.empty()) pr.error("gpus", n, "must list at least one GPU (or be \"auto\")");
        c.gpus = g;
      } else {
        pr.error("gpus", n, "must be \"auto\" or an array of GPU indices");
      }
    }
  }
  if (d.size() != before) return std::nullopt;
  return c;
}

}  // namespace d2k::campaign
