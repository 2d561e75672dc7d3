/* topk_topp_sampling: candidate "v3" (rejected: slower than v2 and the expert on the H200, see NOTES.md) of the expert
 * CUDA C++ solution (thread-block clusters, rows resident on chip).
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 *
 * v2 (bench/candidates/007_topk_v2) plus two changes aimed at the per-row critical path and the tail:
 *  - several draws per round (NDRAW, default 4): round r draws tokens j_0..j_{D-1} from the same proposal over
 *    {z > low} with u[b, rD + i] and one test pass counts the tokens and sums the mass above each of them and above
 *    mid = (max rejected z + high) / 2. The first j_i (in draw order) that passes is the sample: D independent draws
 *    from one proposal tested in order are sequential rejection sampling, only tested in one pass. If none passes,
 *    low rises to their max (or to mid, and high drops to mid, as in the expert's two pivots). Rows then need fewer
 *    rounds, each round two exchanges and a pass over the slice.
 *  - dynamic rows: each cluster takes row cid first, then the next unclaimed row from a counter (one atomicAdd by
 *    CTA 0 per row, its result carried to the cluster in the max/sum exchange), so clusters whose rows took many
 *    rounds take fewer rows (the static split left the last cluster ~20 us behind the average on 256 rows). The
 *    counter is zeroed by a memset before each launch.
 * Kept from v2: the slice by TMA (chunks of CHUNK_ITERS x 256 float4; 16, one copy per slice up to V = 131072,
 * measured faster than 2 or 4), scaled in place with a per-thread online max and sum; st.async exchanges on rotating mbarrier slots; decisions
 * taken by every thread alike.
 * Macros for variants: NDRAW, D2K_STATIC_ROWS (v2's static rows), CHUNK_ITERS, D2K_TIMELINE.
 */
#include "d2k/solution.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#ifdef D2K_TIMELINE
#include <cstdio>
#endif

namespace cg = cooperative_groups;

namespace {

constexpr int kCluster = 8;      // CTAs per cluster (the portable maximum)
constexpr int kThreads = 256;    // threads per CTA
constexpr int kWarps = kThreads / 32;
constexpr int kMinBlocks = 3;    // __launch_bounds__: up to 85 registers (shared memory allows at most 3 CTAs/SM
                                 // at V = 128256 anyway)
constexpr int kMaxChunks = 32;   // mbarriers per slice buffer
constexpr int kSlots = 4;        // exchange slots (3 suffice: see xchg_slot)
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kNoIndex = 0x7fffffff;
constexpr int kMaxV = 1 << 28;
#ifndef CHUNK_ITERS
#define CHUNK_ITERS 16
#endif
#ifndef NDRAW
#define NDRAW 4
#endif
constexpr int kDraws = NDRAW;  // draws tested per round

struct alignas(16) InitMsg {  // one CTA's slice: max of y and sum of 2^(y - max); CTA 0: the cluster's next row
  float m;
  float s;
  int next;
  int pad;
};
struct alignas(16) TestMsg {  // one CTA's test partials: counts and masses (units 2^(y - m_cta)) above each draw
  int c[kDraws + 1];           // and (last) above mid
  float s[kDraws + 1];
};
constexpr int kTestWords = (static_cast<int>(sizeof(TestMsg)) / 4 + 3) / 4 * 4;  // sent as whole v4 stores
constexpr int kTestGroups = kTestWords / 4;
static_assert(kDraws >= 1 && kDraws <= kWarps, "warp i searches draw i");
static_assert(kCluster * kTestGroups <= kThreads, "one thread per (CTA, v4 word group) sends the test partials");
struct alignas(8) DrawMsg {  // the round's drawn token: row index and its y
  int j;
  float y;
};
union alignas(16) XSlot {  // one exchange's messages, in the receiver's shared memory
  InitMsg init[kCluster];
  unsigned test_words[kCluster][kTestWords];  // TestMsg, padded to 16 bytes
  DrawMsg draw[kDraws];
  int amin[kCluster];
};

#ifndef D2K_STATIC_ROWS
__device__ unsigned g_next;  // rows claimed past the first ncl; zeroed by a memset before each launch
#endif

#ifdef D2K_TIMELINE
// Sums over rows of per-phase SM cycles (rank 0, thread 0 of each cluster): rows, test rounds, load + pass, init
// exchange, first draw, test phases, later draws, row total; then the globaltimer span of the kernel.
__device__ unsigned long long g_tl[10];
#endif

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(unsigned mb) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mb) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned mb) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mb) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned mb, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mb), "r"(bytes) : "memory");
}
// Acquire at cluster scope: the waiter then sees what peers wrote by st.async (and TMA wrote) before completing.
__device__ __forceinline__ void mbar_wait(unsigned mb, unsigned parity) {
  unsigned ok = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
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
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const size_t g = __cvta_generic_to_global(gmem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ unsigned cluster_addr(const void* p, unsigned rank) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}

// A message into CTA `rank`'s slot: st.async completing `bytes` on that CTA's slot mbarrier, or (barrier variant)
// a plain DSMEM store published by the cluster barrier that follows.
__device__ __forceinline__ void send(void* slot_field, unsigned long long* slot_mbar, unsigned rank, unsigned a) {
  const unsigned addr = cluster_addr(slot_field, rank);
#ifdef D2K_XCHG_BARRIER
  (void)slot_mbar;
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(addr), "r"(a) : "memory");
#else
  const unsigned mb = cluster_addr(slot_mbar, rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(addr), "r"(a),
               "r"(mb)
               : "memory");
#endif
}
__device__ __forceinline__ void send(void* slot_field, unsigned long long* slot_mbar, unsigned rank, unsigned a,
                                     unsigned b) {
  const unsigned addr = cluster_addr(slot_field, rank);
#ifdef D2K_XCHG_BARRIER
  (void)slot_mbar;
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(a), "r"(b) : "memory");
#else
  const unsigned mb = cluster_addr(slot_mbar, rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(addr),
               "r"(a), "r"(b), "r"(mb)
               : "memory");
