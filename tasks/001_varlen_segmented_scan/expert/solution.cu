/* varlen_segmented_scan: expert CUDA C++ solution.
 *
 * Computes y[t, h] = g[s, h] + ... + g[t, h] for g [T, H] fp32, where s is the first token of the packed
 * sequence holding t (sequence b spans tokens cu_seqlens[b] .. cu_seqlens[b+1]-1).
 *
 * Design:
 *  - L1: one pass over the data. Each CTA scans one tile and gets the running sum that enters its tile from
 *    its predecessors by a decoupled look-back over published tile states (AGGREGATE: the tile's own sum,
 *    INCLUSIVE: the running sum at the tile's end), so g is read once and y written once, in one launch.
 *  - L2: a CTA owns TILE_T tokens x CW head-vectors (a contiguous chunk of each row); segment heads are marked
 *    in a shared-memory bitmap from a cooperative search of cu_seqlens. A tile holding a segment head publishes
 *    INCLUSIVE at once (its tail does not depend on its predecessors), so the look-back stops at the first
 *    predecessor tile that holds a head, and a tile whose first token is a head does no look-back at all.
 *    Tile ids come from an atomic counter, so every tile waits only on tiles that are already running.
 *  - L3: 16-byte streaming loads and stores along H (when H % 4 == 0, else a scalar path), a serial scan of
 *    each thread's 16 consecutive tokens in registers, warp-shuffle segmented scans across threads, fp32
 *    accumulation throughout; a dedicated look-back warp that examines 32 predecessors at once and loads their
 *    values together, while the 8 data warps' loads are in flight; 64 KB tiles, two CTAs per SM.
 *
 * Measured (NVIDIA H200, 2026-12-03, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
 * --compile-baseline-timeout 60 (scripts/gpu-check.sh pairs)`, bench/suite_targets.py --record): 0.1118 / 0.1083 /
 * 0.2326 / 0.03136 ms on long_8seq_1m_h32 / packed_2048seq_1m_h32 / long_64seq_4m_h16 / decode_mix_16kseq_h32;
 * 3272x / 3456x / 6160x / 1.579e+04x over eager (geometric mean 5759x, target 3.0x); 53.89% of speed-of-light on
 * long_64seq_4m_h16; naive kernel 11.9 / 1.887 / 7.588 / 0.09334 ms (expert 106.4x / 17.43x / 32.63x / 2.977x
 * faster); torch.compile - / - / - / - ms.
 */
#include "d2k/solution.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace {

constexpr int kDataWarps = 8;                      // warps that hold the tile
constexpr int kDataThreads = kDataWarps * 32;
constexpr int kThreads = kDataThreads + 32;          // plus warp 0, the look-back warp
constexpr unsigned kFull = 0xffffffffu;

// Tokens per data thread (a thread holds ITEMS x VEC floats of the tile) and the blocks per SM to fit.
constexpr int items_for(int vec) { return vec == 4 ? 16 : 16; }  // 8 for VEC == 4 measured 15-25% slower
constexpr int min_blocks(int items) { return items >= 16 ? 2 : 3; }

// Tile states. Values only ever move INVALID -> AGGREGATE -> INCLUSIVE or INVALID -> INCLUSIVE.
constexpr unsigned kInvalid = 0u;
constexpr unsigned kAggregate = 1u;
constexpr unsigned kInclusive = 2u;

