/* topk_topp_sampling candidate "phased": one balanced HBM pass that summarizes every row, then per-row decisions
 * from the summaries; only rows whose kept set may be large are read again, by a pass shared by the whole GPU.
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 *
 * Design (y = x * log2(e) / T, weights 2^(y - M) with M the row's max y):
 *  - stats: (row, 4096-element chunk) items over the whole GPU. Each 64-element segment leaves its max and its
 *    sum of 2^(y - max): 16 KB of summaries per 128256-element row, the only output of the one full pass.
 *  - decide, one CTA per row, from the summaries:
 *      plain rows (top_k >= V, top_p = 1): inverse CDF over the segments' masses, then inside the drawn segment;
 *      list rows (top_k <= segments, <= 1024): g = the k-th largest segment max bounds the k-th largest y from
 *        below (k segments hold an element >= g), so only the ~k segments whose max reaches g are read back and
 *        the candidates y >= g (~1.1-1.4 k on LLM rows) hold K and the top-p crossing inside it. Selects by one
 *        512-bin value histogram (integer shared atomics) and a rank inside the answer's bin give g, the exact
 *        k-th value and the top-p crossing; inverse CDF over the kept candidates;
 *      other rows (large kept sets): 8 proposals from the full distribution (segments' masses, then the
 *        segment), published to the test pass, which runs beside decide.
 *  - test: (tested row, 8192-element chunk) items from a queue, taken as their rows are published, count the
 *    tokens and sum the mass strictly above each proposal (only elements above the lowest proposal are compared);
 *    finish takes, per row, the first proposal (in draw order) with fewer than top_k tokens and less than top_p
 *    of the mass above it: rejection sampling from p over a superset of K & P, exact. Rows that reject all 8
 *    continue alone with draws 8.. (a pass each), then take the argmax, as the expert does.
 *
 * Measured (NVIDIA H100 80GB HBM3, 2026-12-08, `d2k eval` via scripts/gpu-check.sh candidates; NOTES.md): 0.0356 /
 * 0.0911 / 0.0689 / 0.0350 ms on llama2_b64_v32000 / llama3_b256_v128256 / qwen2_b128_v151936 / llama3_b16_v128256,
 * against the task's expert's 0.0280 / 0.1251 / 0.1274 / 0.0324 ms on the same card; not yet run on an H200.
 */
#include "d2k/solution.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#ifdef D2K_TIMELINE
#include <cstdio>
#endif

#ifndef D2K_CPU_EMU
#include <cuda_runtime.h>
#define D2K_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#define D2K_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#else
#include <atomic>
#include <thread>
#define D2K_DYN_SMEM(name) unsigned char* name = emu::t_cta->smem
#define D2K_LAUNCH(kernel, grid, block, smem, stream) \
  (static_cast<void>(stream), emu::launcher(kernel, grid, block, smem))
#endif

