/* topk_topp_sampling: candidate "cluster16" (rejected) of the expert CUDA C++ solution: the expert with clusters of up
 * to 16 CTAs (non-portable on Hopper) and a cost model choosing 8 or 16 CTAs and one or two buffers. NOTES.md has
 * what the H200 measured; the header below is the expert's, kept for the design.
 *
 * Computes, for every row b of logits [B, V] fp32: one token id drawn from softmax(logits[b] / temperature[b])
 * restricted to the row's top-k set (ties kept) and top-p set (the token crossing top_p kept), both taken on the
 * full distribution, renormalized over their intersection, with the row's uniform draws u[b, :] as randomness.
 * No sort: the kept set is {z >= tau} for an unknown threshold tau, and the kernel never computes tau.
 *
 * Design:
 *  - L1: the Triton expert's rejection sampler with two pivots, unchanged. Round r draws a token j by inverse CDF
 *    from the distribution restricted to {z > low} with u[b, r], then counts the tokens and sums the mass strictly
 *    above z_j and above mid = (z_j + high) / 2. j is accepted when fewer than top_k tokens and less than top_p of
 *    the mass lie above it (a draw from a superset, conditioned on landing in the kept set, is a draw from the kept
 *    set); otherwise low rises to z_j (mid passes: high drops to mid) or to mid. top_k >= V and top_p >= 1 accept
 *    the first draw; a row rejecting all its draws returns its argmax (in every kept set).
 *  - L2: one row per thread-block cluster of 8 CTAs, held in their shared memory (each CTA an eighth of the row,
 *    64 KB at V = 128256, 76 KB at V = 151936), so HBM is read once and every pass of every round is a pass over
 *    shared memory. Persistent clusters (as many as fit at once) loop over rows; where a second buffer costs no
 *    clusters, the next row's slice is prefetched while the current row's rounds run. Per-CTA partials (max and
 *    sum, the four test reductions) are pushed into every CTA's shared memory through DSMEM and a cluster barrier
 *    publishes them; each CTA then takes the same decisions from the same numbers. A draw is two steps: the CTA
 *    whose prefix interval holds u * mass finds the thread by a block scan of the per-thread masses kept from the
 *    last test pass (pass B for the first draw), one warp finds the token among that thread's values and
 *    publishes (j, z_j).
 *  - L3: fp32 throughout, z stored pre-scaled by log2(e) / T so every weight is one ex2.approx of (z - CTA max);
 *    CTA partials are rescaled by 2^(m_cta - m) on exchange; the test pass skips the exponentials of float4 groups
 *    wholly below both pivots; slices arrive by one TMA bulk copy per CTA on an mbarrier (async proxy: a prefetch
 *    in flight is tracked by its mbarrier, not by the threads' memory fences), over the 16-byte-aligned span
 *    that holds them, the ends masked to -inf (unaligned rows, tiny V); settings and draws come one row ahead by
 *    cp.async; a streaming variant of the same kernel (every pass reads the slice from global memory) serves rows
 *    too large for the cluster's shared memory. No atomics on global memory, no scratch, one launch.
 *
 * Measured: see NOTES.md (the expert's figures are in tasks/007_topk_topp_sampling/README.md).
 */
#include "d2k/solution.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#ifdef PRINT_PLAN
#include <cstdio>
#endif

namespace cg = cooperative_groups;