struct TileStates {
  unsigned* counter;  // next tile id to hand out
  unsigned* flags;    // [n_tiles] tile state
  float* agg;         // [n_tiles][CW * VEC] tile sums (valid once the state is AGGREGATE)
  float* incl;        // [n_tiles][CW * VEC] running sums at the tile's end (valid once INCLUSIVE)
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <int VEC>
struct Vec {
  float v[VEC];
};

template <int VEC>
__device__ __forceinline__ void load_stream(Vec<VEC>& out, const float* p) {
  if constexpr (VEC == 4) {
    const float4 q = __ldcs(reinterpret_cast<const float4*>(p));
    out.v[0] = q.x;
    out.v[1] = q.y;
    out.v[2] = q.z;
    out.v[3] = q.w;
  } else {
    out.v[0] = __ldcs(p);
  }
}

template <int VEC>
__device__ __forceinline__ void store_stream(float* p, const Vec<VEC>& in) {
  if constexpr (VEC == 4) {
    __stcs(reinterpret_cast<float4*>(p), make_float4(in.v[0], in.v[1], in.v[2], in.v[3]));
  } else {
    __stcs(p, in.v[0]);
  }
}

// Tile-state values bypass L1 (ld.cg / st.cg): L1 is not coherent, and a neighbour's line may sit there stale.
template <int VEC>
__device__ __forceinline__ void load_l2(Vec<VEC>& out, const float* p) {
  if constexpr (VEC == 4) {
    const float4 q = __ldcg(reinterpret_cast<const float4*>(p));
    out.v[0] = q.x;
    out.v[1] = q.y;
    out.v[2] = q.z;
    out.v[3] = q.w;
  } else {
    out.v[0] = __ldcg(p);
  }
}

template <int VEC>
__device__ __forceinline__ void store_l2(float* p, const Vec<VEC>& in) {
  if constexpr (VEC == 4) {
    __stcg(reinterpret_cast<float4*>(p), make_float4(in.v[0], in.v[1], in.v[2], in.v[3]));
  } else {
    __stcg(p, in.v[0]);
  }
}

// Publishes a tile state from one warp (the first data warp, or the look-back warp): lanes with rl == 0 write their column's values, then lane 0 raises the
// flag. Every writer fences before the warp barrier, and the flag store is a release.
template <int VEC, int CW>
__device__ __forceinline__ void publish(const TileStates& st, float* arr, unsigned state, int id, int lane,
                                        const Vec<VEC>& val) {
  constexpr int CWV = CW * VEC;
  if (lane < CW) store_l2<VEC>(arr + static_cast<size_t>(id) * CWV + lane * VEC, val);
  __threadfence();
  __syncwarp();
  if (lane == 0) store_release(st.flags + id, state);
}

// Named barriers: 1 = the data warps only, 2 = the whole block (reached from both roles' code paths). The
// compiler does not reconverge a warp before inline asm, so reconverge explicitly, and use the non-aligned form.
__device__ __forceinline__ void data_barrier() {
  __syncwarp();
  asm volatile("barrier.sync 1, %0;" ::"n"(kDataThreads) : "memory");
}
__device__ __forceinline__ void block_barrier() {
  __syncwarp();
  asm volatile("barrier.sync 2, %0;" ::"n"(kThreads) : "memory");
}

// One CTA scans one tile of TILE_T tokens x CW head-vectors (VEC floats each). Warp 0 is the look-back warp; the
// data warps 1..kDataWarps hold the tile in registers. Data-thread layout: lane = rl * CW + c; column c is the
// head-vector chunk * CW + c; row-lane ri = (warp - 1) * RPW + rl owns ITEMS consecutive tokens.
template <int VEC, int CW, int ITEMS>
__global__ void __launch_bounds__(kThreads, min_blocks(ITEMS))
    segmented_scan_kernel(const float* __restrict__ g, const int* __restrict__ cu, float* __restrict__ y, int T,
                          int H, int B, int n_chunks, TileStates st) {
  constexpr int RPW = 32 / CW;              // row-lanes per warp
  constexpr int TILE_T = kDataWarps * RPW * ITEMS;
  constexpr int NWORDS = TILE_T / 32;
  constexpr int CWV = CW * VEC;
  static_assert(ITEMS <= 16 && (32 % ITEMS) == 0, "a thread's head bits must sit in one bitmap word");
  static_assert(TILE_T % 32 == 0, "bitmap words");

  __shared__ unsigned s_heads[NWORDS];         // bit r: token t0 + r starts a sequence
  __shared__ float s_warp_v[kDataWarps][CWV];  // per-data-warp segmented aggregates, per column
  __shared__ int s_warp_f[kDataWarps];         // per-data-warp "holds a segment head"
  __shared__ float s_agg[CWV];                 // the tile's segmented aggregate, per column
  __shared__ int s_agg_f;                      // the tile holds a segment head
  __shared__ float s_excl[CWV];                // running sum entering the tile, per column
  __shared__ int s_tile;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int c = lane % CW;
  const int rl = lane / CW;

  if (tid == 0) s_tile = static_cast<int>(atomicAdd(st.counter, 1u));
  for (int w = tid; w < NWORDS; w += kThreads) s_heads[w] = 0u;
  __syncthreads();

  const int id = s_tile;
  const int t_tile = id / n_chunks;
  const int chunk = id - t_tile * n_chunks;
  const int t0 = t_tile * TILE_T;
  const int HV = H / VEC;
  const int hv = chunk * CW + c;
  const bool col_ok = hv < HV;
  const int ri = (warp - 1) * RPW + rl;       // data warps only
  const int row0 = t0 + ri * ITEMS;

  // Data warps issue the tile's loads first; their latency overlaps the search and the look-back below.
  Vec<VEC> x[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int row = row0 + i;
    if (warp != 0 && col_ok && row < T) {
      load_stream<VEC>(x[i], g + static_cast<size_t>(row) * H + static_cast<size_t>(hv) * VEC);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) x[i].v[k] = 0.f;
    }
  }

