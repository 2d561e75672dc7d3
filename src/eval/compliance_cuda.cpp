#include "eval/compliance_cuda.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "core/files.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------------------------------------
// Rules

struct RuleInfo {
  std::string_view name;
  std::string_view why;
};

constexpr RuleInfo kRules[] = {
    {"no_kernel", "the work must be done by CUDA kernels the solution defines and launches"},
    {"stream_creation",
     "creates, captures, replays or destroys streams or graphs; all work must be enqueued on the stream the harness "
     "passes"},
    {"default_stream",
     "enqueues work on the default (legacy or per-thread) stream, not on the stream the harness passes"},
    {"thread_creation", "starts a thread, a process or a host callback; no work may run outside the call"},
    {"dynamic_loading", "loads code or looks up symbols at run time, out of reach of the static checks"},
    {"code_patching", "changes memory protection, maps memory or walks the loaded objects (GOT/PLT patching)"},
    {"host_timer",
     "reads a host clock or a CUDA event time; a solution has no use for time and could behave differently while "
     "timed"},
    {"vendor_library", "calls a vendor library (forbidden for every task, or by the task's forbidden_libraries)"},
    {"forbidden_call", "the task's requirements forbid it (forbidden_calls)"},
    {"host_sync",
     "synchronizes with (or polls) the GPU from the host; it would stall behind the harness's blocking kernel"},
    {"device_control", "changes the device, the context or process-wide CUDA state the harness owns"},
    {"l2_persistence",
     "sets persisting-L2 state or stream attributes that outlive the call and defeat the harness's L2 flush"},
    {"file_io", "accesses files or file descriptors"},
    {"network", "uses the network"},
    {"env_access", "reads or changes the process environment"},
    {"signal", "exits or aborts the process, or raises or handles signals: an attack on the harness"},
    {"raw_syscall", "issues system calls directly"},
    {"load_time_code", "runs code when the library is loaded or unloaded"},
    {"foreign_include",
     "includes a file from outside the solution's folder, the system and CUDA headers and the d2k ABI header"},
    {"line_directive", "#line directives and line markers would hide where code comes from"},
    {"preprocess_error", "nvcc could not preprocess the source"},
    {"linked_library", "links a library outside the allowed set (the CUDA runtime, the C and C++ runtimes)"},
    {"unresolved_symbol",
     "uses a symbol that none of the allowed libraries defines: it would bind to whatever the host process has "
     "loaded (Python, PyTorch, the CUDA driver, a vendor library)"},
    {"symbol_interposition", "exports a definition of a function that the harness's libraries define"},
    {"no_entry", "the library must export d2k_solve (extern \"C\")"},
    {"bad_library", "the built library is not a well-formed ELF64 shared object"},
};

std::string_view why(std::string_view rule) {
  for (const auto& r : kRules)
    if (r.name == rule) return r.why;
  return "";
}

// Flags of a name rule.
enum : unsigned {
  kCall = 1u,      // only when called, `name(`, or when its address is taken, `&name`
  kStd = 2u,       // `std::name` matches too (the <cstdlib>-style functions)
  kMember = 4u,    // matches after `.` or `->` too (struct members)
  kLib = 8u,       // an undefined (or exported) symbol of this name in the built library matches too
  kNoSrc = 16u,    // library only (a device function of that name exists, e.g. clock)
  kGeneric = 32u,  // a common word: skipped in the source when the solution defines a function of that name
};

struct NameRule {
  std::string_view name;  // unqualified C name, or a qualified C++ name ("std::thread": that entity and members)
  std::string_view rule;
  unsigned flags;
};

constexpr unsigned L = kLib;

