/* topk_topp_sampling: candidate "stream" (one HBM pass per row; the pivot sampler on a compacted candidate list).
 * Not the expert: in warm-L2 timing 5-14% faster than it on the two large workloads, 1.3-2x slower on the small ones,
 * and far from 40% of speed-of-light (NOTES.md has the measurements and what to try next).
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 *
 * Design:
 *  - One CTA per row streams it once through a TMA ring, keeping an online max and sum per thread. Rows whose
 *    top_k fits the candidate list (top_k <= CAP/2) also append every element at or above a rising threshold
 *    theta: the warp's running max - WINDOW, and, whenever the list passes half its capacity, the k-th largest
 *    listed value (a value-binned select; every token below it has k tokens above it, so it is outside top-k).
 *  - At the end the list holds every token >= Theta (the final threshold). When at least top_k of them, or top_p
 *    of the mass, lie at or above Theta, the kept set is inside the list and the expert's pivot rejection runs on
 *    the list alone, in shared memory (no HBM, no cluster exchange).
 *  - Other rows (top_k >= V, or a list that cannot prove it holds the kept set): plain rejection from the full
 *    distribution. A draw picks a thread by a block scan of the per-thread masses kept from the stream, then one
 *    warp re-reads that thread's ~V/512 elements; the test uses the list when the draw lies at or above Theta, else
 *    one pass over the row (8 float4 loads in flight per thread). Acceptance is at least top_p per round there.
 *  fp32 in log2 units (y = x * log2(e) / T, weights ex2.approx(y - m)); 512 threads, 2 CTAs per SM, a 2 x 16 KB ring,
 *  an 8192-entry list. Compile-time variants (-D): STAGES, CAP, WINDOW, HIST (a mass histogram built during the
 *  stream decides most top-p tests), EARLY (a per-warp top-k bound from the lanes' largest values), BATCH (slower:
 *  top-p rows draw 16 proposals, then test them all in one re-read), and for
 *  timing only STREAM_ONLY, NO_LIST, NO_COMPACT (wrong ids), TAIL_STATS.
 */
#include "d2k/solution.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#ifdef TAIL_STATS
#include <cstdio>
#endif

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kStageF4 = 1024;            // float4 per ring stage: 16 KB, two per thread
#ifndef STAGES
#define STAGES 2
#endif
constexpr int kStages = STAGES;           // ring depth
#ifndef CAP
#define CAP 8192
#endif
constexpr int kCap = CAP;                 // candidate list capacity
constexpr int kPer = kCap / kThreads;     // list entries per thread
constexpr int kLaneTop = 4;               // early bound: each lane's 4 largest values seen, for top_k <= 32 * 4
constexpr int kChunk = 8;                 // list entries per thread held in registers by one compaction step
#ifndef WINDOW
#define WINDOW 24.0f
#endif
constexpr float kWindow = WINDOW;         // log2 units below the running max that are always listed
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxV = 1 << 28;
constexpr int kRowUnroll = 8;            // float4 loads in flight per thread in a full re-read of the row
constexpr int kHistShift = 19;            // hist rows: bin = key(y) >> 19 (sign, exponent, 4 mantissa bits)
constexpr int kHistBins = 1 << (32 - kHistShift);

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Order-preserving float <-> unsigned key (larger float, larger key).
__device__ __forceinline__ unsigned fkey(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float keyf(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned mb) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mb) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned mb, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mb), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned mb, unsigned parity) {
  unsigned ok = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"(mb), "r"(parity)
        : "memory");
  } while (!ok);
}
__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes, unsigned mb) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(mb)
               : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Raw float4 g of the row's 16-byte-aligned span -> y = x * sc; -inf outside the row (span element q is row
// element q - off).
__device__ __forceinline__ void to_y(float4 v, int g, int off, int V, float sc, float (&y)[4]) {
  const unsigned q = static_cast<unsigned>(4 * g - off);
  const unsigned n = static_cast<unsigned>(V);
  y[0] = q < n ? v.x * sc : neg_inf();
  y[1] = q + 1u < n ? v.y * sc : neg_inf();
  y[2] = q + 2u < n ? v.z * sc : neg_inf();
  y[3] = q + 3u < n ? v.w * sc : neg_inf();
}