#endif
}
__device__ __forceinline__ void send(void* slot_field, unsigned long long* slot_mbar, unsigned rank, unsigned a,
                                     unsigned b, unsigned c, unsigned d) {
  const unsigned addr = cluster_addr(slot_field, rank);
#ifdef D2K_XCHG_BARRIER
  (void)slot_mbar;
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
#else
  const unsigned mb = cluster_addr(slot_mbar, rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   addr),
               "r"(a), "r"(b), "r"(c), "r"(d), "r"(mb)
               : "memory");
#endif
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// A CTA's slice of a row: row elements [lo, lo + len). The buffer mirrors the 16-byte-aligned span that holds
// them: buffer element q is row element lo + q - off (0 <= off < 4), nb float4 in all; the rest is -inf.
struct Slice {
  const float4* src;
  int lo;
  int len;
  int off;
  int nb;
};

__device__ __forceinline__ Slice slice_of(const float* logits, long long row, int V, int S, int rank) {
  Slice sl;
  sl.lo = rank * S;
  sl.len = max(0, min(V, sl.lo + S) - sl.lo);
  const uintptr_t a = reinterpret_cast<uintptr_t>(logits + row * V + sl.lo);
  sl.off = static_cast<int>((a & 15u) >> 2);
  sl.src = reinterpret_cast<const float4*>(a - (a & 15u));
  sl.nb = sl.len > 0 ? (sl.off + sl.len + 3) >> 2 : 0;
  return sl;
}

__device__ __forceinline__ float4 to_y(float4 v, int k, int off, int len, float sc) {
  const unsigned q = static_cast<unsigned>(4 * k - off);
  const unsigned n = static_cast<unsigned>(len);
  float4 y;
  y.x = q < n ? v.x * sc : neg_inf();
  y.y = q + 1u < n ? v.y * sc : neg_inf();
  y.z = q + 2u < n ? v.z * sc : neg_inf();
  y.w = q + 3u < n ? v.w * sc : neg_inf();
  return y;
}

// Online (max, sum of 2^(y - max)) of a thread: adds one float4.
__device__ __forceinline__ void online_add(float4 y, float& tm, float& ts) {
  const float m4 = max4(y);
  if (m4 > tm) {  // ex2(-inf - m4) = 0 on the first finite group
    ts *= ex2(tm - m4);
    tm = m4;
  }
  if (m4 > neg_inf()) ts += ((ex2(y.x - tm) + ex2(y.y - tm)) + ex2(y.z - tm)) + ex2(y.w - tm);
}
// Merges (m2, s2) into (m1, s1).
__device__ __forceinline__ void online_merge(float& m1, float& s1, float m2, float s2) {
  if (m2 > m1) {
    s1 = s1 * ex2(m1 - m2) + s2;
    m1 = m2;
  } else if (m2 > neg_inf()) {
    s1 += s2 * ex2(m2 - m1);
  }
}

// The draw plan of a round, every thread alike: the CTA whose prefix interval of the masses M_q holds u * total,
// and the target within it in that CTA's units (f_q: CTA q's units in the row's).
struct Plan {
  int rs;
  float tloc;
};
template <typename MassOf, typename UnitOf>
__device__ __forceinline__ Plan plan_draw(float ur, MassOf mass_of, UnitOf unit_of) {
  float M[kCluster];
  float total = 0.0f;
#pragma unroll
  for (int q = 0; q < kCluster; ++q) {
    M[q] = mass_of(q);
    total += M[q];
  }
  const float target = ur * total;
  int rs = -1, last = -1;
  float pre = 0.0f, pre_rs = 0.0f, pre_last = 0.0f, f_rs = 1.0f, f_last = 1.0f;
#pragma unroll
  for (int q = 0; q < kCluster; ++q) {  // unrolled: M and the units stay in registers
    if (M[q] > 0.0f) {
      if (rs < 0 && pre + M[q] > target) {
        rs = q;
        pre_rs = pre;
        f_rs = unit_of(q);
      }
      last = q;
      pre_last = pre;
      f_last = unit_of(q);
    }
    pre += M[q];
  }
  if (rs < 0) {  // fp rounding put the target at or past the total: the last CTA with mass
    rs = last;
    pre_rs = pre_last;
    f_rs = f_last;
  }
  Plan p;
  if (rs < 0) {  // no mass anywhere (cannot happen: the argmax is always eligible); CTA 0 reports no token
    p.rs = 0;
    p.tloc = pos_inf();
  } else {
    p.rs = rs;
    p.tloc = fmaxf(0.0f, (target - pre_rs) / f_rs);
  }
  return p;
}

