// How long the supervisor's verdict on one large output takes: a float32 output of N elements against its
// float64 expected values (the toy task's `huge` workload: 64 Mi elements), read from tensor files and
// compared. Prints seconds and elements per second. Usage: d2k_bench_compare [ELEMENTS] [FOLDER]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "eval/compare.hpp"
#include "eval/tensor_file.hpp"

namespace fs = std::filesystem;
using namespace d2k;

int main(int argc, char** argv) {
  std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t(64) << 20);
  fs::path dir = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path();
  dir /= fmt::format("d2k-bench-compare-{}", ::getpid());
  fs::create_directories(dir);
  HostTensor exp, got;
  exp.dtype = DType::float64;
  got.dtype = DType::float32;
  exp.shape = got.shape = {static_cast<int64_t>(n)};
  exp.data.resize(n * 8);
  got.data.resize(n * 4);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> nd;
  auto* e = reinterpret_cast<double*>(exp.data.data());
  auto* g = reinterpret_cast<float*>(got.data.data());
  for (std::size_t i = 0; i < n; ++i) {
    e[i] = nd(rng);
    g[i] = static_cast<float>(e[i]);
  }
  write_tensor_file(dir / "exp.d2kt", exp);
  write_tensor_file(dir / "got.d2kt", got);
  OutputSpec spec;
  spec.name = "y";
  spec.dtype = DType::float32;
  spec.tol.atol = 1e-5;
  spec.tol.rtol = 1e-5;
  double best_read = 1e9, best_read_one = 1e9, best_cmp = 1e9;
  OutputCheck c;
  for (int rep = 0; rep < 3; ++rep) {
    auto t00 = std::chrono::steady_clock::now();  // the files read by one thread, for comparison
    (void)read_tensor_file(dir / "exp.d2kt", std::size_t(64) << 30, {.threads = 1});
    (void)read_tensor_file(dir / "got.d2kt", std::size_t(64) << 30, {.threads = 1});
    best_read_one = std::min(best_read_one, std::chrono::duration<double>(std::chrono::steady_clock::now() - t00).count());
    auto t0 = std::chrono::steady_clock::now();
    auto ge = read_tensor_file(dir / "exp.d2kt");
    auto gg = read_tensor_file(dir / "got.d2kt");
    auto t1 = std::chrono::steady_clock::now();
    c = compare_output(spec, gg, ge, {static_cast<int64_t>(n)});
    auto t2 = std::chrono::steady_clock::now();
    best_read = std::min(best_read, std::chrono::duration<double>(t1 - t0).count());
    best_cmp = std::min(best_cmp, std::chrono::duration<double>(t2 - t1).count());
  }
  fs::remove_all(dir);
  fmt::print("{} elements (float32 vs float64, {:.0f} MB of files in {}, {} hardware threads): read {:.3f} s "
             "({:.3f} s on one thread), compare {:.3f} s ({:.0f} M elements/s), best of 3; verdict {} ({} mismatched)\n",
             n, n * 12 / 1e6, dir.parent_path().string(), std::thread::hardware_concurrency(), best_read, best_read_one,
             best_cmp, n / best_cmp / 1e6,
             c.status == Status::passed ? "passed" : "not passed", c.mismatched);
  return c.status == Status::passed ? 0 : 1;
}