struct Shared {
  unsigned long long mbar[kStages];
  union {
    struct {
      float cy[kCap];  // candidate list (list rows): y and row index
      int ci[kCap];
    };
    float hb[kHistBins];  // mass histogram (hist rows): bin b sums 2^(y - upper edge of b)
  };
  int hist[256];
  float wf[kWarps];    // per-warp scratch
  float wf2[kWarps];
  int wi[kWarps];
  float u[32];
  float theta[2];      // the running threshold, read with a lag of two stages (see the stream loop)
  int cnt;             // list appends (may exceed kCap: the excess is dropped)
  unsigned mkey;       // key of the max y seen
  unsigned wbkey;      // key of the largest warp bound (the k-th largest of a warp's lanes' top values)
  unsigned dkey;       // key of the max dropped y (0: none)
  int sel_digit;
  int sel_above;
  int sel_in;
  unsigned rkmin;      // select: the range's min and max keys
  unsigned rkmax;
  float hm;            // hist test: the mass of the draw's bin
#ifdef BATCH
  float zp[kThreads];  // batched draws: the per-thread mass prefixes and masses
  float zm[kThreads];
  float sy[kWarps];    // the batch's proposals: y sorted ascending; y and id in draw order; bucket totals
  float by[kWarps];
  int bj[kWarps];
  float bt[kWarps + 1];
#endif
  int own;
  int last;
  int dj;              // the round's draw
  float dy;
};

// Block-wide exclusive scan of v (all threads) through the per-warp slots `slot` (kWarps entries); returns the
// exclusive prefix, *total the sum. Two barriers.
template <typename T>
__device__ __forceinline__ T block_scan(T* slot, T v, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T t = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += t;
  }
  if (lane == 31) slot[warp] = x;
  __syncthreads();
  T off = 0, tot = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const T s = slot[w];
    if (w < warp) off += s;
    tot += s;
  }
  __syncthreads();
  *total = tot;
  return off + x - v;
}
// Block sums of (c, s), same result in every thread (fixed order). Two barriers.
__device__ __forceinline__ void block_sum2(Shared& sh, int c, float s, int* cs, float* ss) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    c += __shfl_xor_sync(kFull, c, o);
    s += __shfl_xor_sync(kFull, s, o);
  }
  if (lane == 0) {
    sh.wi[warp] = c;
    sh.wf2[warp] = s;
  }
  __syncthreads();
  int ct = 0;
  float st = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    ct += sh.wi[w];
    st += sh.wf2[w];
  }
  __syncthreads();
  *cs = ct;
  *ss = st;
}

// Select over the list by value: the largest listed t with #{y >= t} >= need, found through up to three levels of
// 256 equal-width bins over the current value range (bins by value, not by key bits, so the bulk of a row spreads
// over many bins instead of piling onto one counter). Stops once #{y >= t} <= enough. Entries below lo0 are ignored.
// All threads; returns t (a listed value).
__device__ __forceinline__ float select_value(Shared& sh, int n, int need, int enough, float lo0) {
  const int lane = threadIdx.x & 31;
  // The range: min and max of the entries >= lo0.
  auto minmax = [&](float lo, float hi, float scale, int b, bool binned) {
    unsigned kmin = 0xffffffffu, kmax = 0u;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float y = sh.cy[i];
      bool in = y >= lo && y <= hi;
      if (in && binned) in = min(255, static_cast<int>((y - lo) * scale)) == b;
      if (in) {
        kmin = min(kmin, fkey(y));
        kmax = max(kmax, fkey(y));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      kmin = min(kmin, __shfl_xor_sync(kFull, kmin, o));
      kmax = max(kmax, __shfl_xor_sync(kFull, kmax, o));
    }
    if (threadIdx.x == 0) {
      sh.rkmin = 0xffffffffu;
      sh.rkmax = 0u;
    }
    __syncthreads();
    if (lane == 0) {
      atomicMin(&sh.rkmin, kmin);
      atomicMax(&sh.rkmax, kmax);
    }
    __syncthreads();
  };
  minmax(lo0, pos_inf(), 0.0f, 0, false);
  float lo = keyf(sh.rkmin), hi = keyf(sh.rkmax);
  int above = 0;
  for (int level = 0;; ++level) {
    const float scale = 256.0f / (hi - lo);
    if (!(hi > lo) || !(scale < pos_inf())) return lo;  // one value left (ties): t = that value
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float y = sh.cy[i];
      if (y >= lo && y <= hi) atomicAdd(&sh.hist[min(255, static_cast<int>((y - lo) * scale))], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l holds bins [8l, 8l + 8); the bin where the count from the top reaches need
      int h[8], sum = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        h[i] = sh.hist[8 * lane + i];
        sum += h[i];
      }
      int suf = sum;  // over lanes >= lane
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_down_sync(kFull, suf, o);
        if (lane + o < 32) suf += t;
      }
      const int higher = above + suf - sum;
      if (higher < need && above + suf >= need) {
        int acc = higher;
#pragma unroll
        for (int i = 7; i >= 0; --i) {
          if (acc + h[i] >= need) {
            sh.sel_digit = 8 * lane + i;
            sh.sel_above = acc;
            sh.sel_in = h[i];
            break;
          }
          acc += h[i];
        }
      }
    }
    __syncthreads();
    const int b = sh.sel_digit, higher = sh.sel_above, in = sh.sel_in;
    __syncthreads();
    minmax(lo, hi, scale, b, true);  // bin b's entries are exactly the listed values in [min_b, max_b] (monotone)
    const float lob = keyf(sh.rkmin), hib = keyf(sh.rkmax);
    if (higher + in <= enough || level == 2) return lob;
    above = higher;
    lo = lob;
    hi = hib;
  }
}

