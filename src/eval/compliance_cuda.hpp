#pragma once
// Static compliance checks for CUDA C++ solutions (docs/COMPLIANCE.md, "CUDA C++ static rules").
//
// check_cuda_source preprocesses the solution with nvcc exactly as the build does (a device pass with
// __CUDA_ARCH__ of the build's arch and a host pass without it), maps every token back to its file and line
// through the preprocessor's line markers, and checks the tokens of the solution's own files (those under the
// solution's folder) against the rules: macros, token pasting and includes cannot hide a name.
//
// check_cuda_library inspects the shared object the build made (ELF dynamic section, parsed here): the needed
// libraries, the undefined symbols (which rules they match, and whether the allowed libraries define them), the
// exported symbols (d2k_solve present, no interposition of library functions) and kernel registration.
#include <filesystem>
#include <string>
#include <vector>

#include "eval/compliance.hpp"
#include "task/manifest.hpp"

namespace d2k {

// What the source check saw of the solution's own code that the library check needs. nvcc writes host code of its
// own: every __device__ function that is not inline (a plain `__device__ int f()`, one in an anonymous namespace,
// a __noinline__ one) gets a host stub that calls exit(). An undefined `exit` in the library is therefore the
// solution's doing only when its own files name `exit`.
struct CudaSourceFacts {
  bool names_exit = false;
};

// `arch` must be the build's (CudaBuildOptions::arch): code under `#if __CUDA_ARCH__ == ...` is judged as built.
// Violations are sorted by file, line and rule. A source nvcc cannot preprocess gives the violation
// "preprocess_error"; an nvcc that cannot be run at all throws std::runtime_error (a harness failure).
// `facts`, when given, receives what check_cuda_library needs to know of the source.
std::vector<Violation> check_cuda_source(const std::filesystem::path& source, const Requirements& req,
                                         const std::string& nvcc, const std::filesystem::path& include_dir,
                                         const std::string& arch = "sm_90a", CudaSourceFacts* facts = nullptr);

// `lib_dirs`: where to look for the allowed needed libraries (libcudart, libc, libstdc++, ...) to check that every
// undefined symbol is defined by one of them; empty: LD_LIBRARY_PATH, the CUDA toolkit of the nvcc on PATH
// ($CUDA_HOME, /usr/local/cuda), /etc/ld.so.conf.d and the system library folders. `facts`: the source check's (see
// CudaSourceFacts); without them an undefined `exit` always counts against the solution.
std::vector<Violation> check_cuda_library(const std::filesystem::path& so, const Requirements& req,
                                          const std::vector<std::filesystem::path>& lib_dirs = {},
                                          const CudaSourceFacts* facts = nullptr);

}  // namespace d2k