template <bool kResident>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, kMinBlocks)
    topk_topp_v3_kernel(const float* __restrict__ logits, const float* __restrict__ temperature,
                        const int* __restrict__ top_k, const float* __restrict__ top_p, const float* __restrict__ u,
                        long long* __restrict__ ids, int B, int V, int R, int S, int nbmax, int nbuf, int chunk_f4,
                        int nchunks) {
  extern __shared__ float4 s_buf[];  // nbuf buffers of nbmax float4 (resident variant only)
  __shared__ XSlot s_x[kSlots];
  __shared__ alignas(8) unsigned long long s_xbar[kSlots];         // exchange n completes on s_xbar[n % kSlots]
  __shared__ alignas(8) unsigned long long s_lbar[2][kMaxChunks];  // chunk c of buffer b lands on s_lbar[b][c]
  __shared__ float s_f[kCluster];                                  // 2^(m_q - m): CTA q's units in the row's
  __shared__ float s_temp[2];  // a row's settings and draws, prefetched one row ahead (slot = it & 1)
  __shared__ int s_topk[2];
  __shared__ float s_topp[2];
  __shared__ float s_u[2][32];
  __shared__ float s_wm[kWarps];
  __shared__ float s_ws[kWarps];
  __shared__ unsigned s_wtest[kWarps][kTestWords];  // per warp: TestMsg's words
  __shared__ float s_wscan[kWarps];
  __shared__ int s_wfirst[kDraws][kWarps];
  __shared__ int s_wlast[kWarps];
  __shared__ float s_wtt[kDraws][kWarps];
#ifndef D2K_STATIC_ROWS
  __shared__ long long s_claim;
#endif
  __shared__ int s_wmin[kWarps];

  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int cid = static_cast<int>(blockIdx.x) / kCluster;
  const int ncl = static_cast<int>(gridDim.x) / kCluster;

  if (tid == 0) {
    for (int i = 0; i < kSlots; ++i) mbar_init(smem_u32(&s_xbar[i]));
    if constexpr (kResident) {
      for (int b = 0; b < nbuf; ++b)
        for (int c = 0; c < nchunks; ++c) mbar_init(smem_u32(&s_lbar[b][c]));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Every CTA of the cluster runs (and its mbarriers are initialized) before anyone sends to it.
  cluster.sync();

  // Exchanges: every CTA of the cluster runs the same sequence (same decisions), numbered by xn. Exchange n uses
  // slot n % kSlots. A sender of exchange n + 3 has completed n + 1 and n + 2, one of which every CTA sends in,
  // after reading exchange n: three slots never overwrite a message still to be read.
  unsigned xn = 0;
  auto xarm = [&](unsigned bytes) {  // before waiting on exchange xn: what this CTA will receive in it
#ifndef D2K_XCHG_BARRIER
    if (tid == 0) mbar_arrive_expect_tx(smem_u32(&s_xbar[xn % kSlots]), bytes);
#else
    (void)bytes;
#endif
  };
  auto xwait = [&]() -> XSlot& {  // exchange xn complete: its slot, then the next exchange
    XSlot& x = s_x[xn % kSlots];
#ifdef D2K_XCHG_BARRIER
    cluster.sync();
#else
    mbar_wait(smem_u32(&s_xbar[xn % kSlots]), (xn / kSlots) & 1u);
#endif
    ++xn;
    return x;
  };

  unsigned use0 = 0u, use1 = 0u;  // completed uses of each buffer's chunk mbarriers
  auto issue_copy = [&](long long row, int b) {  // thread 0: a row's slice into buffer b, chunk by chunk
    if (tid == 0) {
      const Slice sl = slice_of(logits, row, V, S, rank);
      fence_proxy_async();  // this buffer's earlier generic writes before the async-proxy writes
      for (int c = 0; c < nchunks; ++c) {
        const unsigned mb = smem_u32(&s_lbar[b][c]);
        const int lo = c * chunk_f4;
        const int n = min(chunk_f4, sl.nb - lo);
        if (n > 0) {
          mbar_arrive_expect_tx(mb, static_cast<unsigned>(n) * 16u);
          bulk_g2s(smem_u32(s_buf + b * nbmax + lo), sl.src + lo, static_cast<unsigned>(n) * 16u, mb);
        } else {
          mbar_arrive(mb);
        }
      }
    }
  };
  auto issue_params = [&](long long row, int slot) {
    if (tid == 0) {
      cp_async4(&s_temp[slot], temperature + row);
      cp_async4(&s_topk[slot], top_k + row);
      cp_async4(&s_topp[slot], top_p + row);
    }
    if (tid < R && tid < 32) cp_async4(&s_u[slot][tid], u + row * R + tid);
  };

  // Row order: each cluster starts at row cid; rank 0 claims the next row at the start of each row (dynamic) and
  // every CTA learns it from the max/sum exchange.
  long long row = cid;
  if (cid < B) {
    issue_params(cid, 0);
    cp_async_commit();
    if constexpr (kResident) issue_copy(cid, 0);
  }

  int it = 0;
  while (row < B) {
#ifdef D2K_TIMELINE
    const long long t_row = clock64();
    long long t_mark = t_row;
    auto lap = [&](int i) {
      const long long t = clock64();
      if (rank == 0 && tid == 0) atomicAdd(&g_tl[i], static_cast<unsigned long long>(t - t_mark));
      t_mark = t;
    };
    if (rank == 0 && tid == 0 && it == 0) {
      unsigned long long g;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
      atomicMin(&g_tl[8], g);
    }
#else
    auto lap = [](int) {};
#endif
    const int slot = it & 1;
    const int bsel = nbuf == 2 ? slot : 0;
    cp_async_wait_all();
    __syncthreads();  // this row's settings and draws are in shared memory
#ifdef D2K_STATIC_ROWS
    const long long claimed = row + ncl;
#else
    long long claimed = 0;
    if (rank == 0 && tid == 0) claimed = ncl + static_cast<long long>(atomicAdd(&g_next, 1u));
#endif
    const float sc = kLog2e / s_temp[slot];
    const Slice sl = slice_of(logits, row, V, S, rank);
    float4* buf = s_buf + bsel * nbmax;
    auto load4 = [&](int k) -> float4 {
      if constexpr (kResident) {
        return buf[k];
      } else {
        return to_y(__ldg(sl.src + k), k, sl.off, sl.len, sc);
      }
    };
    auto load1 = [&](int q) -> float {
      if constexpr (kResident) {
        return reinterpret_cast<const float*>(buf)[q];
      } else {
        const unsigned d = static_cast<unsigned>(q - sl.off);
        return d < static_cast<unsigned>(sl.len) ? __ldg(reinterpret_cast<const float*>(sl.src) + q) * sc
                                                 : neg_inf();
      }
    };

    // ---- One pass as the chunks land: y = x * log2(e) / T in place, per-thread online max and sum.
    float tm = neg_inf(), ts = 0.0f;
    if constexpr (kResident) {
      const unsigned par = (bsel ? use1 : use0) & 1u;
      for (int c = 0; c < nchunks; ++c) {
        const int lo = c * chunk_f4;
        if (lo >= sl.nb) break;  // later chunks are empty (their mbarriers completed by a plain arrive)
        mbar_wait(smem_u32(&s_lbar[bsel][c]), par);
        const int hi = min(sl.nb, lo + chunk_f4);
        for (int k = lo + tid; k < hi; k += kThreads) {
          const float4 y = to_y(buf[k], k, sl.off, sl.len, sc);
          buf[k] = y;
          online_add(y, tm, ts);
        }
      }
      // Wait the empty chunks too, so every mbarrier of this use has completed before the buffer's next use.
      for (int c = 0; c < nchunks; ++c)
        if (c * chunk_f4 >= sl.nb) mbar_wait(smem_u32(&s_lbar[bsel][c]), par);
      if (bsel) ++use1; else ++use0;
      fence_proxy_async();  // the in-place writes before any later TMA into this buffer
    } else {
      for (int k = tid; k < sl.nb; k += kThreads) online_add(load4(k), tm, ts);
    }
    {
      float wm = tm, ws = ts;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(kFull, wm, o);
        const float s2 = __shfl_xor_sync(kFull, ws, o);
        online_merge(wm, ws, m2, s2);
      }
      if (lane == 0) {
        s_wm[warp] = wm;
        s_ws[warp] = ws;
      }
    }
#ifndef D2K_STATIC_ROWS
    if (rank == 0 && tid == 0) s_claim = claimed;
#endif
    __syncthreads();
    float mr = neg_inf();  // the CTA's max y; its weights are 2^(y - mr)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mr = fmaxf(mr, s_wm[w]);
    float P = tm > neg_inf() ? ts * ex2(tm - mr) : 0.0f;  // this thread's mass of {z > -inf}, CTA units
    xarm(kCluster * sizeof(InitMsg));
    if (tid < kCluster) {  // lane q pushes to CTA q
      float cm = neg_inf(), cs = 0.0f;
      for (int w = 0; w < kWarps; ++w) online_merge(cm, cs, s_wm[w], s_ws[w]);
#ifdef D2K_STATIC_ROWS
      const int nx = 0;
#else
      const int nx = rank == 0 ? static_cast<int>(min(s_claim, static_cast<long long>(B))) : 0;
#endif
      XSlot& x = s_x[xn % kSlots];
      send(&x.init[rank], &s_xbar[xn % kSlots], tid, __float_as_uint(cm), __float_as_uint(cs),
           static_cast<unsigned>(nx), 0u);
    }
    lap(2);
    const XSlot& xi = xwait();
    lap(3);
#ifdef D2K_STATIC_ROWS
    const long long next = claimed;
#else
    const long long next = xi.init[0].next;
#endif
    if (next < B) {  // the next row's settings and draws (and, with two buffers, its slice) while this row runs
      issue_params(next, slot ^ 1);
      cp_async_commit();
      if constexpr (kResident) {
        if (nbuf == 2) issue_copy(next, slot ^ 1);
      }
    }

    // ---- Row setup, every thread alike: m, Z, the top_p limit, the first round's plans.
    const int kk = s_topk[slot];
    const float pp = s_topp[slot];
    float m = neg_inf();
#pragma unroll
    for (int q = 0; q < kCluster; ++q) m = fmaxf(m, xi.init[q].m);
    float f[kCluster];
    float Z = 0.0f;
#pragma unroll
    for (int q = 0; q < kCluster; ++q) {
      const float mq = xi.init[q].m;
      f[q] = mq > neg_inf() ? ex2(mq - m) : 0.0f;
      Z += xi.init[q].s * f[q];
    }
#pragma unroll
    for (int q = 0; q < kCluster; ++q)  // read by the decisions, after the test's CTA barrier
      if (tid == q) s_f[q] = f[q];
    const float pz = pp >= 1.0f ? pos_inf() : pp * Z;
    const bool need_test = kk < V || pp < 1.0f;
    const float m_row = m;
    auto u_of = [&](int r) {
      r = min(r, R - 1);  // draws past R are computed (every CTA expects kDraws messages) but never used
      return r < 32 ? s_u[slot][r] : __ldg(u + row * R + r);
    };
    Plan plan[kDraws];
#pragma unroll
    for (int i = 0; i < kDraws; ++i)
      plan[i] = plan_draw(
          u_of(i), [&](int q) { return xi.init[q].s * f[q]; }, [&](int q) { return f[q]; });
    float low = neg_inf();  // C(low) false: the kept set lies in {z > low}
    float high = m;         // C(high) true: {z >= high} lies in the kept set
    bool done = false;
    int sel = -1;

    const int rounds = (R + kDraws - 1) / kDraws;
    for (int r = 0; r < rounds; ++r) {
      // ---- Draws: CTA plan[i].rs finds draw i by inverse CDF over {z > low} and publishes it; the block scan of
      // the thread masses is shared by the draws a CTA owns, warp i searches draw i.
      xarm(kDraws * sizeof(DrawMsg));
      unsigned own = 0;
#pragma unroll
      for (int i = 0; i < kDraws; ++i) own |= (plan[i].rs == rank ? 1u : 0u) << i;
      if (own) {
        float v = P;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const float t = __shfl_up_sync(kFull, v, o);
          if (lane >= o) v += t;
        }
        if (lane == 31) s_wscan[warp] = v;
        __syncthreads();
        float woff = 0.0f;
        for (int w = 0; w < warp; ++w) woff += s_wscan[w];
        const float incl = woff + v;
        const unsigned bp = __ballot_sync(kFull, P > 0.0f);
        if (lane == 0) s_wlast[warp] = bp ? warp * 32 + 31 - __clz(bp) : -1;
#pragma unroll
        for (int i = 0; i < kDraws; ++i) {
          if (own & (1u << i)) {
            const float tloc = plan[i].tloc;
            const unsigned bc = __ballot_sync(kFull, P > 0.0f && incl > tloc);
            if (lane == 0) s_wfirst[i][warp] = bc ? warp * 32 + __ffs(bc) - 1 : kNoIndex;
            if (bc && lane == __ffs(bc) - 1) s_wtt[i][warp] = tloc - (incl - P);
          }
        }
        __syncthreads();
        if (warp < kDraws && (own & (1u << warp))) {
          const int di = warp;
          int tf = kNoIndex, tl = -1;
#pragma unroll
          for (int w = 0; w < kWarps; ++w) {
            tf = min(tf, s_wfirst[di][w]);
            tl = max(tl, s_wlast[w]);
          }
          int tsel;
          float tt;
          if (tf != kNoIndex) {
            tsel = tf;
            tt = fmaxf(0.0f, s_wtt[di][tf >> 5]);
          } else {  // past the end by rounding: the last eligible token of the last thread with mass
            tsel = tl;
            tt = pos_inf();
          }
          const int cnt = (tsel >= 0 && tsel < sl.nb) ? (sl.nb - tsel + kThreads - 1) / kThreads : 0;
          float base = 0.0f;
          int qsel = -1, qlast = -1;
          for (int g = 0; g < cnt; g += 32) {
            const int i = g + lane;
            const int k = tsel + i * kThreads;
            float4 y = make_float4(neg_inf(), neg_inf(), neg_inf(), neg_inf());
            if (i < cnt) y = load4(k);
            const float e0 = y.x > low ? ex2(y.x - mr) : 0.0f;
            const float e1 = y.y > low ? ex2(y.y - mr) : 0.0f;
            const float e2 = y.z > low ? ex2(y.z - mr) : 0.0f;
            const float e3 = y.w > low ? ex2(y.w - mr) : 0.0f;
            const float ls = ((e0 + e1) + e2) + e3;
            float wi = ls;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
              const float t = __shfl_up_sync(kFull, wi, o);
              if (lane >= o) wi += t;
            }
            const unsigned c2 = __ballot_sync(kFull, ls > 0.0f && base + wi > tt);
            if (c2) {
              const int L = __ffs(c2) - 1;
              int qs = -1;
              if (lane == L) {
                float cum = base + (wi - ls);
                const float e[4] = {e0, e1, e2, e3};
                int c = -1, cl = -1;
#pragma unroll
                for (int cc = 0; cc < 4; ++cc) {
                  if (e[cc] > 0.0f) {
                    cl = cc;
                    cum += e[cc];
                    if (c < 0 && cum > tt) c = cc;
                  }
                }
                qs = 4 * k + (c >= 0 ? c : cl);
              }
              qsel = __shfl_sync(kFull, qs, L);
              break;
            }
            const unsigned p2 = __ballot_sync(kFull, ls > 0.0f);
            if (p2) {
              const int L = 31 - __clz(p2);
              int ql = -1;
              if (lane == L) {
                const int c = e3 > 0.0f ? 3 : e2 > 0.0f ? 2 : e1 > 0.0f ? 1 : 0;
                ql = 4 * k + c;
              }
              qlast = __shfl_sync(kFull, ql, L);
            }
            base += __shfl_sync(kFull, wi, 31);
          }
          if (qsel < 0) qsel = qlast;
          if (lane < kCluster) {  // lane q pushes to CTA q
            const int j = qsel >= 0 ? sl.lo + qsel - sl.off : -1;
            const float yq = qsel >= 0 ? load1(qsel) : 0.0f;
            XSlot& x = s_x[xn % kSlots];
            send(&x.draw[di], &s_xbar[xn % kSlots], lane, static_cast<unsigned>(j), __float_as_uint(yq));
          }
        }
      }
      const XSlot& xd = xwait();
      lap(r == 0 ? 4 : 6);
      float dy[kDraws];  // +inf for an unused draw: nothing lies above it, and it is never tested
      float ymax = neg_inf(), ymin = pos_inf();
      int first_valid = -1;
#pragma unroll
      for (int i = 0; i < kDraws; ++i) {
        const bool valid = r * kDraws + i < R && xd.draw[i].j >= 0;
        dy[i] = valid ? xd.draw[i].y : pos_inf();
        if (valid) {
          ymax = fmaxf(ymax, dy[i]);
          ymin = fminf(ymin, dy[i]);
          if (first_valid < 0) first_valid = i;
        }
      }
      if (first_valid < 0) continue;  // no token (cannot happen): the draws are spent, the pivots stay
      if (!need_test) {                // top_k >= V and top_p >= 1: every draw is accepted
        sel = xd.draw[first_valid].j;
        done = true;
        break;
      }

      // ---- Test: per draw and for mid, the count and mass strictly above it, per thread, then per CTA.
      const float mid = (ymax + high) * 0.5f;
      const float thr = fminf(ymin, mid);
      int cnt_[kDraws + 1];
      float sum_[kDraws + 1];
#pragma unroll
      for (int i = 0; i <= kDraws; ++i) {
        cnt_[i] = 0;
        sum_[i] = 0.0f;
      }
      for (int k = tid; k < sl.nb; k += kThreads) {
        const float4 y = load4(k);
        if (max4(y) > thr) {  // whole float4 groups below every pivot skip the exponentials
          const float yv[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const float yc = yv[c];
            const float e = yc > thr ? ex2(yc - mr) : 0.0f;
#pragma unroll
            for (int i = 0; i < kDraws; ++i) {
              const bool a = yc > dy[i];
              cnt_[i] += a ? 1 : 0;
              sum_[i] += a ? e : 0.0f;
            }
            const bool a = yc > mid;
            cnt_[kDraws] += a ? 1 : 0;
            sum_[kDraws] += a ? e : 0.0f;
          }
        }
      }
      {
#pragma unroll
        for (int i = 0; i <= kDraws; ++i) {
          int rc = cnt_[i];
          float rs = sum_[i];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) {
            rc += __shfl_xor_sync(kFull, rc, o);
            rs += __shfl_xor_sync(kFull, rs, o);
          }
          if (lane == 0) {
            s_wtest[warp][i] = static_cast<unsigned>(rc);
            s_wtest[warp][kDraws + 1 + i] = __float_as_uint(rs);
          }
        }
      }
      xarm(kCluster * kTestWords * 4);
      __syncthreads();
      if (tid < kCluster * kTestGroups) {  // thread (q, g) pushes words [4g, 4g + 4) to CTA q
        const int q = tid / kTestGroups;
        const int g = tid % kTestGroups;
        unsigned wv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int wd = 4 * g + e;
          if (wd <= kDraws) {
            int c = 0;
            for (int w = 0; w < kWarps; ++w) c += static_cast<int>(s_wtest[w][wd]);
            wv[e] = static_cast<unsigned>(c);
          } else if (wd < 2 * (kDraws + 1)) {
            float s = 0.0f;
            for (int w = 0; w < kWarps; ++w) s += __uint_as_float(s_wtest[w][wd]);
            wv[e] = __float_as_uint(s);
          } else {
            wv[e] = 0u;
          }
        }
        XSlot& x = s_x[xn % kSlots];
        send(&x.test_words[rank][4 * g], &s_xbar[xn % kSlots], q, wv[0], wv[1], wv[2], wv[3]);
      }
      const XSlot& xt = xwait();