// Keep the list entries with key >= t (in place; all threads). Returns the new count.
__device__ __forceinline__ int compact(Shared& sh, int n, unsigned t) {
  // In chunks of kChunk * kThreads entries: a chunk is read into registers before a barrier, then written at or
  // below its own start (earlier chunks kept no more than they held), so no unread entry is overwritten.
  int base = 0;
  for (int c0 = 0; c0 < n; c0 += kChunk * kThreads) {
    float y[kChunk];
    int id[kChunk];
    int c = 0;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int i = c0 + threadIdx.x + j * kThreads;
      y[j] = i < n ? sh.cy[i] : neg_inf();
      id[j] = i < n ? sh.ci[i] : 0;
      if (i < n && fkey(y[j]) >= t) ++c;
    }
    int tot;
    int pos = base + block_scan(sh.wi, c, &tot);  // its barriers order the reads above before the writes below
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int i = c0 + threadIdx.x + j * kThreads;
      if (i < n && fkey(y[j]) >= t) {
        sh.cy[pos] = y[j];
        sh.ci[pos] = id[j];
        ++pos;
      }
    }
    base += tot;
    __syncthreads();
  }
  return base;
}

__global__ void __launch_bounds__(kThreads, 2)
    topk_topp_stream_kernel(const float* __restrict__ logits, const float* __restrict__ temperature,
                            const int* __restrict__ top_k, const float* __restrict__ top_p,
                            const float* __restrict__ u, long long* __restrict__ ids, int B, int V, int R) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float4* ring = reinterpret_cast<float4*>(smem_raw);  // kStages x kStageF4
  Shared& sh = *reinterpret_cast<Shared*>(smem_raw + sizeof(float4) * kStages * kStageF4);

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) mbar_init(smem_u32(&sh.mbar[i]));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  long long gs = 0;  // ring stages consumed by this CTA so far (slot gs % kStages, phase (gs / kStages) & 1)
  for (long long row = blockIdx.x; row < B; row += gridDim.x) {
    const float T = __ldg(temperature + row);
    const int kk = __ldg(top_k + row);
    const float pp = __ldg(top_p + row);
    const float sc = kLog2e / T;
    const uintptr_t a = reinterpret_cast<uintptr_t>(logits + row * V);
    const int off = static_cast<int>((a & 15u) >> 2);
    const float4* src = reinterpret_cast<const float4*>(a - (a & 15u));
    const int nb = (off + V + 3) >> 2;                     // float4 in the span
    const int nst = (nb + kStageF4 - 1) / kStageF4;        // ring stages in the row
    const bool k_all = kk >= V;
    // Row modes: list rows (top_k small enough for the list), hist rows (top-p only), plain rows (no test, or a
    // top_k too large for the list: every test is a pass over the row).
#ifdef NO_LIST  // timing variants: rows without the list (or the histogram) take the plain route
    const bool list_rows = false;
#else
    const bool list_rows = !k_all && kk <= kCap / 2;
#endif
#ifdef HIST  // variant: a mass histogram built during the stream decides most top-p tests (slower: see NOTES.md)
    const bool hist_rows = k_all && pp < 1.0f;
#else
    const bool hist_rows = false;
#endif

    if (tid < 32) sh.u[tid] = tid < R ? __ldg(u + row * R + tid) : 0.0f;
    if (tid == 0) {
      sh.cnt = 0;
      sh.theta[0] = sh.theta[1] = list_rows ? neg_inf() : pos_inf();  // +inf: nothing is listed
      sh.mkey = fkey(neg_inf());
      sh.wbkey = 0u;
      sh.dkey = 0u;
      for (int i = 0; i < kStages && i < nst; ++i) {
        const long long g = gs + i;
        const int slot = static_cast<int>(g % kStages);
        const int n4 = min(kStageF4, nb - i * kStageF4);
        fence_proxy_async();
        mbar_arrive_expect_tx(smem_u32(&sh.mbar[slot]), static_cast<unsigned>(n4) * 16u);
        bulk_g2s(smem_u32(ring + slot * kStageF4), src + static_cast<long long>(i) * kStageF4,
                 static_cast<unsigned>(n4) * 16u, smem_u32(&sh.mbar[slot]));
      }
    }
    if (hist_rows) {
      for (int i = tid; i < kHistBins; i += kThreads) sh.hb[i] = 0.0f;
    }
    __syncthreads();

#ifdef TAIL_STATS  // diagnostics: per row, its mode, draws, re-reads, compactions and phase cycles (printf; not for d2k eval)
    int st_rounds = 0, st_passes = 0, st_comp = 0, st_app = 0;
    long long st_t0 = clock64(), st_tc = 0, st_ts = 0;
    unsigned long long st_g0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(st_g0));
