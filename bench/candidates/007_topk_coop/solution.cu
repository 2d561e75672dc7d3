/* topk_topp_sampling: candidate "coop" (the "stream" candidate with an early list bound, lists for every tested row,
 * and plain-rejection tests made as passes shared with CTAs that are done). Not the expert: it ties it and the
 * "stream" candidate on llama3_b256 (~0.11-0.12 ms), is faster on qwen2_b128, 1.4-2.8x slower on the small workloads,
 * and far from 40% of speed-of-light (NOTES.md has the measurements).
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 *
 * Design:
 *  - One CTA per row streams it once through a TMA ring (online max and sum per thread). Rows with a test keep a
 *    list of every token at or above a threshold: first the kb-th largest of the threads' maxima over the first two
 *    ring stages (kb = min(top_k, 128); found before anything is listed, so the list starts short), then the
 *    kb-th largest listed value whenever the list passes half its capacity. The list holds every token >= Theta.
 *  - When at least top_k listed tokens, or top_p of the mass, lie at or above Theta, the expert's pivot rejection runs
 *    on the list in shared memory. Otherwise plain rejection from the full distribution, 8 draws at a time (one warp
 *    each: a thread by the per-thread masses, then that thread's elements): draws at or above Theta are tested on the
 *    list; the first one below it needs a pass over the row. The pass is split into chunks in a global job slot; CTAs
 *    done with their rows take chunks (helpers), each chunk's sums go to its own slot, so the totals do not depend
 *    on who did what. Helpers wait only once every CTA of the grid has started, so none holds a slot another needs.
 *  fp32 in log2 units (y = x * log2(e) / T, weights ex2.approx(y - m)); 512 threads, 2 CTAs per SM, a 3 x 16 KB ring,
 *  a 4096-entry list. Compile-time variants (-D): STAGES, CAP, WINDOW, KLIST (with NO_ALLLIST: only rows with
 *  top_k <= KLIST keep a list), NO_EARLY, PROP (draws per pass), CHUNKS (per pass), SOLO (the CTA makes its pass
 *  alone), SEG (warp-private list segments), L2HINT (evict_first for rows no pass re-reads), and for timing only STREAM_ONLY, NO_LIST, NO_COMPACT, NO_APPEND (wrong
 *  ids), TAIL_STATS (row-times.sh).
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
#define STAGES 3
#endif
constexpr int kStages = STAGES;           // ring depth
#ifndef CAP
#define CAP 4096
#endif
#ifndef NO_ALLLIST
#define ALLLIST
#endif
constexpr int kCap = CAP;                 // candidate list capacity
#ifndef ALLLIST
#ifndef KLIST
#define KLIST 128
#endif
constexpr int kListK = KLIST;             // NO_ALLLIST: rows with top_k <= kListK keep the list
#endif
constexpr int kEarlyK = kThreads / 4;     // the list's bound rank is at most this (the early bound's, from 512 maxima)
constexpr int kPer = kCap / kThreads;     // list entries per thread
#ifdef SEG
constexpr int kSeg = kCap / kWarps;       // SEG: each warp's segment of the list
#endif
constexpr int kChunk = 8;                 // list entries per thread held in registers by one compaction step
#ifndef WINDOW
#define WINDOW 24.0f
#endif
constexpr float kWindow = WINDOW;         // log2 units below the running max that are always listed
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxV = 1 << 28;
constexpr int kPassUnroll = 4;           // float4 loads in flight per thread in a chunk of a shared pass

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
// L2HINT: the same copy with an L2 eviction-priority policy (createpolicy), for rows no pass will read again.
__device__ __forceinline__ void bulk_g2s_hint(unsigned dst, const void* src, unsigned bytes, unsigned mb,
                                              unsigned long long pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(mb), "l"(pol)
      : "memory");
}
__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
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

// Shared passes. A plain row's test of kProp proposals is a pass over the row split into kChunks chunks; its CTA opens
// the pass in its job slot, and any CTA that has finished its own rows may take chunks. Chunk c's counts and masses
// are written to slot c, so the sums do not depend on who took which chunk.
#ifndef PROP
#define PROP 8
#endif
#ifndef CHUNKS
#define CHUNKS 8
#endif
constexpr int kProp = PROP;      // proposals tested per pass (at most kWarps: one warp draws each)
constexpr int kChunks = CHUNKS;  // chunks per pass
static_assert(kProp <= 16, "one warp per proposal");
constexpr int kMaxJobs = 1024;
struct JobParams {
  const float4* src;
  int nb, off, V;
  float sc, m;
  float y[kProp];
};
struct Job {
  unsigned long long claim;  // (tag << 32) | next chunk; tag 0: no pass open
  int done;                  // chunks finished
  JobParams p;
  int pc[kChunks][kProp];
  float ps[kChunks][kProp];
};
__device__ Job g_jobs[kMaxJobs];  // slot b: CTA b's pass
__device__ int g_open;            // passes open
__device__ int g_started;         // CTAs of this launch started, done with their rows, and exited (reset by the last)
__device__ int g_finished;
__device__ int g_exited;

template <typename T>
__device__ __forceinline__ T ld_volatile(const T* p) { return *const_cast<const volatile T*>(p); }

#ifdef TAIL_STATS
__device__ __forceinline__ long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<long long>(t);
}
struct RowStat {
  int mode, listed, rounds, passes, k, comp, appends;
  long long t0, stream, comp_t, draw, pass, t1;
};
constexpr int kStatRows = 4096;
__device__ RowStat g_stat[kStatRows];
__device__ int g_stat_exit;
#endif

// Take the next chunk of the pass whose claim word was seen as `seen`, if that pass is still open (its tag unchanged,
// or equal to `tag` when nonzero) and has chunks left: the chunk's index, else -1.
__device__ __forceinline__ int claim_chunk(unsigned long long* claim, unsigned long long seen, unsigned tag) {
  unsigned long long old = seen;
  const unsigned long long t = tag ? tag : (seen >> 32);
  while ((old >> 32) == t && t != 0ull && static_cast<unsigned>(old) < kChunks) {
    const unsigned long long got = atomicCAS(claim, old, old + 1ull);
    if (got == old) return static_cast<int>(static_cast<unsigned>(old));
    old = got;
  }
  return -1;
}

__device__ __forceinline__ void load_params(JobParams& d, const JobParams& s) {
  const volatile JobParams& v = s;
  d.src = v.src;
  d.nb = v.nb;
  d.off = v.off;
  d.V = v.V;
  d.sc = v.sc;
  d.m = v.m;
#pragma unroll
  for (int q = 0; q < kProp; ++q) d.y[q] = v.y[q];
}

struct Shared {
  unsigned long long mbar[kStages];
  float cy[kCap];       // candidate list (list rows): y and row index
  int ci[kCap];
  float zp[kThreads];   // plain rejection: the per-thread mass prefixes and masses, for the warps' draws
  float zm[kThreads];
  int hist[256];
  float wf[kWarps];    // per-warp scratch
  float wf2[kWarps];
  int wi[kWarps];
  float u[32];
  float theta[2];      // the running threshold, read with a lag of two stages (see the stream loop)
  int cnt;             // list appends (may exceed kCap: the excess is dropped)
#ifdef SEG
  int segc[kWarps];    // SEG: each warp's entries in its segment, and their exclusive prefix
  int segp[kWarps];
  float wmx[kWarps];   // SEG: each warp's running max (plain stores, no atomics)
#endif
  unsigned mkey;       // key of the max y seen
  unsigned dkey;       // key of the max dropped y (0: none)
  int sel_digit;
  int sel_above;
  int sel_in;
  unsigned rkmin;      // select: the range's min and max keys
  unsigned rkmax;
  int own;
  int last;
  int dj;              // the round's draw
  float dy;
  float by[kProp];     // plain rows: the batch's proposals (y, +inf when none) and ids in draw order
  int bj[kProp];
  JobParams jp;        // the pass this CTA works on
  int hjob;            // the claimed job and chunk (-1: none, -2: every CTA is done)
  int hchunk;
  int redc[kWarps][kProp];  // a chunk's per-warp counts and masses
  float reds[kWarps][kProp];
  int tc[kProp];       // a pass's totals per proposal
  float ts[kProp];
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

// Per proposal q, the count and the mass of the tokens of span float4 [lo, hi) strictly above sh.jp.y[q], reduced in a
// fixed order; thread q < kProp gets them in *ct, *st (all threads call it).
static __device__ __noinline__ void range_sums(Shared& sh, int lo, int hi, int* ct, float* st) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const float4* src = sh.jp.src;
  const int off = sh.jp.off, V = sh.jp.V;
  const float sc = sh.jp.sc, m = sh.jp.m;
  float ys[kProp];
#pragma unroll
  for (int q = 0; q < kProp; ++q) ys[q] = sh.jp.y[q];
  int c[kProp];
  float w[kProp];
#pragma unroll
  for (int q = 0; q < kProp; ++q) {
    c[q] = 0;
    w[q] = 0.0f;
  }
  for (int g0 = lo + tid; g0 < hi; g0 += kPassUnroll * kThreads) {
    float4 v[kPassUnroll];
#pragma unroll
    for (int i = 0; i < kPassUnroll; ++i) {
      const int g = g0 + i * kThreads;
      v[i] = g < hi ? __ldg(src + g) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < kPassUnroll; ++i) {
      const int g = g0 + i * kThreads;
      float t4[4];
      to_y(v[i], g < hi ? g : -1, off, V, sc, t4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float wy = ex2(t4[e] - m);
#pragma unroll
        for (int q = 0; q < kProp; ++q) {
          if (t4[e] > ys[q]) {
            ++c[q];
            w[q] += wy;
          }
        }
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kProp; ++q) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      c[q] += __shfl_xor_sync(kFull, c[q], o);
      w[q] += __shfl_xor_sync(kFull, w[q], o);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int q = 0; q < kProp; ++q) {
      sh.redc[warp][q] = c[q];
      sh.reds[warp][q] = w[q];
    }
  }
  __syncthreads();
  if (tid < kProp) {
    int cc = 0;
    float ss = 0.0f;
    for (int k = 0; k < kWarps; ++k) {
      cc += sh.redc[k][tid];
      ss += sh.reds[k][tid];
    }
    *ct = cc;
    *st = ss;
  }
  __syncthreads();
}

// One chunk of a pass (all threads; sh.jp holds the pass): its sums go to the job's slot for the chunk, then the
// chunk is counted done.
__device__ __forceinline__ void do_chunk(Shared& sh, Job& jb, int chunk) {
  const int tid = static_cast<int>(threadIdx.x);
  const int per = (sh.jp.nb + kChunks - 1) / kChunks;
  const int lo = chunk * per, hi = min(sh.jp.nb, lo + per);
  int ct;
  float st;
  range_sums(sh, lo, hi, &ct, &st);
  if (tid < kProp) {
    jb.pc[chunk][tid] = ct;
    jb.ps[chunk][tid] = st;
    __threadfence();
  }
  __syncthreads();
  if (tid == 0) atomicAdd(&jb.done, 1);
}

// This CTA's open pass (tag) in job slot `job`: take its chunks until none is left (helpers may take some), wait for
// the rest, close it, and sum the slots in chunk order into sh.tc / sh.ts (all threads).
__device__ __forceinline__ void shared_pass(Shared& sh, int job, unsigned tag) {
  const int tid = static_cast<int>(threadIdx.x);
  Job& jb = g_jobs[job];
  for (;;) {
    if (tid == 0) sh.hchunk = claim_chunk(&jb.claim, ld_volatile(&jb.claim), tag);
    __syncthreads();
    const int chunk = sh.hchunk;
    if (chunk < 0) break;
    do_chunk(sh, jb, chunk);  // its barriers order the read of hchunk before the next write
  }
  if (tid == 0) {
    while (ld_volatile(&jb.done) < kChunks) __nanosleep(64);
    __threadfence();
    atomicExch(&jb.claim, 0ull);
    atomicSub(&g_open, 1);
  }
  __syncthreads();
  if (tid < kProp) {
    int ct = 0;
    float st = 0.0f;
    for (int k = 0; k < kChunks; ++k) {
      ct += ld_volatile(&jb.pc[k][tid]);
      st += ld_volatile(&jb.ps[k][tid]);
    }
    sh.tc[tid] = ct;
    sh.ts[tid] = st;
  }
  __syncthreads();
}

#ifdef SEG
// SEG: the warps' segments [w * kSeg, w * kSeg + count_w) moved to one contiguous list [0, n); sh.cnt = n. The counts
// come from each warp's register `wc` (entries past kSeg were dropped). All threads; a read-all-then-write step.
__device__ __forceinline__ void seg_gather(Shared& sh, int wc) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  if (lane == 0) sh.segc[warp] = min(wc, kSeg);
  __syncthreads();
  if (tid == 0) {
    int p = 0;
    for (int w = 0; w < kWarps; ++w) {
      sh.segp[w] = p;
      p += sh.segc[w];
    }
    sh.cnt = p;
  }
  __syncthreads();
  float y[kPer];
  int id[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kThreads;
    y[j] = sh.cy[i];
    id[j] = sh.ci[i];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kThreads, w = i / kSeg, q = i - w * kSeg;
    if (q < sh.segc[w]) {
      sh.cy[sh.segp[w] + q] = y[j];
      sh.ci[sh.segp[w] + q] = id[j];
    }
  }
  __syncthreads();
}
// SEG: a contiguous list [0, n) dealt back to the segments, entry i to segment i % kWarps; returns this warp's count.
__device__ __forceinline__ int seg_scatter(Shared& sh, int n) {
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5;
  float y[kPer];
  int id[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kThreads;
    y[j] = i < n ? sh.cy[i] : 0.0f;
    id[j] = i < n ? sh.ci[i] : 0;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kThreads;
    if (i < n) {
      const int at = (i % kWarps) * kSeg + i / kWarps;
      sh.cy[at] = y[j];
      sh.ci[at] = id[j];
    }
  }
  __syncthreads();
  return n > warp ? (n - warp + kWarps - 1) / kWarps : 0;
}
#endif

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
#ifndef SOLO
  if (tid == 0) atomicAdd(&g_started, 1);
#endif
  __syncthreads();

#ifndef SOLO
  unsigned tag = 0;  // this CTA's passes so far: the tag of its open pass (0: none)
#endif
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
    // The rank that bounds the list: top_k, or (ALLLIST rows with a larger top_k) kEarlyK. Any threshold keeps the
    // list exact, since it holds every token >= Theta, the largest threshold used; this one keeps it short.
#ifdef ALLLIST
    const int kb = min(kk, kEarlyK);
#else
    const int kb = kk;
#endif
    // Row modes: list rows (by default every row with a test; with NO_ALLLIST those with top_k <= KLIST) and plain
    // rows (no test; with NO_ALLLIST also the larger top_k, whose every test is then a shared pass over the row).
#ifdef NO_LIST  // timing variant: every row takes the plain route
    const bool list_rows = false;
#else
#ifdef ALLLIST  // the default: every row with a test keeps a list (for k > kEarlyK, of its ~kEarlyK-th largest and
                // up), so that the draws at or above its threshold are tested on the list instead of by a pass
    const bool list_rows = !k_all || pp < 1.0f;
#else
    const bool list_rows = !k_all && kk <= kListK;
#endif
#endif

    // L2HINT: rows that no pass can read again (no test, or a list that is complete by construction) stream with
    // evict_first, so that the rows a pass may re-read keep their lines in L2 (60 MiB on the H200) until then.
#ifdef L2HINT
    const bool may_pass = (!k_all || pp < 1.0f) && !(list_rows && kb >= kk);
    const unsigned long long pol = evict_first_policy();
    auto load_stage = [&](unsigned dst, const void* p, unsigned bytes, unsigned mb) {
      if (may_pass)
        bulk_g2s(dst, p, bytes, mb);
      else
        bulk_g2s_hint(dst, p, bytes, mb, pol);
    };
#else
    auto load_stage = [](unsigned dst, const void* p, unsigned bytes, unsigned mb) { bulk_g2s(dst, p, bytes, mb); };
#endif
    if (tid < 32) sh.u[tid] = tid < R ? __ldg(u + row * R + tid) : 0.0f;
    if (tid == 0) {
      sh.cnt = 0;
      sh.theta[0] = sh.theta[1] = list_rows ? neg_inf() : pos_inf();  // +inf: nothing is listed
      sh.mkey = fkey(neg_inf());
      sh.dkey = 0u;
      for (int i = 0; i < kStages && i < nst; ++i) {
        const long long g = gs + i;
        const int slot = static_cast<int>(g % kStages);
        const int n4 = min(kStageF4, nb - i * kStageF4);
        fence_proxy_async();
        mbar_arrive_expect_tx(smem_u32(&sh.mbar[slot]), static_cast<unsigned>(n4) * 16u);
        load_stage(smem_u32(ring + slot * kStageF4), src + static_cast<long long>(i) * kStageF4,
                   static_cast<unsigned>(n4) * 16u, smem_u32(&sh.mbar[slot]));
      }
    }
    __syncthreads();

#ifdef TAIL_STATS  // diagnostics: per row, its mode, draws, passes, appends and phase times (globaltimer, ns), kept in
                   // g_stat and printed after every row is done (not for d2k eval)
    int st_rounds = 0, st_passes = 0, st_comp = 0, st_app = 0;
    long long st_tc = 0, st_ts = 0, st_td = 0, st_tp = 0, st_x = 0;
    const long long st_t0 = gtime();
#define TAIL_COUNT(x) (x)
#define TAIL_DECL(x) x
#else
#define TAIL_COUNT(x)
#define TAIL_DECL(x)
#endif
    // ---- The stream: online max/sum per thread, the candidate list, theta.
    float mloc = neg_inf(), zloc = 0.0f;
    float wrun = neg_inf();  // the warp's running max: wrun - kWindow bounds theta from below too
#ifdef SEG
    int wc = 0;              // entries this warp appended to its segment (the same in every lane)
#endif
#ifndef NO_EARLY
    if (list_rows && kb <= kEarlyK) {
      // Early bound, before anything is listed: the k-th largest of the threads' maxima over the first two ring
      // stages. Each maximum is a distinct token, so k tokens lie at or above it and everything below is outside
      // top-k. It spares the list the flood of its first stages (WINDOW admits nearly every token) and, mostly, any
      // compaction. One value-binned count: the bound is the smallest maximum in the bins holding the top k.
      float tmx = neg_inf();
      for (int s = 0; s < nst && s < 2; ++s) {
        const long long g = gs + s;
        const int slot = static_cast<int>(g % kStages);
        mbar_wait(smem_u32(&sh.mbar[slot]), static_cast<unsigned>((g / kStages) & 1));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gl = tid + h * kThreads;
          const int gg = s * kStageF4 + gl;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
          if (gg < nb) v = ring[slot * kStageF4 + gl];
          float t4[4];
          to_y(v, gg < nb ? gg : -1, off, V, sc, t4);
#pragma unroll
          for (int c = 0; c < 4; ++c) tmx = fmaxf(tmx, t4[c]);
        }
      }
      const bool fin = tmx > neg_inf();
      unsigned kmin = fin ? fkey(tmx) : 0xffffffffu, kmax = fin ? fkey(tmx) : 0u;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        kmin = min(kmin, __shfl_xor_sync(kFull, kmin, o));
        kmax = max(kmax, __shfl_xor_sync(kFull, kmax, o));
      }
      if (tid == 0) {
        sh.rkmin = 0xffffffffu;
        sh.rkmax = 0u;
        sh.sel_digit = -1;
      }
      for (int i = tid; i < 256; i += kThreads) sh.hist[i] = 0;
      __syncthreads();
      if (lane == 0) {
        atomicMin(&sh.rkmin, kmin);
        atomicMax(&sh.rkmax, kmax);
      }
      __syncthreads();
      const float lo = keyf(sh.rkmin), hi = keyf(sh.rkmax);
      float scale = hi > lo ? 256.0f / (hi - lo) : 0.0f;
      if (!(scale < pos_inf())) scale = 0.0f;
      const int bin = fin ? min(255, static_cast<int>((tmx - lo) * scale)) : -1;
      if (fin) atomicAdd(&sh.hist[bin], 1);
      __syncthreads();
      if (tid < 32) {  // lane l holds bins [8l, 8l + 8): the bin where the count from the top reaches top_k
        int h[8], sum = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          h[i] = sh.hist[8 * lane + i];
          sum += h[i];
        }
        int suf = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int t = __shfl_down_sync(kFull, suf, o);
          if (lane + o < 32) suf += t;
        }
        int acc = suf - sum;
        if (acc < kb && suf >= kb) {
#pragma unroll
          for (int i = 7; i >= 0; --i) {
            if (acc < kb && acc + h[i] >= kb) sh.sel_digit = 8 * lane + i;
            acc += h[i];
          }
        }
        if (tid == 0) sh.rkmin = 0xffffffffu;
      }
      __syncthreads();
      const int bsel = sh.sel_digit;
      if (bsel >= 0 && bin >= bsel) atomicMin(&sh.rkmin, fkey(tmx));
      __syncthreads();
      if (tid == 0 && bsel >= 0) sh.theta[0] = sh.theta[1] = keyf(sh.rkmin);
      __syncthreads();
    }
#endif
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
      const float th = fmaxf(th0, wrun - kWindow);
      int c = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) c += (y[i] >= th && y[i] > neg_inf()) ? 1 : 0;
      bool over = false;
#ifdef NO_APPEND  // timing variant: the threshold test without the appends (the list stays empty; wrong ids)
      c = 0;
#endif
      if (__any_sync(kFull, c > 0)) {
        int x = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int t = __shfl_up_sync(kFull, x, o);
          if (lane >= o) x += t;
        }
        const int wtot = __shfl_sync(kFull, x, 31);
#ifdef SEG  // the warp's own segment, its count in a register: no shared counter
        int pos = wc + x - c;
        const int lim = kSeg, at = warp * kSeg;
        wc += wtot;
        over = wc > kSeg / 2;
#else
        int base = 0;
        if (lane == 31) base = atomicAdd(&sh.cnt, x);
        base = __shfl_sync(kFull, base, 31);
        over = base + wtot > kCap / 2;
        int pos = base + x - c;
        const int lim = kCap, at = 0;
#endif
        unsigned drop = 0u;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (y[i] >= th && y[i] > neg_inf()) {
            if (pos < lim) {
              sh.cy[at + pos] = y[i];
              sh.ci[at + pos] = 4 * gi[i >> 2] + (i & 3) - off;
            } else {
              drop = max(drop, fkey(y[i]));
            }
            ++pos;
          }
        }
        if (drop) atomicMax(&sh.dkey, drop);
      }
#ifdef SEG
      if (lane == 0) sh.wmx[warp] = wrun;
#else
      if (lane == 0 && wm > neg_inf()) atomicMax(&sh.mkey, fkey(wm));
#endif
#ifdef NO_COMPACT  // timing variant: the list never compacts (appends past the capacity are dropped; wrong ids)
      over = false;
#endif
      // (Per-warp count slots read after the barrier, instead of these two shared atomics, were slower: 2026-12-04.)
      const bool need = __syncthreads_or(over);  // every read of this slot, append and max of stage s is done
      if (tid == 0 && s + kStages < nst) {
        const int n4 = min(kStageF4, nb - (s + kStages) * kStageF4);
        fence_proxy_async();
        mbar_arrive_expect_tx(smem_u32(&sh.mbar[slot]), static_cast<unsigned>(n4) * 16u);
        load_stage(smem_u32(ring + slot * kStageF4), src + static_cast<long long>(s + kStages) * kStageF4,
                   static_cast<unsigned>(n4) * 16u, smem_u32(&sh.mbar[slot]));
      }
      if (need) {  // uniform: the list passed half its capacity; raise theta to the k-th largest listed value
#ifdef SEG
        seg_gather(sh, wc);
#endif
        const int n = min(sh.cnt, kCap);
        TAIL_COUNT((++st_comp, st_app += sh.cnt));
        const float t = fmaxf(fmaxf(sh.theta[0], sh.theta[1]), select_value(sh, n, kb, kCap / 4, neg_inf()));
        const unsigned tkey = fkey(t);
        TAIL_DECL(const long long st_c0 = gtime());
        const int nn = compact(sh, n, tkey);
        if (tid == 0) {
          sh.cnt = nn;
          sh.theta[0] = sh.theta[1] = t;
        }
        TAIL_COUNT(st_app -= nn);
        __syncthreads();
#ifdef SEG
        wc = seg_scatter(sh, nn);
#endif
        TAIL_COUNT(st_tc += gtime() - st_c0);
      } else if (tid == 0) {
        // Read again at stage s + 2, after the next barrier, which thread 0 reaches after this write.
#ifdef SEG
        float mseen = neg_inf();
        for (int w = 0; w < kWarps; ++w) mseen = fmaxf(mseen, sh.wmx[w]);
#else
        const float mseen = keyf(sh.mkey);
#endif
        sh.theta[s & 1] = fmaxf(fmaxf(sh.theta[0], sh.theta[1]), mseen - kWindow);
      }
    }
    gs += nst;
    __syncthreads();
#ifdef SEG
    seg_gather(sh, wc);  // the list contiguous again, sh.cnt its size; the exact max from the warps' maxima
    if (tid == 0) {
      float mm = neg_inf();
      for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, sh.wmx[w]);
      sh.mkey = fkey(mm);
    }
    __syncthreads();
#endif
    TAIL_COUNT((st_ts = gtime() - st_t0, st_app += sh.cnt));
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
    // At or above every threshold any warp used.
    const float Theta = fmaxf(fmaxf(sh.theta[0], sh.theta[1]), m - kWindow);
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
    // The test of a draw yj >= Theta by the list (which holds every token >= Theta).
    auto test_list = [&](float yj, int* cs, float* ss) { list_sums(yj, false, cs, ss); };

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
    } else {
      // ---- Plain rejection from the full distribution, kProp draws at a time: warp q draws u[b, r0 + q] (a thread by
      // the per-thread masses, then that thread's elements), then one shared pass over the row (helpers take chunks
      // of it) counts, for every proposal, the tokens and the mass strictly above it. The first accepted proposal in
      // draw order is the sample, as in drawing them one at a time.
      sh.zp[tid] = zpre;
      sh.zm[tid] = zt;
      const int per_pass = need_test ? kProp : 1;
      for (int r0 = 0; r0 < R && result < 0; r0 += per_pass) {
        const int nq = min(per_pass, R - r0);
        TAIL_COUNT(st_x = gtime());
        __syncthreads();  // zp/zm published; the previous batch's reads of by/bj done
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
            sh.by[warp] = pj >= 0 ? __ldg(logits + row * V + pj) * sc : pos_inf();
          }
        }
        __syncthreads();
        TAIL_COUNT((st_rounds += nq, st_td += gtime() - st_x, st_x = gtime()));
        if (!need_test) {
          result = sh.bj[0];
          break;
        }
        // Draws at or above Theta are tested on the list (it holds every token >= Theta). The first draw below it
        // that no earlier draw settled needs the pass, which tests it and the draws after it.
        int q0 = 0;
        if (complete) {
          for (; q0 < nq && result < 0; ++q0) {
            if (sh.bj[q0] < 0) continue;
            const float yq = sh.by[q0];
            if (!(yq >= Theta)) break;
            int cs;
            float ss;
            test_list(yq, &cs, &ss);
            if (cs < kk && ss < pz) result = sh.bj[q0];
          }
        }
        if (result >= 0 || q0 >= nq) continue;
        TAIL_COUNT(++st_passes);
        if (tid == 0) {
          sh.jp.src = src;
          sh.jp.nb = nb;
          sh.jp.off = off;
          sh.jp.V = V;
          sh.jp.sc = sc;
          sh.jp.m = m;
          for (int q = 0; q < kProp; ++q) sh.jp.y[q] = q < nq ? sh.by[q] : pos_inf();
        }
#ifdef SOLO  // variant: this CTA makes the pass alone, in one sweep (no chunks, no helpers)
        __syncthreads();
        {
          int ct;
          float st;
          range_sums(sh, 0, nb, &ct, &st);
          if (tid < kProp) {
            sh.tc[tid] = ct;
            sh.ts[tid] = st;
          }
          __syncthreads();
        }
#else
        ++tag;
        if (tid == 0) {
          Job& jb = g_jobs[blockIdx.x];
          jb.p = sh.jp;
          jb.done = 0;
          __threadfence();
          atomicExch(&jb.claim, static_cast<unsigned long long>(tag) << 32);
          atomicAdd(&g_open, 1);
        }
        shared_pass(sh, blockIdx.x, tag);
#endif
        TAIL_COUNT(st_tp += gtime() - st_x);
        for (int q = q0; q < nq && result < 0; ++q)
          if (sh.bj[q] >= 0 && sh.tc[q] < kk && sh.ts[q] < pz) result = sh.bj[q];
      }
    }
    if (result < 0) {  // every draw rejected: the argmax (lowest index), in every kept set
      int bi = 0x7fffffff;
      if (listed) {  // the pivot route's list holds every token >= Theta, the max among them; else scan the row
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
    if (tid == 0 && row < kStatRows) {
      RowStat& rs = g_stat[row];
      rs.mode = list_rows ? 0 : 2;
      rs.listed = listed ? 1 : 0;
      rs.rounds = st_rounds;
      rs.passes = st_passes;
      rs.k = kk;
      rs.comp = st_comp;
      rs.appends = st_app;
      rs.t0 = st_t0;
      rs.stream = st_ts;
      rs.comp_t = st_tc;
      rs.draw = st_td;
      rs.pass = st_tp;
      rs.t1 = gtime();
    }
#endif
    __syncthreads();  // the list and the ring are free for the next row
  }

#ifndef SOLO
  // ---- Help: a CTA done with its rows takes chunks of other CTAs' open passes until every CTA is done. It waits only
  // once every CTA has started (g_started), so a waiting helper never holds a slot that an unstarted CTA needs.
  if (tid == 0) atomicAdd(&g_finished, 1);
  const int ncta = static_cast<int>(gridDim.x);
  for (;;) {
    if (warp == 0) {
      int pick = -1, chunk = 0;
      unsigned nap = 128;
      const int start = static_cast<int>((blockIdx.x * 37u) % static_cast<unsigned>(ncta));  // spread the helpers
      for (;;) {
        int quit = 0, open = 0;
        if (lane == 0) {
          quit = ld_volatile(&g_finished) >= ncta || ld_volatile(&g_started) < ncta;
          open = ld_volatile(&g_open);
        }
        if (__shfl_sync(kFull, quit, 0)) {
          pick = -2;
          break;
        }
        if (__shfl_sync(kFull, open, 0) > 0) {
          for (int j0 = 0; j0 < ncta && pick < 0; j0 += 32) {
            int j = start + j0 + lane;
            if (j >= ncta) j -= ncta;
            const unsigned long long cl = j0 + lane < ncta ? ld_volatile(&g_jobs[j].claim) : 0ull;
            unsigned bal = __ballot_sync(kFull, (cl >> 32) != 0ull && static_cast<unsigned>(cl) < kChunks);
            while (bal && pick < 0) {
              const int l = __ffs(bal) - 1;
              bal &= bal - 1;
              int got = -1;
              if (lane == l) got = claim_chunk(&g_jobs[j].claim, cl, 0u);
              got = __shfl_sync(kFull, got, l);
              const int jl = __shfl_sync(kFull, j, l);
              if (got >= 0) {
                pick = jl;
                chunk = got;
              }
            }
          }
        }
        if (pick >= 0) break;
        __nanosleep(nap);
        nap = min(nap * 2u, 2048u);
      }
      if (lane == 0) {
        sh.hjob = pick;
        sh.hchunk = chunk;
        if (pick >= 0) {
          __threadfence();  // the owner wrote the parameters before opening the pass
          load_params(sh.jp, g_jobs[pick].p);
        }
      }
    }
    __syncthreads();
    const int job = sh.hjob, chunk = sh.hchunk;
    if (job < 0) break;
    do_chunk(sh, g_jobs[job], chunk);
  }
  if (tid == 0 && atomicAdd(&g_exited, 1) == ncta - 1) {  // the last CTA out: clean state for the next launch
    atomicExch(&g_started, 0);
    atomicExch(&g_finished, 0);
    atomicExch(&g_exited, 0);
  }
#endif
#ifdef TAIL_STATS
  if (tid == 0 && atomicAdd(&g_stat_exit, 1) == static_cast<int>(gridDim.x) - 1) {
    __threadfence();
    long long t00 = 0x7fffffffffffffffll;
    for (int r = 0; r < B && r < kStatRows; ++r) t00 = min(t00, ld_volatile(&g_stat[r].t0));
    for (int r = 0; r < B && r < kStatRows; ++r) {
      const RowStat& rs = g_stat[r];
      printf("rowstat row %d mode %d listed %d k %d rounds %d passes %d comp %d appends %d start_us %.2f stream_us %.2f "
             "comp_us %.2f draw_us %.2f pass_us %.2f end_us %.2f\n", r, rs.mode, rs.listed, rs.k, rs.rounds, rs.passes,
             rs.comp, rs.appends, (rs.t0 - t00) * 1e-3, rs.stream * 1e-3, rs.comp_t * 1e-3, rs.draw * 1e-3,
             rs.pass * 1e-3, (rs.t1 - t00) * 1e-3);
    }
    atomicExch(&g_stat_exit, 0);
  }
#endif
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
  int64_t grid64 = B < slots ? B : slots;
  if (grid64 > kMaxJobs) grid64 = kMaxJobs;  // one job slot per CTA
  const int grid = static_cast<int>(grid64);
  topk_topp_stream_kernel<<<grid, kThreads, smem, s>>>(
      static_cast<const float*>(tl.data), static_cast<const float*>(tt.data), static_cast<const int*>(tk.data),
      static_cast<const float*>(tp.data), static_cast<const float*>(tu.data), static_cast<long long*>(ti.data),
      static_cast<int>(B), static_cast<int>(V), static_cast<int>(R));
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
