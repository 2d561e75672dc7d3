#include "eval/cuda_build.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "core/files.hpp"

namespace d2k {
namespace {

std::string run_capture(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen((cmd + " </dev/null 2>&1").c_str(), "r");  // stdin closed: `#include "/dev/stdin"` gets nothing
  if (!p) {
    status = -1;
    return "popen failed";
  }
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string gencode(const std::string& arch) {
  // sm_90a needs the -gencode form: the -arch shorthand also runs a plain sm_90 pass that rejects wgmma.
  std::string num = arch.substr(arch.find('_') + 1);
  return fmt::format("-gencode=arch=compute_{0},code=sm_{0}", num);
}

}  // namespace

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::filesystem::path default_cache_dir() {
  if (const char* c = std::getenv("D2K_CACHE"); c && *c) return std::filesystem::path(c);
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "d2k";
  return std::filesystem::temp_directory_path() / "d2k-cache";
}

CudaBuild build_cuda_solution(const std::filesystem::path& source, const CudaBuildOptions& opt) {
  CudaBuild b;
  auto text = read_file(source, 4u << 20);
  if (!text) {
    b.log = fmt::format("{}: unreadable or larger than 4 MiB", source.string());
    return b;
  }
  int st = 0;
  std::string version = run_capture(shell_quote(opt.nvcc) + " --version", st);
  if (st != 0) {
    b.log = fmt::format("nvcc is not usable ({}): {}", opt.nvcc, version);
    return b;
  }
  // -cudart shared: the CUDA runtime stays a needed library, so the solution's runtime calls are undefined symbols
  // that the compliance checks can read (a static cudart would bring its own dlopen and pthread_create).
  std::string flags =
      // NVTX off: CCCL's device-wide algorithms would otherwise bring its injection loader (dlopen, getenv).
      fmt::format("-std=c++17 -O3 {} -Xcompiler -fPIC -shared -lineinfo -cudart shared -DNVTX_DISABLE -DCCCL_DISABLE_NVTX",
                  gencode(opt.arch));
  // No rpath: in the worker, torch has loaded libcudart.so.13 already, and dlopen reuses it by its soname.
  auto header = read_file(opt.include_dir / "d2k" / "solution.h").value_or("");
  auto key = sha256_hex(*text + "\n--flags--\n" + flags + "\n--nvcc--\n" + version + "\n--abi--\n" + header);
  std::filesystem::create_directories(opt.cache_dir);
  b.library = opt.cache_dir / (key + ".so");
  std::error_code ec;
  if (std::filesystem::is_regular_file(b.library, ec)) {
    b.ok = b.cached = true;
    b.log = read_file(opt.cache_dir / (key + ".log")).value_or("");
    return b;
  }
  auto tmp = opt.cache_dir / fmt::format("{}.{}.tmp.so", key, ::getpid());
  b.command = fmt::format("timeout {} {} {} -I{} -o {} {}", opt.timeout_s, shell_quote(opt.nvcc), flags,
                          shell_quote(opt.include_dir.string()), shell_quote(tmp.string()), shell_quote(source.string()));
  auto t0 = std::chrono::steady_clock::now();
  b.log = run_capture(b.command, st);
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st == 124) b.log += fmt::format("\nnvcc ran past {} s and was stopped", opt.timeout_s);
  if (st != 0) {
    std::filesystem::remove(tmp, ec);
    return b;
  }
  write_file_atomic(opt.cache_dir / (key + ".log"), b.log);
  std::filesystem::rename(tmp, b.library);  // atomic: concurrent builds of one key both succeed
  b.ok = true;
  return b;
}

}  // namespace d2k