#define TAIL_COUNT(x) (x)
#define TAIL_DECL(x) x
#else
#define TAIL_COUNT(x)
#define TAIL_DECL(x)
#endif
    // ---- The stream: online max/sum per thread, the candidate list, theta.
    float mloc = neg_inf(), zloc = 0.0f;
    float wrun = neg_inf();  // the warp's running max: wrun - kWindow bounds theta from below too
    // Early bound (rows with top_k <= 128): every lane keeps its kLaneTop largest values (keys; 0 = none); the k-th
    // largest of the warp's 128 is a value with k elements at or above it, so everything below is outside top-k.
    // It spares the list the flood of its first stages, before any compaction has raised theta (variant EARLY).
#ifdef EARLY  // variant: slower (NOTES.md): the per-stage warp search and the lanes' top lists cost more than the flood
    const bool early = list_rows && kk <= 32 * kLaneTop;
#else
    const bool early = false;
#endif
    unsigned top[kLaneTop];
#pragma unroll
    for (int j = 0; j < kLaneTop; ++j) top[j] = 0u;
    float wbound = neg_inf();
    for (int s = 0; s < nst; ++s) {
      const long long g = gs + s;
      const int slot = static_cast<int>(g % kStages);
      mbar_wait(smem_u32(&sh.mbar[slot]), static_cast<unsigned>((g / kStages) & 1));
      // theta[s & 1] was last written after the barrier of stage s - 2 (or by a compaction, before a barrier).
      const float th0 = *reinterpret_cast<volatile float*>(&sh.theta[s & 1]);
      float y[8];
      int gi[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int gl = tid + h * kThreads;
        const int gg = s * kStageF4 + gl;
        gi[h] = gg;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gg < nb) v = ring[slot * kStageF4 + gl];
        float t4[4];
        to_y(v, gg < nb ? gg : -1, off, V, sc, t4);
#pragma unroll
        for (int c = 0; c < 4; ++c) y[4 * h + c] = t4[c];
      }
      float gm = y[0];
#pragma unroll
      for (int i = 1; i < 8; ++i) gm = fmaxf(gm, y[i]);
      if (gm > mloc) {
        zloc *= ex2(mloc - gm);  // mloc = -inf: 0 * 0
        mloc = gm;
      }
      if (mloc > neg_inf()) {
#pragma unroll
        for (int i = 0; i < 8; ++i) zloc += ex2(y[i] - mloc);
      }
      float wm = gm;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) wm = fmaxf(wm, __shfl_xor_sync(kFull, wm, o));
      wrun = fmaxf(wrun, wm);
      if (early) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {  // insert into the lane's descending top list (masked elements: key 0)
          unsigned k = y[i] > neg_inf() ? fkey(y[i]) : 0u;
#pragma unroll
          for (int j = 0; j < kLaneTop; ++j) {
            const unsigned hi = max(top[j], k);
            k = min(top[j], k);
            top[j] = hi;
          }
        }
        if (s < 4 || (s & 7) == 0) {  // radix search of the warp's k-th largest key, most significant bit first
          unsigned pre = 0u;
          for (int bit = 31; bit >= 0; --bit) {
            const unsigned cand = pre | (1u << bit);
            int c = 0;
#pragma unroll
            for (int j = 0; j < kLaneTop; ++j) c += top[j] >= cand ? 1 : 0;
            if (static_cast<int>(__reduce_add_sync(kFull, static_cast<unsigned>(c))) >= kk) pre = cand;
          }
          if (pre > fkey(neg_inf())) {  // k real values at or above it
            wbound = fmaxf(wbound, keyf(pre));
            if (lane == 0) atomicMax(&sh.wbkey, pre);
          }
        }
      }
      const float th = fmaxf(fmaxf(th0, wrun - kWindow), wbound);
      if (hist_rows) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (y[i] > neg_inf()) {
            const unsigned b = fkey(y[i]) >> kHistShift;
            atomicAdd(&sh.hb[b], ex2(y[i] - keyf((b + 1u) << kHistShift)));
          }
        }
      }
      int c = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) c += (y[i] >= th && y[i] > neg_inf()) ? 1 : 0;
      bool over = false;
      if (__any_sync(kFull, c > 0)) {
        int x = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int t = __shfl_up_sync(kFull, x, o);
          if (lane >= o) x += t;
        }
        int base = 0;
        if (lane == 31) base = atomicAdd(&sh.cnt, x);
        base = __shfl_sync(kFull, base, 31);
        const int wtot = __shfl_sync(kFull, x, 31);
        over = base + wtot > kCap / 2;
        int pos = base + x - c;
        unsigned drop = 0u;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (y[i] >= th && y[i] > neg_inf()) {
            if (pos < kCap) {
              sh.cy[pos] = y[i];
              sh.ci[pos] = 4 * gi[i >> 2] + (i & 3) - off;
            } else {
              drop = max(drop, fkey(y[i]));
            }
            ++pos;
          }
        }
        if (drop) atomicMax(&sh.dkey, drop);
      }
      if (lane == 0 && wm > neg_inf()) atomicMax(&sh.mkey, fkey(wm));