namespace {

constexpr int kSeg = 64;            // elements per segment summary
#ifndef D2K_UNITS1
#define D2K_UNITS1 2
#endif
constexpr int kUnits1 = D2K_UNITS1;  // 8-element units per thread and stats item (loads in flight)
constexpr int kChunk1 = 256 * 8 * kUnits1;  // elements per stats item
constexpr int kChunk3 = 8192;       // elements per test item (256 threads x 4 x 8)
constexpr int kThreads1 = 256;
constexpr int kThreads2 = 512;      // decide and finish
constexpr int kWarps2 = kThreads2 / 32;
#ifndef D2K_PROP
#define D2K_PROP 8
#endif
static_assert(D2K_PROP >= 1 && D2K_PROP <= 16, "two values per proposal in 32 lanes");
constexpr int kProp = D2K_PROP;     // proposals tested by the shared pass (rows tested keep >= top_p >= mass)
constexpr int kCap = 4096;          // candidates of a list row
constexpr int kListMaxK = 1024;
constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------- primitives (GPU, or the CPU emulation)
#ifndef D2K_CPU_EMU
__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned f2u(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float shx(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
__device__ __forceinline__ float shup(float v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ float shf(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }
__device__ __forceinline__ unsigned ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
__device__ __forceinline__ int ctz(unsigned m) { return __ffs(m) - 1; }      // m != 0
__device__ __forceinline__ int hibit(unsigned m) { return 31 - __clz(m); }  // m != 0
__device__ __forceinline__ int popc(unsigned m) { return __popc(m); }
__device__ __forceinline__ int shfi(int v, int src) { return __shfl_sync(0xffffffffu, v, src); }
__device__ __forceinline__ int shupi(int v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ int s_add(int* a, int v) { return atomicAdd(a, v); }
__device__ __forceinline__ void s_addf(float* a, float v) { atomicAdd(a, v); }
__device__ __forceinline__ void s_min(int* a, int v) { atomicMin(a, v); }
__device__ __forceinline__ void s_max(int* a, int v) { atomicMax(a, v); }
__device__ __forceinline__ int g_add(int* a, int v) { return atomicAdd(a, v); }
__device__ __forceinline__ float u2f(unsigned u) { return __uint_as_float(u); }
__device__ __forceinline__ float4 ld4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float ld1(const float* p) { return __ldg(p); }
#else
inline float ex2(float x) { return std::exp2(x); }
inline unsigned f2u(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float shx(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
inline float shup(float v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
inline float shf(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }
inline unsigned ballot(bool p) {
  return emu::collective<unsigned>(p, [](unsigned, auto get) {
    unsigned m = 0;
    for (unsigned i = 0; i < 32; ++i) m |= (get(i) ? 1u : 0u) << i;
    return m;
  });
}
inline int ctz(unsigned m) { return __builtin_ctz(m); }
inline int hibit(unsigned m) { return 31 - __builtin_clz(m); }
inline int popc(unsigned m) { return __builtin_popcount(m); }
inline int shfi(int v, int src) { return static_cast<int>(__shfl_sync(0xffffffffu, static_cast<float>(v), src)); }  // |v| < 2^24
inline int shupi(int v, int d) { return static_cast<int>(__shfl_up_sync(0xffffffffu, static_cast<float>(v), d)); }
inline int s_add(int* a, int v) { return std::atomic_ref<int>(*a).fetch_add(v); }
inline void s_addf(float* a, float v) { std::atomic_ref<float>(*a).fetch_add(v); }
inline void s_min(int* a, int v) {
  std::atomic_ref<int> r(*a);
  int cur = r.load();
  while (v < cur && !r.compare_exchange_weak(cur, v)) {
  }
}
inline void s_max(int* a, int v) {
  std::atomic_ref<int> r(*a);
  int cur = r.load();
  while (v > cur && !r.compare_exchange_weak(cur, v)) {
  }
}
inline int g_add(int* a, int v) { return s_add(a, v); }
inline float u2f(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
inline float ld1(const float* p) { return *p; }
#endif

// Kernels 2-4 may be launched before their predecessor ends (programmatic dependent launch); they wait here for
// it to finish and its writes to be visible before reading anything it wrote.
__device__ __forceinline__ void wait_prior_grid() {
#if !defined(D2K_CPU_EMU) && !defined(D2K_NO_PDL)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The test pass overlaps decide (unless D2K_SERIAL_TEST): decide lets it launch at once, and publishes each tested
// row (a release flag per slot) and each decided row (a counter); the test pass takes items from a queue and waits
// for their row's flag. No deadlock: test CTAs launch only after every decide CTA has started.
#if !defined(D2K_SERIAL_TEST) && !defined(D2K_NO_PDL)
#define D2K_OVERLAP 1
#endif
#ifndef D2K_CPU_EMU
__device__ __forceinline__ void allow_dependents() {
#ifdef D2K_OVERLAP
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void nap() { __nanosleep(200); }
// Loads of what a concurrently running decide wrote: L2, never a stale L1 line.
__device__ __forceinline__ int ldcg(const int* p) { return __ldcg(p); }
__device__ __forceinline__ float ldcg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float2 ldcg(const float2* p) { return __ldcg(p); }
#else
inline void allow_dependents() {}
inline int ld_acquire(const int* p) { return std::atomic_ref<const int>(*p).load(std::memory_order_acquire); }
inline void st_release(int* p, int v) { std::atomic_ref<int>(*p).store(v, std::memory_order_release); }
inline void nap() { std::this_thread::yield(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <class T>
inline T ldcg(const T* p) {
  return *p;
}
#endif

__device__ __forceinline__ float neg_inf() { return -__builtin_huge_valf(); }
// Order-preserving key of a float: a larger float has a larger key (-inf smallest among the values used).
__device__ __forceinline__ unsigned fkey(float f) {
  const unsigned u = f2u(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key2f(unsigned k) { return u2f((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }
__device__ __forceinline__ float nan_f() { return u2f(0x7fc00000u); }

// Eight consecutive elements of a row from e0, -inf past V. vec: the row is 16-byte aligned and V % 4 == 0, so
// e0 (a multiple of 8) starts two float4 that are each wholly inside or outside the row.
__device__ __forceinline__ void load8(const float* row, int e0, int V, bool vec, float (&x)[8]) {
  if (vec) {
    const float4 a = e0 < V ? ld4(row + e0) : make_float4(neg_inf(), neg_inf(), neg_inf(), neg_inf());
    const float4 b = e0 + 4 < V ? ld4(row + e0 + 4) : make_float4(neg_inf(), neg_inf(), neg_inf(), neg_inf());
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = e0 + i < V ? ld1(row + e0 + i) : neg_inf();
  }
}

#if defined(D2K_TIMELINE) && !defined(D2K_CPU_EMU)
// Timing build: globaltimer spans of the four kernels (the first CTA's start to the last CTA's end) and, per route,
// rows and their thread 0's time (count, sum, max, ns): 0 plain, 1 list, 2 tested, 3 continued in finish.
__device__ unsigned long long g_span[4][2];
__device__ unsigned long long g_route[4][3];
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// List rows' phases, per bucket (0: top_k <= 100, 1: larger): time to each mark (sum, max, ns), and the listed
// segments and candidates (sums).
constexpr int kMarks = 6;
__device__ unsigned long long g_phase[2][kMarks][2];
__device__ unsigned long long g_listed[2][3];
struct Stamp {
  int kernel, route = -1, bucket = 0, nmark = 0;
  unsigned long long t0, mark_t[kMarks] = {};
  __device__ explicit Stamp(int k) : kernel(k), t0(gtime()) {
    if (threadIdx.x == 0) atomicMin(&g_span[k][0], t0);
  }
  __device__ void mark() {
    if (nmark < kMarks) mark_t[nmark++] = gtime();
  }
  __device__ ~Stamp() {
    if (threadIdx.x != 0) return;
    const unsigned long long t1 = gtime();
    atomicMax(&g_span[kernel][1], t1);
    if (route < 0) return;
    atomicAdd(&g_route[route][0], 1ull);
    atomicAdd(&g_route[route][1], t1 - t0);
    atomicMax(&g_route[route][2], t1 - t0);
    if (route != 1) return;
    for (int i = 0; i < nmark; ++i) {
      atomicAdd(&g_phase[bucket][i][0], mark_t[i] - t0);
      atomicMax(&g_phase[bucket][i][1], mark_t[i] - t0);
    }
  }
};
__device__ void listed(int bucket, int nl, int nc) {
  atomicAdd(&g_listed[bucket][0], 1ull);
  atomicAdd(&g_listed[bucket][1], static_cast<unsigned long long>(nl));
  atomicAdd(&g_listed[bucket][2], static_cast<unsigned long long>(nc));
}
__global__ void timeline_reset() {
  for (int k = 0; k < 4; ++k) {
    g_span[k][0] = ~0ull;
    g_span[k][1] = 0;
    for (int i = 0; i < 3; ++i) g_route[k][i] = 0;
  }
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < kMarks; ++i) g_phase[b][i][0] = g_phase[b][i][1] = 0;
    for (int i = 0; i < 3; ++i) g_listed[b][i] = 0;
  }
}
__global__ void timeline_print() {
  const double t0 = static_cast<double>(g_span[0][0]);
  auto us = [&](unsigned long long t) { return (static_cast<double>(t) - t0) / 1000.0; };
  auto mean = [](int r) { return g_route[r][0] ? 1e-3 * g_route[r][1] / g_route[r][0] : 0.0; };
  printf("timeline us: stats %.1f-%.1f decide %.1f-%.1f test %.1f-%.1f finish %.1f-%.1f | rows n mean/max: "
         "plain %llu %.1f/%.1f list %llu %.1f/%.1f tested %llu %.1f/%.1f continued %llu %.1f/%.1f\n",
         us(g_span[0][0]), us(g_span[0][1]), us(g_span[1][0]), us(g_span[1][1]), us(g_span[2][0]),
         us(g_span[2][1]), us(g_span[3][0]), us(g_span[3][1]), g_route[0][0], mean(0), 1e-3 * g_route[0][2],
         g_route[1][0], mean(1), 1e-3 * g_route[1][2], g_route[2][0], mean(2), 1e-3 * g_route[2][2], g_route[3][0],
         mean(3), 1e-3 * g_route[3][2]);
  for (int b = 0; b < 2; ++b) {
    const double n = g_listed[b][0] ? static_cast<double>(g_listed[b][0]) : 1.0;
    printf("timeline list rows, top_k %s: n %llu, segments %.0f, candidates %.0f; us to summary/g/seglist/gather/"
           "k-select/p-select, mean (max):",
           b ? "> 100" : "<= 100", g_listed[b][0], g_listed[b][1] / n, g_listed[b][2] / n);
    for (int i = 0; i < kMarks; ++i) printf(" %.1f (%.1f)", 1e-3 * g_phase[b][i][0] / n, 1e-3 * g_phase[b][i][1]);
    printf("\n");
  }
}
#define D2K_STAMP(k) Stamp stamp_(k)
#define D2K_ROUTE(r) (stamp_.route = (r))
#define D2K_MARK() stamp_.mark()
#define D2K_LISTED(k, nl, nc) \
  ((stamp_.bucket = (k) > 100), threadIdx.x == 0 ? listed(stamp_.bucket, nl, nc) : static_cast<void>(0))
#else
#define D2K_STAMP(k) static_cast<void>(0)
#define D2K_ROUTE(r) static_cast<void>(0)
#define D2K_MARK() static_cast<void>(0)
#define D2K_LISTED(k, nl, nc) static_cast<void>(0)
#endif

// ---------------------------------------------------------------- kernel 1: segment summaries
// One item's summaries from its loaded elements x (row b, chunk c).
__device__ __forceinline__ void stats_item(int b, int c, float sc, int nseg, float (&x)[kUnits1][8],
                                           float2* __restrict__ stats) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnits1; ++u) {
    float m = neg_inf();
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[u][i] *= sc;
      m = fmaxf(m, x[u][i]);
    }
    m = fmaxf(m, shx(m, 1));
    m = fmaxf(m, shx(m, 2));
    m = fmaxf(m, shx(m, 4));
    const float ref = m == neg_inf() ? 0.f : m;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) s += ex2(x[u][i] - ref);
    s += shx(s, 1);
    s += shx(s, 2);
    s += shx(s, 4);
    const int seg = (c * kChunk1 + u * 2048 + 8 * tid) / kSeg;
    if ((tid & 7) == 0 && seg < nseg) stats[static_cast<size_t>(b) * nseg + seg] = make_float2(m, s);
  }
}

// Items (row, chunk) from blockIdx.x in steps of gridDim.x; the next item's loads are issued before the current
// one is summarized, so a CTA keeps loads in flight across items (grid = one item per CTA: a plain launch).
__global__ void __launch_bounds__(kThreads1) stats_kernel(const float* __restrict__ logits,
                                                          const float* __restrict__ temperature, int V, int nseg,
                                                          int nch1, int nitems, bool vec,
                                                          float2* __restrict__ stats, int* __restrict__ counters,
                                                          int* __restrict__ ready, int B) {
  D2K_STAMP(0);
  const int tid = threadIdx.x;
  // The previous call's kernels have ended (stream order); decide waits for this grid before using these.
  if (blockIdx.x == 0 && tid < 3) counters[tid] = 0;
  for (int i = blockIdx.x * kThreads1 + tid; i < B; i += gridDim.x * kThreads1) ready[i] = 0;
  auto load = [&](int item, float (&x)[kUnits1][8]) {
    const int b = item / nch1, c = item % nch1;
    const float* row = logits + static_cast<size_t>(b) * V;
#pragma unroll
    for (int u = 0; u < kUnits1; ++u) load8(row, c * kChunk1 + u * 2048 + 8 * tid, V, vec, x[u]);
  };
  int item = blockIdx.x;
  if (item >= nitems) return;
  float x[kUnits1][8], nx[kUnits1][8];
  load(item, x);
  for (;;) {
    const int next = item + static_cast<int>(gridDim.x);
    if (next < nitems) load(next, nx);
    const int b = item / nch1;
    stats_item(b, item % nch1, kLog2e / temperature[b], nseg, x, stats);
    if (next >= nitems) break;
#pragma unroll
    for (int u = 0; u < kUnits1; ++u)
#pragma unroll
      for (int i = 0; i < 8; ++i) x[u][i] = nx[u][i];
    item = next;
  }
}

// ---------------------------------------------------------------- block helpers (512 threads)
struct Shared2 {  // the fixed part of decide's and finish's shared memory
  float redf[kWarps2];
  float bf[4];
  int bi[8];
  float red2[2][kWarps2];  // select_key's block sums, alternating so that one barrier suffices per sum
  int hist[kThreads2];     // kth_key's value bins
  unsigned small[256];     // kth_key's keys of the bin that holds the answer
#ifndef D2K_PSEL_BITS
  float histw[kThreads2];  // crossing_key's bin weights, then their suffix sums
  float smallw[256];       // crossing_key's bin members: weights, then sorted keys and weights
  unsigned skey2[256];
  float sw2[256];
#endif
  int kb, kneed, nsmall;
  unsigned kres;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v += shx(v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v = fmaxf(v, shx(v, o));
  return v;
}
// Block sums and maxima in a fixed order (the same result in every thread).
__device__ float block_sum(float v, Shared2& sh) {
  v = warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.redf[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps2; ++w) t += sh.redf[w];
  return t;
}
__device__ float block_max(float v, Shared2& sh) {
  v = warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.redf[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = neg_inf();
#pragma unroll
  for (int w = 0; w < kWarps2; ++w) t = fmaxf(t, sh.redf[w]);
  return t;
}
// Inclusive scan of one value per thread, in thread order.
__device__ float block_incl_scan(float v, Shared2& sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float s = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float o = shup(s, d);
    if (lane >= d) s += o;
  }
  __syncthreads();
  if (lane == 31) sh.redf[w] = s;
  __syncthreads();
  float off = 0.f;
  for (int i = 0; i < w; ++i) off += sh.redf[i];
  return off + s;
}

// A block sum in a fixed order, the same in every thread, with one barrier: calls alternate `slot`, so a slot is
// rewritten only after every thread has passed the next call's barrier (and so has read it).
__device__ __forceinline__ float block_sum_slot(float v, Shared2& sh, int slot) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) sh.red2[slot][threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps2; ++w) t += sh.red2[slot][w];
  return t;
}

// The largest key t whose keys at or above it weigh at least `need` (weights 1: the need-th largest key; masses:
// the top-p crossing), or 0 when all keys together weigh less. All keys lie in [lo, hi] (so they share the high
// bits where lo and hi agree); t is built bit by bit from the first bit where they differ, one block sum per bit.
// No atomics (shared float atomics are CAS loops that serialize when keys share their top bits). Every thread
// returns the same t: the sums are in a fixed order, and a fixed-order sum of non-negative terms never decreases
// when terms are added, so "weight(>= c) >= need" is monotone in c.
template <class W>
__device__ unsigned select_key(const unsigned* keys, int n, W weight, float need, unsigned lo, unsigned hi,
                               Shared2& sh) {
  __syncthreads();  // keys and weights written by other threads
  auto weigh = [&](unsigned c, int slot) {
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += kThreads2)
      if (keys[i] >= c) s += weight(i);
    return block_sum_slot(s, sh, slot);
  };
  const int top = lo == hi ? -1 : hibit(lo ^ hi);
  const unsigned low_bits = top < 0 ? 0u : top == 31 ? 0xffffffffu : (2u << top) - 1u;
  unsigned t = lo & ~low_bits;
  int slot = 0;
  if (weigh(t, slot) < need) return 0;
  for (int bit = top; bit >= 0; --bit) {
    slot ^= 1;
    const unsigned c = t | (1u << bit);
    if (weigh(c, slot) >= need) t = c;
  }
  return t;
}

// Bin of v >= lo among kThreads2 bins of width 1 / inv: monotone in v (rounding is monotone), so the bins are in
// value order and equal values share a bin.
__device__ __forceinline__ int vbin(float v, float lo, float inv) {
  const float q = (v - lo) * inv;
  return q < 1.f ? 0 : q >= static_cast<float>(kThreads2 - 1) ? kThreads2 - 1 : static_cast<int>(q);
}

// The k-th largest key (ties counted: the largest t with #(keys >= t) >= k), 0 when fewer than k keys; all keys
// in [lo, hi]. One pass bins the keys' values over [lo, hi] (integer shared atomics, exact); the bin that holds the
// answer ranks its own members (<= 256 of them, each thread one member against all). ~9 barriers where
// select_key's bit-wise search takes ~31. Falls back to select_key for an empty or unbounded range, or a crowded
// bin (every thread takes the same branch: the conditions are read from shared memory after a barrier).
__device__ unsigned kth_key(const unsigned* keys, int n, int k, unsigned lo, unsigned hi, Shared2& sh) {
  const int tid = threadIdx.x;
  const float flo = key2f(lo), fhi = key2f(hi);
  const float inv = static_cast<float>(kThreads2) / (fhi - flo);
  auto fallback = [&] { return select_key(keys, n, [](int) { return 1.f; }, static_cast<float>(k), lo, hi, sh); };
  if (k < 1 || !(flo > neg_inf() && fhi < __builtin_huge_valf() && fhi > flo && inv < __builtin_huge_valf()))
    return fallback();
  if (n < k) return 0;
  __syncthreads();  // keys written by other threads; the previous call's readers of hist are done
  sh.hist[tid] = 0;
  if (tid == 0) sh.nsmall = 0;
  __syncthreads();
  for (int i = tid; i < n; i += kThreads2) s_add(&sh.hist[vbin(key2f(keys[i]), flo, inv)], 1);
  __syncthreads();
  const int h = sh.hist[kThreads2 - 1 - tid];
  const int S = static_cast<int>(block_incl_scan(static_cast<float>(h), sh));  // keys in bins >= 511 - tid (exact)
  if (S >= k && S - h < k) {  // exactly one thread: n >= k
    sh.kb = kThreads2 - 1 - tid;
    sh.kneed = k - (S - h);
  }
  __syncthreads();
  const int B = sh.kb, need = sh.kneed, cB = sh.hist[B];
  if (cB > 256) return fallback();
  for (int i = tid; i < n; i += kThreads2) {
    const unsigned key = keys[i];
    if (vbin(key2f(key), flo, inv) == B) sh.small[s_add(&sh.nsmall, 1)] = key;
  }
  __syncthreads();
  if (tid < cB) {  // the member with fewer than `need` keys above it and at least `need` at or above it
    const unsigned x = sh.small[tid];
    int ge = 0, gt = 0;
    for (int j = 0; j < cB; ++j) {
      const unsigned o = sh.small[j];
      ge += o >= x ? 1 : 0;
      gt += o > x ? 1 : 0;
    }
    if (gt < need && need <= ge) sh.kres = x;  // equal keys write the same value
  }
  __syncthreads();
  return sh.kres;
}

#ifndef D2K_PSEL_BITS
// The top-p crossing over weighted keys: the largest key t whose keys at or above it weigh at least `need`, or 0
// when all of them weigh less; keys in [lo, hi]. The bins' weights (shared float atomics, in any order) only
// point at the bin that holds the crossing; the keys above that bin are then summed in a fixed order, the bin's
// members are put in key order and summed one by one, and the bin is confirmed by both sums (else select_key).
// D2K_PSEL_BITS: select_key alone (measured slower).
template <class W>
__device__ unsigned crossing_key(const unsigned* keys, W weight, int n, float need, unsigned lo, unsigned hi,
                                 Shared2& sh) {
  const int tid = threadIdx.x;
  auto fallback = [&] { return select_key(keys, n, weight, need, lo, hi, sh); };
  const float flo = key2f(lo), fhi = key2f(hi);
  const float inv = static_cast<float>(kThreads2) / (fhi - flo);
  if (!(flo > neg_inf() && fhi < __builtin_huge_valf() && fhi > flo && inv < __builtin_huge_valf()))
    return fallback();
  __syncthreads();  // keys and weights written by other threads; the previous readers of histw are done
  sh.histw[tid] = 0.f;
  if (tid == 0) {
    sh.nsmall = 0;
    sh.kb = -1;
  }
  float loc = 0.f;
  for (int i = tid; i < n; i += kThreads2) loc += weight(i);
  if (block_sum_slot(loc, sh, 0) < need) return 0;  // its barrier also orders the stores above
  for (int i = tid; i < n; i += kThreads2) s_addf(&sh.histw[vbin(key2f(keys[i]), flo, inv)], weight(i));
  __syncthreads();
  const float h = sh.histw[kThreads2 - 1 - tid];
  const float S = block_incl_scan(h, sh);  // weight of bins >= 511 - tid; non-decreasing in tid
  sh.histw[kThreads2 - 1 - tid] = S;  // block_incl_scan's barriers: every h was read
  __syncthreads();
  const float prev = tid ? sh.histw[kThreads2 - tid] : 0.f;
  if (S >= need && prev < need) sh.kb = kThreads2 - 1 - tid;  // at most one thread: S is monotone
  __syncthreads();
  const int B = sh.kb;
  if (B < 0) return fallback();
  float above = 0.f;
  for (int i = tid; i < n; i += kThreads2) {
    const unsigned key = keys[i];
    const int bin = vbin(key2f(key), flo, inv);
    if (bin > B) above += weight(i);
    else if (bin == B) {
      const int pos = s_add(&sh.nsmall, 1);
      if (pos < 256) {
        sh.small[pos] = key;
        sh.smallw[pos] = weight(i);
      }
    }
  }
  const float A = block_sum_slot(above, sh, 1);  // fixed order; its barrier orders the members' stores
  const int c = sh.nsmall;
  if (c > 256 || !(A < need)) return fallback();
  if (tid < c) {  // key order (descending; ties by buffer position)
    const unsigned x = sh.small[tid];
    int pos = 0;
    for (int j = 0; j < c; ++j) {
      const unsigned o = sh.small[j];
      pos += (o > x || (o == x && j < tid)) ? 1 : 0;
    }
    sh.skey2[pos] = x;
    sh.sw2[pos] = sh.smallw[tid];
  }
  __syncthreads();
  if (tid == 0) {  // equal keys have equal weights, so this sum does not depend on the order of ties
    float run = A;
    unsigned res = 0;
    for (int i = 0; i < c; ++i) {
      run += sh.sw2[i];
      if ((i + 1 == c || sh.skey2[i + 1] != sh.skey2[i]) && run >= need) {
        res = sh.skey2[i];
        break;
      }
    }
    sh.kres = res;
  }
  __syncthreads();
  const unsigned res = sh.kres;
  return res ? res : fallback();  // 0: the bins' sums missed the crossing (rounding)
}
#endif

struct RowSummary {
  float M, Z;
};

// Loads row b's segment summaries into smx[s] (segment max) and pre[s] (its sum of 2^(y - max)); returns the row's
// max M. The loads are issued in batches of five per thread (a 2560-segment row in one round trip).
__device__ float load_summary(const float2* __restrict__ stats, int b, int nseg, float* smx, float* pre,
                              Shared2& sh) {
  constexpr int kBatch = 5;
  const float2* st = stats + static_cast<size_t>(b) * nseg;
  float m = neg_inf();
  for (int s0 = 0; s0 < nseg; s0 += kBatch * kThreads2) {
    float2 v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = s0 + i * kThreads2 + threadIdx.x;
      v[i] = s < nseg ? st[s] : make_float2(neg_inf(), 0.f);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = s0 + i * kThreads2 + threadIdx.x;
      if (s < nseg) {
        smx[s] = v[i].x;
        pre[s] = v[i].y;
      }
      m = fmaxf(m, v[i].x);
    }
  }
  return block_max(m, sh);  // its barriers order the stores above
}

// Turns pre[] into the inclusive prefix of the segments' masses 2^(y - M); returns their total Z.
__device__ float prefix_masses(int nseg, const float* smx, float* pre, float M, Shared2& sh) {
  const int per = (nseg + kThreads2 - 1) / kThreads2;
  const int s0 = threadIdx.x * per, s1 = s0 + per < nseg ? s0 + per : nseg;
  float loc = 0.f;
  for (int s = s0; s < s1; ++s) {  // each thread's own segments: masses in place, then their prefix
    pre[s] = smx[s] == neg_inf() ? 0.f : pre[s] * ex2(smx[s] - M);
    loc += pre[s];
  }
  const float inc = block_incl_scan(loc, sh);
  float run = inc - loc;
  for (int s = s0; s < s1; ++s) pre[s] = run += pre[s];
  __syncthreads();
  return pre[nseg - 1];
}

// The total mass Z without the prefix (pre[] unchanged), for rows settled from a list.
__device__ float total_mass(int nseg, const float* smx, const float* pre, float M, Shared2& sh) {
  float loc = 0.f;
  for (int s = threadIdx.x; s < nseg; s += kThreads2)
    if (smx[s] != neg_inf()) loc += pre[s] * ex2(smx[s] - M);
  return block_sum(loc, sh);
}

// One warp draws a token from p (all of the row) with target t in [0, Z): the first segment whose inclusive
// prefix passes t, then the first element inside it whose running mass passes the rest. Rounding that leaves the
// target past the segment's own sum takes its last element of positive weight (else its last element).
__device__ void warp_draw(const float* row, int V, float sc, float M, const float* pre, int nseg, float t, int& j,
                          float& yj) {
  const int lane = threadIdx.x & 31;
  int lo = 0, hi = nseg - 1;  // the first s with pre[s] > t (the last if none)
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (pre[mid] > t) hi = mid;
    else lo = mid + 1;
  }
  const int s = lo;
  float r = t - (s > 0 ? pre[s - 1] : 0.f);
  float y[2], w[2], inc[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int e = s * kSeg + h * 32 + lane;
    y[h] = e < V ? ld1(row + e) * sc : neg_inf();
    w[h] = ex2(y[h] - M);
    inc[h] = w[h];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const float o = shup(inc[h], d);
      if (lane >= d) inc[h] += o;
    }
  }
  const float tot0 = shf(inc[0], 31);
  const unsigned hit0 = ballot(inc[0] > r && w[0] > 0.f);
  const unsigned hit1 = ballot(inc[1] > r - tot0 && w[1] > 0.f);
  const unsigned pos0 = ballot(w[0] > 0.f), pos1 = ballot(w[1] > 0.f);
  const unsigned val0 = ballot(y[0] != neg_inf()), val1 = ballot(y[1] != neg_inf());
  int f;
  if (hit0) f = ctz(hit0);
  else if (hit1) f = 32 + ctz(hit1);
  else if (pos1) f = 32 + hibit(pos1);
  else if (pos0) f = hibit(pos0);
  else if (val1) f = 32 + hibit(val1);
  else f = hibit(val0 ? val0 : 1u);
  const float ya = shf(y[0], f & 31), yb = shf(y[1], f & 31);
  j = s * kSeg + f;
  yj = f < 32 ? ya : yb;
}

// decide's and finish's dynamic shared memory: Shared2, smx[ns], pre[ns], seglist[ns], skey[ns], ckey[kCap],
// cidx[kCap], cw[kCap] (ns = nseg rounded up to 4).
__host__ __device__ inline size_t smem2_bytes(int nseg) {
  const size_t ns = static_cast<size_t>((nseg + 3) & ~3);
  return (sizeof(Shared2) + 15) / 16 * 16 + ns * 16 + static_cast<size_t>(kCap) * 12;
}

struct Scratch {
  float2* stats;    // [B, nseg]
  float2* rowinfo;  // [B]: M, Z of the tested rows
  float* prop_y;    // [B, kProp]
  int* prop_j;      // [B, kProp]
  int* test_rows;   // [B]
  int* ntest;       // [1]: tested rows; ntest[1]: the test pass's next item; ntest[2]: rows decided
  int* ready;       // [B]: slot s of test_rows published
  float* part;      // [B, nch3, 32]: counts (0..15) and masses (16..31) above each proposal, per chunk
};

struct Args {
  const float* logits;
  const float* temperature;
  const int* top_k;
  const float* top_p;
  const float* u;
  long long* ids;
  int B, V, R, nseg, nch3;
  bool vec;
};

struct Smem2 {
  Shared2* sh;
  float* smx;
  float* pre;
  int* seglist;
  unsigned* skey;
  unsigned* ckey;
  int* cidx;
  float* cw;  // the candidates' masses 2^(y - M)
};
__device__ Smem2 carve(unsigned char* raw, int nseg) {
  const int ns = (nseg + 3) & ~3;
  Smem2 m;
  m.sh = reinterpret_cast<Shared2*>(raw);
  m.smx = reinterpret_cast<float*>(raw + (sizeof(Shared2) + 15) / 16 * 16);
  m.pre = m.smx + ns;
  m.seglist = reinterpret_cast<int*>(m.pre + ns);
  m.skey = reinterpret_cast<unsigned*>(m.seglist + ns);
  m.ckey = m.skey + ns;
  m.cidx = reinterpret_cast<int*>(m.ckey + kCap);
  m.cw = reinterpret_cast<float*>(m.cidx + kCap);
  return m;
}

// Rejection continued by one CTA for a row whose first proposals were all rejected: draws n0.. one at a time,
// each tested by the CTA's own pass over the row; then the argmax (lowest index), as the expert does.
__device__ void continue_row(const Args& a, int b, int n0, float sc, const RowSummary& rs, const float* pre,
                             Shared2& sh) {
  const float* row = a.logits + static_cast<size_t>(b) * a.V;
  const int k = a.top_k[b];
  const float p = a.top_p[b];
  for (int r = n0; r < a.R; ++r) {
    __syncthreads();
    if (threadIdx.x < 32) {
      int j;
      float yj;
      warp_draw(row, a.V, sc, rs.M, pre, a.nseg, a.u[static_cast<size_t>(b) * a.R + r] * rs.Z, j, yj);
      if (threadIdx.x == 0) {
        sh.bi[2] = j;
        sh.bf[2] = yj;
      }
    }
    __syncthreads();
    const float yj = sh.bf[2];
    const int j = sh.bi[2];
    float cnt = 0.f, ms = 0.f;
    for (int e = threadIdx.x; e < a.V; e += kThreads2) {
      const float y = ld1(row + e) * sc;
      if (y > yj) {
        cnt += 1.f;
        ms += ex2(y - rs.M);
      }
    }
    cnt = block_sum(cnt, sh);
    ms = block_sum(ms, sh);
    if ((k >= a.V || cnt < static_cast<float>(k)) && (p >= 1.f || ms < p * rs.Z)) {
      if (threadIdx.x == 0) a.ids[b] = j;
      return;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.bi[3] = 0x7fffffff;
  __syncthreads();
  for (int e = threadIdx.x; e < a.V; e += kThreads2)
    if (ld1(row + e) * sc == rs.M) {
      s_min(&sh.bi[3], e);
      break;
    }
  __syncthreads();
  if (threadIdx.x == 0) a.ids[b] = sh.bi[3] == 0x7fffffff ? 0 : sh.bi[3];
}

// ---------------------------------------------------------------- kernel 2: per-row decisions
__global__ void __launch_bounds__(kThreads2, 2) decide_kernel(Args a, Scratch scr) {
  wait_prior_grid();
  allow_dependents();
  D2K_STAMP(1);
  D2K_DYN_SMEM(smem_raw);
  const Smem2 m = carve(smem_raw, a.nseg);
  Shared2& sh = *m.sh;
  const int b = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int V = a.V, nseg = a.nseg;
  const float sc = kLog2e / a.temperature[b];
  const int k = a.top_k[b];
  const float p = a.top_p[b];
  const float* row = a.logits + static_cast<size_t>(b) * V;
  const float* ub = a.u + static_cast<size_t>(b) * a.R;
  [&] {  // the row's route; every return leads to the row's count below
    const float M = load_summary(scr.stats, b, nseg, m.smx, m.pre, sh);

    if (k >= V && p >= 1.f) {  // plain: every token kept
      D2K_ROUTE(0);
      const float Z = prefix_masses(nseg, m.smx, m.pre, M, sh);
      if (warp == 0) {
        int j;
        float yj;
        warp_draw(row, V, sc, M, m.pre, nseg, ub[0] * Z, j, yj);
        if (lane == 0) a.ids[b] = j;
      }
      return;
    }

    if (k <= nseg && k <= kListMaxK) {
      const float Z = p < 1.f ? total_mass(nseg, m.smx, m.pre, M, sh) : 0.f;  // for the top-p crossing alone
      D2K_MARK();
      float mn = __builtin_huge_valf();
      for (int s = tid; s < nseg; s += kThreads2) {  // this thread's own stores of load_summary
        m.skey[s] = fkey(m.smx[s]);
        mn = fminf(mn, m.smx[s]);
      }
      const float smin = -block_max(-mn, sh);
      if (tid == 0) {
        sh.bi[1] = 0;  // segments to read
        sh.bi[4] = 0;  // candidates
        sh.bi[5] = 0x7fffffff;
        sh.bi[6] = -1;
      }
      const unsigned hi = fkey(M);
      // g: the k-th largest segment max (kth_key's first barrier orders the stores above).
      const unsigned gk = kth_key(m.skey, nseg, k, fkey(smin), hi, sh);
      D2K_MARK();
      for (int s0 = 0; s0 < nseg; s0 += kThreads2) {  // warp-aggregated appends: one atomic per warp
        const int s = s0 + tid;
        const bool take = s < nseg && m.skey[s] >= gk;
        const unsigned bal = ballot(take);
        if (bal) {
          int base = 0;
          if (lane == 0) base = s_add(&sh.bi[1], popc(bal));
          base = shfi(base, 0);
          if (take) m.seglist[base + popc(bal & ((1u << lane) - 1u))] = s;
        }
      }
      __syncthreads();
      const int nl = sh.bi[1];
      D2K_MARK();
      // Read back the listed segments, 4 elements per unit, 8 units in flight per thread: y >= g are candidates.
      // A thread marks its candidates in a bit mask (a float compare per element); one warp scan and one shared
      // atomic per warp and round place them, off the per-element path.
      const float gf = key2f(gk);
      const int units = nl * (kSeg / 4);
      auto unit_e0 = [&](int q) { return q < units ? m.seglist[q >> 4] * kSeg + (q & 15) * 4 : V; };
      for (int q0 = 0; q0 < units; q0 += kThreads2 * 8) {
        unsigned hits = 0;
        {
          float x[8][4];
  #pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int e0 = unit_e0(q0 + i * kThreads2 + tid);
            if (a.vec && e0 < V) {
              const float4 v = ld4(row + e0);
              x[i][0] = v.x, x[i][1] = v.y, x[i][2] = v.z, x[i][3] = v.w;
            } else {
  #pragma unroll
              for (int l = 0; l < 4; ++l) x[i][l] = e0 + l < V ? ld1(row + e0 + l) : nan_f();  // never taken
            }
          }
  #pragma unroll
          for (int i = 0; i < 8; ++i)
  #pragma unroll
            for (int l = 0; l < 4; ++l) hits |= x[i][l] * sc >= gf ? 1u << (4 * i + l) : 0u;
        }
        const int c = popc(hits);
        int inc = c;
  #pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const int o = shupi(inc, d);
          if (lane >= d) inc += o;
        }
        int base = 0;
        if (lane == 31 && inc > 0) base = s_add(&sh.bi[4], inc);
        int pos = shfi(base, 31) + inc - c;
        while (hits) {  // rare: the candidates are reloaded (L1) rather than kept in registers
          const int bit = ctz(hits);
          hits &= hits - 1u;
          const int e = unit_e0(q0 + (bit >> 2) * kThreads2 + tid) + (bit & 3);
          const float y = ld1(row + e) * sc;
          const unsigned key = fkey(y);
          if (pos < kCap) {
            m.ckey[pos] = key > gk ? key : gk;  // y >= g also takes -0 when g = +0: the same value
            m.cidx[pos] = e;
            m.cw[pos] = ex2(y - M);
          }
          ++pos;
        }
      }
      __syncthreads();
      const int nc = sh.bi[4];
      D2K_MARK();
      if (nc <= kCap) {  // else too many ties at g: the row is tested instead
        D2K_ROUTE(1);
        D2K_LISTED(k, nl, nc);
        // Candidates are exactly the keys >= g, so within [g, key of M].
        const unsigned tk = kth_key(m.ckey, nc, k, gk, hi, sh);
        D2K_MARK();
        unsigned t = tk;
        if (p < 1.f) {
          // The top-p crossing, when it lies at or above g (the candidates' masses are the row's there); else 0.
#ifndef D2K_PSEL_BITS
          const unsigned tp = crossing_key(m.ckey, [&](int i) { return m.cw[i]; }, nc, p * Z, gk, hi, sh);
#else
          const unsigned tp = select_key(m.ckey, nc, [&](int i) { return m.cw[i]; }, p * Z, gk, hi, sh);
#endif
          t = tp > tk ? tp : tk;
        }
        D2K_MARK();
        // Inverse CDF over the kept candidates (key >= t), in buffer order, with u[b, 0].
        const int per = (nc + kThreads2 - 1) / kThreads2;
        const int i0 = tid * per, i1 = i0 + per < nc ? i0 + per : nc;
        float loc = 0.f;
        int last = -1;
        for (int i = i0; i < i1; ++i)
          if (m.ckey[i] >= t) {
            loc += m.cw[i];
            last = i;
          }
        const float inc = block_incl_scan(loc, sh);
        if (last >= 0) s_max(&sh.bi[6], last);
        if (tid == kThreads2 - 1) sh.bf[1] = inc;
        __syncthreads();
        const float total = sh.bf[1];
        float target = ub[0] * total;
        if (target >= total) target = u2f(f2u(total) - 1u);  // total >= 1 (the max is kept)
        float run = inc - loc;
        if (loc > 0.f && run <= target && target < inc)
          for (int i = i0; i < i1; ++i)
            if (m.ckey[i] >= t) {
              run += m.cw[i];
              if (run > target) {
                s_min(&sh.bi[5], i);
                break;
              }
            }
        __syncthreads();
        if (tid == 0) a.ids[b] = m.cidx[sh.bi[5] != 0x7fffffff ? sh.bi[5] : sh.bi[6]];
        return;
      }
    }

    // Tested: kProp proposals from the whole distribution, one per warp.
    D2K_ROUTE(2);
    const float Z = prefix_masses(nseg, m.smx, m.pre, M, sh);
    const int np = a.R < kProp ? a.R : kProp;
    if (warp < np) {
      int j;
      float yj;
      warp_draw(row, V, sc, M, m.pre, nseg, ub[warp] * Z, j, yj);
      if (lane == 0) {
        scr.prop_y[b * kProp + warp] = yj;
        scr.prop_j[b * kProp + warp] = j;
      }
    }
    if (tid == 0) scr.rowinfo[b] = make_float2(M, Z);
    __syncthreads();  // the proposals and rowinfo, then the slot's flag (bar.sync, then a gpu-scope fence)
    if (tid == 0) {
      const int slot = g_add(scr.ntest, 1);
      scr.test_rows[slot] = b;
      __threadfence();
      st_release(scr.ready + slot, 1);
    }
  }();
  __syncthreads();
  if (tid == 0) {  // after every write of this row (ids, proposals, slot)
    __threadfence();
    g_add(scr.ntest + 2, 1);
  }
}

// ---------------------------------------------------------------- kernel 3: the shared test pass
// Only elements above the lowest proposal count for any proposal (~1-2% on LLM rows): one compare per element
// marks them in a bit mask, and they alone are reloaded (L1) and compared with every proposal.
constexpr int kAcc = kProp <= 8 ? 16 : 32;  // counts, masses, zeros: a power of two >= 2 kProp

template <bool kCnt, bool kMass>
__device__ __forceinline__ void test_chunk(const float* row, int e0, int V, bool vec, float sc, float M,
                                           const float (&v)[kProp], float vmin, float (&acc)[kAcc]) {
  float x[4][8];
#pragma unroll
  for (int u = 0; u < 4; ++u) load8(row, e0 + u * (kChunk3 / 4), V, vec, x[u]);
  unsigned hits = 0;
#pragma unroll
  for (int u = 0; u < 4; ++u)
#pragma unroll
    for (int i = 0; i < 8; ++i) hits |= x[u][i] * sc > vmin ? 1u << (8 * u + i) : 0u;  // -inf past V: never
  while (hits) {
    const int bit = ctz(hits);
    hits &= hits - 1u;
    const float y = ld1(row + e0 + (bit >> 3) * (kChunk3 / 4) + (bit & 7)) * sc;
    const float w = kMass ? ex2(y - M) : 0.f;
#pragma unroll
    for (int r = 0; r < kProp; ++r) {
      const bool gt = y > v[r];
      if (kCnt) acc[r] += gt ? 1.f : 0.f;
      if (kMass) acc[kProp + r] += gt ? w : 0.f;
    }
  }
}

// The next (tested row, chunk) item once its row is published, or -1 when every row is decided and none is left.
__device__ int claim_item(const Args& a, const Scratch& scr) {
  const int item = g_add(scr.ntest + 1, 1);
  const int slot = item / a.nch3;
  for (;;) {
    if (slot < a.B && ld_acquire(scr.ready + slot)) return item;
    if (ld_acquire(scr.ntest + 2) == a.B && ldcg(scr.ntest) <= slot) return -1;
    nap();
  }
}

constexpr size_t kSmem3 = 8 * 32 * sizeof(float) + 16;  // test_kernel: red[8][32], the next item

__global__ void __launch_bounds__(kThreads1) test_kernel(Args a, Scratch scr) {
#ifndef D2K_OVERLAP
  wait_prior_grid();
#endif
  D2K_STAMP(2);
  D2K_DYN_SMEM(smem_raw);
  float* red = reinterpret_cast<float*>(smem_raw);  // [8 warps][32]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#ifdef D2K_OVERLAP
  int* next = reinterpret_cast<int*>(red + 8 * 32);
  for (;;) {
    if (tid == 0) *next = claim_item(a, scr);  // the previous item's readers passed two barriers since
    __syncthreads();
    const int item = *next;
    if (item < 0) break;
#else
  const int items = *scr.ntest * a.nch3;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
#endif
    const int slot = item / a.nch3, c = item % a.nch3;
    const int b = ldcg(scr.test_rows + slot);
    const float sc = kLog2e / a.temperature[b];
    const float M = ldcg(scr.rowinfo + b).x;
    const bool cnt = a.top_k[b] < a.V, mass = a.top_p[b] < 1.f;
    const int np = a.R < kProp ? a.R : kProp;
    float v[kProp], acc[kAcc];  // counts in [0, kProp), masses in [kProp, 2 kProp), zeros after
    float vmin = __builtin_huge_valf();
#pragma unroll
    for (int r = 0; r < kProp; ++r) {
      v[r] = r < np ? ldcg(scr.prop_y + b * kProp + r) : __builtin_huge_valf();
      vmin = fminf(vmin, v[r]);
    }
#pragma unroll
    for (int r = 0; r < kAcc; ++r) acc[r] = 0.f;
    const float* row = a.logits + static_cast<size_t>(b) * a.V;
    const int e0 = c * kChunk3 + 8 * tid;
    if (cnt && mass) test_chunk<true, true>(row, e0, a.V, a.vec, sc, M, v, vmin, acc);
    else if (cnt) test_chunk<true, false>(row, e0, a.V, a.vec, sc, M, v, vmin, acc);
    else test_chunk<false, true>(row, e0, a.V, a.vec, sc, M, v, vmin, acc);
    // Reduce-scatter over the warp: lane l ends with the warp's total of value l (mod kAcc).
    if (kAcc == 16) {
#pragma unroll
      for (int i = 0; i < 16; ++i) acc[i] += shx(acc[i], 16);
    }
#pragma unroll
    for (int o = kAcc / 2, n = kAcc; o; o >>= 1, n >>= 1) {
      const bool up = lane & o;
#pragma unroll
      for (int i = 0; i < n / 2; ++i) {
        const float send = up ? acc[i] : acc[i + n / 2];
        const float keep = up ? acc[i + n / 2] : acc[i];
        acc[i] = keep + shx(send, o);
      }
    }
    __syncthreads();  // the previous item's red is read
    red[warp * 32 + lane] = lane < kAcc ? acc[0] : 0.f;
    __syncthreads();
    if (tid < 32) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < kThreads1 / 32; ++w) t += red[w * 32 + tid];
      scr.part[(static_cast<size_t>(slot) * a.nch3 + c) * 32 + tid] = t;
    }
  }
}

// ---------------------------------------------------------------- kernel 4: the tested rows' verdicts
__global__ void __launch_bounds__(kThreads2) finish_kernel(Args a, Scratch scr) {
  wait_prior_grid();
  D2K_STAMP(3);
  D2K_DYN_SMEM(smem_raw);
  const Smem2 m = carve(smem_raw, a.nseg);
  Shared2& sh = *m.sh;
  const int slot = blockIdx.x;
  if (slot >= ldcg(scr.ntest)) return;
  const int b = ldcg(scr.test_rows + slot);
  const int k = a.top_k[b];
  const float p = a.top_p[b];
  const float Z = ldcg(scr.rowinfo + b).y;
  const int np = a.R < kProp ? a.R : kProp;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float t = 0.f;
    for (int c = 0; c < a.nch3; ++c) t += ldcg(scr.part + (static_cast<size_t>(slot) * a.nch3 + c) * 32 + lane);
    const float ms = shf(t, (lane + kProp) & 31);
    const bool ok = lane < np && (k >= a.V || t < static_cast<float>(k)) && (p >= 1.f || ms < p * Z);
    const unsigned acc = ballot(ok);
    if (lane == 0) {
      sh.bi[7] = acc ? 1 : 0;
      if (acc) a.ids[b] = ldcg(scr.prop_j + b * kProp + ctz(acc));
    }
  }
  __syncthreads();
  if (sh.bi[7]) return;
  const float sc = kLog2e / a.temperature[b];
  RowSummary rs;
  rs.M = load_summary(scr.stats, b, a.nseg, m.smx, m.pre, sh);
  rs.Z = prefix_masses(a.nseg, m.smx, m.pre, rs.M, sh);
  D2K_ROUTE(3);
  continue_row(a, b, np, sc, rs, m.pre, sh);
}

// Launches a kernel that begins with wait_prior_grid(): with programmatic stream serialization its CTAs may be
// scheduled while the previous kernel drains (D2K_NO_PDL: an ordinary launch).
template <class K>
cudaError_t launch_dependent(K kernel, dim3 grid, int threads, size_t smem, cudaStream_t s, const Args& a,
                             const Scratch& scr) {
#if defined(D2K_CPU_EMU) || defined(D2K_NO_PDL)
  D2K_LAUNCH(kernel, grid, dim3(threads), smem, s)(a, scr);
  return cudaGetLastError();
#else
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, a, scr);
#endif
}

bool aligned(const void* p, uintptr_t al) { return (reinterpret_cast<uintptr_t>(p) % al) == 0; }

struct ScratchState {
  void* ptr = nullptr;
  size_t bytes = 0;
  int device = -1;
};
ScratchState g_scratch;

// Per-device launch facts, found once: the host's setup of a call is then the launches alone.
struct DeviceFacts {
  int device = -1, optin = 0, nsm = 0, occ3 = 1, occ1 = 1;
  size_t smem2_set = 0;  // the dynamic shared memory decide and finish are allowed
};
DeviceFacts g_facts;

}  // namespace

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)params;
  (void)n_params;
  if (n_inputs != 5 || n_outputs != 1) return 1;
  const d2k_tensor& tl = inputs[0];
  const d2k_tensor& tt = inputs[1];
  const d2k_tensor& tk = inputs[2];
  const d2k_tensor& tp = inputs[3];
  const d2k_tensor& tu = inputs[4];
  const d2k_tensor& ti = outputs[0];
  if (tl.dtype != D2K_FLOAT32 || tl.ndim != 2 || tt.dtype != D2K_FLOAT32 || tk.dtype != D2K_INT32 ||
      tp.dtype != D2K_FLOAT32 || tu.dtype != D2K_FLOAT32 || tu.ndim != 2 || ti.dtype != D2K_INT64)
    return 2;
  const int64_t B = tl.shape[0];
  const int64_t V = tl.shape[1];
  const int64_t R = tu.shape[1];
  if (tu.shape[0] != B || tt.shape[0] != B || tk.shape[0] != B || tp.shape[0] != B || ti.shape[0] != B) return 3;
  if (B == 0) return 0;
  const int64_t nseg = (V + kSeg - 1) / kSeg;
  const int64_t nch1 = (V + kChunk1 - 1) / kChunk1, nch3 = (V + kChunk3 - 1) / kChunk3;
  if (V < 1 || R < 1 || nseg > (1 << 20) || B * nch1 > (int64_t{1} << 31) - 1 || R > 1 << 20) return 3;
  if (tl.strides[1] != 1 || tl.strides[0] != V || tu.strides[1] != 1 || tu.strides[0] != R) return 4;
  if (!aligned(tl.data, 4)) return 4;
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);

  Args a;
  a.logits = static_cast<const float*>(tl.data);
  a.temperature = static_cast<const float*>(tt.data);
  a.top_k = static_cast<const int*>(tk.data);
  a.top_p = static_cast<const float*>(tp.data);
  a.u = static_cast<const float*>(tu.data);
  a.ids = static_cast<long long*>(ti.data);
  a.B = static_cast<int>(B);
  a.V = static_cast<int>(V);
  a.R = static_cast<int>(R);
  a.nseg = static_cast<int>(nseg);
  a.nch3 = static_cast<int>(nch3);
  a.vec = V % 4 == 0 && aligned(tl.data, 16);

  auto up = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t b_stats = up(sizeof(float2) * B * nseg), b_row = up(sizeof(float2) * B),
               b_py = up(sizeof(float) * B * kProp), b_pj = up(sizeof(int) * B * kProp), b_tr = up(sizeof(int) * B),
               b_nt = 256, b_part = up(sizeof(float) * B * nch3 * 32), b_rd = up(sizeof(int) * B);
  const size_t need = b_stats + b_row + b_py + b_pj + b_tr + b_nt + b_part + b_rd;

  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 5;
  // Scratch: kept between calls (grow-only) outside graph capture; stream-ordered inside one.
  void* buf = nullptr;
  bool temporary = false;
  if (g_scratch.ptr != nullptr && g_scratch.device == dev && g_scratch.bytes >= need) {
    buf = g_scratch.ptr;
  } else {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) return 5;
    if (cs == cudaStreamCaptureStatusNone) {
      if (g_scratch.ptr != nullptr && g_scratch.device == dev) cudaFree(g_scratch.ptr);
      g_scratch = {};
      if (cudaMalloc(&g_scratch.ptr, need + need / 2) != cudaSuccess) return 5;
      g_scratch.bytes = need + need / 2;
      g_scratch.device = dev;
      buf = g_scratch.ptr;
    } else {
      if (cudaMallocAsync(&buf, need, s) != cudaSuccess) return 5;
      temporary = true;
    }
  }
  char* base = static_cast<char*>(buf);
  Scratch scr;
  scr.stats = reinterpret_cast<float2*>(base);
  base += b_stats;
  scr.rowinfo = reinterpret_cast<float2*>(base);
  base += b_row;
  scr.prop_y = reinterpret_cast<float*>(base);
  base += b_py;
  scr.prop_j = reinterpret_cast<int*>(base);
  base += b_pj;
  scr.test_rows = reinterpret_cast<int*>(base);
  base += b_tr;
  scr.ntest = reinterpret_cast<int*>(base);
  base += b_nt;
  scr.part = reinterpret_cast<float*>(base);
  base += b_part;
  scr.ready = reinterpret_cast<int*>(base);

  // decide and finish keep a row's summaries in shared memory: 16 bytes per segment, so V up to ~770,000 on an
  // H100 or H200 (227 KB); larger rows are refused (code 7) rather than served slowly.
  const size_t smem2 = smem2_bytes(a.nseg);
  if (g_facts.device != dev) {
    DeviceFacts f;
    f.device = dev;
    if (cudaDeviceGetAttribute(&f.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&f.nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 5;
#ifndef D2K_CPU_EMU
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.occ3, test_kernel, kThreads1, kSmem3) != cudaSuccess ||
        f.occ3 < 1)
      f.occ3 = 1;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.occ1, stats_kernel, kThreads1, 0) != cudaSuccess ||
        f.occ1 < 1)
      f.occ1 = 1;
