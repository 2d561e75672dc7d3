// The pure half of the sandbox: a SandboxSpec in, a bwrap argv out; the environment filter.
#include <algorithm>
#include <cctype>

#include "agent/sandbox/sandbox.hpp"

namespace d2k::agent {

namespace fs = std::filesystem;

namespace {

std::size_t depth(const fs::path& p) {
  std::size_t n = 0;
  for (const auto& part : p.lexically_normal()) {
    auto s = part.string();
    if (!s.empty() && s != "/") ++n;
  }
  return n;
}

// True when `p` is `base` or lies below it (lexically).
bool is_within(const fs::path& p, const fs::path& base) {
  auto rel = p.lexically_normal().lexically_relative(base.lexically_normal());
  if (rel.empty()) return false;
  auto first = rel.begin()->string();
  return first != "..";
}

bool strictly_within(const fs::path& p, const fs::path& base) {
  return is_within(p, base) && p.lexically_normal() != base.lexically_normal();
}

struct MountOp {
  fs::path path;
  std::vector<std::string> args;
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool name_allowed(const std::string& name, const std::vector<std::string>& allow) {
  for (const auto& a : allow) {
    if (!a.empty() && a.back() == '*') {
      if (name.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0) return true;
    } else if (name == a) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string ulimit_script(const SandboxLimits& l) {
  std::vector<std::string> parts;
  if (l.no_core_dumps) parts.push_back("ulimit -c 0");
  if (l.processes) parts.push_back("ulimit -u " + std::to_string(l.processes));
  if (l.file_bytes) parts.push_back("ulimit -f " + std::to_string(std::max<std::uint64_t>(1, l.file_bytes / 1024)));
  if (l.cpu_seconds) parts.push_back("ulimit -t " + std::to_string(l.cpu_seconds));
  if (l.open_files) parts.push_back("ulimit -n " + std::to_string(l.open_files));
  if (l.memory_bytes) parts.push_back("ulimit -d " + std::to_string(std::max<std::uint64_t>(1, l.memory_bytes / 1024)));
  if (parts.empty()) return "";
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : " && ") + p;
  // ulimit without -H or -S sets both limits: the command cannot raise them again.
  s += " || { echo 'd2k sandbox: could not set the resource limits' >&2; exit 125; }";
  return s;
}

std::vector<std::string> bwrap_argv(const SandboxSpec& spec, const std::vector<std::string>& command) {
  std::vector<std::string> a = {spec.bwrap.string()};
  if (spec.run_as) {
    // bwrap as root, no user namespace: the command drops to run_as with setpriv, which needs these two
    // capabilities; the uid switch clears them (no SECBIT_KEEP_CAPS; bwrap sets no_new_privs).
    a.insert(a.end(), {"--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                       "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"});
  } else {
    a.insert(a.end(), {"--unshare-all",     // user, ipc, pid, net, uts, cgroup namespaces
                       "--unshare-user",    // required, not "try": --disable-userns needs it
                       "--disable-userns",  // no nested user namespace to regain capabilities in
                       "--cap-drop", "ALL"});
  }
  a.insert(a.end(), {"--die-with-parent",  // the runner's kill of bwrap ends the sandbox
                     "--new-session",      // no TIOCSTI into a terminal outside
                     "--hostname", spec.hostname, "--clearenv"});
  for (const auto& [k, v] : spec.env) {
    a.insert(a.end(), {"--setenv", k, v});
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  for (const auto& [target, link] : spec.symlinks) a.insert(a.end(), {"--symlink", target, link.string()});

  std::vector<MountOp> ops;
  {
    MountOp tmp{"/tmp", {}};
    if (spec.limits.tmp_bytes) tmp.args = {"--size", std::to_string(spec.limits.tmp_bytes)};
    tmp.args.insert(tmp.args.end(), {"--perms", "1777", "--tmpfs", "/tmp"});  // writable whoever runs inside
    ops.push_back(tmp);
  }
  std::vector<fs::path> shown;  // what binds show; hidden paths below them get covered
  for (const auto& b : spec.binds) {
    auto p = b.path.lexically_normal().string();
    ops.push_back({b.path, {b.writable ? "--bind-try" : "--ro-bind-try", p, p}});
    shown.push_back(b.path);
  }
  if (!spec.workspace.empty()) {
    auto w = spec.workspace.lexically_normal().string();
    ops.push_back({spec.workspace, {"--bind", w, w}});
    shown.push_back(spec.workspace);
  }
  for (const auto& h : spec.hidden) {
    bool visible = std::any_of(shown.begin(), shown.end(), [&](const fs::path& s) { return strictly_within(h.path, s); });
    bool bound_itself = std::any_of(shown.begin(), shown.end(), [&](const fs::path& s) {
      return h.path.lexically_normal() == s.lexically_normal();
    });
    if (!visible || bound_itself) continue;
    auto p = h.path.lexically_normal().string();
    if (h.is_dir)
      ops.push_back({h.path, {"--tmpfs", p}});
    else
      ops.push_back({h.path, {"--ro-bind", "/dev/null", p}});
  }
  for (const auto& d : spec.devices) {
    auto p = d.lexically_normal().string();
    ops.push_back({d, {"--dev-bind-try", p, p}});
  }
  // The folders above each mount point exist inside with mode 0755 (bwrap as root would create them 0700,
  // which the command's user could not pass). Existing folders keep their mode.
  std::vector<fs::path> parents;
  for (const auto& op : ops) {
    for (auto p = op.path.lexically_normal().parent_path(); depth(p) > 0; p = p.parent_path()) {
      if (std::find(parents.begin(), parents.end(), p) == parents.end()) parents.push_back(p);
    }
  }
  std::sort(parents.begin(), parents.end());
  for (const auto& p : parents) ops.push_back({p, {"--perms", "0755", "--dir", p.string()}});
  // Shallower first, so that a deeper mount lands on top; equal depths keep the order above (tmp, binds,
  // workspace, hidden, devices, then the folders).
  std::stable_sort(ops.begin(), ops.end(),
                   [](const MountOp& x, const MountOp& y) { return depth(x.path) < depth(y.path); });
  for (const auto& op : ops) a.insert(a.end(), op.args.begin(), op.args.end());

  a.insert(a.end(), {"--remount-ro", "/"});
  // As root, bwrap has no capabilities left when it changes directory, so it cannot enter a workspace of mode
  // 0700 that the command's user owns: the command's own shell does (after the uid switch).
  bool cd_inside = spec.run_as && !spec.workspace.empty();
  if (!spec.workspace.empty() && !cd_inside)
    a.insert(a.end(), {"--chdir", spec.workspace.lexically_normal().string()});
  a.push_back("--");
  if (spec.run_as)
    a.insert(a.end(), {spec.setpriv.string(), "--reuid", std::to_string(spec.run_as->first), "--regid",
                       std::to_string(spec.run_as->second), "--clear-groups", "--"});
  auto limits = ulimit_script(spec.limits);
  if (cd_inside || !limits.empty()) {
    std::string script = cd_inside ? "cd -- \"$1\" || exit 125; shift; " : "";
    if (!limits.empty()) script += limits + "; ";
    script += "exec \"$@\"";
    a.insert(a.end(), {"/bin/bash", "-c", script, "d2k-sandbox"});
    if (cd_inside) a.push_back(spec.workspace.lexically_normal().string());
  }
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

bool is_secret_env_name(const std::string& name) {
  auto n = upper(name);
  auto ends = [&](const char* s) {
    std::string t(s);
    return n.size() >= t.size() && n.compare(n.size() - t.size(), t.size(), t) == 0;
  };
  auto starts = [&](const char* s) { return n.rfind(s, 0) == 0; };
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  for (const char* part : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE", "SESSION",
                           "API_KEY", "APIKEY", "AUTH"})
    if (has(part)) return true;
  if (ends("_KEY") || n == "KEY") return true;
  for (const char* prefix : {"AWS_", "AZURE_", "GOOGLE_", "GCP_", "GCLOUD_", "HF_", "HUGGING", "OPENAI_",
                             "ANTHROPIC_", "GITHUB_", "GH_", "GITLAB_", "SSH_", "GPG_", "NPM_", "PYPI_", "DOCKER_"})
    if (starts(prefix)) return true;
  return false;
}

std::vector<std::pair<std::string, std::string>> filter_environment(
    const std::vector<std::string>& environ, const std::vector<std::string>& allow,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::pair<std::string, std::string>> out;
  auto overridden = [&](const std::string& k) {
    return std::any_of(overrides.begin(), overrides.end(), [&](const auto& o) { return o.first == k; });
  };
  for (const auto& kv : environ) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    auto k = kv.substr(0, eq);
    if (!name_allowed(k, allow) || is_secret_env_name(k) || overridden(k)) continue;
    if (std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.first == k; })) continue;
    out.emplace_back(k, kv.substr(eq + 1));
  }
  for (const auto& o : overrides) out.push_back(o);
  return out;
}

std::vector<std::string> default_env_allow_list() {
  return {"PATH", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
          "NVIDIA_DRIVER_CAPABILITIES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "TRITON_INTERPRET",
          "OMP_NUM_THREADS"};
}

std::optional<SandboxKind> parse_sandbox_kind(const std::string& text) {
  if (text == "bwrap") return SandboxKind::bwrap;
  if (text == "none") return SandboxKind::none;
  return std::nullopt;
}

}  // namespace d2k::agent
