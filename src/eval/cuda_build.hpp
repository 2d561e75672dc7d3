#pragma once
// Builds a CUDA C++ solution into a shared library with nvcc, cached by a digest of the source,
// the flags and the toolchain's version, so re-evaluation compiles nothing.
#include <filesystem>
#include <string>

namespace d2k {

struct CudaBuild {
  bool ok = false;
  bool cached = false;
  std::filesystem::path library;
  std::string log;      // nvcc's output (errors and warnings)
  std::string command;  // what was run
  double seconds = 0;
};

struct CudaBuildOptions {
  std::string nvcc = "nvcc";
  std::string arch = "sm_90a";  // sm_90a -> -gencode=arch=compute_90a,code=sm_90a
  std::filesystem::path cache_dir;  // the folder of built libraries
  std::filesystem::path include_dir;  // holds d2k/solution.h
  int timeout_s = 300;
};

CudaBuild build_cuda_solution(const std::filesystem::path& source, const CudaBuildOptions& opt);

// The cache root: $D2K_CACHE or ~/.cache/d2k (CUDA builds in cuda/, device calibrations in calibration/).
std::filesystem::path default_cache_dir();

// SHA-256 of data, in hex (OpenSSL): cache keys and the solution hash in traces.
std::string sha256_hex(const std::string& data);

}  // namespace d2k