#ifdef NO_COMPACT  // timing variant: the list never compacts (appends past the capacity are dropped; wrong ids)
      over = false;
#endif
      const bool need = __syncthreads_or(over);  // every read of this slot, append and max of stage s is done
      if (tid == 0 && s + kStages < nst) {
        const int n4 = min(kStageF4, nb - (s + kStages) * kStageF4);
        fence_proxy_async();
        mbar_arrive_expect_tx(smem_u32(&sh.mbar[slot]), static_cast<unsigned>(n4) * 16u);
        bulk_g2s(smem_u32(ring + slot * kStageF4), src + static_cast<long long>(s + kStages) * kStageF4,
                 static_cast<unsigned>(n4) * 16u, smem_u32(&sh.mbar[slot]));
      }
      if (need) {  // uniform: the list passed half its capacity; raise theta to the k-th largest listed value
        TAIL_DECL(const long long st_c0 = clock64());
        const int n = min(sh.cnt, kCap);
        TAIL_COUNT((++st_comp, st_app += sh.cnt));
        const float t = fmaxf(fmaxf(sh.theta[0], sh.theta[1]), select_value(sh, n, kk, kCap / 4, neg_inf()));
        const unsigned tkey = fkey(t);
        const int nn = compact(sh, n, tkey);
        if (tid == 0) {
          sh.cnt = nn;
          sh.theta[0] = sh.theta[1] = t;
        }
        TAIL_COUNT(st_app -= nn);
        __syncthreads();
        TAIL_COUNT(st_tc += clock64() - st_c0);
      } else if (tid == 0) {
        // Read again at stage s + 2, after the next barrier, which thread 0 reaches after this write.
        const float mseen = keyf(sh.mkey);
        const unsigned wb = sh.wbkey;
        sh.theta[s & 1] = fmaxf(fmaxf(fmaxf(sh.theta[0], sh.theta[1]), mseen - kWindow), wb ? keyf(wb) : neg_inf());
      }
    }
    gs += nst;
    __syncthreads();
    TAIL_COUNT((st_ts = clock64() - st_t0, st_app += sh.cnt));
#ifdef STREAM_ONLY  // timing variant: the stream alone (wrong ids)
    if (tid == 0) ids[row] = 0;
    continue;
#endif

    // ---- Row totals: m (exact max), per-thread masses in row units, Z.
    const float m = keyf(sh.mkey);
    const float zt = mloc > neg_inf() ? zloc * ex2(mloc - m) : 0.0f;
    float Z;
    const float zpre = block_scan(sh.wf, zt, &Z);
    const float pz = pp >= 1.0f ? pos_inf() : pp * Z;
    const bool need_test = !k_all || pp < 1.0f;
    // At or above every threshold any warp used (each warp's early bound is folded in through wbkey).
    const float Theta = fmaxf(fmaxf(fmaxf(sh.theta[0], sh.theta[1]), m - kWindow), sh.wbkey ? keyf(sh.wbkey) : neg_inf());
    const unsigned Tkey = fkey(Theta);
    const bool complete = list_rows && sh.dkey < Tkey;  // the list holds every token >= Theta
    const int n = min(sh.cnt, kCap);

    // Count and mass over the list of the entries above t (at or above t when inclusive).
    auto list_sums = [&](float t, bool inclusive, int* cs, float* ss) {
      int c = 0;
      float w = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int i = tid + j * kThreads;
        if (i < n) {
          const float yy = sh.cy[i];
          if (inclusive ? yy >= t : yy > t) {
            ++c;
            w += ex2(yy - m);
          }
        }
      }
      block_sum2(sh, c, w, cs, ss);
    };
    int c_all;
    float M_all;
    list_sums(Theta, true, &c_all, &M_all);
    const bool listed = complete && (c_all >= kk || M_all >= pz);
#ifdef BATCH  // variant, slower on the H200 (NOTES.md): batched draws for top-p rows
    const bool batch = need_test && k_all && !list_rows && !hist_rows;  // only the top-p test applies