// clang-format off
constexpr NameRule kNameRules[] = {
    // stream_creation: work must go on the harness's stream, in the call's window.
    {"cudaStreamCreate", "stream_creation", L}, {"cudaStreamCreateWithFlags", "stream_creation", L},
    {"cudaStreamCreateWithPriority", "stream_creation", L}, {"cudaStreamDestroy", "stream_creation", L},
    {"cuStreamCreate", "stream_creation", L}, {"cuStreamCreateWithPriority", "stream_creation", L},
    {"cuStreamDestroy", "stream_creation", L},
    {"cudaStreamBeginCapture", "stream_creation", L}, {"cudaStreamBeginCaptureToGraph", "stream_creation", L},
    {"cudaStreamEndCapture", "stream_creation", L}, {"cuStreamBeginCapture", "stream_creation", L},
    {"cuStreamBeginCaptureToGraph", "stream_creation", L}, {"cuStreamEndCapture", "stream_creation", L},
    {"cudaThreadExchangeStreamCaptureMode", "stream_creation", L},
    {"cudaGraphLaunch", "stream_creation", L}, {"cudaGraphInstantiate", "stream_creation", L},
    {"cudaGraphInstantiateWithFlags", "stream_creation", L}, {"cudaGraphInstantiateWithParams", "stream_creation", L},
    {"cudaGraphUpload", "stream_creation", L}, {"cuGraphLaunch", "stream_creation", L},
    {"cuGraphInstantiate", "stream_creation", L}, {"cuGraphInstantiateWithFlags", "stream_creation", L},
    {"cuGraphInstantiateWithParams", "stream_creation", L}, {"cuGraphUpload", "stream_creation", L},

    // thread_creation
    {"pthread_create", "thread_creation", L}, {"fork", "thread_creation", L}, {"vfork", "thread_creation", L},
    {"clone", "thread_creation", L | kCall | kGeneric}, {"clone3", "thread_creation", L},
    {"popen", "thread_creation", L}, {"system", "thread_creation", L | kCall | kStd | kGeneric},
    {"execl", "thread_creation", L}, {"execle", "thread_creation", L}, {"execlp", "thread_creation", L},
    {"execv", "thread_creation", L}, {"execve", "thread_creation", L}, {"execvp", "thread_creation", L},
    {"execvpe", "thread_creation", L}, {"fexecve", "thread_creation", L}, {"posix_spawn", "thread_creation", L},
    {"posix_spawnp", "thread_creation", L}, {"thrd_create", "thread_creation", L},
    {"cudaLaunchHostFunc", "thread_creation", L}, {"cuLaunchHostFunc", "thread_creation", L},
    {"cudaStreamAddCallback", "thread_creation", L}, {"cuStreamAddCallback", "thread_creation", L},
    {"std::thread", "thread_creation", L}, {"std::jthread", "thread_creation", L},
    {"std::async", "thread_creation", 0}, {"std::execution", "thread_creation", 0},

    // dynamic_loading (cudaGetDriverEntryPoint & co. are checked by their argument, below)
    {"dlopen", "dynamic_loading", L}, {"dlmopen", "dynamic_loading", L}, {"dlsym", "dynamic_loading", L},
    {"dlvsym", "dynamic_loading", L}, {"dlinfo", "dynamic_loading", L},
    {"cudaLibraryLoadData", "dynamic_loading", L}, {"cudaLibraryLoadFromFile", "dynamic_loading", L},
    {"cuLibraryLoadData", "dynamic_loading", L}, {"cuLibraryLoadFromFile", "dynamic_loading", L},
    {"cuModuleLoad", "dynamic_loading", L}, {"cuModuleLoadData", "dynamic_loading", L},
    {"cuModuleLoadDataEx", "dynamic_loading", L}, {"cuModuleLoadFatBinary", "dynamic_loading", L},
    {"cuLinkCreate", "dynamic_loading", L}, {"cuLinkAddData", "dynamic_loading", L},
    {"cuLinkAddFile", "dynamic_loading", L}, {"cuLinkComplete", "dynamic_loading", L},

    // code_patching
    {"mprotect", "code_patching", L}, {"pkey_mprotect", "code_patching", L}, {"mmap", "code_patching", L},
    {"mmap64", "code_patching", L}, {"mremap", "code_patching", L}, {"dl_iterate_phdr", "code_patching", L},
    {"process_vm_readv", "code_patching", L}, {"process_vm_writev", "code_patching", L},
    {"ptrace", "code_patching", L}, {"_r_debug", "code_patching", L}, {"_dl_find_object", "code_patching", L},

    // host_timer
    {"clock_gettime", "host_timer", L}, {"__clock_gettime", "host_timer", L}, {"gettimeofday", "host_timer", L},
    {"ftime", "host_timer", L}, {"timespec_get", "host_timer", L | kStd},
    {"time", "host_timer", L | kCall | kStd | kGeneric}, {"clock", "host_timer", L | kNoSrc},
    {"times", "host_timer", L | kCall | kGeneric}, {"getrusage", "host_timer", L}, {"timer_gettime", "host_timer", L},
    {"__rdtsc", "host_timer", 0}, {"__rdtscp", "host_timer", 0}, {"_rdtsc", "host_timer", 0},
    {"__rdpmc", "host_timer", 0}, {"__builtin_ia32_rdtsc", "host_timer", 0},
    {"__builtin_ia32_rdtscp", "host_timer", 0}, {"__builtin_ia32_rdpmc", "host_timer", 0},
    {"__builtin_readcyclecounter", "host_timer", 0},
    {"cudaEventElapsedTime", "host_timer", L}, {"cuEventElapsedTime", "host_timer", L},
    {"std::chrono", "host_timer", L},

    // host_sync (synchronous copies and sets run on the legacy stream and block the host)
    {"cudaDeviceSynchronize", "host_sync", L}, {"cudaThreadSynchronize", "host_sync", L},
    {"cudaStreamSynchronize", "host_sync", L}, {"cudaEventSynchronize", "host_sync", L},
    {"cudaStreamQuery", "host_sync", L}, {"cudaEventQuery", "host_sync", L},
    {"cuCtxSynchronize", "host_sync", L}, {"cuStreamSynchronize", "host_sync", L},
    {"cuEventSynchronize", "host_sync", L}, {"cuStreamQuery", "host_sync", L}, {"cuEventQuery", "host_sync", L},
    {"cudaMemcpy", "host_sync", L}, {"cudaMemcpy2D", "host_sync", L}, {"cudaMemcpy3D", "host_sync", L},
    {"cudaMemcpyPeer", "host_sync", L}, {"cudaMemcpy3DPeer", "host_sync", L},
    {"cudaMemcpyToSymbol", "host_sync", L}, {"cudaMemcpyFromSymbol", "host_sync", L},
    {"cudaMemcpyToArray", "host_sync", L}, {"cudaMemcpyFromArray", "host_sync", L},
    {"cudaMemcpy2DToArray", "host_sync", L}, {"cudaMemcpy2DFromArray", "host_sync", L},
    {"cudaMemcpyArrayToArray", "host_sync", L},
    {"cudaMemset", "host_sync", L}, {"cudaMemset2D", "host_sync", L}, {"cudaMemset3D", "host_sync", L},
    {"cuMemcpy", "host_sync", L}, {"cuMemcpyHtoD", "host_sync", L}, {"cuMemcpyDtoH", "host_sync", L},
    {"cuMemcpyDtoD", "host_sync", L}, {"cuMemcpyPeer", "host_sync", L}, {"cuMemsetD8", "host_sync", L},
    {"cuMemsetD16", "host_sync", L}, {"cuMemsetD32", "host_sync", L},

    // device_control
    // cudaSetDevice is judged in the source only: CUB's device-wide algorithms (which a task may allow) call it
    // from their host code to restore the current device; the solution's own calls are spelled, and caught.
    {"cudaDeviceReset", "device_control", L}, {"cudaSetDevice", "device_control", 0},
    {"cudaSetDeviceFlags", "device_control", L}, {"cudaDeviceSetLimit", "device_control", L},
    {"cudaDeviceSetMemPool", "device_control", L}, {"cudaIpcGetMemHandle", "device_control", L},
    {"cudaIpcOpenMemHandle", "device_control", L}, {"cudaIpcGetEventHandle", "device_control", L},
    {"cudaIpcOpenEventHandle", "device_control", L}, {"cudaIpcCloseMemHandle", "device_control", L},
    {"cuCtxCreate", "device_control", L}, {"cuCtxDestroy", "device_control", L},
    {"cuCtxSetCurrent", "device_control", L}, {"cuCtxPushCurrent", "device_control", L},
    {"cuCtxPopCurrent", "device_control", L}, {"cuCtxSetLimit", "device_control", L},
    {"cuDevicePrimaryCtxReset", "device_control", L}, {"cuDevicePrimaryCtxRelease", "device_control", L},
    {"cuDevicePrimaryCtxSetFlags", "device_control", L}, {"cuDeviceSetMemPool", "device_control", L},

    // l2_persistence
    {"cudaStreamSetAttribute", "l2_persistence", L}, {"cuStreamSetAttribute", "l2_persistence", L},
    {"accessPolicyWindow", "l2_persistence", kMember}, {"cudaAccessPropertyPersisting", "l2_persistence", 0},
    {"cudaLimitPersistingL2CacheSize", "l2_persistence", 0}, {"CU_ACCESS_PROPERTY_PERSISTING", "l2_persistence", 0},
    {"CU_LIMIT_PERSISTING_L2_CACHE_SIZE", "l2_persistence", 0},
    {"cudaLaunchAttributeAccessPolicyWindow", "l2_persistence", 0},
    {"CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW", "l2_persistence", 0},

    // file_io
    {"fopen", "file_io", L | kStd}, {"fopen64", "file_io", L}, {"freopen", "file_io", L | kStd},
    {"freopen64", "file_io", L}, {"fdopen", "file_io", L}, {"open", "file_io", L | kCall | kGeneric},
    {"open64", "file_io", L}, {"__open_2", "file_io", L}, {"__open64_2", "file_io", L}, {"openat", "file_io", L},
    {"openat64", "file_io", L}, {"__openat_2", "file_io", L}, {"creat", "file_io", L}, {"creat64", "file_io", L},
    {"read", "file_io", L | kCall | kGeneric}, {"__read_chk", "file_io", L},
    {"write", "file_io", L | kCall | kGeneric}, {"pread", "file_io", L}, {"pread64", "file_io", L},
    {"pwrite", "file_io", L}, {"pwrite64", "file_io", L}, {"readv", "file_io", L}, {"writev", "file_io", L},
    {"lseek", "file_io", L}, {"lseek64", "file_io", L}, {"dup", "file_io", L | kCall | kGeneric},
    {"dup2", "file_io", L}, {"dup3", "file_io", L}, {"fcntl", "file_io", L}, {"ioctl", "file_io", L},
    {"unlink", "file_io", L}, {"unlinkat", "file_io", L}, {"remove", "file_io", L | kCall | kGeneric},
    {"rename", "file_io", L | kCall | kStd | kGeneric}, {"renameat", "file_io", L}, {"renameat2", "file_io", L},
    {"mkdir", "file_io", L}, {"mkdirat", "file_io", L}, {"rmdir", "file_io", L}, {"opendir", "file_io", L},
    {"fdopendir", "file_io", L}, {"readdir", "file_io", L}, {"chdir", "file_io", L}, {"fchdir", "file_io", L},
    {"chmod", "file_io", L}, {"fchmod", "file_io", L}, {"chown", "file_io", L}, {"fchown", "file_io", L},
    {"truncate", "file_io", L | kCall | kGeneric}, {"ftruncate", "file_io", L}, {"symlink", "file_io", L},
    {"symlinkat", "file_io", L}, {"readlink", "file_io", L}, {"readlinkat", "file_io", L},
    {"link", "file_io", L | kCall | kGeneric}, {"linkat", "file_io", L},
    {"stat", "file_io", L | kCall | kGeneric}, {"lstat", "file_io", L}, {"fstat", "file_io", L},
    {"fstatat", "file_io", L}, {"stat64", "file_io", L}, {"fstat64", "file_io", L}, {"lstat64", "file_io", L},
    {"statx", "file_io", L}, {"__xstat", "file_io", L}, {"__fxstat", "file_io", L}, {"__lxstat", "file_io", L},
    {"access", "file_io", L | kCall | kGeneric}, {"faccessat", "file_io", L}, {"euidaccess", "file_io", L},
    {"tmpfile", "file_io", L | kStd}, {"tmpnam", "file_io", L | kStd}, {"mkstemp", "file_io", L},
    {"mkostemp", "file_io", L}, {"mkdtemp", "file_io", L}, {"memfd_create", "file_io", L},
    {"sendfile", "file_io", L}, {"splice", "file_io", L}, {"pipe", "file_io", L | kCall | kGeneric},
    {"pipe2", "file_io", L}, {"mkfifo", "file_io", L}, {"dprintf", "file_io", L}, {"vdprintf", "file_io", L},
    {"__dprintf_chk", "file_io", L}, {"__vdprintf_chk", "file_io", L},
    {"std::ifstream", "file_io", L}, {"std::ofstream", "file_io", L}, {"std::fstream", "file_io", L},
    {"std::filebuf", "file_io", L}, {"std::basic_ifstream", "file_io", L}, {"std::basic_ofstream", "file_io", L},
    {"std::basic_fstream", "file_io", L}, {"std::basic_filebuf", "file_io", L}, {"std::filesystem", "file_io", L},
    {"std::experimental::filesystem", "file_io", L}, {"__gnu_cxx::stdio_filebuf", "file_io", L},
    {"__gnu_cxx::stdio_sync_filebuf", "file_io", L},

    // network
    {"socket", "network", L}, {"socketpair", "network", L}, {"connect", "network", L | kCall | kGeneric},
    {"bind", "network", L | kCall | kGeneric}, {"listen", "network", L | kCall | kGeneric},
    {"accept", "network", L | kCall | kGeneric}, {"accept4", "network", L},
    {"send", "network", L | kCall | kGeneric}, {"sendto", "network", L}, {"sendmsg", "network", L},
    {"recv", "network", L | kCall | kGeneric}, {"recvfrom", "network", L}, {"recvmsg", "network", L},
    {"getaddrinfo", "network", L}, {"gethostbyname", "network", L}, {"gethostbyname2", "network", L},
    {"getnameinfo", "network", L}, {"shutdown", "network", L | kCall | kGeneric},

    // env_access
    {"getenv", "env_access", L | kStd}, {"secure_getenv", "env_access", L}, {"setenv", "env_access", L},
    {"unsetenv", "env_access", L}, {"putenv", "env_access", L}, {"clearenv", "env_access", L},
    {"environ", "env_access", L}, {"__environ", "env_access", L},

    // signal: exiting, aborting, signals
    {"signal", "signal", L | kCall | kStd | kGeneric}, {"sigaction", "signal", L | kCall},
    {"sigprocmask", "signal", L}, {"pthread_sigmask", "signal", L}, {"sigaltstack", "signal", L},
    {"raise", "signal", L | kCall | kStd | kGeneric}, {"kill", "signal", L | kCall | kGeneric},
    {"killpg", "signal", L}, {"tgkill", "signal", L}, {"tkill", "signal", L}, {"pthread_kill", "signal", L},
    {"alarm", "signal", L | kCall | kGeneric}, {"setitimer", "signal", L}, {"timer_create", "signal", L},
    {"abort", "signal", L | kCall | kStd}, {"exit", "signal", L | kCall | kStd}, {"_exit", "signal", L},
    {"_Exit", "signal", L | kStd}, {"quick_exit", "signal", L | kStd}, {"atexit", "signal", L | kStd},
    {"at_quick_exit", "signal", L | kStd}, {"on_exit", "signal", L},
    {"std::terminate", "signal", 0}, {"std::set_terminate", "signal", 0},

    // raw_syscall
    {"syscall", "raw_syscall", L | kCall},
};
// clang-format on

// Identifier prefixes: `cublasSgemm`, `CUBLAS_OP_N` and the namespace `cublas::` all match "cublas".
struct PrefixRule {
  std::string prefix;
  std::string rule;
};

// Vendor libraries forbidden for every task (they cannot be linked by the build anyway; calls would bind to
// whatever the host process has loaded). A task adds more with forbidden_libraries (e.g. "cub", "cutlass").
// curand is left out: its device API (curand_init, curand_uniform) is header-only and allowed.
const std::vector<std::string> kDefaultVendors = {"cublas", "cublasLt", "cudnn",    "cusparse", "cusparseLt",
                                                  "cusolver", "cufft", "cutensor", "nccl",     "nvshmem"};
const std::vector<std::string> kRuntimeCompilers = {"nvrtc", "nvJitLink", "nvPTXCompiler"};

// Driver functions a solution may fetch through cudaGetDriverEntryPoint: the TMA descriptor encoders, which have
// no runtime-API equivalent. Any other name (cuStreamCreate, cuCtxSynchronize, ...) is dynamic_loading.
const std::set<std::string, std::less<>> kEntryPointAllowed = {
    "cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress"};
const std::set<std::string, std::less<>> kEntryPointFunctions = {
    "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetProcAddress"};

// Kernel launches (their presence is required; their stream argument is checked where it has one).
const std::set<std::string, std::less<>> kLaunchFunctions = {
    "cudaLaunchKernel",  "cudaLaunchKernelEx",        "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel",
    "cuLaunchKernelEx",  "cuLaunchCooperativeKernel"};

// Stream-ordered calls whose stream parameter has a default (0, the legacy stream) or may be given as a constant:
// the stream is argument `idx` of `nmin..nmax` arguments.
struct StreamArg {
  std::string_view name;
  int idx, nmin, nmax;
};
constexpr StreamArg kStreamArgs[] = {
    {"cudaMemsetAsync", 3, 3, 4},           {"cudaMemset2DAsync", 5, 5, 6},
    {"cudaMemset3DAsync", 3, 3, 4},         {"cudaMemcpyAsync", 4, 4, 5},
    {"cudaMemcpy2DAsync", 7, 7, 8},         {"cudaMemcpy3DAsync", 1, 1, 2},
    {"cudaMemcpyPeerAsync", 5, 5, 6},       {"cudaMemcpyToSymbolAsync", 5, 3, 6},
    {"cudaMemcpyFromSymbolAsync", 5, 3, 6}, {"cudaMallocAsync", 2, 3, 3},
    {"cudaFreeAsync", 1, 2, 2},             {"cudaMallocFromPoolAsync", 3, 4, 4},
    {"cudaLaunchKernel", 5, 4, 6},          {"cudaLaunchCooperativeKernel", 5, 4, 6},
    {"cudaEventRecord", 1, 1, 2},           {"cudaEventRecordWithFlags", 1, 1, 3},
    {"cudaStreamWaitEvent", 0, 2, 3},
};

// Strips the API-version and per-thread-stream suffixes the CUDA headers' macros add (cuStreamDestroy_v2,
// cudaMemcpyAsync_ptsz), so the rule of the plain name applies.
std::string strip_api_suffix(std::string s) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view suf : {"_ptsz", "_ptds"}) {
      if (s.size() > suf.size() && s.ends_with(suf)) {
        s.resize(s.size() - suf.size());
        again = true;
      }
    }
    auto u = s.rfind("_v");
    if (u != std::string::npos && u > 0 && u + 2 < s.size() &&
        std::all_of(s.begin() + static_cast<long>(u) + 2, s.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      s.resize(u);
      again = true;
    }
  }
  return s;
}