namespace {

#ifndef MAX_CLUSTER
#define MAX_CLUSTER 16
#endif
constexpr int kMaxCluster = MAX_CLUSTER;    // largest cluster tried (16: non-portable, Hopper allows it)
constexpr int kThreads = 256;               // threads per CTA
constexpr int kWarps = kThreads / 32;
constexpr int kMinBlocks = 3;               // __launch_bounds__: shared memory allows 3 CTAs per SM anyway; 80 registers, no spills
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kNoIndex = 0x7fffffff;
constexpr int kMaxV = 1 << 28;              // in-row indices stay in int

struct alignas(8) InitMsg {   // one CTA's slice after the load: max of y and sum of 2^(y - max)
  float m;
  float s;
};
struct alignas(16) TestMsg {   // one CTA's test partials: counts and masses (units 2^(y - m_cta)) above z_j and above mid
  int c0;
  int c1;
  float s0;
  float s1;
};
struct alignas(8) DrawMsg {   // the round's drawn token: row index and its y
  int j;
  float y;
};
struct RowState {  // decisions of thread 0, broadcast to the CTA through shared memory
  float low;
  float high;
  float m;
  float tloc;
  int rs;
  int done;
  int sel;
  int midok;
  int need_test;
};

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Slices travel by TMA bulk copies (async proxy) completing on an mbarrier: nothing the threads wait on in the
// meantime (cluster barriers included) waits for them.
__device__ __forceinline__ void mbar_init(unsigned mb) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mb) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned mb) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mb) : "memory");
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
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const size_t g = __cvta_generic_to_global(gmem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// DSMEM: the shared::cluster address of `p` in CTA `rank` of the cluster, and stores to it. Volatile, so the
// addresses are formed at the point of use and not hoisted out of the row loop into registers.
__device__ __forceinline__ unsigned cluster_addr(const void* p, unsigned rank) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster(unsigned addr, unsigned a) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(addr), "r"(a) : "memory");
}
__device__ __forceinline__ void st_cluster(unsigned addr, unsigned a, unsigned b) {
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void st_cluster(unsigned addr, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// A CTA's slice of a row: row elements [lo, lo + len). The buffer mirrors the 16-byte-aligned span that holds
// them: buffer element q is row element lo + q - off (0 <= off < 4), nb float4 in all; the other elements are
// masked to -inf.
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

// Raw float4 k of the span -> y = x * log2(e) / T, -inf outside the slice.
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

template <bool kResident, int kCluster>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    topk_topp_cluster_kernel(const float* __restrict__ logits, const float* __restrict__ temperature,
                             const int* __restrict__ top_k, const float* __restrict__ top_p,
                             const float* __restrict__ u, long long* __restrict__ ids, int B, int V, int R, int S,
                             int nbmax, int nbuf) {
  extern __shared__ float4 s_buf[];  // nbuf buffers of nbmax float4 (resident variant only)
  __shared__ InitMsg s_init[kCluster];
  __shared__ TestMsg s_test[kCluster];
  __shared__ DrawMsg s_draw;
  __shared__ int s_amin[kCluster];
  __shared__ float s_f[kCluster];  // 2^(m_q - m): CTA q's units in the row's units (warp 0 only)
  __shared__ RowState s_st;
  __shared__ alignas(8) unsigned long long s_mbar[2];  // slice buffer b's copy completes on s_mbar[b]
  __shared__ float s_temp[2];      // a row's settings and draws, prefetched one row ahead (slot = it & 1)
  __shared__ int s_topk[2];
  __shared__ float s_topp[2];
  __shared__ float s_u[2][32];
  __shared__ float s_wmax[kWarps];
  __shared__ float s_wsum[kWarps];
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

  if constexpr (kResident) {
    if (tid == 0) {
      mbar_init(smem_u32(&s_mbar[0]));
      mbar_init(smem_u32(&s_mbar[1]));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
  }
  // Every CTA of the cluster runs (and its mbarriers are initialized) before anyone touches shared memory.
  cluster.sync();

  // A row's slice into buffer b (thread 0: one TMA bulk copy; the buffer's earlier generic accesses are fenced).
  auto issue_copy = [&](long long row, int b) {
    if (tid == 0) {
      const Slice sl = slice_of(logits, row, V, S, rank);
      const unsigned mb = smem_u32(&s_mbar[b]);
      const unsigned bytes = static_cast<unsigned>(sl.nb) * 16u;
      fence_proxy_async();
      if (bytes > 0) {
        mbar_arrive_expect_tx(mb, bytes);
        bulk_g2s(smem_u32(s_buf + b * nbmax), sl.src, bytes, mb);
      } else {
        mbar_arrive(mb);
      }
    }
  };
  // The row's settings and draws, by cp.async into slot `slot` (the caller commits).
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
    const long long next = row + ncl;
    const int slot = it & 1;
    const int bsel = nbuf == 2 ? slot : 0;  // this row's slice buffer
    if constexpr (kResident) {
      // Buffer bsel's copies complete in order: with two buffers this is its (it / 2)-th, else its it-th.
      mbar_wait(smem_u32(&s_mbar[bsel]), static_cast<unsigned>(nbuf == 2 ? (it >> 1) & 1 : it & 1));
    }
    cp_async_wait_all();
    __syncthreads();  // this row's slice (resident), settings and draws are in shared memory
    if (next < B) {   // prefetch the next row's settings, and with two buffers its slice
      issue_params(next, slot ^ 1);
      cp_async_commit();
      if constexpr (kResident) {
        if (nbuf == 2) issue_copy(next, slot ^ 1);
      }
    }
#ifdef ABLATE_LOAD_ONLY  // timing variant (bench/profile_cuda_solution.py --define): the loads and nothing else
    if (rank == 0 && tid == 0) ids[row] = 0;
    if constexpr (kResident) {
      if (nbuf == 1 && next < B) issue_copy(next, 0);
    }
    continue;
#endif
    const float sc = kLog2e / s_temp[slot];  // y = x * log2(e) / T: exp(z - m) = 2^(y - m_y)
    const Slice sl = slice_of(logits, row, V, S, rank);
    float4* buf = s_buf + bsel * nbmax;
    auto load4 = [&](int k) -> float4 {
      if constexpr (kResident) {
        return buf[k];
      } else {
        return to_y(__ldg(sl.src + k), k, sl.off, sl.len, sc);
      }
    };
    auto load1 = [&](int q) -> float {  // buffer element q (0 <= q < 4 nb)
      if constexpr (kResident) {
        return reinterpret_cast<const float*>(buf)[q];
      } else {
        const unsigned d = static_cast<unsigned>(q - sl.off);
        return d < static_cast<unsigned>(sl.len) ? __ldg(reinterpret_cast<const float*>(sl.src) + q) * sc
                                                 : neg_inf();
      }
    };

    // ---- Pass A: y = x * log2(e) / T (in place when resident), the slice's max.
    float mx = neg_inf();
    for (int k = tid; k < sl.nb; k += kThreads) {
      float4 y;
      if constexpr (kResident) {
        y = to_y(buf[k], k, sl.off, sl.len, sc);
        buf[k] = y;
      } else {
        y = load4(k);
      }
      mx = fmaxf(mx, max4(y));
    }
    if constexpr (kResident) fence_proxy_async();  // the in-place writes before any later TMA into this buffer
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
    if (lane == 0) s_wmax[warp] = mx;
    __syncthreads();
    float mr = neg_inf();  // the CTA's max y; its weights are 2^(y - mr)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mr = fmaxf(mr, s_wmax[w]);

    // ---- Pass B: per-thread mass 2^(y - mr), kept as the thread's share of {z > -inf} for the first draw.
    float P = 0.0f;
    if (mr > neg_inf()) {
      for (int k = tid; k < sl.nb; k += kThreads) {
        const float4 y = load4(k);
        P += ex2(y.x - mr);
        P += ex2(y.y - mr);
        P += ex2(y.z - mr);
        P += ex2(y.w - mr);
      }
    }
    {
      float s = P;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
      if (lane == 0) s_wsum[warp] = s;
    }
    __syncthreads();
    if (tid < kCluster) {  // lane q pushes to CTA q
      float s = 0.0f;
      for (int w = 0; w < kWarps; ++w) s += s_wsum[w];
      st_cluster(cluster_addr(&s_init[rank], tid), __float_as_uint(mr), __float_as_uint(s));
    }
    cluster.sync();

    // ---- Row setup (warp 0 of every CTA, lane q holding CTA q's numbers; identical in every CTA): m, Z, the
    // top-p limit, the first draw. Lane-parallel, so a 16-CTA cluster costs no longer serial loops.
    const bool qlane = lane < kCluster;
    // The draw's CTA: the first with mass whose prefix interval holds u * mass (lane q holds Mq, CTA q's mass).
    auto plan_draw = [&](int r, float Mq, RowState& st) {
      const float ur = r < 32 ? s_u[slot][r] : __ldg(u + row * R + r);
      float incl = Mq;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float t = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += t;
      }
      float excl = __shfl_up_sync(kFull, incl, 1);
      if (lane == 0) excl = 0.0f;
      const float total = __shfl_sync(kFull, incl, 31);
      const float target = ur * total;
      const unsigned has = __ballot_sync(kFull, Mq > 0.0f);
      const unsigned hit = __ballot_sync(kFull, Mq > 0.0f && incl > target);
      // fp rounding can put the target at or past the total: then the last CTA with mass
      const int rs = hit ? __ffs(hit) - 1 : (has ? 31 - __clz(has) : -1);
      const float pre = __shfl_sync(kFull, excl, rs < 0 ? 0 : rs);
      if (rs < 0) {  // no mass anywhere (cannot happen: the argmax is always eligible); CTA 0 reports no token
        st.rs = 0;
        st.tloc = pos_inf();
      } else {
        st.rs = rs;
        st.tloc = fmaxf(0.0f, (target - pre) / s_f[rs]);  // in CTA rs's units
      }
    };
    int kk = 0;  // top_k (warp 0 only)
    float pz = pos_inf();  // top_p limit in row units (warp 0 only)
    if (warp == 0) {
      kk = s_topk[slot];
      const float pp = s_topp[slot];
      const float mq = qlane ? s_init[lane].m : neg_inf();
      float m = mq;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
      const float f = mq > neg_inf() ? ex2(mq - m) : 0.0f;
      const float Mq = qlane ? s_init[lane].s * f : 0.0f;
      if (qlane) s_f[lane] = f;
      __syncwarp();
      float Z = Mq;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) Z += __shfl_xor_sync(kFull, Z, o);
      pz = pp >= 1.0f ? pos_inf() : pp * Z;
      RowState st;
      st.low = neg_inf();  // C(low) false: the kept set lies in {z > low}
      st.high = m;         // C(high) true: {z >= high} lies in the kept set
      st.m = m;
      st.done = 0;
      st.sel = -1;
      st.midok = 0;
#ifdef ABLATE_NO_TEST  // timing variant: the first draw is taken (wrong ids; load, passes and one draw)
      st.need_test = 0;
#else
      st.need_test = (kk < V || pp < 1.0f) ? 1 : 0;
#endif
      plan_draw(0, Mq, st);
      if (lane == 0) s_st = st;
    }
    __syncthreads();
    RowState st = s_st;
    float low = st.low;
    float high = st.high;
    const float m_row = st.m;
    const bool need_test = st.need_test != 0;
    bool done = false;
    int sel = -1;

    for (int r = 0; r < R; ++r) {
      // ---- Draw: CTA st.rs finds the token by inverse CDF over {z > low} and publishes it.
      if (rank == st.rs) {
        const float tloc = st.tloc;
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
          int ts;
          float tt;
          if (tf != kNoIndex) {
            ts = tf;
            tt = fmaxf(0.0f, s_wtt[tf >> 5]);
          } else {  // past the end by rounding: the last eligible token of the last thread with mass
            ts = tl;
            tt = pos_inf();
          }
          // Thread ts's float4 are k = ts + i * kThreads; lane handles i = g + lane.
          const int cnt = (ts >= 0 && ts < sl.nb) ? (sl.nb - ts + kThreads - 1) / kThreads : 0;
          float base = 0.0f;
          int qsel = -1, qlast = -1;
          for (int g = 0; g < cnt; g += 32) {
            const int i = g + lane;
            const int k = ts + i * kThreads;
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
            st_cluster(cluster_addr(&s_draw, lane), static_cast<unsigned>(j), __float_as_uint(yq));
          }
        }
      }
      cluster.sync();
      const DrawMsg d = s_draw;
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
        if (max4(y) > thr) {  // whole float4 groups (and warps) below both pivots skip the exponentials
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
      __syncthreads();
      if (tid < kCluster) {  // lane q pushes to CTA q
        TestMsg t{0, 0, 0.0f, 0.0f};
        for (int w = 0; w < kWarps; ++w) {
          t.c0 += s_wtest[w].c0;
          t.c1 += s_wtest[w].c1;
          t.s0 += s_wtest[w].s0;
          t.s1 += s_wtest[w].s1;
        }
        st_cluster(cluster_addr(&s_test[rank], tid), static_cast<unsigned>(t.c0), static_cast<unsigned>(t.c1),
                   __float_as_uint(t.s0), __float_as_uint(t.s1));
      }
      cluster.sync();

      // ---- Decide (warp 0 of every CTA, lane q holding CTA q's partials; same numbers, same order everywhere).
      if (warp == 0) {
        const TestMsg tq = qlane ? s_test[lane] : TestMsg{0, 0, 0.0f, 0.0f};
        const float f = qlane ? s_f[lane] : 0.0f;
        int C0 = tq.c0, C1 = tq.c1;
        float S0 = tq.s0 * f, S1 = tq.s1 * f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          C0 += __shfl_xor_sync(kFull, C0, o);
          C1 += __shfl_xor_sync(kFull, C1, o);
          S0 += __shfl_xor_sync(kFull, S0, o);
          S1 += __shfl_xor_sync(kFull, S1, o);
        }
        const bool accept = C0 < kk && S0 < pz;
        const bool midok = C1 < kk && S1 < pz;
        RowState ns = st;
        ns.midok = midok ? 1 : 0;
        if (accept) {
          ns.done = 1;
          ns.sel = d.j;
        } else {
          ns.low = midok ? yj : mid;
          ns.high = midok ? mid : high;
          const float Mq = (midok ? tq.s0 : tq.s1) * f;
          if (r + 1 < R) plan_draw(r + 1, Mq, ns);
        }
        if (lane == 0) s_st = ns;
      }
      __syncthreads();
      st = s_st;
      if (st.done) {
        sel = st.sel;
        done = true;
        break;
      }
      P = st.midok ? s0 : s1;  // this thread's mass of {z > new low}
      low = st.low;
      high = st.high;
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
        if (best != kNoIndex) break;  // this thread's later float4 hold larger indices
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) best = min(best, __shfl_xor_sync(kFull, best, o));
      if (lane == 0) s_wmin[warp] = best;
      __syncthreads();
      if (tid < kCluster) {  // lane q pushes to CTA q
        int b = kNoIndex;
        for (int w = 0; w < kWarps; ++w) b = min(b, s_wmin[w]);
        st_cluster(cluster_addr(&s_amin[rank], tid), static_cast<unsigned>(b));
      }
      cluster.sync();
      int b = kNoIndex;
#pragma unroll
      for (int q = 0; q < kCluster; ++q) b = min(b, s_amin[q]);
      sel = b;
    }
    if (rank == 0 && tid == 0) ids[row] = static_cast<long long>(sel);

    // Single buffer: every read of this row's slice came before the last cluster barrier; load the next row.
    if constexpr (kResident) {
      if (nbuf == 1 && next < B) issue_copy(next, 0);
    }
  }
  cp_async_wait_all();
  cluster.sync();  // nobody leaves while a peer could still address its shared memory
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
  if (V < 1 || V > kMaxV || B > (int64_t{1} << 31) - 1 || R > 1 << 20) return 3;
  if (tl.strides[1] != 1 || tl.strides[0] != V || tu.strides[1] != 1 || tu.strides[0] != R) return 4;
  if (!aligned(tl.data, 4)) return 4;

  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const int Bi = static_cast<int>(B), Vi = static_cast<int>(V), Ri = static_cast<int>(R);

  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 5;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return 5;

  const float* logits = static_cast<const float*>(tl.data);
  const float* temperature = static_cast<const float*>(tt.data);
  const int* top_k = static_cast<const int*>(tk.data);
  const float* top_p = static_cast<const float*>(tp.data);
  const float* u = static_cast<const float*>(tu.data);
  long long* ids = static_cast<long long*>(ti.data);

  // One launch configuration: cluster size, resident or streaming, buffers, clusters at once, slice geometry.
  struct Plan {
    void (*kernel)(const float*, const float*, const int*, const float*, const float*, long long*, int, int, int,
                   int, int, int) = nullptr;
    int cl = 0, nbuf = 0, ncl = 0, S = 0, nbmax = 0;
    size_t dyn = 0;
  };
  auto slice_elems = [&](int cl) { return ((Vi + cl - 1) / cl + 3) & ~3; };  // per CTA, a multiple of 4
  auto make_cfg = [&](const Plan& p, cudaLaunchAttribute* attr, unsigned grid) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = p.dyn;
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(p.cl);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
  };
  // Clusters of p that fit at once (0: does not fit, or the cluster size is refused).
  auto clusters_for = [&](Plan& p) -> int {
    if (p.cl > 8 && cudaFuncSetAttribute(p.kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, p.kernel) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    if (p.dyn > 0) {
      const size_t room = static_cast<size_t>(optin) > fa.sharedSizeBytes ? optin - fa.sharedSizeBytes : 0;
      if (p.dyn > room ||
          cudaFuncSetAttribute(p.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(p.dyn)) !=
              cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
      }
    }
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = make_cfg(p, attr, static_cast<unsigned>(p.cl));
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, p.kernel, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  };

  // Resident plans: clusters of 8 or 16 CTAs, one or two buffers per CTA. Cost model, in units of one CTA's pass
  // over its slice (S elements): single-buffered clusters load, then compute (2 per row); double-buffered ones
  // overlap the next load with the current rounds (1 per row, plus the first load). A 16-CTA cluster halves
  // every CTA's slice, so two buffers fit where one did at 8 (V = 128256: 32 KB per buffer, three CTAs per SM).
  // Ties go to the smaller cluster, then to two buffers.
  Plan best;
  int64_t best_cost = INT64_MAX;
  for (int cl : {8, kMaxCluster}) {
    for (int nb : {2, 1}) {
      Plan p;
      p.kernel = cl == 8 ? topk_topp_cluster_kernel<true, 8> : topk_topp_cluster_kernel<true, kMaxCluster>;
      p.cl = cl;
      p.nbuf = nb;
      p.S = slice_elems(cl);
      p.nbmax = p.S / 4 + 2;  // float4 per buffer (aligned span plus slack)
      p.dyn = static_cast<size_t>(nb) * p.nbmax * sizeof(float4);
      p.ncl = clusters_for(p);
      if (p.ncl <= 0) continue;
      const int64_t rows = (B + p.ncl - 1) / p.ncl;
      const int64_t cost = static_cast<int64_t>(p.S) * (nb == 1 ? 2 * rows : 1 + rows);
      if (cost < best_cost) {
        best_cost = cost;
        best = p;
      }
    }
  }
  if (best.ncl <= 0) {  // streaming: rows too large for the cluster's shared memory; every pass reads global memory
    Plan p;
    p.kernel = topk_topp_cluster_kernel<false, 8>;
    p.cl = 8;
    p.S = slice_elems(8);
    p.nbmax = p.S / 4 + 2;
    p.ncl = clusters_for(p);
    if (p.ncl <= 0) return 7;
    best = p;
  }
#ifdef PRINT_PLAN  // bench/candidates/007_topk_cluster16/ablate.sh: which plan the cost model took
  fprintf(stderr, "plan: cluster %d, %d buffer(s), %d clusters at once, %d elements per CTA\n", best.cl, best.nbuf,
          best.ncl, best.S);
#endif
  // clusters_for left the attribute at the last plan it tried; the launch needs the chosen plan's.
  if (best.dyn > 0 && cudaFuncSetAttribute(best.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(best.dyn)) != cudaSuccess)
    return 6;
  (void)cudaGetLastError();
  const int grid_clusters = static_cast<int>(B < best.ncl ? B : best.ncl);
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = make_cfg(best, attr, static_cast<unsigned>(grid_clusters * best.cl));
  if (cudaLaunchKernelEx(&cfg, best.kernel, logits, temperature, top_k, top_p, u, ids, Bi, Vi, Ri, best.S,
                         best.nbmax, best.nbuf) != cudaSuccess)
    return 6;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