  // Cooperative search: the largest j with cu[j] <= t0 (cu[0] = 0 <= t0 < T = cu[B]); each round probes
  // kThreads evenly spaced entries, so B = 65536 takes two rounds.
  int lo = 0, hi = B;
  while (hi - lo > 1) {
    const int n = hi - lo - 1;
    const int stride = (n + kThreads - 1) / kThreads;
    const int p = lo + (tid + 1) * stride;
    const int pred = (p < hi) && (__ldg(cu + p) <= t0);
    const int cnt = __syncthreads_count(pred);
    lo += cnt * stride;
    hi = min(lo + stride, hi);
  }

  if (warp == 0) {
    // ---------------- look-back warp: the running sum entering the tile, while the data warps load and scan.
    // No look-back when the tile starts a sequence (tile 0 always does: cu[0] = 0).
    const bool need_lookback = __ldg(cu + lo) != t0;
    Vec<VEC> acc;
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc.v[k] = 0.f;
    if (need_lookback) {
      // Lane L watches predecessor tile pt - L; the window moves back 32 tiles until it meets an INCLUSIVE one.
      // Predecessors publish AGGREGATE or INCLUSIVE as soon as their own data is scanned, without waiting for
      // anything, and tile 0 publishes INCLUSIVE, so the walk ends.
      int pt = t_tile - 1;
      while (true) {
        const int mine = pt - lane;
        const unsigned* fp = st.flags + static_cast<ptrdiff_t>(mine) * n_chunks + chunk;
        unsigned s = kInclusive;  // below tile 0: a sentinel, never reached with valid cu_seqlens
        if (mine >= 0) s = load_acquire(fp);
        while (__any_sync(kFull, s == kInvalid)) {
          if (s == kInvalid) s = load_acquire(fp);
        }
        __syncwarp();  // orders the flag reads of every lane before the value reads of the others
        const unsigned incl_mask = __ballot_sync(kFull, s == kInclusive);
        const int last = incl_mask ? __ffs(static_cast<int>(incl_mask)) - 1 : 31;
        // Sum the values of predecessors pt .. pt - last; lanes split them by rl (k = rl + it * RPW) and
        // the columns by c. The loads of a batch are independent and all in flight at once.
        constexpr int kIters = 32 / RPW;
        constexpr int kBatch = kIters < 8 ? kIters : 8;
#pragma unroll
        for (int b0 = 0; b0 < kIters; b0 += kBatch) {
          if (rl + b0 * RPW > last) break;
          Vec<VEC> v[kBatch];
#pragma unroll
          for (int it = 0; it < kBatch; ++it) {
            const int k = rl + (b0 + it) * RPW;
            const int tk = pt - k;
            if (k <= last && tk >= 0) {
              const float* src = ((incl_mask >> k) & 1u) ? st.incl : st.agg;
              load_l2<VEC>(v[it], src + static_cast<size_t>(tk * n_chunks + chunk) * CWV + c * VEC);
            } else {
#pragma unroll
              for (int q = 0; q < VEC; ++q) v[it].v[q] = 0.f;
            }
          }
#pragma unroll
          for (int it = 0; it < kBatch; ++it) {
#pragma unroll
            for (int q = 0; q < VEC; ++q) acc.v[q] += v[it].v[q];
          }
        }
        if (incl_mask) break;
        pt -= 32;
      }
#pragma unroll
      for (int o = CW; o < 32; o <<= 1) {
#pragma unroll
        for (int q = 0; q < VEC; ++q) acc.v[q] += __shfl_xor_sync(kFull, acc.v[q], o);
      }
    }
    if (lane < CW) {
#pragma unroll
      for (int q = 0; q < VEC; ++q) s_excl[c * VEC + q] = acc.v[q];
    }
    block_barrier();  // s_excl out; s_agg, s_agg_f in
    if (need_lookback && !s_agg_f) {
      Vec<VEC> inc;
#pragma unroll
      for (int q = 0; q < VEC; ++q) inc.v[q] = acc.v[q] + s_agg[c * VEC + q];
      publish<VEC, CW>(st, st.incl, kInclusive, id, lane, inc);
    }
    return;
  }