std::vector<std::string> split_qualified(std::string_view s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (true) {
    auto q = s.find("::", p);
    out.emplace_back(s.substr(p, q == std::string_view::npos ? std::string_view::npos : q - p));
    if (q == std::string_view::npos) break;
    p = q + 2;
  }
  if (!out.empty() && out.front().empty()) out.erase(out.begin());  // "::name"
  return out;
}

std::string join(const std::vector<std::string>& v, std::string_view sep = "::") {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += v[i];
  }
  return s;
}

bool starts_with(const std::vector<std::string>& a, const std::vector<std::string>& prefix) {
  return prefix.size() <= a.size() && std::equal(prefix.begin(), prefix.end(), a.begin());
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string lower(std::string_view s) {
  std::string u(s);
  for (auto& c : u) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return u;
}

// `id` is library L's: L's exact spelling followed by an upper-case letter, a digit, '_' or nothing
// (cublasSgemm, cudnn_frontend), or L in capitals followed by a digit, '_' or nothing (CUBLAS_OP_N).
bool prefix_match(std::string_view id, std::string_view lib) {
  if (lib.empty() || id.size() < lib.size()) return false;
  auto boundary = [&](bool allow_upper) {
    if (id.size() == lib.size()) return true;
    unsigned char c = static_cast<unsigned char>(id[lib.size()]);
    return c == '_' || std::isdigit(c) || (allow_upper && std::isupper(c));
  };
  if (id.substr(0, lib.size()) == lib && boundary(true)) return true;
  if (id.substr(0, lib.size()) == upper(lib) && boundary(false)) return true;
  return false;
}

// The rule tables, indexed for the source and the library checks.
struct RuleSet {
  std::unordered_map<std::string, std::vector<const NameRule*>> plain;  // unqualified names
  struct Qualified {
    std::vector<std::string> comps;
    std::string rule;
    unsigned flags;
    std::string display;  // as written in the requirements or the table
  };
  std::vector<Qualified> qualified;                  // std::thread, cub::DeviceScan, ...
  std::vector<std::pair<std::string, std::string>> forbidden_plain;  // (name, display) from forbidden_calls
  std::vector<PrefixRule> prefixes;                  // vendor libraries, runtime compilers

  explicit RuleSet(const Requirements& req) {
    for (const auto& r : kNameRules) {
      if (r.name.find("::") != std::string_view::npos)
        qualified.push_back({split_qualified(r.name), std::string(r.rule), r.flags, std::string(r.name)});
      else
        plain[std::string(r.name)].push_back(&r);
    }
    for (const auto& f : req.forbidden_calls) {
      std::string q = f;
      // Python-style names ("torch.cumsum") become C++ ones ("torch::cumsum").
      for (std::size_t p; (p = q.find('.')) != std::string::npos;) q.replace(p, 1, "::");
      auto comps = split_qualified(q);
      if (comps.empty() || std::any_of(comps.begin(), comps.end(), [](const auto& c) { return c.empty(); })) continue;
      if (comps.size() == 1)
        forbidden_plain.emplace_back(comps[0], f);
      else
        qualified.push_back({comps, "forbidden_call", kLib, f});
    }
    std::set<std::string> seen;
    for (const auto& v : kDefaultVendors)
      if (seen.insert(v).second) prefixes.push_back({v, "vendor_library"});
    for (const auto& v : req.forbidden_libraries) {
      std::string n = v;
      if (n.starts_with("lib")) n = n.substr(3);  // "libcublas" -> "cublas"
      if (auto p = n.find(".so"); p != std::string::npos) n.resize(p);
      if (!n.empty() && seen.insert(n).second) prefixes.push_back({n, "vendor_library"});
    }
    for (const auto& v : kRuntimeCompilers) prefixes.push_back({v, "dynamic_loading"});
  }
};

// ------------------------------------------------------------------------------------------------------------
// Running nvcc

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `cmd` with sh, stdin from /dev/null, stdout and stderr captured (at most `cap` bytes kept).
std::string run_shell(const std::string& cmd, int& status, std::size_t cap = 1u << 20) {
  std::string out;
  FILE* p = popen(("( " + cmd + " ) </dev/null 2>&1").c_str(), "r");
  if (!p) {
    status = -1;
    return "popen failed";
  }
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    if (out.size() < cap) out.append(buf, std::min(n, cap - out.size()));
  int st = pclose(p);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::optional<fs::path> which(const std::string& prog) {
  if (prog.find('/') != std::string::npos) {
    std::error_code ec;
    if (fs::exists(prog, ec)) return fs::path(prog);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view ps = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t p = 0;
  while (p <= ps.size()) {
    auto q = ps.find(':', p);
    std::string dir(ps.substr(p, q == std::string_view::npos ? std::string_view::npos : q - p));
    if (!dir.empty()) {
      fs::path cand = fs::path(dir) / prog;
      if (::access(cand.c_str(), X_OK) == 0) return cand;
    }
    if (q == std::string_view::npos) break;
    p = q + 1;
  }
  return std::nullopt;
}

fs::path canonical_or(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

bool under(const fs::path& p, const fs::path& dir) {
  if (dir.empty()) return false;
  auto rel = p.lexically_relative(dir);
  if (rel.empty()) return false;
  auto first = *rel.begin();
  return first != ".." && !rel.is_absolute();
}

// Splits a command line as sh would for the simple quoting nvcc's --dryrun prints.
std::vector<std::string> split_command(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      have = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) out.push_back(cur);
  return out;
}

// What nvcc's device preprocessing pass defines and searches, from `nvcc --dryrun -E`: the arch macros (undefined
// again for the host pass, which nvcc runs without them) and the include folders (CUDA's headers are found
// through -I, not as system headers).
struct NvccPlan {
  std::vector<std::string> arch_macros;
  std::vector<fs::path> include_roots;
};

// ------------------------------------------------------------------------------------------------------------
// Tokens of nvcc -E output

struct Tok {
  enum Kind : unsigned char { ident, punct, str, num, chr, sep };
  Kind k = sep;
  std::string text;  // identifier, punctuator, or a string literal's content (between the quotes)
  int file = -1;
  int line = 0;
};

struct FileInfo {
  std::string name;  // as the line markers spell it
  fs::path path;     // canonical
  bool own = false;
  bool allowed = false;  // system headers, CUDA's headers, the d2k ABI header
  bool special = false;  // <built-in>, <command-line>
};

struct Context {
  fs::path own_dir;       // canonical folder of the solution
  fs::path report_dir;    // the folder as the caller spelled it (paths in violations)
  fs::path include_dir;   // canonical
  std::vector<fs::path> include_roots;
  std::vector<FileInfo> files;
  std::map<std::string, int, std::less<>> by_name;
  std::vector<Violation> out;

  int file_index(const std::string& name, bool system_flag) {
    auto it = by_name.find(name);
    if (it != by_name.end()) {
      if (system_flag) files[it->second].allowed = files[it->second].allowed || !files[it->second].own;
      return it->second;
    }
    FileInfo f;
    f.name = name;
    f.special = name.size() > 1 && name.front() == '<' && name.back() == '>';
    if (!f.special) {
      fs::path p(name);
      if (p.is_relative()) p = fs::current_path() / p;
      f.path = canonical_or(p);
      f.own = under(f.path, own_dir);
      f.allowed = !f.own && (system_flag || under(f.path, include_dir) ||
                             std::any_of(include_roots.begin(), include_roots.end(),
                                         [&](const fs::path& r) { return under(f.path, r); }));
    } else {
      f.allowed = true;
    }
    files.push_back(std::move(f));
    by_name[name] = static_cast<int>(files.size()) - 1;
    return static_cast<int>(files.size()) - 1;
  }

  std::string report_name(int file) const {
    if (file < 0) return report_dir.string();
    const auto& f = files[static_cast<std::size_t>(file)];
    if (f.own) return (report_dir / f.path.lexically_relative(own_dir)).string();
    return f.path.empty() ? f.name : f.path.string();
  }

  void report(std::string_view rule, int file, int line, const std::string& what) {
    out.push_back({std::string(rule), report_name(file), line, fmt::format("{}: {}", what, why(rule))});
  }
};

bool ident_start(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalpha(u) || c == '_' || c == '$' || u >= 0x80;
}
bool ident_char(char c) { return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

// A GCC line marker: # <line> "<file>" <flags>...
bool parse_marker(std::string_view l, int& num, std::string& name, std::vector<int>& flags) {
  std::size_t i = 1;
  while (i < l.size() && (l[i] == ' ' || l[i] == '\t')) ++i;
  if (i >= l.size() || !std::isdigit(static_cast<unsigned char>(l[i]))) return false;
  long long n = 0;
  while (i < l.size() && std::isdigit(static_cast<unsigned char>(l[i]))) {
    n = std::min<long long>(n * 10 + (l[i] - '0'), 1 << 30);
    ++i;
  }
  num = static_cast<int>(n);
  while (i < l.size() && l[i] == ' ') ++i;
  name.clear();
  flags.clear();
  if (i >= l.size() || l[i] != '"') return true;
  ++i;
  while (i < l.size() && l[i] != '"') {
    if (l[i] == '\\' && i + 1 < l.size()) {
      char e = l[i + 1];
      if (e >= '0' && e <= '7') {
        int v = 0, k = 0;
        ++i;
        while (k < 3 && i < l.size() && l[i] >= '0' && l[i] <= '7') {
          v = v * 8 + (l[i] - '0');
          ++i;
          ++k;
        }
        name += static_cast<char>(v);
        continue;
      }
      name += e;
      i += 2;
      continue;
    }
    name += l[i++];
  }
  ++i;
  while (i < l.size()) {
    while (i < l.size() && l[i] == ' ') ++i;
    int f = 0;
    bool any = false;
    while (i < l.size() && std::isdigit(static_cast<unsigned char>(l[i]))) {
      f = f * 10 + (l[i] - '0');
      ++i;
      any = true;
    }
    if (!any) break;
    flags.push_back(f);
  }
  return true;
}

// Tokenizes one preprocessing pass. Keeps the tokens of the solution's own files (a `sep` token stands for any
// stretch of other files' tokens, so no name is glued across files), and reports includes of foreign files and
// line markers that rename a file (a #line directive with a file name).
std::vector<Tok> lex_pass(const std::string& s, Context& c) {
  std::vector<Tok> own;
  struct Frame {
    int file;
    std::string shown;
  };
  std::vector<Frame> stack;
  int cur = -1;
  int line = 1;
  bool bol = true, in_directive = false, last_sep = true;
  std::size_t i = 0;
  const std::size_t n = s.size();

  auto push_sep = [&] {
    if (!last_sep) {
      own.push_back({Tok::sep, "", -1, 0});
      last_sep = true;
    }
  };
  auto emit = [&](Tok::Kind k, std::string text, int ln) {
    if (cur >= 0 && c.files[static_cast<std::size_t>(cur)].own) {
      own.push_back({k, std::move(text), cur, ln});
      last_sep = false;
    } else {
      push_sep();
    }
  };
  auto is_own = [&](int f) { return f >= 0 && c.files[static_cast<std::size_t>(f)].own; };

  while (i < n) {
    char ch = s[i];
    if (ch == '\n') {
      ++line;
      ++i;
      bol = true;
      if (in_directive) {
        push_sep();
        in_directive = false;
      }
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
      ++i;
      continue;
    }
    if (bol && ch == '#') {
      std::size_t e = s.find('\n', i);
      if (e == std::string::npos) e = n;
      int num = 0;
      std::string name;
      std::vector<int> flags;
      if (parse_marker(std::string_view(s).substr(i, e - i), num, name, flags) && !name.empty()) {
        bool enter = std::find(flags.begin(), flags.end(), 1) != flags.end();
        bool leave = std::find(flags.begin(), flags.end(), 2) != flags.end();
        bool system = std::find(flags.begin(), flags.end(), 3) != flags.end();
        if (enter) {
          int includer = cur;
          int f = c.file_index(name, system);
          if (is_own(includer) && !c.files[static_cast<std::size_t>(f)].own &&
              !c.files[static_cast<std::size_t>(f)].allowed)
            c.report("foreign_include", includer, line,
                     fmt::format("`#include` of {}", c.files[static_cast<std::size_t>(f)].path.string()));
          stack.push_back({f, name});
        } else if (leave) {
          if (!stack.empty()) stack.pop_back();
          if (stack.empty()) stack.push_back({c.file_index(name, system), name});
          stack.back().shown = name;
        } else if (stack.empty()) {
          stack.push_back({c.file_index(name, system), name});
        } else if (name != stack.back().shown) {
          Frame& top = stack.back();
          const bool to_special = name.size() > 1 && name.front() == '<' && name.back() == '>';
          if (to_special || c.files[static_cast<std::size_t>(top.file)].special) {
            // The preamble: main file -> <built-in> -> <command-line> -> main file. (A `#line` naming one of these
            // inside the solution is caught by the raw scan of its files.)
            top = {c.file_index(name, system), name};
          } else {
            // A #line "file" (or a hand-written line marker): the tokens stay attributed to the real file. Inside
            // the solution's files the raw scan (scan_line_directives) reports it with its true line.
            top.shown = name;  // a #line in someone else's header: follow it
          }
        }
        cur = stack.empty() ? -1 : stack.back().file;
        line = num - 1;  // the newline ending the marker moves to `num`
        i = e;
        push_sep();
        continue;
      }
      // #pragma (and any other directive nvcc keeps): its tokens are checked too (#pragma weak NAME ...).
      push_sep();
      in_directive = true;
      bol = false;
      ++i;
      continue;
    }
    bol = false;
    const int ln = line;
    if (ident_start(ch)) {
      std::size_t j = i;
      while (j < n && ident_char(s[j])) ++j;
      std::string id = s.substr(i, j - i);
      if (j < n && s[j] == '"' && (id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR")) {
        // Raw string literal.
        std::size_t d = j + 1;
        while (d < n && s[d] != '(' && s[d] != '\n' && d - j < 20) ++d;
        std::string delim = s.substr(j + 1, d - j - 1);
        std::string close = ")" + delim + "\"";
        std::size_t end = s.find(close, d);
        if (end == std::string::npos) end = n;
        std::string content = s.substr(std::min(d + 1, n), end - std::min(d + 1, end));
        line += static_cast<int>(std::count(content.begin(), content.end(), '\n'));
        emit(Tok::str, std::move(content), ln);
        i = std::min(n, end + close.size());
        continue;
      }
      if (j < n && (s[j] == '"' || s[j] == '\'') && (id == "u8" || id == "u" || id == "U" || id == "L")) {
        i = j;  // an encoding prefix: lex the literal below
        ch = s[i];
      } else {
        emit(Tok::ident, std::move(id), ln);
        i = j;
        continue;
      }
    }
    if (ch == '"' || ch == '\'') {
      std::size_t j = i + 1;
      while (j < n && s[j] != ch && s[j] != '\n') j += (s[j] == '\\' && j + 1 < n) ? 2 : 1;
      std::string content = s.substr(i + 1, std::min(j, n) - i - 1);
      emit(ch == '"' ? Tok::str : Tok::chr, std::move(content), ln);
      i = (j < n && s[j] == ch) ? j + 1 : j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch)) ||
        (ch == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::size_t j = i + 1;
      while (j < n) {
        char d = s[j];
        if ((d == '+' || d == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E' || s[j - 1] == 'p' || s[j - 1] == 'P')) {
          ++j;
        } else if (d == '\'' && j + 1 < n && ident_char(s[j + 1])) {
          j += 2;
        } else if (ident_char(d) || d == '.') {
          ++j;
        } else {
          break;
        }
      }
      emit(Tok::num, s.substr(i, j - i), ln);
      i = j;
      continue;
    }
    if (ch == '/' && i + 1 < n && s[i + 1] == '/') {  // comments (nvcc -E drops them; be safe)
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    if (ch == '/' && i + 1 < n && s[i + 1] == '*') {
      std::size_t e = s.find("*/", i + 2);
      if (e == std::string::npos) e = n;
      line += static_cast<int>(std::count(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(e), '\n'));
      i = std::min(n, e + 2);
      continue;
    }
    static constexpr std::string_view kPunct3[] = {"<<<", ">>>", "<<=", ">>=", "->*", "..."};
    static constexpr std::string_view kPunct2[] = {"::", "->", "&&", "||", "<<", ">>", "<=", ">=", "==", "!=",
                                                   "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "++", "--"};
    std::string_view rest = std::string_view(s).substr(i, 3);
    std::size_t len = 1;
    for (auto p : kPunct3)
      if (rest.starts_with(p)) len = 3;
    if (len == 1)
      for (auto p : kPunct2)
        if (rest.starts_with(p)) len = 2;
    emit(Tok::punct, s.substr(i, len), ln);
    i += len;
  }
  return own;
}

// ------------------------------------------------------------------------------------------------------------
// Analysis of the own tokens of one pass

struct Chain {
  std::vector<std::string> comps;  // as written
  bool global = false;             // ::name
  bool dependent = false;          // X<...>::name, decltype(...)::name: the qualifier is unknown
  bool member = false;             // .name, ->name
  std::size_t begin = 0, end = 0;  // token range
};

struct PassFacts {
  bool kernel_defined = false;
  bool launches = false;
};

class Analyzer {
 public:
  Analyzer(const std::vector<Tok>& t, Context& c, const RuleSet& rules) : T(t), C(c), R(rules) {}

  void run(PassFacts& facts) {
    collect_aliases();
    collect_definitions();
    for (std::size_t i = 0; i < T.size(); ++i) {
      if (auto ch = chain_at(i)) check_chain(*ch, facts);
      if (P(i, "<<<")) check_launch(i, facts);
      if ((IS(i, "__attribute__") || IS(i, "__attribute")) && P(i + 1, "(") && P(i + 2, "("))
        check_gnu_attribute(i, facts);
      if (IS(i, "__location__") && P(i + 1, "(") && IS(i + 2, "global")) kernel_attribute(close_of(i + 1), facts);
      if (P(i, "[") && P(i + 1, "[")) check_std_attribute(i);
      if (IS(i, "asm") || IS(i, "__asm__") || IS(i, "__asm")) check_asm(i);
    }
  }

 private:
  const std::vector<Tok>& T;
  Context& C;
  const RuleSet& R;
  std::map<std::string, std::vector<std::string>> aliases_;
  std::vector<std::vector<std::string>> directives_;
  std::set<std::string, std::less<>> defined_;

  bool P(std::size_t i, std::string_view s) const { return i < T.size() && T[i].k == Tok::punct && T[i].text == s; }
  bool I(std::size_t i) const { return i < T.size() && T[i].k == Tok::ident; }
  bool IS(std::size_t i, std::string_view s) const { return I(i) && T[i].text == s; }

  void report(std::string_view rule, std::size_t tok, const std::string& what) {
    C.report(rule, T[tok].file, T[tok].line, what);
  }

  // Index of the bracket closing the one at `i` ('(' '[' '{'), or T.size() when none (or a file boundary).
  std::size_t close_of(std::size_t i) const {
    int depth = 0;
    for (std::size_t k = i; k < T.size(); ++k) {
      if (T[k].k == Tok::sep) return T.size();
      if (T[k].k != Tok::punct) continue;
      const auto& p = T[k].text;
      if (p == "(" || p == "[" || p == "{") ++depth;
      if (p == ")" || p == "]" || p == "}") {
        if (--depth == 0) return k;
      }
    }
    return T.size();
  }

  // Top-level comma-separated ranges in (open, close).
  std::vector<std::pair<std::size_t, std::size_t>> args_of(std::size_t open, std::size_t close) const {
    std::vector<std::pair<std::size_t, std::size_t>> a;
    if (close >= T.size() || close == open + 1) return a;
    int depth = 0;
    std::size_t b = open + 1;
    for (std::size_t k = open + 1; k < close; ++k) {
      if (T[k].k != Tok::punct) continue;
      const auto& p = T[k].text;
      if (p == "(" || p == "[" || p == "{") ++depth;
      if (p == ")" || p == "]" || p == "}") --depth;
      if (p == "," && depth == 0) {
        a.emplace_back(b, k);
        b = k + 1;
      }
    }
    a.emplace_back(b, close);
    return a;
  }

  std::optional<Chain> parse_chain(std::size_t j) const {
    Chain ch;
    ch.begin = j;
    std::size_t k = j;
    if (P(k, "::")) {
      ch.global = true;
      ++k;
    }
    if (!I(k)) return std::nullopt;
    ch.comps.push_back(T[k].text);
    ++k;
    while (P(k, "::")) {
      std::size_t m = k + 1;
      if (IS(m, "template")) ++m;
      if (!I(m)) break;
      ch.comps.push_back(T[m].text);
      k = m + 1;
    }
    ch.end = k;
    return ch;
  }

  std::vector<std::string> resolve(const std::vector<std::string>& comps) const {
    auto it = aliases_.find(comps[0]);
    if (it == aliases_.end()) return comps;
    auto r = it->second;
    r.insert(r.end(), comps.begin() + 1, comps.end());
    return r;
  }

  // The chain starting at token i, if one starts there.
  std::optional<Chain> chain_at(std::size_t i) const {
    if (I(i)) {
      if (i > 0 && P(i - 1, "::")) return std::nullopt;  // inside a chain started earlier
      auto ch = parse_chain(i);
      if (ch && i > 0) ch->member = P(i - 1, ".") || P(i - 1, "->");
      return ch;
    }
    if (P(i, "::") && I(i + 1) && !(i > 0 && I(i - 1))) {
      auto ch = parse_chain(i);
      if (!ch) return ch;
      const std::string& prev = i > 0 ? T[i - 1].text : std::string();
      bool after_close = i > 0 && T[i - 1].k == Tok::punct &&
                         (prev == ">" || prev == ">>" || prev == ">>>" || prev == ")");
      if (after_close) {
        ch->global = false;
        ch->dependent = true;
      }
      return ch;
    }
    return std::nullopt;
  }

  void collect_aliases() {
    for (std::size_t i = 0; i + 3 < T.size(); ++i) {
      if (IS(i, "namespace") && I(i + 1) && P(i + 2, "=")) {
        if (auto ch = parse_chain(i + 3)) aliases_[T[i + 1].text] = resolve(ch->comps);
      }
      if (IS(i, "using") && IS(i + 1, "namespace")) {
        if (auto ch = parse_chain(i + 2)) directives_.push_back(resolve(ch->comps));
      }
    }
  }

  // Names of functions the solution defines (`name(...) {`): a common word such as `read` is then its own.
  void collect_definitions() {
    static const std::set<std::string, std::less<>> kControl = {"if", "while", "for", "switch", "catch", "return",
                                                                "sizeof", "alignof", "decltype", "noexcept"};
    for (std::size_t i = 0; i + 1 < T.size(); ++i) {
      if (!I(i) || !P(i + 1, "(") || kControl.count(T[i].text)) continue;
      std::size_t k = close_of(i + 1);
      if (k >= T.size()) continue;
      ++k;
      while (k < T.size() && (IS(k, "const") || IS(k, "noexcept") || IS(k, "override") || IS(k, "final") ||
                              IS(k, "volatile") || IS(k, "mutable")))
        ++k;
      if (P(k, "{")) defined_.insert(T[i].text);
    }
  }

  bool constant_stream(std::size_t b, std::size_t e) const {
    static const std::set<std::string, std::less<>> kOk = {"nullptr", "__null", "NULL", "cudaStream_t", "CUstream",
                                                           "CUstream_st", "d2k_stream", "struct", "static_cast",
                                                           "reinterpret_cast", "const_cast"};
    bool value = false;
    if (b >= e) return false;
    for (std::size_t k = b; k < e; ++k) {
      const auto& t = T[k];
      if (t.k == Tok::num) {
        value = true;
      } else if (t.k == Tok::ident && kOk.count(t.text)) {
        if (t.text == "nullptr" || t.text == "__null" || t.text == "NULL") value = true;
      } else if (t.k == Tok::punct &&
                 (t.text == "(" || t.text == ")" || t.text == "*" || t.text == "<" || t.text == ">")) {
      } else {
        return false;
      }
    }
    return value;
  }

  void check_chain(const Chain& ch, PassFacts& facts) {
    const auto r = ch.dependent ? ch.comps : resolve(ch.comps);
    const std::size_t at = ch.global ? ch.begin + 1 : ch.begin;
    const std::string shown = (ch.global ? "::" : "") + join(ch.comps);
    const bool called = P(ch.end, "(");
    const bool address = ch.begin > 0 && P(ch.begin - 1, "&") && !ch.member;

    // 1. Unqualified C names (and std::name for the <cstdlib>-style ones).
    std::string cand;
    bool via_std = false;
    if (!ch.dependent) {
      if (r.size() == 1) {
        cand = r[0];
      } else if (r.size() == 2 && r[0] == "std" && !ch.member) {
        cand = r[1];
        via_std = true;
      }
    }
    if (!cand.empty()) {
      const std::string base = strip_api_suffix(cand);
      std::vector<std::string> keys = {cand};
      if (base != cand) keys.push_back(base);
      for (const auto& key : keys) {
        auto it = R.plain.find(key);
        if (it == R.plain.end()) continue;
        for (const NameRule* nr : it->second) {
          if (nr->flags & kNoSrc) continue;
          if (ch.member && !(nr->flags & kMember)) continue;
          if (via_std && !(nr->flags & kStd)) continue;
          if ((nr->flags & kCall) && !called && !address) continue;
          if ((nr->flags & kGeneric) && defined_.count(key)) continue;
          report(nr->rule, at, fmt::format("`{}`", shown));
        }
      }
      if (!ch.member) {
        if (kLaunchFunctions.count(base)) facts.launches = true;
        if (called) check_call_arguments(base, ch, at);
      }
    }

    // 2. Qualified names: prefixes of the resolved chain, directly or through a using-directive.
    for (const auto& q : R.qualified) {
      bool hit = !ch.member && !ch.dependent && starts_with(r, q.comps);
      if (!hit && !ch.member && !ch.global && !ch.dependent) {
        for (const auto& u : directives_) {
          if (u.size() < q.comps.size() && starts_with(q.comps, u)) {
            std::vector<std::string> rest(q.comps.begin() + static_cast<long>(u.size()), q.comps.end());
            if (starts_with(r, rest)) {
              hit = true;
              break;
            }
          }
        }
      }
      if (hit) {
        std::string what = q.rule == "forbidden_call" ? fmt::format("`{}` (the task forbids `{}`)", shown, q.display)
                                                      : fmt::format("`{}`", shown);
        report(q.rule, at, what);
      }
    }

    // 3. Unqualified forbidden names match any component, members included (`BlockScan`, `.InclusiveSum`).
    for (const auto& [name, display] : R.forbidden_plain) {
      if (std::find(r.begin(), r.end(), name) != r.end() ||
          std::find(ch.comps.begin(), ch.comps.end(), name) != ch.comps.end())
        report("forbidden_call", at, fmt::format("`{}` (the task forbids `{}`)", shown, display));
    }

    // 4. Library prefixes: any component (cublasSgemm, CUBLAS_OP_N, cutlass::gemm::...).
    std::set<std::string> said;
    for (const auto& pr : R.prefixes) {
      for (const auto& comp : r) {
        if (prefix_match(comp, pr.prefix) && said.insert(pr.rule + pr.prefix).second)
          report(pr.rule, at, fmt::format("`{}` ({})", shown, pr.prefix));
      }
    }
  }

  void check_call_arguments(const std::string& name, const Chain& ch, std::size_t at) {
    const std::size_t open = ch.end;
    const std::size_t close = close_of(open);
    if (close >= T.size()) return;
    auto args = args_of(open, close);
    if (kEntryPointFunctions.count(name)) {
      // Only a literal naming an allowed driver function (the TMA encoders) is accepted.
      std::string lit;
      bool only_strings = !args.empty();
      if (!args.empty()) {
        for (std::size_t k = args[0].first; k < args[0].second; ++k) {
          if (T[k].k == Tok::str)
            lit += T[k].text;
          else
            only_strings = false;
        }
      }
      if (!only_strings || !kEntryPointAllowed.count(lit))
        report("dynamic_loading", at,
               only_strings ? fmt::format("`{}(\"{}\")` (allowed: the cuTensorMap encoders)", name, lit)
                            : fmt::format("`{}` with a name that is not a string literal", name));
    }
    for (const auto& sa : kStreamArgs) {
      if (sa.name != name) continue;
      const int count = static_cast<int>(args.size());
      if (count < sa.nmin || count > sa.nmax) break;  // an overload we do not know, or template commas
      if (count <= sa.idx)
        report("default_stream", at, fmt::format("`{}` without a stream argument", name));
      else if (const auto& a = args[static_cast<std::size_t>(sa.idx)]; constant_stream(a.first, a.second))
        report("default_stream", at, fmt::format("`{}` on a constant stream handle", name));
      break;
    }
  }

  void check_launch(std::size_t i, PassFacts& facts) {
    facts.launches = true;
    int depth = 0;
    std::size_t k = i + 1, b = i + 1;
    std::vector<std::pair<std::size_t, std::size_t>> args;
    for (; k < T.size(); ++k) {
      if (T[k].k == Tok::sep) return;
      if (T[k].k != Tok::punct) continue;
      const auto& p = T[k].text;
      if (p == "(" || p == "[" || p == "{") ++depth;
      if (p == ")" || p == "]" || p == "}") --depth;
      if (depth == 0 && p == ",") {
        args.emplace_back(b, k);
        b = k + 1;
      }
      if (depth == 0 && p == ">>>") {
        args.emplace_back(b, k);
        break;
      }
    }
    if (k >= T.size()) return;
    if (args.size() < 4)
      report("default_stream", i, "a `<<<...>>>` launch without a stream argument");
    else if (args.size() == 4 && constant_stream(args[3].first, args[3].second))
      report("default_stream", i, "a `<<<...>>>` launch on a constant stream handle");
  }

  // A __global__ attribute ending at `close`: a kernel is defined when a body follows before any ';'.
  void kernel_attribute(std::size_t close, PassFacts& facts) {
    if (close >= T.size()) return;
    int depth = 0;
    for (std::size_t k = close + 1; k < T.size() && k < close + 4096; ++k) {
      if (T[k].k == Tok::sep) return;
      if (T[k].k != Tok::punct) continue;
      const auto& p = T[k].text;
      if (p == "(" || p == "[") ++depth;
      if (p == ")" || p == "]") --depth;
      if (depth == 0 && p == ";") return;
      if (depth == 0 && p == "}") return;
      if (depth == 0 && p == "{") {
        facts.kernel_defined = true;
        return;
      }
    }
  }

  static bool init_section(const std::string& s) {
    return s.find("init") != std::string::npos || s.find("fini") != std::string::npos ||
           s.find("ctors") != std::string::npos || s.find("dtors") != std::string::npos;
  }

  void check_gnu_attribute(std::size_t i, PassFacts& facts) {
    const std::size_t close = close_of(i + 1);
    if (close >= T.size()) return;
    static const std::set<std::string, std::less<>> kLoad = {"constructor", "destructor", "__constructor__",
                                                             "__destructor__", "ifunc", "__ifunc__"};
    int depth = 0;
    bool kernel = false;
    for (std::size_t k = i + 3; k < close; ++k) {
      if (T[k].k == Tok::punct) {
        if (T[k].text == "(") ++depth;
        if (T[k].text == ")") --depth;
        continue;
      }
      if (T[k].k != Tok::ident || depth != 0) continue;
      const auto& a = T[k].text;
      if (a == "global" || a == "__global__") kernel = true;
      if (kLoad.count(a)) report("load_time_code", k, fmt::format("`__attribute__(({}))`", a));
      if ((a == "section" || a == "__section__") && P(k + 1, "(") && k + 2 < close && T[k + 2].k == Tok::str &&
          init_section(T[k + 2].text))
        report("load_time_code", k, fmt::format("`__attribute__((section(\"{}\")))`", T[k + 2].text));
    }
    if (kernel) kernel_attribute(close, facts);
  }

  void check_std_attribute(std::size_t i) {
    for (std::size_t k = i + 2; k + 1 < T.size() && k < i + 256; ++k) {
      if (T[k].k == Tok::sep || (P(k, "]") && P(k + 1, "]"))) return;
      if (T[k].k == Tok::ident &&
          (T[k].text == "constructor" || T[k].text == "destructor" || T[k].text == "__constructor__" ||
           T[k].text == "__destructor__" || T[k].text == "ifunc"))
        report("load_time_code", k, fmt::format("`[[{}]]`", T[k].text));
    }
  }

  void check_asm(std::size_t i) {
    std::size_t k = i + 1;
    while (IS(k, "volatile") || IS(k, "__volatile__") || IS(k, "goto") || IS(k, "inline") || IS(k, "__inline")) ++k;
    // An asm label follows a declarator (`int f(int) asm("name")`, `int x asm("name")`); a statement does not.
    const bool label_position = k == i + 1 && i > 0 && (P(i - 1, ")") || P(i - 1, "]") || I(i - 1));
    if (!P(k, "(")) return;
    std::string text;
    for (++k; k < T.size() && T[k].k == Tok::str; ++k) text += T[k].text;
    const std::string lo = lower(text);
    auto has = [&](std::string_view s) { return lo.find(s) != std::string::npos; };
    if (has("syscall") || has("sysenter") || has("int $0x80") || has("int 0x80") || has("int $128") || has("svc #0") ||
        has("svc 0"))
        report("raw_syscall", i, "inline assembly issuing a system call");
    if (has("rdtsc") || has("rdpmc") || has("cntvct_el0"))
      report("host_timer", i, "inline assembly reading a cycle counter");
    if (has(".incbin")) report("file_io", i, "inline assembly embedding a file (.incbin)");
    if (has("init_array") || has("fini_array") || has(".ctors") || has(".dtors"))
      report("load_time_code", i, "inline assembly placing code in an init/fini section");
    // An asm label (`int f() asm("clock_gettime");`) names a symbol: judge the name.
    std::string label = text;
    while (!label.empty() && std::isspace(static_cast<unsigned char>(label.back()))) label.pop_back();
    if (label_position && !label.empty() && std::all_of(label.begin(), label.end(), ident_char) &&
        ident_start(label[0])) {
      const std::string base = strip_api_suffix(label);
      std::vector<std::string> keys = {label};
      if (base != label) keys.push_back(base);
      for (const auto& key : keys) {
        auto it = R.plain.find(key);
        if (it != R.plain.end())
          for (const NameRule* nr : it->second) report(nr->rule, i, fmt::format("an asm label naming `{}`", label));
      }
      for (const auto& pr : R.prefixes)
        if (prefix_match(label, pr.prefix)) report(pr.rule, i, fmt::format("an asm label naming `{}`", label));
      for (const auto& [name, display] : R.forbidden_plain)
        if (label == name) report("forbidden_call", i, fmt::format("an asm label naming `{}`", label));
    }
  }
};

// ------------------------------------------------------------------------------------------------------------
// Raw scan of the solution's own files for line directives (#line, GNU line markers), which gcc -E would turn
// into markers that look like another file's. Translation phases 1-3 in small: line splices joined, comments
// replaced by a space, literals skipped.

void scan_line_directives(const std::string& s, int file, Context& c) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  int line = 1;
  auto splice = [&](std::size_t& k) {  // skips backslash-newlines at k
    while (k + 1 < n && s[k] == '\\' && (s[k + 1] == '\n' || (s[k + 1] == '\r' && k + 2 < n && s[k + 2] == '\n'))) {
      k += s[k + 1] == '\n' ? 2 : 3;
      ++line;
    }
  };
  auto at = [&](std::size_t k) -> char { return k < n ? s[k] : '\0'; };
  bool bol = true;
  while (i < n) {
    splice(i);
    if (i >= n) break;
    char ch = s[i];
    if (ch == '\n') {
      ++line;
      ++i;
      bol = true;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
      ++i;
      continue;
    }
    if (ch == '/' && at(i + 1) == '*') {
      std::size_t e = s.find("*/", i + 2);
      if (e == std::string::npos) e = n;
      line += static_cast<int>(std::count(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(e), '\n'));
      i = std::min(n, e + 2);
      continue;  // a comment is whitespace: bol unchanged
    }
    if (ch == '/' && at(i + 1) == '/') {
      while (i < n && s[i] != '\n') {
        if (s[i] == '\\' && at(i + 1) == '\n') {
          ++line;
          i += 2;
          continue;
        }
        ++i;
      }
      continue;
    }
    if (bol && (ch == '#' || (ch == '%' && at(i + 1) == ':'))) {
      const int dline = line;
      i += ch == '#' ? 1 : 2;
      // whitespace and comments, then the directive's name
      while (i < n) {
        splice(i);
        if (i < n && (s[i] == ' ' || s[i] == '\t')) {
          ++i;
        } else if (at(i) == '/' && at(i + 1) == '*') {
          std::size_t e = s.find("*/", i + 2);
          if (e == std::string::npos) e = n;
          line += static_cast<int>(
              std::count(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(e), '\n'));
          i = std::min(n, e + 2);
        } else {
          break;
        }
      }
      std::string word;
      while (i < n) {
        splice(i);
        if (i < n && ident_char(s[i])) {
          word += s[i++];
        } else {
          break;
        }
      }
      if (word == "line" || (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0]))))
        c.report("line_directive", file, dline, word == "line" ? "a `#line` directive" : "a hand-written line marker");
      bol = false;
      continue;
    }
    bol = false;
    if (ch == '"' || ch == '\'') {
      // A raw string R"d(...)d" spans lines; detect the prefix just before.
      bool raw = ch == '"' && i > 0 && s[i - 1] == 'R';
      if (raw) {
        std::size_t d = i + 1;
        while (d < n && s[d] != '(' && s[d] != '\n' && d - i < 20) ++d;
        std::string close = ")" + s.substr(i + 1, d - i - 1) + "\"";
        std::size_t e = s.find(close, d);
        if (e == std::string::npos) e = n;
        line += static_cast<int>(std::count(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(e), '\n'));
        i = std::min(n, e + close.size());
        continue;
      }
      std::size_t j = i + 1;
      while (j < n && s[j] != ch && s[j] != '\n') {
        if (s[j] == '\\' && j + 1 < n) {
          if (s[j + 1] == '\n') ++line;
          j += 2;
        } else {
          ++j;
        }
      }
      i = j < n && s[j] == ch ? j + 1 : j;
      continue;
    }
    ++i;
  }
}

std::string first_lines(const std::string& s, std::size_t max_lines = 12) {
  std::string out;
  std::size_t lines = 0, p = 0;
  while (p < s.size() && lines < max_lines) {
    auto e = s.find('\n', p);
    if (e == std::string::npos) e = s.size();
    if (!out.empty()) out += " | ";
    out += s.substr(p, e - p);
    p = e + 1;
    ++lines;
  }
  return out;
}

void sort_unique(std::vector<Violation>& v) {
  std::sort(v.begin(), v.end(), [](const Violation& a, const Violation& b) {
    return std::tie(a.file, a.line, a.rule, a.message) < std::tie(b.file, b.line, b.rule, b.message);
  });
  v.erase(std::unique(v.begin(), v.end(),
                      [](const Violation& a, const Violation& b) {
                        return a.file == b.file && a.line == b.line && a.rule == b.rule && a.message == b.message;
                      }),
          v.end());
}

std::string gencode(const std::string& arch) {
  std::string num = arch.substr(arch.find('_') + 1);
  return fmt::format("-gencode=arch=compute_{0},code=sm_{0}", num);
}

// A scratch folder, removed on scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "d2k-compliance-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// ------------------------------------------------------------------------------------------------------------
// ELF

struct ElfSym {
  std::string name;
  bool defined = false;
  unsigned char bind = 0, type = 0, vis = 0;
};

struct ElfInfo {
  std::vector<std::string> needed, search_paths, filters;
  std::vector<ElfSym> dynsyms;  // from the dynamic section, as the loader sees them
  std::vector<ElfSym> symtab;   // .symtab (local and hidden symbols too), when present
};

template <class T>
bool get(const std::string& b, std::uint64_t off, T& out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(&out, b.data() + off, sizeof(T));
  return true;
}

std::optional<std::string> cstr(const std::string& b, std::uint64_t off, std::uint64_t end) {
  end = std::min<std::uint64_t>(end, b.size());
  if (off >= end) return std::nullopt;
  const char* p = b.data() + off;
  const void* z = std::memchr(p, 0, end - off);
  if (!z) return std::nullopt;
  return std::string(p, static_cast<const char*>(z) - p);
}

std::optional<ElfInfo> read_elf(const fs::path& path, std::string& err, bool want_symtab) {
  auto data = read_file(path, std::size_t{1} << 30);
  if (!data) {
    err = "unreadable or larger than 1 GiB";
    return std::nullopt;
  }
  const std::string& b = *data;
  Elf64_Ehdr eh;
  if (!get(b, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    err = "not an ELF file";
    return std::nullopt;
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    err = "not a little-endian ELF64 file";
    return std::nullopt;
  }
  if (eh.e_type != ET_DYN) {
    err = "not a shared object";
    return std::nullopt;
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0) {
    err = "no program headers";
    return std::nullopt;
  }
  std::vector<Elf64_Phdr> loads;
  std::optional<Elf64_Phdr> dyn;
  for (unsigned k = 0; k < eh.e_phnum; ++k) {
    Elf64_Phdr ph;
    if (!get(b, eh.e_phoff + std::uint64_t{k} * sizeof(Elf64_Phdr), ph)) {
      err = "truncated program headers";
      return std::nullopt;
    }
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_DYNAMIC) dyn = ph;
  }
  if (!dyn) {
    err = "no dynamic section";
    return std::nullopt;
  }
  auto v2o = [&](std::uint64_t va) -> std::optional<std::uint64_t> {
    for (const auto& l : loads)
      if (va >= l.p_vaddr && va - l.p_vaddr < l.p_filesz) return va - l.p_vaddr + l.p_offset;
    return std::nullopt;
  };
  std::uint64_t strtab = 0, strsz = 0, symtab = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0;
  std::vector<std::uint64_t> needed_off, path_off, filter_off;
  for (std::uint64_t off = dyn->p_offset; off + sizeof(Elf64_Dyn) <= dyn->p_offset + dyn->p_filesz;
       off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    if (!get(b, off, d)) break;
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_NEEDED: needed_off.push_back(d.d_un.d_val); break;
      case DT_STRTAB: strtab = d.d_un.d_ptr; break;
      case DT_STRSZ: strsz = d.d_un.d_val; break;
      case DT_SYMTAB: symtab = d.d_un.d_ptr; break;
      case DT_SYMENT: syment = d.d_un.d_val; break;
      case DT_HASH: hash = d.d_un.d_ptr; break;
      case DT_GNU_HASH: gnu_hash = d.d_un.d_ptr; break;
      case DT_RPATH:
      case DT_RUNPATH: path_off.push_back(d.d_un.d_val); break;
      case DT_AUXILIARY:
      case DT_FILTER: filter_off.push_back(d.d_un.d_val); break;
      default: break;
    }
  }
  auto str_off = strtab ? v2o(strtab) : std::nullopt;
  if (!str_off) {
    err = "no dynamic string table";
    return std::nullopt;
  }
  const std::uint64_t str_end = *str_off + strsz;
  ElfInfo info;
  auto dstr = [&](std::uint64_t o) { return cstr(b, *str_off + o, str_end); };
  for (auto o : needed_off) info.needed.push_back(dstr(o).value_or("?"));
  for (auto o : path_off) info.search_paths.push_back(dstr(o).value_or("?"));
  for (auto o : filter_off) info.filters.push_back(dstr(o).value_or("?"));

  // Symbol count: from DT_HASH's nchain, or by walking DT_GNU_HASH's chains to the last symbol.
  std::uint64_t nsyms = 0;
  if (auto h = hash ? v2o(hash) : std::nullopt) {
    std::uint32_t nbucket = 0, nchain = 0;
    if (get(b, *h, nbucket) && get(b, *h + 4, nchain)) nsyms = nchain;
  } else if (auto g = gnu_hash ? v2o(gnu_hash) : std::nullopt) {
    std::uint32_t nbuckets = 0, symoffset = 0, bloom_size = 0, bloom_shift = 0;
    if (get(b, *g, nbuckets) && get(b, *g + 4, symoffset) && get(b, *g + 8, bloom_size) &&
        get(b, *g + 12, bloom_shift)) {
      const std::uint64_t buckets = *g + 16 + std::uint64_t{bloom_size} * 8;
      const std::uint64_t chains = buckets + std::uint64_t{nbuckets} * 4;
      std::uint32_t last = 0;
      for (std::uint32_t k = 0; k < nbuckets; ++k) {
        std::uint32_t v = 0;
        if (!get(b, buckets + std::uint64_t{k} * 4, v)) break;
        last = std::max(last, v);
      }
      if (last < symoffset) {
        nsyms = symoffset;
      } else {
        for (std::uint64_t guard = 0; guard < (1u << 24); ++guard) {
          std::uint32_t cv = 1;
          if (!get(b, chains + std::uint64_t{last - symoffset} * 4, cv)) break;
          if (cv & 1u) break;
          ++last;
        }
        nsyms = std::uint64_t{last} + 1;
      }
    }
  }
  if (syment != sizeof(Elf64_Sym)) syment = sizeof(Elf64_Sym);
  if (auto so = symtab ? v2o(symtab) : std::nullopt) {
    nsyms = std::min<std::uint64_t>(nsyms, (b.size() - std::min<std::uint64_t>(*so, b.size())) / syment);
    for (std::uint64_t k = 1; k < nsyms; ++k) {
      Elf64_Sym s;
      if (!get(b, *so + k * syment, s)) break;
      ElfSym e;
      e.name = dstr(s.st_name).value_or("");
      if (e.name.empty()) continue;
      e.defined = s.st_shndx != SHN_UNDEF;
      e.bind = ELF64_ST_BIND(s.st_info);
      e.type = ELF64_ST_TYPE(s.st_info);
      e.vis = ELF64_ST_VISIBILITY(s.st_other);
      info.dynsyms.push_back(std::move(e));
    }
  }

  // .symtab, through the section headers (absent when stripped).
  if (want_symtab && eh.e_shoff && eh.e_shentsize == sizeof(Elf64_Shdr)) {
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    bool ok = true;
    for (unsigned k = 0; k < eh.e_shnum && ok; ++k)
      ok = get(b, eh.e_shoff + std::uint64_t{k} * sizeof(Elf64_Shdr), sh[k]);
    for (unsigned k = 0; ok && k < eh.e_shnum; ++k) {
      if (sh[k].sh_type != SHT_SYMTAB || sh[k].sh_entsize != sizeof(Elf64_Sym) || sh[k].sh_link >= eh.e_shnum) continue;
      const auto& strs = sh[sh[k].sh_link];
      const std::uint64_t count = std::min<std::uint64_t>(sh[k].sh_size / sizeof(Elf64_Sym), 1u << 24);
      for (std::uint64_t j = 1; j < count; ++j) {
        Elf64_Sym s;
        if (!get(b, sh[k].sh_offset + j * sizeof(Elf64_Sym), s)) break;
        ElfSym e;
        e.name = cstr(b, strs.sh_offset + s.st_name, strs.sh_offset + strs.sh_size).value_or("");
        if (e.name.empty()) continue;
        e.defined = s.st_shndx != SHN_UNDEF;
        e.bind = ELF64_ST_BIND(s.st_info);
        e.type = ELF64_ST_TYPE(s.st_info);
        e.vis = ELF64_ST_VISIBILITY(s.st_other);
        info.symtab.push_back(std::move(e));
      }
    }
  }
  return info;
}

std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return name;
  return d.get();
}

// CUB_300001_SM_900, THRUST_300001_SM_900_NS, CUB_NS: CCCL's versioned inline namespaces.
bool cccl_inline_namespace(std::string_view w) {
  for (std::string_view p : {"CUB_", "THRUST_", "CCCL_"}) {
    if (!w.starts_with(p)) continue;
    auto rest = w.substr(p.size());
    return w.ends_with("_NS") || (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0])));
  }
  return false;
}