#ifdef D2K_TIMELINE
      if (rank == 0 && tid == 0) atomicAdd(&g_tl[1], 1ull);
#endif

      // ---- Decide, every thread alike (same numbers, same order): the first draw that passes is the sample.
      float fs[kCluster];
#pragma unroll
      for (int q = 0; q < kCluster; ++q) fs[q] = s_f[q];
      int acc = -1;
      bool midok = false;
#pragma unroll
      for (int i = 0; i <= kDraws; ++i) {
        int C = 0;
        float Sm = 0.0f;
#pragma unroll
        for (int q = 0; q < kCluster; ++q) {
          C += static_cast<int>(xt.test_words[q][i]);
          Sm += __uint_as_float(xt.test_words[q][kDraws + 1 + i]) * fs[q];
        }
        const bool ok = C < kk && Sm < pz;
        if (i < kDraws) {
          if (acc < 0 && ok && dy[i] != pos_inf()) acc = i;
        } else {
          midok = ok;
        }
      }
      if (acc >= 0) {
        sel = xd.draw[acc].j;  // the slot is not reused before the next round's draws
        done = true;
        lap(5);
        break;
      }
      // Every draw rejected: everything at or below the highest is out. Column `col` holds the masses above the
      // new low (the highest draw, or mid).
      int col = kDraws;
      if (midok) {
#pragma unroll
        for (int i = kDraws - 1; i >= 0; --i)
          if (dy[i] == ymax) col = i;
        low = ymax;
        high = mid;
      } else {
        low = mid;
      }
      if (r + 1 < rounds) {
#pragma unroll
        for (int i = 0; i < kDraws; ++i)
          plan[i] = plan_draw(
              u_of((r + 1) * kDraws + i),
              [&](int q) { return __uint_as_float(xt.test_words[q][kDraws + 1 + col]) * fs[q]; },
              [&](int q) { return fs[q]; });
      }
      float pn = 0.0f;  // this thread's mass of {z > new low}
