#include "eval/evaluator.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>

#include "core/expr.hpp"
#include "core/files.hpp"
#include "d2k/build_info.hpp"
#include "eval/compliance_cuda.hpp"
#include "eval/compliance_triton.hpp"
#include "eval/cuda_build.hpp"
#include "eval/process.hpp"
#include "eval/tensor_file.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json spec_json(const TensorSpec& s, const ExprVars& vars) {
  std::vector<long long> shape;
  for (const auto& e : s.shape) shape.push_back(eval_dim(e, vars));
  return {{"name", s.name}, {"dtype", std::string(dtype_name(s.dtype))}, {"shape", shape}};
}

json params_json(const Task& t) {
  json a = json::array();
  for (const auto& p : t.params) a.push_back({{"name", p.name}, {"dtype", std::string(dtype_name(p.dtype))}, {"value", p.value}});
  return a;
}

// Kills a worker's process group, reaps it and drops it. Also for workers whose replies are all in, rather than
// asking them to exit: the teardown of a Python process with torch, a CUDA context and the activity profiler is
// time on the evaluation's path that nothing needs (the toy task's last phase, mostly the two exits, took 1.1 s on
// the H200); the driver frees the GPU memory as the process dies.
void stop_worker(std::unique_ptr<ChildProcess>& p) {
  p->kill();
  p->wait();
  p.reset();
}

json workload_json(const Workload& w) { return {{"name", w.name}, {"axes", w.axes}, {"params", w.params}}; }