// Drops the inline and versioned namespaces library implementations add (std::chrono::_V2, std::__cxx11,
// cub::CUB_300000_SM_900_NS, cuda::std::__4), so "cub::DeviceScan" matches what the user wrote.
std::string normalize_demangled(const std::string& d) {
  std::string out;
  std::size_t i = 0;
  while (i < d.size()) {
    if (ident_start(d[i]) && (i == 0 || !ident_char(d[i - 1]))) {
      std::size_t j = i;
      while (j < d.size() && ident_char(d[j])) ++j;
      std::string_view w(d.data() + i, j - i);
      bool inline_ns = w == "__cxx11" || w == "_V2" ||
                       (w.size() >= 3 && w.starts_with("__") && std::all_of(w.begin() + 2, w.end(), [](char c) {
                          return std::isdigit(static_cast<unsigned char>(c));
                        })) ||
                       cccl_inline_namespace(w);
      if (inline_ns && d.compare(j, 2, "::") == 0) {
        i = j + 2;
        continue;
      }
      out.append(w);
      i = j;
      continue;
    }
    out += d[i++];
  }
  return out;
}

// `text` (a normalized demangled name) mentions the qualified `name` as a whole: not preceded by an identifier
// character or "::", not followed by an identifier character.
bool mentions(const std::string& text, const std::string& name) {
  for (std::size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    bool before_ok = p == 0 || (!ident_char(text[p - 1]) && !(p >= 2 && text.compare(p - 2, 2, "::") == 0) &&
                                text[p - 1] != ':');
    std::size_t e = p + name.size();
    bool after_ok = e >= text.size() || !ident_char(text[e]);
    if (before_ok && after_ok) return true;
  }
  return false;
}