#pragma unroll
      for (int i = 0; i <= kDraws; ++i)
        if (i == col) pn = sum_[i];
      P = pn;
      lap(5);
    }

    // ---- Every draw rejected (not seen in practice): the argmax, lowest index, is in every kept set.
    if (!done) {
      int best = kNoIndex;
      for (int k = tid; k < sl.nb; k += kThreads) {
        const float4 y = load4(k);
        const int g = sl.lo + 4 * k - sl.off;
        if (y.w == m_row) best = g + 3;
        if (y.z == m_row) best = g + 2;
        if (y.y == m_row) best = g + 1;
        if (y.x == m_row) best = g;
        if (best != kNoIndex) break;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) best = min(best, __shfl_xor_sync(kFull, best, o));
      if (lane == 0) s_wmin[warp] = best;
      xarm(kCluster * sizeof(int));
      __syncthreads();
      if (tid < kCluster) {
        int b = kNoIndex;
        for (int w = 0; w < kWarps; ++w) b = min(b, s_wmin[w]);
        XSlot& x = s_x[xn % kSlots];
        send(&x.amin[rank], &s_xbar[xn % kSlots], tid, static_cast<unsigned>(b));
      }
      const XSlot& xa = xwait();
      int b = kNoIndex;
#pragma unroll
      for (int q = 0; q < kCluster; ++q) b = min(b, xa.amin[q]);
      sel = b;
    }
    // One buffer: this CTA read its slice for the last time before the exchange it just completed (every thread
    // passed the CTA barrier before its CTA's message); the next row's copy may overwrite it.
    if constexpr (kResident) {
      if (nbuf == 1 && next < B) issue_copy(next, 0);
    }
    if (rank == 0 && tid == 0) ids[row] = static_cast<long long>(sel);