#endif
    // The test of a draw yj >= Theta by the list (which holds every token >= Theta).
    auto test_list = [&](float yj, int* cs, float* ss) { list_sums(yj, false, cs, ss); };
    // The same over the whole row from global memory.
    // A pass over this thread's share of the row from global memory: fn(y) for every element (-inf outside the row),
    // kRowUnroll loads in flight per thread (latency, not bandwidth, bounds one CTA's pass).
    auto row_pass = [&](auto&& fn) {
      for (int g0 = tid; g0 < nb; g0 += kRowUnroll * kThreads) {
        float4 v[kRowUnroll];
#pragma unroll
        for (int q = 0; q < kRowUnroll; ++q) {
          const int g = g0 + q * kThreads;
          v[q] = g < nb ? __ldg(src + g) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int q = 0; q < kRowUnroll; ++q) {
          const int g = g0 + q * kThreads;
          float t4[4];
          to_y(v[q], g < nb ? g : -1, off, V, sc, t4);
#pragma unroll
          for (int e = 0; e < 4; ++e) fn(t4[e]);
        }
      }
    };
    // The list test's counts and masses over the whole row.
    auto test_row = [&](float yj, int* cs, float* ss) {
      int c = 0;
      float w = 0.0f;
      row_pass([&](float y) {
        if (y > yj) {
          ++c;
          w += ex2(y - m);
        }
      });
      block_sum2(sh, c, w, cs, ss);
    };

    // Hist rows: 1 when the histogram proves yj kept, 0 proves it out, -1 when yj's bin straddles the top_p cut.
    auto test_hist = [&](float yj) -> int {
      const unsigned bj = fkey(yj) >> kHistShift;
      float c = 0.0f;
      for (int b = tid; b < kHistBins; b += kThreads) {
        const float h = sh.hb[b];
        if (h > 0.0f) {
          const float M = h * ex2(keyf((static_cast<unsigned>(b) + 1u) << kHistShift) - m);
          if (static_cast<unsigned>(b) > bj) {
            c += M;
          } else if (static_cast<unsigned>(b) == bj) {
            sh.hm = M;
          }
        }
      }
      int unused;
      float C;
      block_sum2(sh, 0, c, &unused, &C);  // its barriers publish sh.hm
      const float Mj = sh.hm;
      __syncthreads();
      if (C >= pz) return 0;       // the mass strictly above yj is at least C
      if (C + Mj <= pz) return 1;  // and below C + Mj
      return -1;
    };

    // The thread whose mass interval [pre, pre + mass) holds target; fp rounding past the end: the last thread with
    // mass. All threads; two barriers.
    auto find_owner = [&](float pre, float mass, float target) -> int {
      if (tid == 0) {
        sh.own = -1;
        sh.last = -1;
      }
      __syncthreads();
      if (mass > 0.0f) {
        atomicMax(&sh.last, tid);
        if (pre <= target && target < pre + mass) sh.own = tid;
      }
      __syncthreads();
      return sh.own >= 0 ? sh.own : sh.last;
    };

    long long result = -1;
    // One warp (all lanes): the token of thread `owner`'s elements (its float4s in stream order are span float4
    // s*kStageF4 + h*kThreads + owner) where the running mass passes rem; fp rounding past the end: the last token
    // with mass. Returns the row index (-1: no mass), the same in every lane.
    auto walk = [&](int owner, float rem) -> int {
      int pj = -1, lastj = -1;
      const int items = 2 * nst;
      for (int base = 0; base < items && pj < 0; base += 32) {
        const int it = base + lane;
        const int gg = (it >> 1) * kStageF4 + (it & 1) * kThreads + owner;
        float t4[4] = {neg_inf(), neg_inf(), neg_inf(), neg_inf()};
        if (it < items && gg < nb) to_y(__ldg(src + gg), gg, off, V, sc, t4);
        float wq[4], ws = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          wq[q] = ex2(t4[q] - m);
          ws += wq[q];
        }
        float x = ws;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const float t = __shfl_up_sync(kFull, x, o);
          if (lane >= o) x += t;
        }
        const unsigned hit = __ballot_sync(kFull, ws > 0.0f && rem < x);
        const unsigned pos = __ballot_sync(kFull, ws > 0.0f);
        if (pos) {
          const int ll = 31 - __clz(pos);
          int lq = -1;
          if (lane == ll) {
            for (int q = 0; q < 4; ++q)
              if (wq[q] > 0.0f) lq = 4 * gg + q - off;
          }
          lastj = __shfl_sync(kFull, lq, ll);
        }
        if (hit) {
          const int hl = __ffs(hit) - 1;
          int pk = -1;
          if (lane == hl) {
            float acc = x - ws;
            int lp = -1;
            for (int q = 0; q < 4; ++q) {
              if (wq[q] > 0.0f) {
                lp = 4 * gg + q - off;
                if (pk < 0 && rem < acc + wq[q]) pk = lp;
                acc += wq[q];
              }
            }
            if (pk < 0) pk = lp;
          }
          pj = __shfl_sync(kFull, pk, hl);
        } else {
          rem -= __shfl_sync(kFull, x, 31);
        }
      }
      return pj < 0 ? lastj : pj;
    };


    if (listed) {
      // ---- Pivot rejection over the list: round r draws from {entries >= Theta} then {entries > low}.
      float lowv = Theta;
      bool strict = false;
      for (int r = 0; r < R && result < 0; ++r) {
        // Weights are recomputed by the owner below (same expression, same order): no per-entry registers.
        auto weight = [&](int j) -> float {
          const int i = tid + j * kThreads;
          if (i >= n) return 0.0f;
          const float yy = sh.cy[i];
          return (strict ? yy > lowv : yy >= lowv) ? ex2(yy - m) : 0.0f;
        };
        float tm = 0.0f;
#pragma unroll
        for (int j = 0; j < kPer; ++j) tm += weight(j);
        float M;
        const float pre = block_scan(sh.wf, tm, &M);
        const float ur = r < 32 ? sh.u[r] : __ldg(u + row * R + r);
        const float target = ur * M;
        const int owner = find_owner(pre, tm, target);
        if (tid == owner) {
          float acc = pre;
          int pick = -1, lastp = -1;
          for (int j = 0; j < kPer; ++j) {
            const float wj = weight(j);
            if (wj > 0.0f) {
              lastp = j;
              if (pick < 0 && target < acc + wj) pick = j;
              acc += wj;
            }
          }
          if (pick < 0) pick = lastp;
          const int i = tid + pick * kThreads;
          sh.dj = sh.ci[i];
          sh.dy = sh.cy[i];
        }
        __syncthreads();
        const int dj = sh.dj;
        const float dy = sh.dy;
        if (!need_test) {
          result = dj;
          break;
        }
        int cs;
        float ss;
        TAIL_COUNT(++st_rounds);
        test_list(dy, &cs, &ss);
        if (cs < kk && ss < pz) {
          result = dj;
        } else {
          lowv = dy;
          strict = true;
        }
      }
#ifdef BATCH
    } else if (batch) {
      // ---- Plain rejection, kWarps draws at a time (top-p rows without a list): warp w draws u[b, r0 + w] from the
      // full distribution, then one pass over the row sums, for every proposal, the mass strictly above it. Element y
      // lands in bucket j = #{proposals < y} (sorted), so the mass above proposal q is the sum of buckets j >= U_q,
      // U_q = #{proposals <= y_q}. The first accepted proposal in draw order is the sample (independent draws).
      float* bk = sh.cy;  // buckets 1..kWarps x kThreads per thread, in the list's memory (unused by these rows)
      static_assert(kWarps * kThreads <= 2 * kCap, "the buckets overflow the list's memory");
      sh.zp[tid] = zpre;
      sh.zm[tid] = zt;
      for (int r0 = 0; r0 < R && result < 0; r0 += kWarps) {
        const int nq = min(kWarps, R - r0);
        __syncthreads();  // zp/zm published; the previous batch's reads of sy/by/bj/bt done
        if (warp < nq) {
          const int r = r0 + warp;
          const float target = (r < 32 ? sh.u[r] : __ldg(u + row * R + r)) * Z;
          int owner = -1, lastm = -1;
          for (int c = 0; c < kThreads && owner < 0; c += 32) {
            const float zm_ = sh.zm[c + lane], zp_ = sh.zp[c + lane];
            const unsigned hit = __ballot_sync(kFull, zm_ > 0.0f && target < zp_ + zm_);
            const unsigned pos = __ballot_sync(kFull, zm_ > 0.0f);
            if (pos) lastm = c + 31 - __clz(pos);
            if (hit) owner = c + __ffs(hit) - 1;
          }
          if (owner < 0) owner = lastm;
          const int pj = owner >= 0 ? walk(owner, target - sh.zp[owner]) : -1;
          if (lane == 0) {
            sh.bj[warp] = pj;
            sh.by[warp] = pj >= 0 ? __ldg(logits + row * V + pj) * sc : neg_inf();
          }
        }
        __syncthreads();
        if (tid == 0) {  // insertion sort of the proposals' y, ascending
          for (int q = 0; q < nq; ++q) {
            const float v = sh.by[q];
            int i = q;
            while (i > 0 && sh.sy[i - 1] > v) {
              sh.sy[i] = sh.sy[i - 1];
              --i;
            }
            sh.sy[i] = v;
          }
        }
        for (int j = 1; j <= nq; ++j) bk[(j - 1) * kThreads + tid] = 0.0f;
        __syncthreads();
        TAIL_COUNT((st_rounds += nq, ++st_passes));
        row_pass([&](float yy) {
          int lo = 0, hi = nq;  // lower bound: #{proposals < yy}
          while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (sh.sy[mid] < yy) lo = mid + 1; else hi = mid;
          }
          if (lo > 0) bk[(lo - 1) * kThreads + tid] += ex2(yy - m);
        });
        __syncthreads();
        for (int j = 1 + warp; j <= nq; j += kWarps) {  // bucket totals, fixed order
          float t = 0.0f;
          for (int i = lane; i < kThreads; i += 32) t += bk[(j - 1) * kThreads + i];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(kFull, t, o);
          if (lane == 0) sh.bt[j] = t;
        }
        __syncthreads();
        for (int q = 0; q < nq && result < 0; ++q) {  // every thread takes the same decision
          const float yq = sh.by[q];
          if (sh.bj[q] < 0) continue;
          int U = 0;
          for (int i = 0; i < nq; ++i) U += sh.sy[i] <= yq ? 1 : 0;
          float M = 0.0f;
          for (int j = nq; j >= U; --j) M += sh.bt[j];  // U >= 1: the proposal itself
          if (M < pz) result = sh.bj[q];
        }
      }