// `text` has `name` as a whole identifier (any qualification).
bool mentions_component(const std::string& text, const std::string& name) {
  for (std::size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    std::size_t e = p + name.size();
    if ((p == 0 || !ident_char(text[p - 1])) && (e >= text.size() || !ident_char(text[e]))) return true;
  }
  return false;
}

bool allowed_needed(const std::string& name) {
  static const char* kBases[] = {"libcudart.so", "libc.so",       "libm.so",      "libstdc++.so",
                                 "libgcc_s.so",  "libdl.so",      "libpthread.so", "librt.so"};
  for (const char* base : kBases) {
    std::string_view b(base);
    if (name == b) return true;
    if (name.starts_with(b) && name.size() > b.size() && name[b.size()] == '.' &&
        std::all_of(name.begin() + static_cast<long>(b.size()), name.end(),
                    [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); }))
      return true;
  }
  return name.starts_with("ld-linux");
}

std::vector<fs::path> default_lib_dirs() {
  std::vector<fs::path> dirs;
  auto add_list = [&](const char* v) {
    if (!v) return;
    std::string_view s(v);
    std::size_t p = 0;
    while (p <= s.size()) {
      auto q = s.find(':', p);
      auto d = s.substr(p, q == std::string_view::npos ? std::string_view::npos : q - p);
      if (!d.empty()) dirs.emplace_back(std::string(d));
      if (q == std::string_view::npos) break;
      p = q + 1;
    }
  };
  add_list(std::getenv("LD_LIBRARY_PATH"));
  std::vector<fs::path> roots;
  for (const char* e : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(e); v && *v) roots.emplace_back(v);
  if (auto nv = which("nvcc")) roots.push_back(canonical_or(*nv).parent_path().parent_path());
  roots.emplace_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"})
      dirs.push_back(r / sub);
  std::error_code ec;
  if (fs::is_directory("/etc/ld.so.conf.d", ec)) {
    std::vector<fs::path> confs;
    for (const auto& e : fs::directory_iterator("/etc/ld.so.conf.d", ec))
      if (e.path().extension() == ".conf") confs.push_back(e.path());
    std::sort(confs.begin(), confs.end());
    for (const auto& cf : confs) {
      auto text = read_file(cf, 1u << 16);
      if (!text) continue;
      std::size_t p = 0;
      while (p < text->size()) {
        auto e = text->find('\n', p);
        if (e == std::string::npos) e = text->size();
        std::string l = text->substr(p, e - p);
        p = e + 1;
        while (!l.empty() && std::isspace(static_cast<unsigned char>(l.back()))) l.pop_back();
        if (l.starts_with("/")) dirs.emplace_back(l);
      }
    }
  }
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"})
    dirs.emplace_back(d);
  return dirs;
}

