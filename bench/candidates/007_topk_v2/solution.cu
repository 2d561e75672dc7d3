/* topk_topp_sampling: candidate "v2" of the expert CUDA C++ solution (thread-block clusters, rows resident on chip).
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 *
 * The sampler is the expert's (tasks/007_topk_topp_sampling/expert/solution.cu): two-pivot rejection sampling, one
 * row per cluster of 8 CTAs, each CTA an eighth of the row in shared memory. What changes is the per-row critical
 * path, which the H200 measured at ~18 us per row (ncu: 60% of cycles with no eligible warp):
 *  - the slice arrives as several TMA bulk copies (chunks of 2 x 256 float4), each on its own mbarrier, and one
 *    pass scales it in place and keeps a per-thread online max and sum of 2^(y - max) as the chunks land (the
 *    expert: one copy, then a max pass, then a sum pass);
 *  - per-CTA partials travel by st.async into the peers' shared memory, completing on the receiver's mbarrier
 *    (4 rotating slots), instead of DSMEM stores and a cluster barrier (whose release fence is GPU-wide);
 *  - every thread takes the row's decisions itself from the exchanged numbers (same numbers, same order, so the
 *    same decision in every thread of every CTA), instead of thread 0 deciding behind two CTA barriers;
 *  - with one buffer, the next row's copy starts as soon as this CTA has read its slice for the last time (after
 *    the accepting round's test), not after the row's last barrier.
 * Macros for variants: D2K_XCHG_BARRIER (exchanges by DSMEM stores + cluster.sync, as the expert), CHUNK_ITERS (float4
 * per thread per chunk, default 2), D2K_TIMELINE (per-row phase times, printed after each call).
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
#define CHUNK_ITERS 2
#endif

struct alignas(8) InitMsg {  // one CTA's slice: max of y and sum of 2^(y - max)
  float m;
  float s;
};
struct alignas(16) TestMsg {  // one CTA's test partials: counts and masses (units 2^(y - m_cta)) above z_j and mid
  int c0;
  int c1;
  float s0;
  float s1;
};
struct alignas(8) DrawMsg {  // the round's drawn token: row index and its y
  int j;
  float y;
};
union alignas(16) XSlot {  // one exchange's messages, in the receiver's shared memory
  InitMsg init[kCluster];
  TestMsg test[kCluster];
  DrawMsg draw;
  int amin[kCluster];
};

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
    topk_topp_v2_kernel(const float* __restrict__ logits, const float* __restrict__ temperature,
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
  __shared__ TestMsg s_wtest[kWarps];
  __shared__ float s_wscan[kWarps];
  __shared__ int s_wfirst[kWarps];
  __shared__ int s_wlast[kWarps];
  __shared__ float s_wtt[kWarps];
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

  if (cid < B) {
    issue_params(cid, 0);
    cp_async_commit();
    if constexpr (kResident) issue_copy(cid, 0);
  }

  int it = 0;
  for (long long row = cid; row < B; row += ncl, ++it) {
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
    const long long next = row + ncl;
    const int slot = it & 1;
    const int bsel = nbuf == 2 ? slot : 0;
    cp_async_wait_all();
    __syncthreads();  // this row's settings and draws are in shared memory
    if (next < B) {
      issue_params(next, slot ^ 1);
      cp_async_commit();
      if constexpr (kResident) {
        if (nbuf == 2) issue_copy(next, slot ^ 1);
      }
    }
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
    __syncthreads();
    float mr = neg_inf();  // the CTA's max y; its weights are 2^(y - mr)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mr = fmaxf(mr, s_wm[w]);
    float P = tm > neg_inf() ? ts * ex2(tm - mr) : 0.0f;  // this thread's mass of {z > -inf}, CTA units
    xarm(kCluster * sizeof(InitMsg));
    if (tid < kCluster) {  // lane q pushes to CTA q
      float cm = neg_inf(), cs = 0.0f;
      for (int w = 0; w < kWarps; ++w) online_merge(cm, cs, s_wm[w], s_ws[w]);
      XSlot& x = s_x[xn % kSlots];
      send(&x.init[rank], &s_xbar[xn % kSlots], tid, __float_as_uint(cm), __float_as_uint(cs));
    }
    lap(2);
    const XSlot& xi = xwait();
    lap(3);

    // ---- Row setup, every thread alike: m, Z, the top_p limit, the first draw's plan.
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
    auto u_of = [&](int r) { return r < 32 ? s_u[slot][r] : __ldg(u + row * R + r); };
    Plan plan = plan_draw(
        u_of(0), [&](int q) { return xi.init[q].s * f[q]; }, [&](int q) { return f[q]; });
    float low = neg_inf();  // C(low) false: the kept set lies in {z > low}
    float high = m;         // C(high) true: {z >= high} lies in the kept set
    bool done = false;
    int sel = -1;

    for (int r = 0; r < R; ++r) {
      // ---- Draw: CTA plan.rs finds the token by inverse CDF over {z > low} and publishes it.
      xarm(sizeof(DrawMsg));
      if (rank == plan.rs) {
        const float tloc = plan.tloc;
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
        const bool cand = P > 0.0f && incl > tloc;
        const unsigned bc = __ballot_sync(kFull, cand);
        const unsigned bp = __ballot_sync(kFull, P > 0.0f);
        if (lane == 0) {
          s_wfirst[warp] = bc ? warp * 32 + __ffs(bc) - 1 : kNoIndex;
          s_wlast[warp] = bp ? warp * 32 + 31 - __clz(bp) : -1;
        }
        if (bc && lane == __ffs(bc) - 1) s_wtt[warp] = tloc - (incl - P);
        __syncthreads();
        if (warp == 0) {
          int tf = kNoIndex, tl = -1;
#pragma unroll
          for (int w = 0; w < kWarps; ++w) {
            tf = min(tf, s_wfirst[w]);
            tl = max(tl, s_wlast[w]);
          }
          int tsel;
          float tt;
          if (tf != kNoIndex) {
            tsel = tf;
            tt = fmaxf(0.0f, s_wtt[tf >> 5]);
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
            send(&x.draw, &s_xbar[xn % kSlots], lane, static_cast<unsigned>(j), __float_as_uint(yq));
          }
        }
      }
      const DrawMsg d = xwait().draw;
      lap(r == 0 ? 4 : 6);
      if (d.j < 0) continue;  // no token (cannot happen): the draw is spent, the pivots stay
      if (!need_test) {       // top_k >= V and top_p >= 1: every draw is accepted
        sel = d.j;
        done = true;
        break;
      }

      // ---- Test: count and mass strictly above z_j and above mid, per thread, then per CTA.
      const float yj = d.y;
      const float mid = (yj + high) * 0.5f;
      const float thr = fminf(yj, mid);
      int c0 = 0, c1 = 0;
      float s0 = 0.0f, s1 = 0.0f;
      for (int k = tid; k < sl.nb; k += kThreads) {
        const float4 y = load4(k);
        if (max4(y) > thr) {  // whole float4 groups below both pivots skip the exponentials
          const float yv[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const float yc = yv[c];
            const bool a0 = yc > yj;
            const bool a1 = yc > mid;
            const float e = (a0 || a1) ? ex2(yc - mr) : 0.0f;
            c0 += a0 ? 1 : 0;
            c1 += a1 ? 1 : 0;
            s0 += a0 ? e : 0.0f;
            s1 += a1 ? e : 0.0f;
          }
        }
      }
      {
        int rc0 = c0, rc1 = c1;
        float rs0 = s0, rs1 = s1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          rc0 += __shfl_xor_sync(kFull, rc0, o);
          rc1 += __shfl_xor_sync(kFull, rc1, o);
          rs0 += __shfl_xor_sync(kFull, rs0, o);
          rs1 += __shfl_xor_sync(kFull, rs1, o);
        }
        if (lane == 0) s_wtest[warp] = TestMsg{rc0, rc1, rs0, rs1};
      }
      xarm(kCluster * sizeof(TestMsg));
      __syncthreads();
      if (tid < kCluster) {  // lane q pushes to CTA q
        TestMsg t{0, 0, 0.0f, 0.0f};
        for (int w = 0; w < kWarps; ++w) {
          t.c0 += s_wtest[w].c0;
          t.c1 += s_wtest[w].c1;
          t.s0 += s_wtest[w].s0;
          t.s1 += s_wtest[w].s1;
        }
        XSlot& x = s_x[xn % kSlots];
        send(&x.test[rank], &s_xbar[xn % kSlots], tid, static_cast<unsigned>(t.c0), static_cast<unsigned>(t.c1),
             __float_as_uint(t.s0), __float_as_uint(t.s1));
      }
      const XSlot& xt = xwait();
#ifdef D2K_TIMELINE
      if (rank == 0 && tid == 0) atomicAdd(&g_tl[1], 1ull);
#endif

      // ---- Decide, every thread alike (same numbers, same order).
      float fs[kCluster];
#pragma unroll
      for (int q = 0; q < kCluster; ++q) fs[q] = s_f[q];
      int C0 = 0, C1 = 0;
      float S0 = 0.0f, S1 = 0.0f;
#pragma unroll
      for (int q = 0; q < kCluster; ++q) {
        C0 += xt.test[q].c0;
        C1 += xt.test[q].c1;
        S0 += xt.test[q].s0 * fs[q];
        S1 += xt.test[q].s1 * fs[q];
      }
      const bool accept = C0 < kk && S0 < pz;
      const bool midok = C1 < kk && S1 < pz;
      if (accept) {
        sel = d.j;
        done = true;
        lap(5);
        break;
      }
      if (midok) {
        low = yj;
        high = mid;
      } else {
        low = mid;
      }
      if (r + 1 < R) {
        plan = plan_draw(
            u_of(r + 1), [&](int q) { return (midok ? xt.test[q].s0 : xt.test[q].s1) * fs[q]; },
            [&](int q) { return fs[q]; });
      }
      P = midok ? s0 : s1;  // this thread's mass of {z > new low}
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
  auto kres = topk_topp_v2_kernel<true>;
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
  if (nbuf > 0) {
    const int grid_clusters = static_cast<int>(B < ncl ? B : ncl);
    topk_topp_v2_kernel<true><<<grid_clusters * kCluster, kThreads, nbuf * buf_bytes, s>>>(
        logits, temperature, top_k, top_p, u, ids, Bi, Vi, Ri, S, nbmax, nbuf, chunk_f4, nchunks);
    const bool ok = cudaGetLastError() == cudaSuccess;
    print_timeline();
    return ok ? 0 : 6;
  }

  // Streaming: rows too large for the cluster's shared memory; every pass reads the slice from global memory.
  auto kstr = topk_topp_v2_kernel<false>;
  const int cs = clusters_for(kstr, 0);
  if (cs <= 0) return 7;
  const int grid_clusters = static_cast<int>(B < cs ? B : cs);
  topk_topp_v2_kernel<false><<<grid_clusters * kCluster, kThreads, 0, s>>>(
      logits, temperature, top_k, top_p, u, ids, Bi, Vi, Ri, S, nbmax, 0, chunk_f4, nchunks);
  const bool ok = cudaGetLastError() == cudaSuccess;
  print_timeline();
  return ok ? 0 : 6;
}
