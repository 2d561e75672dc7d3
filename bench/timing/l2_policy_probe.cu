// Does the harness's L2 flush (a cudaMemsetAsync of twice the L2, as nvbench does) evict lines that a kernel loaded
// with an L2::evict_last policy? If not, a solution can mark its inputs evict_last and find them in L2 after the
// flush on its next timed call. Also: what the dirty lines a memset flush leaves cost the next kernel's read.
// Build and run (GPU machine): nvcc -std=c++17 -O3 -arch=sm_90a bench/timing/l2_policy_probe.cu -o /tmp/l2probe
// && /tmp/l2probe. Prints one line per case: median microseconds of the timed read over 15 samples.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

enum Policy { kNormal = 0, kEvictLast = 1, kEvictFirst = 2 };

__device__ __forceinline__ unsigned long long make_policy(int p) {
  unsigned long long pol = 0;
  if (p == kEvictLast)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

__global__ void read_kernel(const int4* __restrict__ in, size_t n, int policy, int* sink) {
  int acc = 0;
  const unsigned long long pol = policy ? make_policy(policy) : 0ull;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    int4 v;
    if (policy) {
      asm volatile("ld.global.L2::cache_hint.v4.s32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(in + i), "l"(pol));
    } else {
      v = in[i];
    }
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7eadbeef) *sink = acc;
}

// The hardened flush's first pass: write every line of the buffer with evict_last, so that it displaces lines of any
// priority; the second pass then lowers them (applypriority) or drops them (discard).
__global__ void flush_write_kernel(int4* buf, size_t n, int value) {
  const unsigned long long pol = make_policy(kEvictLast);
  const int4 v = make_int4(value, value, value, value);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    asm volatile("st.global.L2::cache_hint.v4.s32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(buf + i), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w), "l"(pol)
                 : "memory");
}
__global__ void flush_lower_kernel(char* buf, size_t bytes, int discard) {
  for (size_t off = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * 128; off < bytes;
       off += size_t(gridDim.x) * blockDim.x * 128) {
    if (discard)
      asm volatile("discard.global.L2 [%0], 128;" ::"l"(buf + off) : "memory");
    else
      asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(buf + off) : "memory");
  }
}

int main() {
  int dev = 0, l2 = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const size_t flush_bytes = 2 * size_t(l2);
  const size_t big = size_t(256) << 20;
  char *flush = nullptr, *x = nullptr;
  int* sink = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&x, big));
  CK(cudaMalloc(&sink, sizeof(int)));
  CK(cudaMemset(x, 1, big));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int blocks = sms * 4, threads = 512;
  unsigned fill = 0;

  enum Flush { kNone, kMemset, kHardLower, kHardDiscard, kMemsetDiscard };
  auto do_flush = [&](int f) {
    ++fill;
    if (f == kMemset || f == kMemsetDiscard) CK(cudaMemsetAsync(flush, int(fill & 0xff), flush_bytes));
    if (f == kHardLower || f == kHardDiscard)
      flush_write_kernel<<<blocks, threads>>>(reinterpret_cast<int4*>(flush), flush_bytes / 16, int(fill));
    if (f == kHardLower) flush_lower_kernel<<<blocks, threads>>>(flush, flush_bytes, 0);
    if (f == kHardDiscard || f == kMemsetDiscard) flush_lower_kernel<<<blocks, threads>>>(flush, flush_bytes, 1);
  };
  // One case: the "attacker" read of `bytes` with `prior` policy, the flush, then the timed plain read.
  auto run_case = [&](const char* name, size_t bytes, int prior, int f) {
    std::vector<float> t;
    for (int i = 0; i < 16; ++i) {
      read_kernel<<<blocks, threads>>>(reinterpret_cast<int4*>(x), bytes / 16, prior, sink);
      do_flush(f);
      CK(cudaEventRecord(a));
      read_kernel<<<blocks, threads>>>(reinterpret_cast<int4*>(x), bytes / 16, kNormal, sink);
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (i) t.push_back(ms);  // the first is a warm-up
    }
    std::sort(t.begin(), t.end());
    const double us = 1e3 * t[t.size() / 2];
    std::printf("%-58s %4zu MiB  %8.2f us  %6.2f TB/s\n", name, bytes >> 20, us, bytes / us / 1e6);
  };
  std::printf("L2 %d bytes, flush %zu bytes, %d SMs\n", l2, flush_bytes, sms);
  for (size_t mib : {24, 48}) {
    const size_t bytes = mib << 20;
    run_case("warm (plain read, no flush)", bytes, kNormal, kNone);
    run_case("memset flush after a plain read", bytes, kNormal, kMemset);
    run_case("memset flush after an evict_last read", bytes, kEvictLast, kMemset);
    run_case("memset flush after an evict_first read", bytes, kEvictFirst, kMemset);
    run_case("hardened flush (evict_last + evict_normal), evict_last read", bytes, kEvictLast, kHardLower);
    run_case("hardened flush (evict_last + discard), evict_last read", bytes, kEvictLast, kHardDiscard);
    run_case("hardened flush (evict_last + evict_normal), plain read", bytes, kNormal, kHardLower);
  }
  // What the dirty lines a memset flush leaves cost a large read (write-backs during the timed kernel).
  run_case("large read after a memset flush", big, kNormal, kMemset);
  run_case("large read after a memset flush + discard", big, kNormal, kMemsetDiscard);
  run_case("large read after the hardened flush (evict_normal)", big, kNormal, kHardLower);
  // The same with an evict_last "attacker" read of the whole 60 MiB-fitting prefix, repeated: does anything persist
  // across two flushes?
  run_case("48 MiB: evict_last read, memset flush, then read", size_t(48) << 20, kEvictLast, kMemset);
  return 0;
}