// The defined dynamic symbols of a system library, cached by path, size and modification time.
std::shared_ptr<const std::set<std::string>> exported_names(const fs::path& lib) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::set<std::string>>> cache;
  std::error_code ec;
  auto canon = fs::canonical(lib, ec);
  if (ec) return nullptr;
  auto size = fs::file_size(canon, ec);
  auto mtime = fs::last_write_time(canon, ec).time_since_epoch().count();
  std::string key = fmt::format("{}|{}|{}", canon.string(), size, mtime);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::string err;
  auto info = read_elf(canon, err, false);
  if (!info) return nullptr;
  auto names = std::make_shared<std::set<std::string>>();
  for (const auto& s : info->dynsyms)
    if (s.defined && s.bind != STB_LOCAL) names->insert(s.name);
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = names;
  return names;
}

std::optional<fs::path> find_library(const std::string& name, const std::vector<fs::path>& dirs) {
  std::error_code ec;
  for (const auto& d : dirs) {
    auto p = d / name;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

std::string shorten(const std::string& s, std::size_t max = 160) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}


// A symbol of the built library (undefined: what it calls; defined: what it contains) against the rules. C names
// by the name tables (undefined only) and the library prefixes; C++ names demangled, by the qualified rules, the
// library namespaces and the task's unqualified forbidden names. Returns whether any rule matched.
template <class Report>
bool match_symbol(const std::string& name, const RuleSet& rules, bool undefined, Report&& report) {
  bool matched = false;
  const char* how = undefined ? "undefined symbol" : "the library contains";
  if (!name.starts_with("_Z")) {
    if (!undefined) return false;
    const std::string base = strip_api_suffix(name);
    std::vector<std::string> keys = {name};
    if (base != name) keys.push_back(base);
    for (const auto& key : keys) {
      auto it = rules.plain.find(key);
      if (it == rules.plain.end()) continue;
      for (const NameRule* nr : it->second) {
        if (!(nr->flags & kLib)) continue;
        report(nr->rule, name, fmt::format("{} `{}`", how, name));
        matched = true;
      }
    }
    for (const auto& pr : rules.prefixes)
      if (prefix_match(name, pr.prefix)) {
        report(pr.rule, name, fmt::format("{} `{}` ({})", how, name, pr.prefix));
        matched = true;
      }
    for (const auto& [fname, display] : rules.forbidden_plain)
      if (name == fname) {
        report("forbidden_call", display, fmt::format("{} `{}` (the task forbids `{}`)", how, name, display));
        matched = true;
      }
    return matched;
  }
  const std::string d = normalize_demangled(demangle(name));
  for (const auto& q : rules.qualified) {
    if (!(q.flags & kLib) || (!undefined && q.rule != "forbidden_call")) continue;
    if (mentions(d, join(q.comps))) {
      report(q.rule, q.display, q.rule == "forbidden_call"
                         ? fmt::format("{} `{}` (the task forbids `{}`)", how, shorten(d), q.display)
                         : fmt::format("{} `{}`", how, shorten(d)));
      matched = true;
    }
  }
  for (const auto& [fname, display] : rules.forbidden_plain)
    if (mentions_component(d, fname)) {
      report("forbidden_call", display, fmt::format("{} `{}` (the task forbids `{}`)", how, shorten(d), display));
      matched = true;
    }
  for (const auto& pr : rules.prefixes) {
    const std::string ns = pr.prefix + "::";
    for (std::size_t p = d.find(ns); p != std::string::npos; p = d.find(ns, p + 1)) {
      if (p == 0 || (!ident_char(d[p - 1]) && d[p - 1] != ':')) {
        report(pr.rule, pr.prefix, fmt::format("{} `{}` ({})", how, shorten(d), pr.prefix));
        matched = true;
        break;
      }
    }
  }
  return matched;
}

}  // namespace