#endif
#if !defined(D2K_CPU_EMU) && defined(D2K_CARVEOUT)
    // The summary and test kernels run beside decide's 80 KB CTAs (PDL): give them the same shared-memory
    // carveout, so an SM need not drain to switch its L1/shared split between the kernels. Not yet measured,
    // so not the default.
    if (cudaFuncSetAttribute(stats_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess ||
        cudaFuncSetAttribute(test_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess ||
        cudaFuncSetAttribute(decide_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess ||
        cudaFuncSetAttribute(finish_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess)
      return 5;
#endif
    g_facts = f;
  }
  if (smem2 > static_cast<size_t>(g_facts.optin)) return 7;
  if (smem2 > g_facts.smem2_set) {
    if (cudaFuncSetAttribute(decide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem2)) !=
            cudaSuccess ||
        cudaFuncSetAttribute(finish_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem2)) !=
            cudaSuccess)
      return 5;
    g_facts.smem2_set = smem2;
  }
#ifdef D2K_CPU_EMU
  const int grid3 = 3;  // few CTAs, so that each takes several items
#else
  const int grid3 = g_facts.nsm * g_facts.occ3;
#endif
#if defined(D2K_TIMELINE) && !defined(D2K_CPU_EMU)
  timeline_reset<<<1, 1, 0, s>>>();
#endif
  const int nitems1 = static_cast<int>(B * nch1);
  int grid1 = nitems1;
#if defined(D2K_PERSIST1) || defined(D2K_CPU_EMU)
  {  // persistent: every resident CTA loops over items (the emulation: a few CTAs, so that each takes several)
#ifdef D2K_CPU_EMU
    const int g = 5;
#else
    const int g = g_facts.nsm * g_facts.occ1;
#endif
    if (g < grid1) grid1 = g;
  }
#endif
  D2K_LAUNCH(stats_kernel, dim3(static_cast<unsigned>(grid1)), dim3(kThreads1), 0, s)(
      a.logits, a.temperature, a.V, a.nseg, static_cast<int>(nch1), nitems1, a.vec, scr.stats, scr.ntest, scr.ready,
      a.B);
  cudaError_t err = cudaGetLastError();
#ifndef D2K_STATS_ONLY  // timing variants: the summary pass alone; the pass and the decisions
  if (err == cudaSuccess) err = launch_dependent(decide_kernel, dim3(static_cast<unsigned>(B)), kThreads2, smem2, s, a, scr);
#ifndef D2K_NO_TEST
  if (err == cudaSuccess)
    err = launch_dependent(test_kernel, dim3(static_cast<unsigned>(grid3)), kThreads1, kSmem3, s, a, scr);
  if (err == cudaSuccess) err = launch_dependent(finish_kernel, dim3(static_cast<unsigned>(B)), kThreads2, smem2, s, a, scr);
#endif
#endif
#if defined(D2K_TIMELINE) && !defined(D2K_CPU_EMU)
  timeline_print<<<1, 1, 0, s>>>();
#endif
  if (temporary) {
    const cudaError_t ferr = cudaFreeAsync(buf, s);
    if (err == cudaSuccess) err = ferr;
  }
  return err == cudaSuccess ? 0 : 6;
}