#ifdef D2K_TIMELINE
    if (rank == 0 && tid == 0) {
      atomicAdd(&g_tl[0], 1ull);
      atomicAdd(&g_tl[7], static_cast<unsigned long long>(clock64() - t_row));
      if (next >= B) {
        unsigned long long g;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
        atomicMax(&g_tl[9], g);
      }
    }
#endif
    row = next;
    ++it;
  }
  cp_async_wait_all();
  cluster.sync();  // nobody leaves while a peer could still address its shared memory
}

#ifdef D2K_TIMELINE
__global__ void timeline_reset() {
  for (int i = 0; i < 10; ++i) g_tl[i] = 0;
  g_tl[8] = ~0ull;
}
__global__ void timeline_print(float cycles_per_us) {
  const double rows = g_tl[0] > 0 ? static_cast<double>(g_tl[0]) : 1.0;
  auto us = [&](int i) { return static_cast<double>(g_tl[i]) / rows / cycles_per_us; };
  const double rounds = static_cast<double>(g_tl[1]);
  printf("timeline rows %llu  test rounds/row %.2f  per row (us): load+pass %.2f  init xchg %.2f  draw0 %.2f  "
         "tests %.2f  later draws %.2f  total %.2f  |  per test round %.2f  |  span %.2f us\n",
         g_tl[0], rounds / rows, us(2), us(3), us(4), us(5), us(6), us(7),
         rounds > 0 ? static_cast<double>(g_tl[5]) / rounds / cycles_per_us : 0.0,
         static_cast<double>(g_tl[9] - g_tl[8]) / 1000.0);
}
#endif

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
  if (V < 1 || V > kMaxV || B > (int64_t{1} << 31) - 1 || R > 1 << 20) return 3;
  if (tl.strides[1] != 1 || tl.strides[0] != V || tu.strides[1] != 1 || tu.strides[0] != R) return 4;
  if (!aligned(tl.data, 4)) return 4;

  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const int Bi = static_cast<int>(B), Vi = static_cast<int>(V), Ri = static_cast<int>(R);
  const int S = ((Vi + kCluster - 1) / kCluster + 3) & ~3;  // elements per CTA, a multiple of 4
  const int nbmax = S / 4 + 2;                              // float4 per buffer (aligned span plus slack)
  const size_t buf_bytes = static_cast<size_t>(nbmax) * sizeof(float4);
  int chunk_f4 = kThreads * CHUNK_ITERS;  // float4 per TMA chunk: whole rounds of the block's threads
  while ((nbmax + chunk_f4 - 1) / chunk_f4 > kMaxChunks) chunk_f4 *= 2;
  const int nchunks = (nbmax + chunk_f4 - 1) / chunk_f4;

  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 5;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return 5;

  const float* logits = static_cast<const float*>(tl.data);
  const float* temperature = static_cast<const float*>(tt.data);
  const int* top_k = static_cast<const int*>(tk.data);
  const float* top_p = static_cast<const float*>(tp.data);
  const float* u = static_cast<const float*>(tu.data);
  long long* ids = static_cast<long long*>(ti.data);

  auto clusters_for = [&](auto kernel, size_t dyn) -> int {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(kCluster));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = dyn;
    cfg.stream = s;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  };

