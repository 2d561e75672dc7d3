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

// `arch` must be the build's (CudaBuildOptions::arch): code under `#if __CUDA_ARCH__ == ...` is judged as built.
// Violations are sorted by file, line and rule. A source nvcc cannot preprocess gives the violation
// "preprocess_error"; an nvcc that cannot be run at all throws std::runtime_error (a harness failure).
std::vector<Violation> check_cuda_source(const std::filesystem::path& source, const Requirements& req,
                                         const std::string& nvcc, const std::filesystem::path& include_dir,
                                         const std::string& arch = "sm_90a");

// `lib_dirs`: where to look for the allowed needed libraries (libcudart, libc, libstdc++, ...) to check that every
// undefined symbol is defined by one of them; empty: LD_LIBRARY_PATH, the CUDA toolkit of the nvcc on PATH
// ($CUDA_HOME, /usr/local/cuda), /etc/ld.so.conf.d and the system library folders.
std::vector<Violation> check_cuda_library(const std::filesystem::path& so, const Requirements& req,
                                          const std::vector<std::filesystem::path>& lib_dirs = {});

}  // namespace d2k