// ==============================================================================================================

std::vector<Violation> check_cuda_source(const std::filesystem::path& source, const Requirements& req,
                                         const std::string& nvcc, const std::filesystem::path& include_dir,
                                         const std::string& arch, CudaSourceFacts* facts) {
  Context c;
  c.report_dir = source.parent_path();
  std::error_code ec;
  const fs::path src = canonical_or(fs::absolute(source, ec));
  c.own_dir = src.parent_path();
  c.include_dir = include_dir.empty() ? fs::path() : canonical_or(fs::absolute(include_dir, ec));
  const std::string src_name = source.string();
  auto fail = [&](const std::string& msg) {
    return std::vector<Violation>{{"preprocess_error", src_name, 0, msg}};
  };
  if (!fs::is_regular_file(src, ec)) return fail("the source file does not exist");
  if (arch.find('_') == std::string::npos) throw std::invalid_argument("arch must look like sm_90a: " + arch);

  const std::string common = fmt::format("-E -x cu -std=c++17 -O3 {} -Xcompiler -fPIC{}", gencode(arch),
                                         c.include_dir.empty() ? "" : " -I" + shell_quote(c.include_dir.string()));
  // 1. What the device pass defines and where nvcc finds CUDA's headers.
  int st = 0;
  TempDir tmp;
  const std::string nv = shell_quote(nvcc);
  std::string dry = run_shell(fmt::format("{} {} --dryrun {} -o {}", nv, common, shell_quote(src.string()),
                                          shell_quote((tmp.path / "dry.ii").string())),
                              st);
  if (st == 126 || st == 127 || st == -1)
    throw std::runtime_error(fmt::format("nvcc is not usable ({}): {}", nvcc, first_lines(dry, 4)));
  NvccPlan plan;
  {
    std::size_t p = 0;
    while (p < dry.size()) {
      auto e = dry.find('\n', p);
      if (e == std::string::npos) e = dry.size();
      std::string_view l(dry.data() + p, e - p);
      p = e + 1;
      if (!l.starts_with("#$ ") || l.find(" -E ") == std::string_view::npos) continue;
      auto args = split_command(l.substr(3));
      for (std::size_t k = 0; k < args.size(); ++k) {
        const auto& a = args[k];
        if (a.starts_with("-D")) {
          std::string m = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
          if ((m.starts_with("__CUDA_ARCH") && m != "__CUDA_ARCH_LIST__") || m == "CUDA_DOUBLE_MATH_FUNCTIONS")
            plan.arch_macros.push_back(m);
        } else if (a == "-I" || a == "-isystem" || a == "-idirafter") {
          if (k + 1 < args.size()) plan.include_roots.push_back(canonical_or(args[++k]));
        } else if (a.starts_with("-I")) {
          plan.include_roots.push_back(canonical_or(a.substr(2)));
        } else if (a.starts_with("-isystem")) {
          plan.include_roots.push_back(canonical_or(a.substr(8)));
        }
      }
      break;
    }
  }
  if (plan.arch_macros.empty()) plan.arch_macros = {"__CUDA_ARCH__", "CUDA_DOUBLE_MATH_FUNCTIONS"};
  if (auto nvp = which(nvcc)) {
    auto root = canonical_or(*nvp).parent_path().parent_path();
    plan.include_roots.push_back(root / "include");
    plan.include_roots.push_back(root / "targets");
  }
  c.include_roots = plan.include_roots;

  // 2. The device pass (what cicc compiles) and the host pass (what cudafe++ and the host compiler see).
  std::string undef;
  for (const auto& m : plan.arch_macros) undef += (undef.empty() ? "" : ",") + std::string("-U") + m;
  struct PassOut {
    std::string text;
    bool device;
  };
  std::vector<PassOut> passes;
  for (bool device : {true, false}) {
    auto out = tmp.path / (device ? "device.ii" : "host.ii");
    std::string cmd = fmt::format("ulimit -f 1048576; timeout 120 {} {}{} {} -o {}", nv, common,
                                  device ? "" : " -Xcompiler " + shell_quote(undef), shell_quote(src.string()),
                                  shell_quote(out.string()));
    std::string log = run_shell(cmd, st);
    if (st == 126 || st == 127)
      throw std::runtime_error(fmt::format("nvcc is not usable ({}): {}", nvcc, first_lines(log, 4)));
    if (st == 124) return fail("nvcc -E ran past 120 s");
    if (st != 0) return fail(fmt::format("nvcc -E failed ({} pass): {}", device ? "device" : "host", first_lines(log)));
    auto text = read_file(out, std::size_t{512} << 20);
    if (!text) return fail("the preprocessed source is unreadable or larger than 512 MiB");
    passes.push_back({std::move(*text), device});
  }

  // 3. Tokens of the solution's own files, checked pass by pass.
  const RuleSet rules(req);
  bool kernel_defined = false, launches = false;
  for (const auto& p : passes) {
    auto toks = lex_pass(p.text, c);
    PassFacts pf;
    Analyzer(toks, c, rules).run(pf);
    if (p.device) kernel_defined = pf.kernel_defined;  // device code exists only where the device pass has it
    if (!p.device) launches = pf.launches;             // launches are host code
    if (facts)
      for (const auto& t : toks)
        if (t.k == Tok::ident && t.text == "exit") facts->names_exit = true;
  }
  if (!kernel_defined)
    c.out.push_back({"no_kernel", src_name, 0,
                     "the solution's own files define no __global__ function: " + std::string(why("no_kernel"))});
  else if (!launches)
    c.out.push_back({"no_kernel", src_name, 0,
                     "the solution never launches a kernel (no <<<...>>> and no cudaLaunchKernel): " +
                         std::string(why("no_kernel"))});

  // 4. #line directives and hand-written line markers in the solution's own files.
  int main_index = c.file_index(src.string(), false);
  std::set<int> own_files = {main_index};
  for (std::size_t k = 0; k < c.files.size(); ++k)
    if (c.files[k].own) own_files.insert(static_cast<int>(k));
  for (int f : own_files) {
    if (auto text = read_file(c.files[static_cast<std::size_t>(f)].path, 16u << 20)) scan_line_directives(*text, f, c);
  }

  sort_unique(c.out);
  return c.out;
}