  // ---------------- data warps
  const int dt = tid - 32;
  const int dw = warp - 1;
  // Mark the heads inside the tile: cu[j] for j in [lo, B) with t0 <= cu[j] < tile end.
  const int t_end = min(t0 + TILE_T, T);
  for (int j = lo + dt; j < B; j += kDataThreads) {
    const int s = __ldg(cu + j);
    if (s >= t_end) break;
    if (s >= t0) atomicOr(&s_heads[(s - t0) >> 5], 1u << ((s - t0) & 31));
  }
  if (t0 == 0 && dt == 0) atomicOr(&s_heads[0], 1u);  // token 0 always starts a sequence
  data_barrier();

  const int bit0 = ri * ITEMS;
  const unsigned fm = (s_heads[bit0 >> 5] >> (bit0 & 31)) & ((1u << ITEMS) - 1u);

  // 1. Serial segmented scan of the thread's ITEMS consecutive tokens, in registers.
  Vec<VEC> run;
#pragma unroll
  for (int k = 0; k < VEC; ++k) run.v[k] = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const bool head = (fm >> i) & 1u;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      run.v[k] = head ? x[i].v[k] : run.v[k] + x[i].v[k];
      x[i].v[k] = run.v[k];
    }
  }

  // 2. Warp-shuffle segmented inclusive scan over the RPW row-lanes of each column (lanes CW apart).
  //    (a, fa) then (b, fb) combines to (fb ? b : a + b, fa | fb).
  Vec<VEC> wv = run;
  int wf = fm != 0u;
#pragma unroll
  for (int d = 1; d < RPW; d <<= 1) {
    Vec<VEC> up;
#pragma unroll
    for (int k = 0; k < VEC; ++k) up.v[k] = __shfl_up_sync(kFull, wv.v[k], d * CW);
    const int upf = __shfl_up_sync(kFull, wf, d * CW);
    if (rl >= d) {
      if (!wf) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) wv.v[k] += up.v[k];
      }
      wf |= upf;
    }
  }
  Vec<VEC> ev;  // exclusive within the warp
  int ef;
#pragma unroll
  for (int k = 0; k < VEC; ++k) ev.v[k] = __shfl_up_sync(kFull, wv.v[k], CW);
  ef = __shfl_up_sync(kFull, wf, CW);
  if (rl == 0) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) ev.v[k] = 0.f;
    ef = 0;
  }
  if (rl == RPW - 1) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) s_warp_v[dw][c * VEC + k] = wv.v[k];
    if (c == 0) s_warp_f[dw] = wf;
  }
  data_barrier();

  // 3. Prefix of the earlier data warps, then the thread's exclusive prefix within the tile.
  Vec<VEC> pv;
  int pf = 0;