#ifdef D2K_TIMELINE
  timeline_reset<<<1, 1, 0, s>>>();
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
  auto print_timeline = [&]() { timeline_print<<<1, 1, 0, s>>>(static_cast<float>(clock_khz) / 1000.0f); };
#else
  auto print_timeline = []() {};
#endif

  // Resident: one or two buffers per CTA, by the expert's cost model in row-times (one buffer: load, then rounds,
  // 2 per row; two: the next load overlapped, 1 per row plus the first load); ties go to two buffers.
  auto kres = topk_topp_v3_kernel<true>;
  cudaFuncAttributes fa{};
  int nbuf = 0, ncl = 0;
  if (cudaFuncGetAttributes(&fa, kres) == cudaSuccess) {
    const size_t room = static_cast<size_t>(optin) > fa.sharedSizeBytes ? optin - fa.sharedSizeBytes : 0;
    if (buf_bytes <= room) {
      const size_t most = 2 * buf_bytes <= room ? 2 * buf_bytes : buf_bytes;
      if (cudaFuncSetAttribute(kres, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(most)) ==
          cudaSuccess) {
        const int c1 = clusters_for(kres, buf_bytes);
        const int c2 = 2 * buf_bytes <= room ? clusters_for(kres, 2 * buf_bytes) : 0;
        const int64_t cost1 = c1 > 0 ? 2 * ((B + c1 - 1) / c1) : INT64_MAX;
        const int64_t cost2 = c2 > 0 ? 1 + (B + c2 - 1) / c2 : INT64_MAX;
        if (c2 > 0 && cost2 <= cost1) {
          nbuf = 2;
          ncl = c2;
        } else if (c1 > 0) {
          nbuf = 1;
          ncl = c1;
        }
      }
    }
  }
  (void)cudaGetLastError();