std::vector<Violation> check_cuda_library(const std::filesystem::path& so, const Requirements& req,
                                          const std::vector<std::filesystem::path>& lib_dirs,
                                          const CudaSourceFacts* facts) {
  std::vector<Violation> out;
  const std::string file = so.string();
  auto add = [&](std::string_view rule, const std::string& what) {
    out.push_back({std::string(rule), file, 0, fmt::format("{}: {}", what, why(rule))});
  };
  std::string err;
  auto info = read_elf(so, err, true);
  if (!info) {
    add("bad_library", err);
    return out;
  }
  const RuleSet rules(req);

  // 1. The entry point.
  bool entry = false;
  for (const auto& s : info->dynsyms)
    if (s.name == "d2k_solve" && s.defined && s.type == STT_FUNC && (s.bind == STB_GLOBAL || s.bind == STB_WEAK) &&
        (s.vis == STV_DEFAULT || s.vis == STV_PROTECTED))
      entry = true;
  if (!entry) add("no_entry", "no exported function `d2k_solve`");

  // 2. Needed libraries, search paths, filters.
  std::vector<std::string> allowed;
  for (const auto& n : info->needed) {
    if (allowed_needed(n)) {
      allowed.push_back(n);
      continue;
    }
    std::string which_vendor;
    for (const auto& pr : rules.prefixes)
      if (n.starts_with("lib" + pr.prefix)) which_vendor = pr.prefix;
    add("linked_library", which_vendor.empty() ? fmt::format("needs `{}`", n)
                                               : fmt::format("needs `{}` ({})", n, which_vendor));
  }
  for (const auto& p : info->search_paths) add("linked_library", fmt::format("sets a library search path `{}`", p));
  for (const auto& f : info->filters) add("linked_library", fmt::format("declares a filter library `{}`", f));

  // 3. The definitions the allowed libraries export (to resolve undefined symbols, and to spot interposition).
  const auto dirs = lib_dirs.empty() ? default_lib_dirs() : lib_dirs;
  std::set<std::string> provided;
  bool have_libc = false, resolvable = true;
  std::vector<std::string> tolerated_prefixes;
  for (const auto& n : allowed) {
    auto path = find_library(n, dirs);
    auto names = path ? exported_names(*path) : nullptr;
    if (names) {
      provided.insert(names->begin(), names->end());
      if (n.starts_with("libc.so")) have_libc = true;
      continue;
    }
    // Not found here: tolerate the names that library's namespace covers, or give up on resolution.
    if (n.starts_with("libcudart.so")) {
      tolerated_prefixes.insert(tolerated_prefixes.end(), {"cuda", "__cuda"});
    } else if (n.starts_with("libstdc++.so")) {
      tolerated_prefixes.insert(tolerated_prefixes.end(), {"_Z", "__cxa", "__gxx", "__dynamic_cast"});
    } else if (n.starts_with("libgcc_s.so")) {
      tolerated_prefixes.insert(tolerated_prefixes.end(), {"_Unwind", "__"});
    } else {
      resolvable = false;
    }
  }
  if (!have_libc) resolvable = false;  // a library that needs no libc is odd; do not guess
  static const std::set<std::string, std::less<>> kWeakOk = {"__gmon_start__", "_ITM_deregisterTMCloneTable",
                                                             "_ITM_registerTMCloneTable", "_Jv_RegisterClasses"};

  // 4. Undefined symbols: rules by name, then resolution against the allowed libraries.
  bool registers_kernels = false;
  std::set<std::string> said;
  // One violation per rule and matched name (std::thread brings several symbols; a CUB algorithm dozens).
  auto once = [&](std::string_view rule, const std::string& key, const std::string& what) {
    if (said.insert(std::string(rule) + "|" + key).second) add(rule, what);
  };
  for (const auto& s : info->dynsyms) {
    if (s.defined) continue;
    if (s.name == "__cudaRegisterFunction") registers_kernels = true;
    // nvcc's host stubs of non-inline __device__ functions call exit(); the solution's own `exit` is named in its
    // source (and caught there, or here when named without a call).
    const bool stub_exit = s.name == "exit" && facts && !facts->names_exit;
    const bool matched = !stub_exit && match_symbol(s.name, rules, true, once);
    if (matched || !resolvable) continue;
    if (provided.count(s.name)) continue;
    if (s.bind == STB_WEAK && kWeakOk.count(s.name)) continue;
    if (std::any_of(tolerated_prefixes.begin(), tolerated_prefixes.end(),
                    [&](const std::string& p) { return s.name.starts_with(p); }))
      continue;
    once("unresolved_symbol", s.name, fmt::format("undefined symbol `{}`", shorten(demangle(s.name))));
  }
  if (!registers_kernels)
    add("no_kernel", "the library registers no kernel with the CUDA runtime (no `__cudaRegisterFunction`)");

  // 5. Exported definitions that would interpose a library function (C names only: C++ template instances that
  //    libstdc++ also exports are normal).
  static const std::set<std::string, std::less<>> kLinkerSymbols = {
      "d2k_solve", "_init", "_fini", "_edata", "_end", "__bss_start", "_DYNAMIC", "_GLOBAL_OFFSET_TABLE_",
      "__data_start", "__dso_handle"};
  for (const auto& s : info->dynsyms) {
    if (!s.defined || s.name.starts_with("_Z") || kLinkerSymbols.count(s.name)) continue;
    if (s.bind == STB_LOCAL || !(s.vis == STV_DEFAULT || s.vis == STV_PROTECTED)) continue;
    const std::string base = strip_api_suffix(s.name);
    bool known = provided.count(s.name) || rules.plain.count(s.name) || rules.plain.count(base) ||
                 s.name.starts_with("cuda") || s.name.starts_with("__cuda") ||
                 (s.name.size() > 2 && s.name.starts_with("cu") && std::isupper(static_cast<unsigned char>(s.name[2])));
    if (known) once("symbol_interposition", s.name, fmt::format("exports `{}`", s.name));
  }

  // 6. Definitions (template instances, kernel stubs) of names the task forbids, in .dynsym and .symtab.
  for (const auto* list : {&info->dynsyms, &info->symtab})
    for (const auto& s : *list)
      if (s.defined && s.name.starts_with("_Z")) match_symbol(s.name, rules, false, once);

  sort_unique(out);
  return out;
}

}  // namespace d2k