#endif
    } else {
      // ---- Plain rejection from the full distribution: a thread by the per-thread masses, then its elements.
      for (int r = 0; r < R && result < 0; ++r) {
        const float ur = r < 32 ? sh.u[r] : __ldg(u + row * R + r);
        const float target = ur * Z;
        const int owner = find_owner(zpre, zt, target);
        // The owner's prefix, broadcast; its float4s in stream order are span float4 s*kStageF4 + h*kThreads + owner.
        if (tid == owner) sh.dy = zpre;
        __syncthreads();
        const float opre = sh.dy;
        __syncthreads();
        if (warp == 0) {
          const int pj = walk(owner, target - opre);
          if (lane == 0) {
            sh.dj = pj;
            sh.dy = pj >= 0 ? __ldg(logits + row * V + pj) * sc : neg_inf();
          }
        }
        __syncthreads();
        const int dj = sh.dj;
        const float dy = sh.dy;
        __syncthreads();
        TAIL_COUNT(++st_rounds);
        if (!need_test) {
          result = dj;
          break;
        }
        int dec = hist_rows ? test_hist(dy) : -1;
        if (dec < 0) {
          int cs;
          float ss;
          if (complete && dy >= Theta) {
            test_list(dy, &cs, &ss);
          } else {
            TAIL_COUNT(++st_passes);
            test_row(dy, &cs, &ss);
          }
          dec = cs < kk && ss < pz ? 1 : 0;
        }
        if (dec == 1) result = dj;
      }
    }
    if (result < 0) {  // every draw rejected: the argmax (lowest index), in every kept set
      int bi = 0x7fffffff;
      if (complete) {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int i = tid + j * kThreads;
          if (i < n && sh.cy[i] == m) bi = min(bi, sh.ci[i]);
        }
      } else {
        for (int g = tid; g < nb; g += kThreads) {
          float t4[4];
          to_y(__ldg(src + g), g, off, V, sc, t4);
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (t4[q] == m) bi = min(bi, 4 * g + q - off);
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) bi = min(bi, __shfl_xor_sync(kFull, bi, o));
      if (lane == 0) sh.wi[warp] = bi;
      __syncthreads();
      if (tid == 0) {
        int b = 0x7fffffff;
        for (int w = 0; w < kWarps; ++w) b = min(b, sh.wi[w]);
        ids[row] = b;
      }
    } else if (tid == 0) {
      ids[row] = result;
    }