#ifndef D2K_STATIC_ROWS
  void* next_counter = nullptr;
  if (cudaGetSymbolAddress(&next_counter, g_next) != cudaSuccess) return 5;
  if (cudaMemsetAsync(next_counter, 0, sizeof(unsigned), s) != cudaSuccess) return 6;
#endif
  if (nbuf > 0) {
    const int grid_clusters = static_cast<int>(B < ncl ? B : ncl);
    topk_topp_v3_kernel<true><<<grid_clusters * kCluster, kThreads, nbuf * buf_bytes, s>>>(
        logits, temperature, top_k, top_p, u, ids, Bi, Vi, Ri, S, nbmax, nbuf, chunk_f4, nchunks);
    const bool ok = cudaGetLastError() == cudaSuccess;
    print_timeline();
    return ok ? 0 : 6;
  }

  // Streaming: rows too large for the cluster's shared memory; every pass reads the slice from global memory.
  auto kstr = topk_topp_v3_kernel<false>;
  const int cs = clusters_for(kstr, 0);
  if (cs <= 0) return 7;
  const int grid_clusters = static_cast<int>(B < cs ? B : cs);
  topk_topp_v3_kernel<false><<<grid_clusters * kCluster, kThreads, 0, s>>>(
      logits, temperature, top_k, top_p, u, ids, Bi, Vi, Ri, S, nbmax, 0, chunk_f4, nchunks);
  const bool ok = cudaGetLastError() == cudaSuccess;
  print_timeline();
  return ok ? 0 : 6;
}