#pragma unroll
  for (int k = 0; k < VEC; ++k) pv.v[k] = 0.f;
  for (int u = 0; u < dw; ++u) {
    const int uf = s_warp_f[u];
#pragma unroll
    for (int k = 0; k < VEC; ++k) pv.v[k] = uf ? s_warp_v[u][c * VEC + k] : pv.v[k] + s_warp_v[u][c * VEC + k];
    pf |= uf;
  }
  Vec<VEC> tp;
  int tf;
#pragma unroll
  for (int k = 0; k < VEC; ++k) tp.v[k] = ef ? ev.v[k] : pv.v[k] + ev.v[k];
  tf = ef | pf;

  // 4. First data warp: the tile's aggregate. A tile holding a head knows the running sum at its end now and
  //    publishes INCLUSIVE; one without publishes its sum (AGGREGATE), and the look-back warp completes it.
  if (dw == 0) {
    Vec<VEC> av;  // sum since the tile's last head, column c
    int af = 0;
#pragma unroll
    for (int k = 0; k < VEC; ++k) av.v[k] = 0.f;
#pragma unroll
    for (int u = 0; u < kDataWarps; ++u) {
      const int uf = s_warp_f[u];
#pragma unroll
      for (int k = 0; k < VEC; ++k) av.v[k] = uf ? s_warp_v[u][c * VEC + k] : av.v[k] + s_warp_v[u][c * VEC + k];
      af |= uf;
    }
    publish<VEC, CW>(st, af ? st.incl : st.agg, af ? kInclusive : kAggregate, id, lane, av);
    if (lane < CW) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) s_agg[c * VEC + k] = av.v[k];
    }
    if (lane == 0) s_agg_f = af;
  }
  block_barrier();  // s_excl in (from the look-back warp)

  // 5. Final values: tokens before the thread's first head take the prefix of the tile and, when no head
  //    precedes them in the tile, the running sum entering the tile.
  Vec<VEC> base;
#pragma unroll
  for (int k = 0; k < VEC; ++k) base.v[k] = tf ? tp.v[k] : tp.v[k] + s_excl[c * VEC + k];
  const int first_head = fm ? __ffs(static_cast<int>(fm)) - 1 : ITEMS;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int row = row0 + i;
    if (i < first_head) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) x[i].v[k] += base.v[k];
    }
    if (col_ok && row < T) store_stream<VEC>(y + static_cast<size_t>(row) * H + static_cast<size_t>(hv) * VEC, x[i]);
  }
}

constexpr int tile_tokens(int vec, int cw) { return kDataWarps * (32 / cw) * items_for(vec); }

// Tile-state buffer, grown on demand and kept across calls (one stream-ordered memset resets it per call).
// While the stream is being captured into a graph it cannot grow; then a stream-ordered allocation is used.
struct StateBuffer {
  std::mutex mu;
  void* ptr = nullptr;
  size_t bytes = 0;
  int device = -1;
};
StateBuffer g_state;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