#ifdef TAIL_STATS
    unsigned long long st_g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(st_g1));
    if (tid == 0)
      printf("tailstats row %lld mode %d listed %d rounds %d passes %d n %d k %d comp %d appends %d stream_us %.2f "
             "comp_us %.2f row_us %.2f start_ns %llu end_ns %llu\n", row, list_rows ? 0 : hist_rows ? 1 : 2, listed ? 1 : 0, st_rounds,
             st_passes, n, kk, st_comp, st_app, st_ts / 1980.0, st_tc / 1980.0, (clock64() - st_t0) / 1980.0, st_g0, st_g1);
#endif
    __syncthreads();  // the list and the ring are free for the next row
  }
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

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
  if (V < 1 || V > kMaxV || B > (int64_t{1} << 31) - 1 || R < 1 || R > 1 << 20) return 3;
  if (tl.strides[1] != 1 || tl.strides[0] != V || tu.strides[1] != 1 || tu.strides[0] != R) return 4;
  if (!aligned(tl.data, 4)) return 4;

  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const size_t smem = sizeof(float4) * kStages * kStageF4 + sizeof(Shared);
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 5;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 5;
  if (cudaFuncSetAttribute(topk_topp_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess)
    return 5;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk_topp_stream_kernel, kThreads, smem) !=
          cudaSuccess ||
      per_sm < 1)
    return 5;
  const int64_t slots = static_cast<int64_t>(per_sm) * sms;
  const int grid = static_cast<int>(B < slots ? B : slots);
  topk_topp_stream_kernel<<<grid, kThreads, smem, s>>>(
      static_cast<const float*>(tl.data), static_cast<const float*>(tt.data), static_cast<const int*>(tk.data),
      static_cast<const float*>(tp.data), static_cast<const float*>(tu.data), static_cast<long long*>(ti.data),
      static_cast<int>(B), static_cast<int>(V), static_cast<int>(R));
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