// The environment a worker sees: nothing from ours but what it needs (no API keys or tokens).
std::map<std::string, std::string> worker_env(const fs::path& home_base, bool interpret) {
  std::map<std::string, std::string> env;
  for (const char* k : {"PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "D2K_PYTHONPATH",
                        "CUDA_HOME", "TRITON_PTXAS_PATH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                        "NVSHMEM_DISABLE_NVLS"})
    if (const char* v = std::getenv(k)) env[k] = v;
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = (home_base / "home").string();
  env["TMPDIR"] = (home_base / "tmp").string();
  env["TRITON_CACHE_DIR"] = (home_base / "triton-cache").string();
  env["TORCHINDUCTOR_CACHE_DIR"] = (home_base / "inductor-cache").string();
  env["PYTHONUNBUFFERED"] = "1";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  if (interpret) env["TRITON_INTERPRET"] = "1";
  return env;
}

struct Worker {
  std::unique_ptr<ChildProcess> proc;
  json environment;
  std::string role, sandbox;
  int uid = -1;
  bool ready = false;
};

// A worker's own writable folders (home, tmp, caches) under base; owned by uid when it is >= 0.
void make_worker_dirs(const fs::path& base, int uid) {
  for (const char* sub : {"home", "tmp", "triton-cache", "inductor-cache"}) {
    fs::create_directories(base / sub);
    if (uid >= 0 && ::chown((base / sub).c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0)
      throw std::runtime_error(fmt::format("chown {}: {}", (base / sub).string(), strerror(errno)));
  }
}

// Starts a worker without waiting for it (its start, torch's import and the CUDA context, takes seconds and
// can overlap other work); await_worker() then waits for its ready line. `uid` >= 0 runs it as that user
// (privilege separation; the caller must be root).
Worker spawn_worker(const EvalOptions& opt, const fs::path& scratch, const std::string& role, bool interpret,
                    int uid = -1, const fs::path& triton_cache = {}) {
  Worker w;
  w.role = role;
  w.uid = uid;
  static int counter = 0;
  auto log = scratch / fmt::format("{}-{}.log", role, ++counter);
  auto base = scratch / ("w-" + role);
  make_worker_dirs(base, uid);
  // Solution workers get no network and bounded files; trusted workers only the file bound.
  ChildLimits limits;
  limits.isolate_network = role == "solution";
  limits.max_file_bytes = 64ull << 30;
  limits.max_open_files = 4096;
  limits.run_as_uid = uid;
  limits.run_as_gid = uid;
  WorkerLaunch launch{{opt.worker.string()}, worker_env(base, interpret), base, {}, {}, uid};
  // The first profiled call pays for starting the CUDA activity profiler (seconds); the solution worker starts it
  // while the reference runs instead.
  if (role == "solution" && opt.defenses && !interpret) launch.env["D2K_WARM_PROFILER"] = "1";
  if (role == "compile") {
    // torch.compile of the trusted reference: its Inductor and Triton caches persist across evaluations (an
    // agent's every submission times the same baseline), unlike a solution's, which stay in its scratch.
    auto root = (opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir) / "torch-compile";
    std::error_code ec;
    fs::create_directories(root / "inductor", ec);
    fs::create_directories(root / "triton", ec);
    if (!ec) {
      launch.env["TORCHINDUCTOR_CACHE_DIR"] = (root / "inductor").string();
      launch.env["TRITON_CACHE_DIR"] = (root / "triton").string();
    }
  }
  const bool jailed = role == "solution" && opt.jail;
  // The solution's own Triton cache, kept between evaluations of the same source (re-evaluating it compiles
  // nothing). It is the only one that process writes, so a solution can spoil no one's cache but its own.
  // As another user without the sandbox the cache folder may be out of its reach: then scratch's is used.
  bool own_cache = role == "solution" && !triton_cache.empty() && (jailed || uid < 0);
  if (own_cache) {
    std::error_code ec;
    fs::create_directories(triton_cache, ec);
    if (uid >= 0 && !ec && ::chown(triton_cache.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0)
      ec = std::error_code(errno, std::generic_category());
    own_cache = !ec;
    if (own_cache) launch.env["TRITON_CACHE_DIR"] = triton_cache.string();
  }
  if (jailed) {
    // The sandbox makes the network namespace and switches the user; it shows the solution only its own
    // folder, its inputs and outputs, the solution snapshot, the worker and the harness (never private/).
    launch.writable = {scratch / "out"};
    if (own_cache) launch.writable.push_back(triton_cache);
    launch.readable = {scratch / "in", scratch / "solution", opt.worker, fs::path(build::source_dir) / "python"};
    launch = opt.jail->wrap(launch);
    limits.isolate_network = false;
    limits.run_as_uid = limits.run_as_gid = -1;
  }
  w.proc = std::make_unique<ChildProcess>(launch.argv, launch.env, log, limits);
  if (role == "solution") w.sandbox = jailed ? opt.jail->name : "none: " + opt.jail_note;
  return w;
}

// Waits for a spawned worker's ready line; on failure kills it, empties w.proc, sets `why` and returns false.
bool await_worker(Worker& w, const EvalOptions& opt, std::string& why) {
  if (!w.proc) return false;
  if (w.ready) return true;
  auto r = w.proc->receive(opt.load_timeout);
  if (r.outcome != ChildProcess::Outcome::response || r.body.value("event", "") != "ready") {
    w.proc->kill();
    auto exit = w.proc->wait();
    why = fmt::format("the {} worker did not start ({}; {}):\n{}", w.role,
                      r.outcome == ChildProcess::Outcome::timeout ? "no answer" : "no ready line", exit.describe(),
                      w.proc->log_tail());
    w.proc.reset();
    return false;
  }
  w.ready = true;
  w.environment = r.body["environment"];
  w.environment["uid"] = w.uid >= 0 ? w.uid : static_cast<int>(::geteuid());
  if (w.role == "solution") w.environment["sandbox"] = w.sandbox;
  return true;
}

// Starts a worker and waits for its ready line; on failure returns an empty proc and sets `why`.
Worker start_worker(const EvalOptions& opt, const fs::path& scratch, const std::string& role, bool interpret,
                    std::string& why, int uid = -1, const fs::path& triton_cache = {}) {
  Worker w = spawn_worker(opt, scratch, role, interpret, uid, triton_cache);
  await_worker(w, opt, why);
  return w;
}

// Where evaluations put their files: $D2K_SCRATCH, else /dev/shm when it has room for the largest workloads
// (inputs and expected outputs of every seed and timing set go through files; on a disk that took 1.7 s per
// reference run of a 768 MB workload on the H200), else the temp folder.
fs::path scratch_root() {
  if (const char* e = std::getenv("D2K_SCRATCH"); e && *e) return e;
  std::error_code ec;
  auto sp = fs::space("/dev/shm", ec);
  if (!ec && sp.available >= (32ull << 30) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path();
}

// Scratch folders of evaluations whose d2k is gone (killed by a timeout or a signal, so its cleanup never ran):
// gigabytes each in /dev/shm. A folder whose owner file names no live process is removed; one without an owner
// file is left alone (it may be being created).
void sweep_stale_scratch(const fs::path& root) {
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.rfind("d2k-eval-", 0) != 0) continue;
    auto owner = read_file(it->path() / "owner", 256);
    if (!owner || owner->empty()) continue;
    auto space = owner->find(' ');
    int pid = 0;
    try {
      pid = std::stoi(owner->substr(0, space));
    } catch (const std::exception&) {
      continue;
    }
    if (pid > 0 && process_identity(pid) == *owner) continue;  // alive
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

Timing parse_timing(const json& j) {
  // The worker sends null for a figure that is not finite (a stderr of one sample, a clock not probed).
  auto num = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  Timing t;
  t.raw = j;
  if (auto it = j.find("samples_ms"); it != j.end() && it->is_array())
    for (const auto& x : *it)
      if (x.is_number()) t.samples_ms.push_back(x.get<double>());
  t.median_ms = num("median_ms");
  t.mean_ms = num("mean_ms");
  t.q1_ms = num("q1_ms");
  t.q3_ms = num("q3_ms");
  t.rel_stderr = num("rel_stderr");
  t.throttled = static_cast<int>(num("throttled"));
  t.stop_reason = j.contains("stop_reason") && j["stop_reason"].is_string() ? j["stop_reason"].get<std::string>() : "";
  return t;
}

json timing_json(const Timing& t) {
  json j = {{"median_ms", t.median_ms}, {"mean_ms", t.mean_ms}, {"q1_ms", t.q1_ms}, {"q3_ms", t.q3_ms},
            {"iqr_ms", t.q3_ms - t.q1_ms}, {"rel_stderr", t.rel_stderr}, {"samples", t.samples_ms.size()},
            {"throttled_discarded", t.throttled}, {"stop_reason", t.stop_reason}, {"samples_ms", t.samples_ms}};
  for (const char* k : {"bracket_median_ms", "bracket_overhead_ms", "sm_clock_mhz", "wall_s"})
    if (auto it = t.raw.find(k); it != t.raw.end() && it->is_number()) j[k] = *it;
  return j;
}

Status status_of(const json& body) {
  return parse_status(body.value("status", "runtime_error")).value_or(Status::runtime_error);
}

// Kernels that belong to libraries or to torch rather than to the solution (library GEMMs, aten, copies).
// A solution's own kernels may sit in an anonymous namespace, so that prefix alone says nothing.
bool library_kernel(const std::string& name) {
  static const std::vector<std::string> prefixes = {
      "void at::", "at::", "void cub", "cub::", "void cutlass", "cutlass",
      "cublas", "cudnn", "nvjet", "sm80_", "sm90_", "sm100_", "ampere_", "hopper_", "Memcpy", "Memset",
      "triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "void gemv", "void gemmk", "void splitKreduce"};
  for (const auto& p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

bool any_solution_kernel(const json& kernels) {
  for (const auto& k : kernels)
    if (k.is_string() && !library_kernel(k.get<std::string>())) return true;
  return false;
}

std::string device_key(const json& env) {
  std::string k = fmt::format("{}_{}sm_{}", env.value("gpu", "unknown"), env.value("sm_count", 0),
                              env.value("memory_bytes", 0LL));
  for (auto& c : k)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return k;
}

}  // namespace

double WorkloadTrace::pct_speed_of_light() const {
  if (!timing || timing->median_ms <= 0 || ceiling <= 0) return 0;
  double s = timing->median_ms * 1e-3;
  double achieved = bound == "compute" ? flops / s * 1e-12 : bytes / s * 1e-9;
  return 100.0 * achieved / ceiling;
}

std::optional<json> load_calibration(const fs::path& cache_dir, const json& environment) {
  auto text = read_file(cache_dir / "calibration" / (device_key(environment) + ".json"));
  if (!text) return std::nullopt;
  try {
    return json::parse(*text);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

json calibrate_device(const EvalOptions& opt, bool force) {
  std::random_device rd;
  auto scratch = fs::temp_directory_path() / fmt::format("d2k-calibrate-{:08x}", rd());
  fs::create_directories(scratch);
  std::string why;
  auto w = start_worker(opt, scratch, "calibrate", false, why);
  if (!w.proc) throw std::runtime_error(why);
  if (w.environment.value("device", "cpu") != "cuda") throw std::runtime_error("no GPU: nothing to calibrate");
  auto cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  if (!force)
    if (auto c = load_calibration(cache, w.environment)) return *c;
  w.proc->send({{"op", "calibrate"}, {"timing", {{"max_rel_stderr", 0.005}, {"max_wall_time_s", 10}}}});
  auto r = w.proc->receive(std::chrono::seconds(300));
  if (r.outcome != ChildProcess::Outcome::response || !r.body.value("ok", false))
    throw std::runtime_error("calibration failed: " + (r.outcome == ChildProcess::Outcome::response
                                                           ? r.body.value("error", "")
                                                           : w.proc->log_tail()));
  json rec = r.body["calibration"];
  rec["environment"] = w.environment;
  fs::create_directories(cache / "calibration");
  write_file_atomic(cache / "calibration" / (device_key(w.environment) + ".json"), rec.dump(2));
  w.proc->send({{"op", "exit"}});
  w.proc->wait();
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return rec;
}

json WorkloadTrace::to_json() const {
  json checks_j = json::array();
  for (const auto& c : checks)
    checks_j.push_back({{"output", c.name}, {"status", std::string(status_name(c.status))}, {"numel", c.numel},
                        {"mismatched", c.mismatched}, {"nonfinite", c.nonfinite}, {"matched_ratio", c.matched_ratio},
                        {"max_abs_err", std::isfinite(c.max_abs_err) ? json(c.max_abs_err) : json("inf")},
                        {"max_rel_err", c.max_rel_err}, {"atol_used", c.atol_used}, {"message", c.message}});
  json j = {{"task", task},
            {"workload", workload},
            {"timed", timed},
            {"solution", {{"name", solution}, {"language", language}, {"sha256", solution_hash}}},
            {"status", skipped.empty() ? json(std::string(status_name(status))) : json(nullptr)},
            {"skipped", skipped},
            {"message", message},
            {"correctness", {{"seeds", seeds_checked}, {"outputs", checks_j}}}};
  json perf = json::object();
  if (timing) {
    perf["solution"] = timing_json(*timing);
    double s = timing->median_ms * 1e-3;
    if (s > 0) {
      perf["achieved_gb_per_s"] = bytes / s * 1e-9;
      perf["achieved_tflop_per_s"] = flops / s * 1e-12;
    }
  }
  if (eager) {
    perf["eager"] = timing_json(*eager);
    if (timing && timing->median_ms > 0) perf["speedup_vs_eager"] = eager->median_ms / timing->median_ms;
  }
  if (compiled) {
    perf["torch_compile"] = timing_json(*compiled);
    if (timing && timing->median_ms > 0) perf["speedup_vs_compile"] = compiled->median_ms / timing->median_ms;
  }
  if (!compiled_skipped.empty()) perf["torch_compile_skipped"] = compiled_skipped;
  perf["flops"] = flops;
  perf["bytes"] = bytes;
  perf["bound"] = bound;
  if (ceiling > 0) {
    perf["ceiling"] = ceiling;
    perf["pct_speed_of_light"] = pct_speed_of_light();
  }
  j["performance"] = perf;
  j["kernels"] = kernels;
  j["environment"] = environment;
  return j;
}

json EvalResult::to_json() const {
  json t = json::array();
  for (const auto& tr : traces) t.push_back(tr.to_json());
  return {{"environment", environment}, {"solution_environment", solution_environment}, {"gpu", gpu},
          {"compile_log", compile_log}, {"violations", violations}, {"timeline", timeline}, {"seconds", seconds},
          {"traces", t}};
}

double geomean_speedup(const EvalResult& e) {
  double logsum = 0;
  int n = 0;
  for (const auto& t : e.traces)
    if (t.timed && t.skipped.empty() && t.status == Status::passed && t.timing && t.eager && t.timing->median_ms > 0) {
      logsum += std::log(t.eager->median_ms / t.timing->median_ms);
      ++n;
    }
  return n ? std::exp(logsum / n) : 0;
}

SharedReference::~SharedReference() {
  std::error_code ec;
  if (!scratch.empty()) fs::remove_all(scratch, ec);
}

EvalResult evaluate(const Task& task, const Solution& solution, const EvalOptions& opt) {
  EvalResult ev;
  const auto started = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ev.timeline.push_back({{"at_s", std::round(at * 1000) / 1000}, {"step", s}});
    if (opt.progress) opt.progress(fmt::format("[{:6.1f}s] {}", at, s));
  };
  const auto& shared = opt.shared_reference;
  if (shared && !shared->task.empty() && shared->task != task.name)
    throw std::logic_error(fmt::format("a reference run of {} offered to an evaluation of {}", shared->task, task.name));
  const bool reusing = shared && !shared->scratch.empty();
  fs::path scratch = reusing ? shared->scratch : opt.scratch;
  bool own_scratch = false;
  if (scratch.empty()) {
    std::random_device rd;
    const auto root = scratch_root();
    sweep_stale_scratch(root);
    scratch = root / fmt::format("d2k-eval-{:08x}{:08x}", rd(), rd());
    own_scratch = true;
  }
  // A scratch folder of our own is removed however the evaluation ends (inputs of big workloads take GBs); a
  // shared one goes with the SharedReference.
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{opt.scratch.empty() && !shared ? scratch : fs::path()};
  if (shared) {
    shared->task = task.name;
    shared->scratch = scratch;
  }
  if (reusing) {  // nothing of the previous solution's may be read as this one's: its outputs, its snapshot
    std::error_code ec;
    fs::remove_all(scratch / "out", ec);
    fs::remove_all(scratch / "solution", ec);
  }
  // in/: inputs (the solution reads them). private/: expected outputs, mode 0700, which a solution worker
  // running as another user cannot open. out/: the solution's outputs, written by it.
  for (const char* sub : {"in", "private", "out", "solution"}) fs::create_directories(scratch / sub);
  if (own_scratch) write_file_atomic(scratch / "owner", process_identity(::getpid()));
  fs::permissions(scratch / "private", fs::perms::owner_all, fs::perm_options::replace);
  // Privilege separation: as root, the solution runs as nobody (65534) unless D2K_NO_PRIVSEP is set.
  int sol_uid = (::geteuid() == 0 && !std::getenv("D2K_NO_PRIVSEP")) ? 65534 : -1;

  auto source = read_file(solution.source, 4u << 20).value_or("");
  auto hash = sha256_hex(source);

  // Workloads and secret seeds, chosen here; the solution never learns them before its outputs are in.
  std::vector<const Workload*> selected;
  for (const auto* list : {&task.workloads, &task.correctness})
    for (const auto& w : *list) {
      if (opt.correctness_only && list == &task.workloads) continue;
      if (opt.workloads.empty() || std::find(opt.workloads.begin(), opt.workloads.end(), w.name) != opt.workloads.end())
        selected.push_back(&w);
    }
  for (const auto& name : opt.workloads)
    if (!task.workload(name)) throw std::runtime_error(fmt::format("task {} has no workload '{}'", task.name, name));
  int nseeds = opt.seeds > 0 ? opt.seeds : task.evaluation.seeds;
  std::random_device rd;
  std::vector<int> seeds;
  for (int i = 0; i < nseeds; ++i) seeds.push_back(static_cast<int>(rd() & 0x7fffffff));
  // Timed calls get input sets of their own, from seeds no checked call saw: outputs cached from the checks
  // are worth nothing there, and the timed outputs are checked against these sets' expected outputs.
  std::vector<int> timing_seeds;
  for (int i = 0; i < std::max(2, opt.timing_sets); ++i) timing_seeds.push_back(static_cast<int>(rd() & 0x7fffffff));
  if (shared && !shared->seeds.empty()) {
    seeds = shared->seeds;
    timing_seeds = shared->timing_seeds;
  } else if (shared) {
    shared->seeds = seeds;
    shared->timing_seeds = timing_seeds;
  }

  std::optional<json> calibration;
  auto make_trace = [&](const Workload& w) {
    WorkloadTrace t;
    t.task = task.name;
    t.workload = w.name;
    t.timed = w.timed;
    t.solution = solution.name;
    t.language = std::string(language_name(solution.language));
    t.solution_hash = hash;
    t.bound = task.performance.bound;
    t.environment = ev.environment;
    if (calibration) {
      const auto& c = *calibration;
      std::string key = task.performance.bound == "compute" ? task.performance.compute_dtype + "_tflop_per_s"
                                                             : std::string("copy_gb_per_s");
      if (key == "tf32_tflop_per_s") key = "bf16_tflop_per_s";  // tf32 is not measured; bf16's rate bounds it
      t.ceiling = c.value(key, 0.0);
    }
    auto vars = task.vars(w);
    try {
      t.flops = task.performance.flops.empty() ? 0 : eval_expr(task.performance.flops, vars);
      t.bytes = task.performance.bytes.empty() ? 0 : eval_expr(task.performance.bytes, vars);
    } catch (const ExprError&) {
    }
    return t;
  };

  // Static checks and the build come first: a solution that breaks the task's rules or does not compile
  // costs no reference run.
  std::optional<Status> all_failed;
  std::string all_failed_msg;
  fs::path so_path;
  CudaSourceFacts source_facts;
  auto reject = [&](const std::vector<Violation>& vs) {
    if (vs.empty()) return;
    bool preprocess = std::any_of(vs.begin(), vs.end(), [](const auto& v) { return v.rule == "preprocess_error"; });
    all_failed = preprocess ? Status::compile_error : Status::compliance_violation;
    std::vector<std::string> lines;
    for (const auto& v : vs) lines.push_back(v.to_string());
    if (lines.size() > 12) lines.resize(12);
    all_failed_msg = fmt::format("{} static violation{}:\n{}", vs.size(), vs.size() == 1 ? "" : "s", fmt::join(lines, "\n"));
    for (const auto& v : vs)
      ev.violations.push_back({{"rule", v.rule}, {"file", v.file}, {"line", v.line}, {"message", v.message}});
  };
  if (opt.static_checks && opt.defenses) {
    say("static checks");
    if (solution.language == Language::triton)
      reject(check_triton_source(solution.source, task, scratch));
    else
      reject(check_cuda_source(solution.source, task.requirements, "nvcc", opt.include_dir, CudaBuildOptions{}.arch,
                               &source_facts));
  }
  if (!all_failed && solution.language == Language::cuda) {
    say("compiling " + solution.source.string());
    CudaBuildOptions bo;
    bo.cache_dir = (opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir) / "cuda";
    bo.include_dir = opt.include_dir;
    bo.timeout_s = static_cast<int>(opt.compile_timeout.count());
    auto b = build_cuda_solution(solution.source, bo);
    ev.compile_log = b.log;
    if (!b.ok) {
      all_failed = Status::compile_error;
      all_failed_msg = "nvcc failed:\n" + b.log.substr(0, 4000);
    } else {
      so_path = b.library;
      say(b.cached ? "compile cache hit" : fmt::format("compiled in {:.1f} s", b.seconds));
      ev.seconds["solution_build"] = b.cached ? 0.0 : b.seconds;
      if (opt.static_checks && opt.defenses) reject(check_cuda_library(so_path, task.requirements, {}, &source_facts));
    }
  }
  if (all_failed) {
    for (const auto* w : selected) {
      auto t = make_trace(*w);
      t.status = *all_failed;
      t.message = all_failed_msg;
      ev.traces.push_back(std::move(t));
    }
    return ev;
  }

  // 1. The reference: inputs and expected outputs for every (workload, seed), and the baselines.
  // All three workers start at once (each takes seconds: torch's import, the CUDA context, and for the solution's
  // the profiler warm-up); the solution's and the compile baseline's come up while the reference runs, on a
  // guess of whether there is a GPU that the reference worker's answer corrects. No solution code runs in the
  // solution worker before its `load`, which comes after every expected output exists.
  EvalOptions sol_opt = opt;  // loses its sandbox if that cannot host the worker (and not required)
  const bool any_timed_workload = std::any_of(selected.begin(), selected.end(), [](const Workload* w) { return w->timed; });
  // Triton's interpreter (no GPU) compiles nothing; CUDA solutions are built and cached by the supervisor.
  auto triton_cache_for = [&](bool gpu) {
    return gpu && solution.language == Language::triton
               ? (opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir) / "triton-solutions" / hash.substr(0, 32)
               : fs::path();
  };
  Worker pre_sol, pre_compile;
  auto spawn_helpers = [&](bool gpu) {
    pre_sol = spawn_worker(sol_opt, scratch, "solution", !gpu, sol_uid, triton_cache_for(gpu));
    if (gpu && any_timed_workload && opt.baselines && opt.compile_baseline)
      pre_compile = spawn_worker(opt, scratch, "compile", false);
  };
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const bool guess_gpu = fs::exists("/dev/nvidiactl") && !(visible && (!*visible || std::string(visible) == "-1"));
  std::string why;
  say("starting the workers");
  auto ref = spawn_worker(opt, scratch, "reference", false);
  spawn_helpers(guess_gpu);
  await_worker(ref, opt, why);
  if (!ref.proc) throw std::runtime_error(why);
  ev.environment = ref.environment;
  ev.gpu = ref.environment.value("device", "cpu") == "cuda";
  ev.environment["d2k_version"] = build::version;
  if (ev.gpu) {
    calibration = load_calibration(opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir, ev.environment);
    if (!calibration) say("no calibration for this GPU: run `d2k calibrate` to get % of speed-of-light");
  }
  if (!ev.gpu) {
    std::vector<const Workload*> small;
    for (const auto* w : selected)
      if (!w->timed) small.push_back(w);
    if (small.size() != selected.size())
      say(fmt::format("no GPU: checking the {} correctness workloads only, on the CPU, untimed", small.size()));
    selected = small;
  }
  const fs::path sol_triton_cache = triton_cache_for(ev.gpu);
  if (ev.gpu != guess_gpu) {  // spawned for the wrong device: again, as they must be
    pre_sol = Worker();
    pre_compile = Worker();
    spawn_helpers(ev.gpu);
  }
  std::string pre_sol_why, pre_compile_why;
  auto await_prespawned = [&] {
    if (pre_sol.proc && !pre_sol.ready) await_worker(pre_sol, sol_opt, pre_sol_why);
    if (pre_compile.proc && !pre_compile.ready) await_worker(pre_compile, opt, pre_compile_why);
  };

  std::map<std::string, std::vector<json>> ref_files;         // workload -> per seed {inputs, expected}
  std::map<std::string, std::vector<json>> timing_ref_files;  // workload -> per timing seed {inputs, expected}
  std::map<std::string, std::pair<std::optional<Timing>, std::optional<Timing>>> baselines;
  std::map<std::string, std::string> compile_skipped;
  std::string gave_up;  // after one compilation ran out of time, the task's other shapes are not tried
  // Shapes compiled ahead: a later timeout kills the worker that held them, but they compiled within the
  // limit once (and their Inductor cache is warm), so they are compiled again rather than given up.
  std::set<std::string> compiled_ahead;
  json timing_cfg = {{"mode", opt.timing_mode}, {"max_rel_stderr", opt.max_rel_stderr},
                     {"max_wall_time_s", opt.max_time_per_workload_s}};
  // torch.compile's compilations (CPU work: seconds to minutes per shape) run in the compile worker while the
  // reference worker computes expected outputs; the supervisor awaits them before anything is timed and counts
  // only that wait as compilation (the overlapped part is gone from the evaluation's time).
  const bool compile_ahead = ev.gpu && opt.baselines && opt.compile_baseline && pre_compile.proc != nullptr;
  std::vector<const Workload*> compile_queue;  // compile requests sent, replies not read yet
  auto queue_compile = [&](const Workload& w, const json& inputs) {
    if (!compile_ahead || !w.timed) return;
    if (pre_compile.proc->send({{"op", "compile"}, {"reference_path", (task.dir / "reference.py").string()},
                                {"workload", workload_json(w)}, {"inputs", inputs}, {"params", params_json(task)},
                                {"input_files", ref_files[w.name][0]["inputs"]}}))
      compile_queue.push_back(&w);
  };
  for (const auto* w : selected) {
    auto vars = task.vars(*w);
    json inputs = json::array(), outputs = json::array();
    for (const auto& s : task.inputs) inputs.push_back(spec_json(s, vars));
    for (const auto& s : task.outputs) outputs.push_back(spec_json(s, vars));
    const bool timed = ev.gpu && w->timed;
    if (shared && shared->ref_files.count(w->name) && (!timed || shared->timing_ref_files.count(w->name))) {
      say(fmt::format("reference {}: the files of the previous evaluation", w->name));
      ref_files[w->name] = shared->ref_files[w->name];
      if (timed) timing_ref_files[w->name] = shared->timing_ref_files[w->name];
      queue_compile(*w, inputs);
      continue;
    }
    const std::size_t n_runs = seeds.size() + (timed ? timing_seeds.size() : 0);
    for (std::size_t k = 0; k < n_runs; ++k) {
      const bool for_timing = k >= seeds.size();
      const int seed = for_timing ? timing_seeds[k - seeds.size()] : seeds[k];
      auto dir = scratch / "in" / w->name / std::to_string(k);
      auto private_dir = scratch / "private" / w->name / std::to_string(k);
      fs::create_directories(dir);
      fs::create_directories(private_dir);
      say(for_timing ? fmt::format("reference {} timing set {}/{}", w->name, k - seeds.size() + 1, timing_seeds.size())
                     : fmt::format("reference {} seed {}/{}", w->name, k + 1, seeds.size()));
      json req = {{"op", "reference"}, {"reference_path", (task.dir / "reference.py").string()},
                  {"workload", workload_json(*w)}, {"seed", seed}, {"inputs", inputs}, {"outputs", outputs},
                  {"params", params_json(task)}, {"precision", task.evaluation.reference_precision},
                  {"out_dir", dir.string()}, {"private_dir", private_dir.string()}};
      ref.proc->send(req);
      auto r = ref.proc->receive(opt.timing_timeout);
      if (r.outcome != ChildProcess::Outcome::response || !r.body.value("ok", false))
        throw std::runtime_error(fmt::format("the task's reference failed on workload {}: {}", w->name,
                                             r.outcome == ChildProcess::Outcome::response ? r.body.value("error", "")
                                                                                         : ref.proc->log_tail()));
      (for_timing ? timing_ref_files : ref_files)[w->name].push_back(r.body);
    }
    if (shared) {
      shared->ref_files[w->name] = ref_files[w->name];
      if (timed) shared->timing_ref_files[w->name] = timing_ref_files[w->name];
    }
    queue_compile(*w, inputs);
  }
  await_prespawned();  // nothing starting up while the baselines are timed
  if (!compile_queue.empty() && pre_compile.proc) {
    say("waiting for torch.compile (compiled while the reference ran)");
    double waited = 0, worked = 0;
    for (std::size_t i = 0; i < compile_queue.size(); ++i) {
      const auto& w = *compile_queue[i];
      if (!pre_compile.proc) break;  // killed below: the rest compile in a fresh worker, when timed
      const auto t0 = std::chrono::steady_clock::now();
      auto r = pre_compile.proc->receive(opt.compile_baseline_timeout);
      waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r.outcome == ChildProcess::Outcome::response && r.body.value("ok", false)) {
        if (r.body.contains("compile_s") && r.body["compile_s"].is_number()) worked += r.body["compile_s"].get<double>();
        if (r.body.contains("skipped"))
          compile_skipped[w.name] = r.body["skipped"];
        else
          compiled_ahead.insert(w.name);
        continue;
      }
      compile_skipped[w.name] =
          r.outcome == ChildProcess::Outcome::timeout
              ? fmt::format("torch.compile ran past {} s", opt.compile_baseline_timeout.count())
              : "torch.compile failed: " + (r.outcome == ChildProcess::Outcome::response ? r.body.value("error", "")
                                                                                        : pre_compile.proc->log_tail(600));
      if (r.outcome == ChildProcess::Outcome::timeout)
        gave_up = fmt::format("torch.compile ran past {} s on workload {}; not tried again",
                              opt.compile_baseline_timeout.count(), w.name);
      stop_worker(pre_compile.proc);
    }
    ev.seconds["torch_compile"] = ev.seconds.value("torch_compile", 0.0) + waited;
    ev.seconds["torch_compile_overlapped"] = std::max(0.0, worked - waited);
  }
  for (const auto* w : selected) {
    auto vars = task.vars(*w);
    json inputs = json::array();
    for (const auto& s : task.inputs) inputs.push_back(spec_json(s, vars));
    if (ev.gpu && w->timed && opt.baselines) {
      say(fmt::format("baseline eager {}", w->name));
      ref.proc->send({{"op", "baseline"}, {"mode", "eager"}, {"reference_path", (task.dir / "reference.py").string()},
                      {"workload", workload_json(*w)}, {"inputs", inputs}, {"params", params_json(task)},
                      {"input_files", ref_files[w->name][0]["inputs"]}, {"timing", timing_cfg}});
      auto r = ref.proc->receive(opt.timing_timeout);
      if (r.outcome != ChildProcess::Outcome::response || !r.body.value("ok", false))
        throw std::runtime_error(fmt::format("timing the reference failed on {}: {}", w->name,
                                             r.outcome == ChildProcess::Outcome::response ? r.body.value("error", "")
                                                                                         : ref.proc->log_tail()));
      baselines[w->name].first = parse_timing(r.body["timing"]);
    }
  }
  stop_worker(ref.proc);

  // torch.compile baselines, in a worker of their own: a compilation that fails or runs past its time
  // (a Python loop over thousands of segments unrolls) makes the baseline absent, not the evaluation fail.
  if (ev.gpu && opt.baselines && opt.compile_baseline) {
    Worker cw = std::move(pre_compile);  // ready (its compilations done), or empty with pre_compile_why
    bool first = true;
    for (const auto* w : selected) {
      if (!w->timed || compile_skipped.count(w->name)) continue;
      if (!gave_up.empty() && !compiled_ahead.count(w->name)) {
        compile_skipped[w->name] = gave_up;
        continue;
      }
      if (!cw.proc) {
        std::string cwhy;
        if (first && !pre_compile_why.empty())
          cwhy = pre_compile_why;
        else
          cw = start_worker(opt, scratch, "compile", false, cwhy);
        first = false;
        if (!cw.proc) {
          compile_skipped[w->name] = cwhy;
          continue;
        }
      }
      auto vars = task.vars(*w);
      json inputs = json::array();
      for (const auto& sp : task.inputs) inputs.push_back(spec_json(sp, vars));
      say(fmt::format("baseline torch.compile {}", w->name));
      cw.proc->send({{"op", "baseline"}, {"mode", "compile"}, {"reference_path", (task.dir / "reference.py").string()},
                     {"workload", workload_json(*w)}, {"inputs", inputs}, {"params", params_json(task)},
                     {"input_files", ref_files[w->name][0]["inputs"]}, {"timing", timing_cfg}});
      auto r = cw.proc->receive(opt.compile_baseline_timeout);
      if (r.outcome == ChildProcess::Outcome::response && r.body.value("ok", false)) {
        if (r.body.contains("compile_s") && r.body["compile_s"].is_number())
          ev.seconds["torch_compile"] = ev.seconds.value("torch_compile", 0.0) + r.body["compile_s"].get<double>();
        if (r.body.contains("skipped"))
          compile_skipped[w->name] = r.body["skipped"];
        else
          baselines[w->name].second = parse_timing(r.body["timing"]);
        continue;
      }
      compile_skipped[w->name] =
          r.outcome == ChildProcess::Outcome::timeout
              ? fmt::format("torch.compile ran past {} s", opt.compile_baseline_timeout.count())
              : "torch.compile failed: " +
                    (r.outcome == ChildProcess::Outcome::response ? r.body.value("error", "") : cw.proc->log_tail(600));
      if (r.outcome == ChildProcess::Outcome::timeout)
        gave_up = fmt::format("torch.compile ran past {} s on workload {}; not tried again",
                              opt.compile_baseline_timeout.count(), w->name);
      stop_worker(cw.proc);
    }
    if (cw.proc) stop_worker(cw.proc);
  }

  // The solution as evaluated: a snapshot in scratch (readable by the solution's user; later edits of the
  // original cannot race the evaluation).
  fs::path snapshot_source = scratch / "solution" / solution.source.filename();
  fs::path snapshot_so;
  fs::copy_file(solution.source, snapshot_source, fs::copy_options::overwrite_existing);
  if (!so_path.empty()) {
    snapshot_so = scratch / "solution" / "solution.so";
    fs::copy_file(so_path, snapshot_so, fs::copy_options::overwrite_existing);
  }
  auto writable = [&](const fs::path& dir) {
    fs::create_directories(dir);
    if (sol_uid >= 0) (void)!::chown(dir.c_str(), static_cast<uid_t>(sol_uid), static_cast<gid_t>(sol_uid));
  };

  // Outputs with check = "custom" are judged by the task's check() (reference.py, trusted) in a checker worker
  // that never runs solution code, started when first needed. It judges a copy of the output that the
  // supervisor wrote into private/ (out of the solution's reach: a thread it left behind cannot rewrite it
  // between our shape check and the checker's read); its reply is (passed, message), the status is ours.
  Worker checker;
  int check_copies = 0;
  auto custom_check = [&](const OutputSpec& spec, const HostTensor& got, const Workload& w, const json& inputs_spec,
                          const json& input_files, const std::string& expected_file) {
    OutputCheck c;
    c.name = spec.name;
    c.numel = got.numel();
    auto fail = [&](const std::string& reason) {
      throw std::runtime_error(fmt::format("the task's check() failed on workload {}, output {}: {}", w.name,
                                           spec.name, reason));
    };
    if (!checker.proc) {
      std::string cwhy;
      say("starting the checker worker");
      checker = start_worker(opt, scratch, "checker", false, cwhy);
      if (!checker.proc) throw std::runtime_error(cwhy);
    }
    auto copy = scratch / "private" / "check" / fmt::format("out_{}_{}.d2kt", spec.name, ++check_copies);
    fs::create_directories(copy.parent_path());
    write_tensor_file(copy, got);
    checker.proc->send({{"op", "check"}, {"reference_path", (task.dir / "reference.py").string()},
                        {"workload", workload_json(w)}, {"name", spec.name}, {"output_file", copy.string()},
                        {"inputs", inputs_spec}, {"input_files", input_files}, {"expected_file", expected_file},
                        {"params", params_json(task)}});
    auto r = checker.proc->receive(opt.timing_timeout);
    if (r.outcome != ChildProcess::Outcome::response) {
      std::string tail = checker.proc->log_tail();
      stop_worker(checker.proc);
      fail(r.outcome == ChildProcess::Outcome::timeout ? fmt::format("no answer within {} s", opt.timing_timeout.count())
                                                       : "the checker worker died:\n" + tail);
    }
    if (!r.body.value("ok", false)) fail(r.body.value("error", "no error message"));
    if (!r.body.contains("passed") || !r.body["passed"].is_boolean()) fail("the checker's reply has no verdict");
    std::error_code ec;
    fs::remove(copy, ec);
    c.matched_ratio = r.body["passed"].get<bool>() ? 1.0 : 0.0;
    if (!r.body["passed"].get<bool>()) {
      c.status = Status::incorrect_numerics;
      auto m = r.body.value("message", std::string());
      c.message = fmt::format("{}: check() says: {}", spec.name, m.empty() ? "wrong" : m);
    }
    return c;
  };

  // 3. The solution, in a worker of its own that is restarted after a crash or a hang.
  Worker sol;
  await_prespawned();  // no timed workload: not awaited yet
  auto ensure_solution_worker = [&]() -> bool {
    if (sol.proc) return true;
    std::string w_why;
    // A worker that came up without the GPU the reference worker saw (a sandbox hiding the device nodes) is
    // no worker for this evaluation: it would run the solution on the CPU.
    auto start = [&] {
      if (pre_sol.ready || !pre_sol_why.empty()) {  // the one started during the reference, once
        sol = std::move(pre_sol);
        w_why = pre_sol_why;
        pre_sol = Worker();
        pre_sol_why.clear();
      } else {
        sol = start_worker(sol_opt, scratch, "solution", !ev.gpu, w_why, sol_uid, sol_triton_cache);
      }
      if (sol.proc && ev.gpu && sol.environment.value("device", "") != "cuda") {
        w_why = fmt::format("the solution worker sees no GPU (device {}) where the reference worker saw one",
                            sol.environment.value("device", "?"));
        stop_worker(sol.proc);
      }
    };
    start();
    if (!sol.proc && sol_opt.jail && !sol_opt.jail->required) {
      // A sandbox that cannot host the worker here (CUDA not reachable inside, say): go on without it, and say so.
      say(fmt::format("the solution worker did not start in the {} sandbox; running it without: {}", sol_opt.jail->name,
                      w_why.substr(0, 600)));
      sol_opt.jail_note = fmt::format("the {} sandbox failed: {}", sol_opt.jail->name, w_why.substr(0, 300));
      sol_opt.jail.reset();
      start();
    }
    if (!sol.proc && sol_uid >= 0) {
      // The build or the Python environment may not be readable by nobody (a checkout under /root):
      // run as ourselves, and say so in the record.
      say("the solution worker could not start as nobody; running it without privilege separation");
      sol_uid = -1;
      start();
    }
    if (sol.proc) {
      ev.solution_environment = sol.environment;
      ev.solution_environment["privilege_separation"] = sol_uid >= 0;
    }
    if (!sol.proc) {
      all_failed = Status::runtime_error;
      all_failed_msg = w_why;
      return false;
    }
    json req = {{"op", "load"}, {"language", std::string(language_name(solution.language))},
                {"path", snapshot_source.string()}, {"so_path", snapshot_so.string()}};
    sol.proc->send(req);
    auto r = sol.proc->receive(opt.load_timeout);
    if (r.outcome == ChildProcess::Outcome::response && r.body.value("ok", false)) return true;
    all_failed = r.outcome == ChildProcess::Outcome::response ? status_of(r.body)
                 : r.outcome == ChildProcess::Outcome::timeout ? Status::timeout
                                                               : Status::runtime_error;
    all_failed_msg = "loading the solution failed: " +
                     (r.outcome == ChildProcess::Outcome::response ? r.body.value("error", "") : sol.proc->log_tail());
    stop_worker(sol.proc);
    return false;
  };
  auto drop_worker = [&]() {
    if (!sol.proc) return std::string();
    sol.proc->kill();
    auto e = sol.proc->wait();
    auto tail = sol.proc->log_tail(2000);
    sol.proc.reset();
    return fmt::format("the worker {}; its last output:\n{}", e.describe(), tail);
  };
  // One request to the solution worker; a hang or a crash becomes a status and a fresh worker next time.
  auto ask = [&](const json& req, std::chrono::seconds timeout, WorkloadTrace& t) -> std::optional<json> {
    if (!sol.proc->send(req)) {
      t.status = Status::runtime_error;
      t.message = "the solution worker is gone: " + drop_worker();
      return std::nullopt;
    }
    auto r = sol.proc->receive(timeout);
    switch (r.outcome) {
      case ChildProcess::Outcome::response:
        if (r.body.value("ok", false)) return r.body;
        t.status = status_of(r.body);
        t.message = r.body.value("error", "");
        // A CUDA error poisons the process's context: the next workload gets a fresh worker.
        if (t.status == Status::runtime_error) drop_worker();
        return std::nullopt;
      case ChildProcess::Outcome::timeout:
        t.status = Status::timeout;
        t.message = fmt::format("no answer within {} s; ", timeout.count()) + drop_worker();
        return std::nullopt;
      case ChildProcess::Outcome::closed:
        t.status = Status::runtime_error;
        t.message = "the solution's process ended: " + drop_worker();
        return std::nullopt;
      case ChildProcess::Outcome::garbled:
        t.status = Status::runtime_error;
        t.message = "garbled reply from the solution's process: " + r.raw + "; " + drop_worker();
        return std::nullopt;
    }
    return std::nullopt;
  };

  // Timing integrity: each sample's whole-device wall-clock bracket must agree with its event time (work
  // hidden on another stream or a thread, or a forged elapsed time, is outside the events but inside the
  // bracket), and no time may beat the physical floor.
  auto integrity_checks = [&](WorkloadTrace& t) {
    const auto& tm = *t.timing;
    auto num = [&](const char* k) {
      auto it = tm.raw.find(k);
      return it != tm.raw.end() && it->is_number() ? it->get<double>() : -1.0;
    };
    const double bracket = num("bracket_median_ms"), overhead = std::max(0.0, num("bracket_overhead_ms"));
    const double allowed = tm.median_ms + 0.25 * tm.median_ms + 2 * overhead + opt.bracket_slack_ms;
    if (bracket > allowed) {
      t.status = Status::compliance_violation;
      t.message = fmt::format("events say {:.4f} ms but the whole device was busy for {:.4f} ms (allowed {:.4f} ms): "
                              "work ran outside the timed stream, or the timer was tampered with",
                              tm.median_ms, bracket, allowed);
      return;
    }
    // The manifest's flops and bytes are the expert algorithm's minimum; 1.3x the calibrated ceiling leaves room
    // for a kernel that beats the calibration's copy or matrix product.
    if (t.ceiling > 0 && tm.median_ms > 0 && t.pct_speed_of_light() > 130) {
      t.status = Status::compliance_violation;
      t.message = fmt::format("{:.4f} ms is {:.0f}% of speed-of-light: below the physical floor, not a real time",
                              tm.median_ms, t.pct_speed_of_light());
    }
  };

  for (const auto* w : selected) {
    auto t = make_trace(*w);
    auto vars = task.vars(*w);
    if (auto it = baselines.find(w->name); it != baselines.end()) {
      t.eager = it->second.first;
      t.compiled = it->second.second;
    }
    if (auto it = compile_skipped.find(w->name); it != compile_skipped.end()) t.compiled_skipped = it->second;
    if (!all_failed && solution.language == Language::cuda && !ev.gpu) {
      t.skipped = "no GPU: compiled, not run";
      ev.traces.push_back(std::move(t));
      continue;
    }
    if (!all_failed) ensure_solution_worker();
    if (all_failed) {
      t.status = *all_failed;
      t.message = all_failed_msg;
      ev.traces.push_back(std::move(t));
      continue;
    }
    json inputs = json::array(), outputs = json::array();
    for (const auto& s : task.inputs) inputs.push_back(spec_json(s, vars));
    for (const auto& s : task.outputs) outputs.push_back(spec_json(s, vars));
    // Output files are read from where the supervisor told the worker to write them, never from paths the
    // worker reports: a hostile worker could point at the expected outputs.
    // `ref_set` is the reference's record of the input set: {inputs, expected} files.
    auto check_outputs = [&](const json& ref_set, const fs::path& out_dir, const std::string& suffix) {
      std::vector<OutputCheck> checks;
      const json& expected_files = ref_set["expected"];
      for (const auto& spec : task.outputs) {
        std::vector<int64_t> shape;
        for (const auto& e : spec.shape) shape.push_back(eval_dim(e, vars));
        HostTensor got;
        try {
          got = read_tensor_file(out_dir / fmt::format("out_{}{}.d2kt", spec.name, suffix));
          if (spec.tol.check != "custom") {
            auto expected = read_tensor_file(expected_files[spec.name].get<std::string>());
            checks.push_back(compare_output(spec, got, expected, shape));
            continue;
          }
        } catch (const std::exception& e) {
          OutputCheck c;
          c.name = spec.name;
          c.status = Status::runtime_error;
          c.message = fmt::format("{}: unreadable output: {}", spec.name, e.what());
          checks.push_back(c);
          continue;
        }
        // check = "custom": shape and dtype are ours to judge, the values check()'s.
        OutputCheck c;
        c.name = spec.name;
        if (got.shape != shape) {
          c.status = Status::incorrect_shape;
          c.message = fmt::format("{}: shape [{}], expected [{}]", spec.name, fmt::join(got.shape, ", "), fmt::join(shape, ", "));
        } else if (got.dtype != spec.dtype) {
          c.status = Status::incorrect_dtype;
          c.message = fmt::format("{}: dtype {}, expected {}", spec.name, dtype_name(got.dtype), dtype_name(spec.dtype));
        } else {
          c = custom_check(spec, got, *w, inputs, ref_set["inputs"], expected_files[spec.name].get<std::string>());
        }
        checks.push_back(c);
      }
      return checks;
    };
    bool ok = true;
    for (std::size_t k = 0; k < seeds.size() && ok; ++k) {
      say(fmt::format("check {} seed {}/{}", w->name, k + 1, seeds.size()));
      auto out_dir = scratch / "out" / w->name / std::to_string(k);
      writable(out_dir);
      const auto& rf = ref_files[w->name][k];
      json req = {{"op", "run"}, {"workload", workload_json(*w)}, {"inputs", inputs}, {"outputs", outputs},
                  {"params", params_json(task)}, {"input_files", rf["inputs"]}, {"out_dir", out_dir.string()},
                  {"profile", k == 0 && opt.defenses}, {"defenses", opt.defenses}};
      auto body = ask(req, opt.call_timeout, t);
      if (!body) {
        ok = false;
        break;
      }
      if (auto off = body->find("off_stream_kernels"); off != body->end() && off->is_array() && !off->empty()) {
        t.status = Status::compliance_violation;
        t.message = fmt::format("GPU work ran on another stream than the one given to the solution: {}", off->dump());
        ok = false;
        break;
      }
      if (body->contains("kernels")) {
        const auto& ks = (*body)["kernels"];
        if (ks.is_array()) {
          t.kernels = ks;
          if (!any_solution_kernel(ks)) {
            t.status = Status::compliance_violation;
            t.message = fmt::format("no kernel of the solution ran on the check inputs (GPU kernels seen: {})",
                                    ks.empty() ? "none" : ks.dump());
            ok = false;
            break;
          }
        } else {
          t.kernels = ks;  // why the kernels could not be listed: recorded, not judged
        }
      }
      t.seeds_checked.push_back(seeds[k]);
      auto checks = check_outputs(rf, out_dir, "");
      t.checks = checks;
      for (const auto& c : checks)
        if (c.status != Status::passed) {
          t.status = c.status;
          t.message = fmt::format("seed {}: {}", k, c.message);
          ok = false;
          break;
        }
    }
    if (ok && ev.gpu && w->timed) {
      say(fmt::format("timing {}", w->name));
      json sets = json::array();
      for (const auto& rf : timing_ref_files[w->name]) sets.push_back(rf["inputs"]);
      auto out_dir = scratch / "out" / w->name / "timed";
      writable(out_dir);
      json req = {{"op", "time"}, {"workload", workload_json(*w)}, {"inputs", inputs}, {"outputs", outputs},
                  {"params", params_json(task)}, {"input_sets", sets}, {"timing", timing_cfg},
                  {"out_dir", out_dir.string()}, {"defenses", opt.defenses}};
      if (auto body = ask(req, opt.timing_timeout, t)) {
        t.timing = parse_timing((*body)["timing"]);
        // The outputs of timed calls are checked too: a solution must not behave differently when timed.
        // One timed call per set, drawn by the worker uniformly among that set's calls (file _timed<set>_0).
        const auto& tsets = timing_ref_files[w->name];
        for (std::size_t k = 0; k < tsets.size() && t.status == Status::passed; ++k)
          for (const auto& c : check_outputs(tsets[k], out_dir, fmt::format("_timed{}_0", k)))
            if (c.status != Status::passed) {
              t.status = c.status;
              t.message = fmt::format("a timed call's outputs (input set {}) are wrong: {}", k, c.message);
              break;
            }
        if (t.status == Status::passed && opt.defenses) integrity_checks(t);
        if (t.status != Status::passed) t.timing.reset();  // no time for an output that did not pass
      }
    }
    ev.traces.push_back(std::move(t));
  }
  for (auto* w : {&sol, &checker})
    if (w->proc) stop_worker(w->proc);
  ev.seconds["total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  double compiling = ev.seconds.value("solution_build", 0.0) + ev.seconds.value("torch_compile", 0.0);
  ev.seconds["beyond_compilation"] = ev.seconds["total"].get<double>() - compiling;
  say(fmt::format("done: {:.1f} s, {:.1f} s of it compiling (the solution's build and torch.compile)",
                  ev.seconds["total"].get<double>(), compiling));
  return ev;
}

}  // namespace d2k