template <int VEC, int CW>
cudaError_t launch(const float* g, const int* cu, float* y, int T, int H, int B, cudaStream_t stream) {
  constexpr int TILE_T = tile_tokens(VEC, CW);
  constexpr int CWV = CW * VEC;
  const int HV = H / VEC;
  const int n_chunks = (HV + CW - 1) / CW;
  const long long n_tiles_ll = ((static_cast<long long>(T) + TILE_T - 1) / TILE_T) * n_chunks;
  if (n_tiles_ll > 0x7fffffffLL) return cudaErrorInvalidValue;
  const int n_tiles = static_cast<int>(n_tiles_ll);

  const size_t head_bytes = align_up(sizeof(unsigned) * (1 + static_cast<size_t>(n_tiles)), 256);
  const size_t vals_bytes = align_up(sizeof(float) * static_cast<size_t>(n_tiles) * CWV, 256);
  const size_t need = head_bytes + 2 * vals_bytes;

  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;

  void* buf = nullptr;
  bool temporary = false;
  {
    std::lock_guard<std::mutex> lock(g_state.mu);
    if (g_state.device != device || g_state.bytes < need) {
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      err = cudaStreamIsCapturing(stream, &cs);
      if (err != cudaSuccess) return err;
      if (cs == cudaStreamCaptureStatusNone) {
        if (g_state.ptr != nullptr && g_state.device == device) cudaFree(g_state.ptr);  // waits for the device
        g_state.ptr = nullptr;
        g_state.bytes = 0;
        const size_t grow = need + need / 2;
        err = cudaMalloc(&g_state.ptr, grow);
        if (err != cudaSuccess) return err;
        g_state.bytes = grow;
        g_state.device = device;
        buf = g_state.ptr;
      } else {
        err = cudaMallocAsync(&buf, need, stream);
        if (err != cudaSuccess) return err;
        temporary = true;
      }
    } else {
      buf = g_state.ptr;
    }
  }

  char* base = static_cast<char*>(buf);
  TileStates st;
  st.counter = reinterpret_cast<unsigned*>(base);
  st.flags = st.counter + 1;
  st.agg = reinterpret_cast<float*>(base + head_bytes);
  st.incl = reinterpret_cast<float*>(base + head_bytes + vals_bytes);

  err = cudaMemsetAsync(base, 0, head_bytes, stream);  // counter = 0, every flag INVALID
  if (err != cudaSuccess) return err;
  segmented_scan_kernel<VEC, CW, items_for(VEC)><<<n_tiles, kThreads, 0, stream>>>(g, cu, y, T, H, B, n_chunks, st);
  err = cudaGetLastError();
  if (temporary) {
    const cudaError_t ferr = cudaFreeAsync(buf, stream);
    if (err == cudaSuccess) err = ferr;
  }
  return err;
}

template <int VEC>
cudaError_t dispatch(const float* g, const int* cu, float* y, int T, int H, int B, cudaStream_t stream) {
  const int HV = H / VEC;
  if (HV <= 1) return launch<VEC, 1>(g, cu, y, T, H, B, stream);
  if (HV <= 2) return launch<VEC, 2>(g, cu, y, T, H, B, stream);
  if (HV <= 4) return launch<VEC, 4>(g, cu, y, T, H, B, stream);
  if (HV <= 8) return launch<VEC, 8>(g, cu, y, T, H, B, stream);
  if (HV <= 16) return launch<VEC, 16>(g, cu, y, T, H, B, stream);
  return launch<VEC, 32>(g, cu, y, T, H, B, stream);
}

}  // namespace

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)params;
  (void)n_params;
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const d2k_tensor& tg = inputs[0];
  const d2k_tensor& tcu = inputs[1];
  const d2k_tensor& ty = outputs[0];
  if (tg.dtype != D2K_FLOAT32 || tg.ndim != 2 || tcu.dtype != D2K_INT32 || tcu.ndim != 1 ||
      ty.dtype != D2K_FLOAT32 || ty.ndim != 2)
    return 2;
  const int64_t T64 = tg.shape[0];
  const int64_t H64 = tg.shape[1];
  const int64_t B64 = tcu.shape[0] - 1;
  if (ty.shape[0] != T64 || ty.shape[1] != H64 || B64 < 1) return 3;
  if (T64 > 0x7fffffffLL - 8192 || H64 > 0x7fffffffLL || B64 > 0x7fffffffLL ||
      T64 * H64 > 0x7fffffffffffLL)
    return 4;
  if (T64 == 0 || H64 == 0) return 0;
  const int T = static_cast<int>(T64), H = static_cast<int>(H64), B = static_cast<int>(B64);

  const float* g = static_cast<const float*>(tg.data);
  const int* cu = static_cast<const int*>(tcu.data);
  float* y = static_cast<float*>(ty.data);
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);

  const bool vec4 = (H % 4 == 0) && (reinterpret_cast<uintptr_t>(g) % 16 == 0) &&
                    (reinterpret_cast<uintptr_t>(y) % 16 == 0);
  const cudaError_t err = vec4 ? dispatch<4>(g, cu, y, T, H, B, s) : dispatch<1>(g, cu, y, T, H, B, s);
  return err == cudaSuccess ? 0 : 5;
}
