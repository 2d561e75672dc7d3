// CPU emulation of the small subset of CUDA that d2k's hand-written CUDA candidates use, so that their kernels can
// be checked for correctness on a machine without a GPU (CI and the development machines have none; device time is
// scarce). Not a simulator: no timing, no memory model beyond what std::barrier gives.
//
// How: a kernel is compiled as plain C++ (g++, with -Wno-unknown-pragmas for its #pragma unroll) with this header
// included first and D2K_CPU_EMU defined. A launch runs the CTAs one after another; each CTA runs its blockDim
// threads as std::threads. __syncthreads is a barrier over the CTA's threads; warp-collective operations (mma,
// ldmatrix, shuffles) exchange their lanes' operands through a per-warp buffer between two barriers over the warp's
// 32 threads, so every lane must reach them, as on the GPU.
// Dynamic shared memory is filled with 0xff bytes (NaN as float and bf16) before each CTA, so a read of a slot the
// kernel never wrote tends to show up as NaN in the output.
#pragma once

#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// ---------------------------------------------------------------- the CUDA vocabulary the kernels use
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorInvalidValue = 1;
constexpr cudaError_t cudaErrorMemoryAllocation = 2;
typedef struct CUstream_st* cudaStream_t;
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };

// The SM count the emulated device reports: the H200's, so host code takes the H200's paths.
inline int emu_sm_count = 132;
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? emu_sm_count
      : a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 232448  // Hopper's opt-in limit per CTA (227 KB)
                                                      : 0;
  return cudaSuccess;
}

inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* s) {
  *s = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, std::size_t n) {
  *p = std::malloc(n ? n : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMallocAsync(void** p, std::size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
inline cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t) {
  std::memset(p, v, n);
  return cudaSuccess;
}
template <class F>
inline cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) { return cudaSuccess; }

// bf16 with round-to-nearest-even conversions, as __float2bfloat16_rn on the GPU.
struct __nv_bfloat16 {
  std::uint16_t x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x40)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const std::uint32_t u = std::uint32_t(b.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

namespace emu {

struct Warp {
  std::barrier<> bar{32};
  alignas(64) unsigned char xch[32][64];
};

struct Cta {
  dim3 grid, block, idx;
  unsigned nthreads = 0;
  std::barrier<>* bar = nullptr;
  std::vector<std::unique_ptr<Warp>> warps;
  unsigned char* smem = nullptr;
  std::mutex named_mu;  // bar.sync id, n: one barrier per id, created by its first user
  std::map<int, std::unique_ptr<std::barrier<>>> named;
  std::map<int, unsigned> named_count;
};

inline thread_local dim3 t_thread, t_block;
inline thread_local Cta* t_cta = nullptr;

inline unsigned linear_tid() { return t_thread.x + t_cta->block.x * (t_thread.y + t_cta->block.y * t_thread.z); }
inline unsigned lane() { return linear_tid() % 32; }
inline Warp& warp() { return *t_cta->warps[linear_tid() / 32]; }

// Every lane publishes `in`; then each lane computes its result from all lanes' inputs with f(lane, get).
template <class Out, class In, class F>
Out collective(const In& in, F f) {
  static_assert(sizeof(In) <= 64, "collective input too large");
  Warp& w = warp();
  const unsigned l = lane();
  std::memcpy(w.xch[l], &in, sizeof(In));
  w.bar.arrive_and_wait();
  auto get = [&](unsigned src) {
    In x;
    std::memcpy(&x, w.xch[src], sizeof(In));
    return x;
  };
  Out out = f(l, get);
  w.bar.arrive_and_wait();
  return out;
}

template <class K, class... P>
struct Launcher {
  K* kernel;
  dim3 grid, block;
  std::size_t smem;
  template <class... A>
  void operator()(A... args) const {
    const unsigned n = block.x * block.y * block.z;
    if (n % 32 != 0) std::abort();  // the kernels here always launch whole warps
    std::vector<unsigned char> shared(smem + 16);
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          std::memset(shared.data(), 0xff, shared.size());
          std::barrier<> bar(n);
          Cta cta;
          cta.grid = grid;
          cta.block = block;
          cta.idx = dim3(x, y, z);
          cta.nthreads = n;
          cta.bar = &bar;
          for (unsigned w = 0; w < n / 32; ++w) cta.warps.push_back(std::make_unique<Warp>());
          cta.smem = shared.data();
          std::vector<std::thread> threads;
          threads.reserve(n);
          for (unsigned t = 0; t < n; ++t)
            threads.emplace_back([&, t] {
              t_cta = &cta;
              t_block = cta.idx;
              t_thread = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
              kernel(args...);
            });
          for (auto& th : threads) th.join();
        }
  }
};

template <class... P>
Launcher<void(P...), P...> launcher(void (*k)(P...), dim3 grid, dim3 block, std::size_t smem) {
  return {k, grid, block, smem};
}

}  // namespace emu

#define threadIdx (emu::t_thread)
#define blockIdx (emu::t_block)
#define blockDim (emu::t_cta->block)
#define gridDim (emu::t_cta->grid)
#define __syncthreads() (emu::t_cta->bar->arrive_and_wait())
#define __syncwarp() (emu::warp().bar.arrive_and_wait())

namespace emu {
// bar.sync id, n (named barriers, warp-specialized kernels): the n threads that use id meet; a different count for
// the same id is a kernel bug (undefined on the GPU), so it aborts here.
inline void named_barrier(int id, unsigned n) {
  Cta& c = *t_cta;
  std::barrier<>* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.named_mu);
    auto it = c.named.find(id);
    if (it == c.named.end()) {
      it = c.named.emplace(id, std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(n))).first;
      c.named_count[id] = n;
    } else if (c.named_count[id] != n) {
      std::fprintf(stderr, "cuda_emu: bar.sync %d with %u threads, first used with %u\n", id, n, c.named_count[id]);
      std::abort();
    }
    b = it->second.get();
  }
  b->arrive_and_wait();
}
}  // namespace emu

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  return emu::collective<float>(v, [&](unsigned l, auto get) { return get(l ^ unsigned(mask)); });
}
inline float __shfl_up_sync(unsigned, float v, int delta) {
  return emu::collective<float>(v,
                                [&](unsigned l, auto get) { return l >= unsigned(delta) ? get(l - delta) : get(l); });
}
inline float __shfl_sync(unsigned, float v, int src) {
  return emu::collective<float>(v, [&](unsigned, auto get) { return get(unsigned(src) & 31u); });
}

// ---------------------------------------------------------------- tensor-core and async-copy counterparts
namespace emu {

inline float bf16_half(std::uint32_t reg, int hi) {
  return __bfloat162float({static_cast<std::uint16_t>(hi ? reg >> 16 : reg & 0xffffu)});
}
inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// d = A B + c for one m16n8kKD mma: every lane contributes its A and B registers; unpack(lane, a, b, A, B) places
// one lane's operands into the 16 x KD and KD x 8 matrices; the C/D layout is (g, 2t), (g, 2t+1), (g+8, 2t),
// (g+8, 2t+1) for lane = 4 g + t.
template <int KD, class Unpack>
void mma_m16n8(float* d, const std::uint32_t* a, const std::uint32_t* b, Unpack unpack) {
  struct In {
    std::uint32_t a[4], b[2];
  } in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  struct Out {
    float d[4];
  };
  const float c[4] = {d[0], d[1], d[2], d[3]};
  const Out o = collective<Out>(in, [&](unsigned l, auto get) {
    float A[16][KD], B[KD][8];
    for (unsigned s = 0; s < 32; ++s) {
      const In x = get(s);
      unpack(s, x.a, x.b, A, B);
    }
    const unsigned g = l >> 2, t = l & 3;
    Out r;
    for (int e = 0; e < 4; ++e) {
      const unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      float acc = c[e];
      for (int k = 0; k < KD; ++k) acc += A[row][k] * B[k][col];
      r.d[e] = acc;
    }
    return r;
  });
  std::memcpy(d, o.d, sizeof o.d);
}

// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32, fragments as the PTX ISA lays them out: A regs (g, 2t), (g+8, 2t),
// (g, 2t+8), (g+8, 2t+8), each two bf16 along k; B regs (k 2t, n g), (k 2t+8, n g).
inline void mma_bf16_16816(float* d, const std::uint32_t* a, const std::uint32_t* b) {
  mma_m16n8<16>(d, a, b, [](unsigned s, const std::uint32_t* ra, const std::uint32_t* rb, float (&A)[16][16],
                            float (&B)[16][8]) {
    const unsigned g = s >> 2, t = s & 3;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = bf16_half(ra[0], h);
      A[g + 8][2 * t + h] = bf16_half(ra[1], h);
      A[g][2 * t + 8 + h] = bf16_half(ra[2], h);
      A[g + 8][2 * t + 8 + h] = bf16_half(ra[3], h);
      B[2 * t + h][g] = bf16_half(rb[0], h);
      B[2 * t + 8 + h][g] = bf16_half(rb[1], h);
    }
  });
}

// cvt.rna.tf32.f32: round to nearest (ties away from zero) at the tf32 mantissa's last bit.
inline std::uint32_t to_tf32(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;
  return u;
}

// mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32: A regs (g, t), (g+8, t), (g, t+4), (g+8, t+4); B regs (k t, n g),
// (k t+4, n g); the low 13 bits of every operand are ignored, as by the hardware.
inline void mma_tf32_1688(float* d, const std::uint32_t* a, const std::uint32_t* b) {
  mma_m16n8<8>(d, a, b, [](unsigned s, const std::uint32_t* ra, const std::uint32_t* rb, float (&A)[16][8],
                           float (&B)[8][8]) {
    const unsigned g = s >> 2, t = s & 3;
    auto f = [](std::uint32_t u) { return bits_to_float(u & ~0x1fffu); };
    A[g][t] = f(ra[0]);
    A[g + 8][t] = f(ra[1]);
    A[g][t + 4] = f(ra[2]);
    A[g + 8][t + 4] = f(ra[3]);
    B[t][g] = f(rb[0]);
    B[t + 4][g] = f(rb[1]);
  });
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 give the row addresses of matrix i; register i
// of lane l holds matrix i's (row l/4, columns 2(l%4), +1), or with .trans (rows 2(l%4), +1, column l/4).
inline void ldmatrix_x4(std::uint32_t* r, const void* p, bool trans) {
  struct Out {
    std::uint32_t r[4];
  };
  const Out o = collective<Out>(p, [&](unsigned l, auto get) {
    Out out;
    for (unsigned i = 0; i < 4; ++i) {
      std::uint16_t lo, hi;
      if (!trans) {
        const auto* row = static_cast<const std::uint16_t*>(get(8 * i + l / 4));
        lo = row[2 * (l % 4)];
        hi = row[2 * (l % 4) + 1];
      } else {
        lo = static_cast<const std::uint16_t*>(get(8 * i + 2 * (l % 4)))[l / 4];
        hi = static_cast<const std::uint16_t*>(get(8 * i + 2 * (l % 4) + 1))[l / 4];
      }
      out.r[i] = std::uint32_t(lo) | std::uint32_t(hi) << 16;
    }
    return out;
  });
  std::memcpy(r, o.r, sizeof o.r);
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 with A from registers and B from shared memory, K-major:
// desc holds B's start (as an offset into the CTA's dynamic shared memory, >> 4) in bits 0-13, the byte offset
// between core matrices along K (>> 4) in bits 16-29 and along N in bits 32-45, the layout in bits 62-63. No swizzle
// (0): core matrices of 8 rows x 16 B. 128-byte swizzle (1): row n of B at start + (n / 8) * SBO + (n % 8) * 128, the
// K elements contiguous, then address bits 4-6 XORed with bits 7-9 (the offsets count from the shared memory's base,
// which the kernels align to 1024 B, so the pattern is the tensor copies'); the leading offset is unused. Each warp's
// 16 rows of D depend only on its own A rows, so a warp-wide exchange of A suffices; D per warp in the mma C layout,
// one 16 x 8 block after another along N. kTransB (imm-trans-b = 1): B is N-major, 128-byte swizzle only (the PTX
// ISA's canonical ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements): N runs along 128-byte rows, 64 elements per
// row, the next 64 at LBO; K rows 128 B apart, groups of 8 rows SBO apart.
template <int N, bool kTransB = false>
void wgmma_m64nNk16_rs(float* d, const std::uint32_t* a, std::uint64_t desc) {
  const std::size_t start = (desc & 0x3fff) << 4;
  const std::size_t lbo = ((desc >> 16) & 0x3fff) << 4, sbo = ((desc >> 32) & 0x3fff) << 4;
  const unsigned layout = static_cast<unsigned>(desc >> 62);
  if ((layout != 0 && layout != 1) || (kTransB && layout != 1)) {
    std::fprintf(stderr, "cuda_emu: wgmma descriptor layout %u%s not emulated\n", layout, kTransB ? " (N-major)" : "");
    std::abort();
  }
  struct In {
    std::uint32_t a[4];
  } in;
  std::memcpy(in.a, a, sizeof in.a);
  struct Out {
    float d[N / 2];
  };
  Out cur;
  std::memcpy(cur.d, d, sizeof cur.d);
  const Out o = collective<Out>(in, [&](unsigned l, auto get) {
    float A[16][16];
    for (unsigned s = 0; s < 32; ++s) {
      const In x = get(s);
      const unsigned g = s >> 2, t = s & 3;
      for (int h = 0; h < 2; ++h) {
        A[g][2 * t + h] = bf16_half(x.a[0], h);
        A[g + 8][2 * t + h] = bf16_half(x.a[1], h);
        A[g][2 * t + 8 + h] = bf16_half(x.a[2], h);
        A[g + 8][2 * t + 8 + h] = bf16_half(x.a[3], h);
      }
    }
    auto B = [&](int k, int n) {
      std::size_t at;
      if (kTransB) {
        at = start + (n / 64) * lbo + (n % 64) * 2 + (k / 8) * sbo + (k % 8) * 128;
        at ^= ((at >> 7) & 7) << 4;
      } else if (layout == 0) {
        at = start + (n / 8) * sbo + (k / 8) * lbo + (n % 8) * 16 + (k % 8) * 2;
      } else {
        at = start + (n / 8) * sbo + (n % 8) * 128 + k * 2;
        at ^= ((at >> 7) & 7) << 4;
      }
      std::uint16_t v;
      std::memcpy(&v, t_cta->smem + at, 2);
      return __bfloat162float({v});
    };
    const unsigned g = l >> 2, t = l & 3;
    Out r = cur;
    for (int j = 0; j < N / 8; ++j)
      for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
        float acc = 0.f;
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B(k, col);
        r.d[4 * j + e] += acc;
      }
    return r;
  });
  std::memcpy(d, o.d, sizeof o.d);
}

// cp.async with a source size of 0 or n: copies at once (there is nothing to overlap with on the CPU).
inline void cp_async(void* dst, const void* src, std::size_t n, bool full) {
  if (full)
    std::memcpy(dst, src, n);
  else
    std::memset(dst, 0, n);
}

// mbarrier with transaction counts (sm_90), as the tensor copies use it: a phase completes when its pending arrivals
// reach zero with no bytes outstanding; then the phase bit flips and the arrival count is rearmed. The state lives
// beside the CTA's shared memory, keyed by the barrier's address (CTAs run one after another). A wait that does not
// complete within 20 s aborts: on the GPU it would hang.
struct Mbarrier {
  int expected = 0, pending = 0;
  long long tx = 0;
  unsigned phase = 0;
};
inline std::mutex g_mbar_mu;
inline std::condition_variable g_mbar_cv;
inline std::map<const void*, Mbarrier> g_mbars;

inline void mbar_complete_if_done(Mbarrier& m) {
  if (m.pending == 0 && m.tx == 0) {
    m.phase ^= 1u;
    m.pending = m.expected;
    g_mbar_cv.notify_all();
  }
}
inline void mbar_init(const void* bar, int count) {
  std::lock_guard<std::mutex> lock(g_mbar_mu);
  g_mbars[bar] = Mbarrier{count, count, 0, 0};
}
inline Mbarrier& mbar_get(const void* bar) {
  const auto it = g_mbars.find(bar);
  if (it == g_mbars.end()) {
    std::fprintf(stderr, "cuda_emu: mbarrier used before mbarrier.init\n");
    std::abort();
  }
  return it->second;
}
inline void mbar_arrive_expect_tx(const void* bar, unsigned bytes) {
  std::lock_guard<std::mutex> lock(g_mbar_mu);
  Mbarrier& m = mbar_get(bar);
  m.tx += bytes;
  --m.pending;
  mbar_complete_if_done(m);
}
inline void mbar_arrive(const void* bar) {
  std::lock_guard<std::mutex> lock(g_mbar_mu);
  Mbarrier& m = mbar_get(bar);
  if (m.pending <= 0) {
    std::fprintf(stderr, "cuda_emu: mbarrier arrival beyond its expected count\n");
    std::abort();
  }
  --m.pending;
  mbar_complete_if_done(m);
}
// A tensor map as cp.async.bulk.tensor reads it, for 3-D tiles of 2-byte elements: the emulation's own form (the
// GPU build encodes the driver's CUtensorMap with cuTensorMapEncodeTiled from the same fields).
struct TensorMap3d {
  const void* base = nullptr;
  std::uint64_t dim[3] = {};     // elements, innermost first
  std::uint64_t stride[2] = {};  // bytes of dimensions 1 and 2
  unsigned box[3] = {};
  bool swizzle128 = false;  // 128-byte swizzle: 16-byte chunk j of box row R lands at chunk j ^ (R & 7)
};
// cp.async.bulk.tensor.3d ... tile: the box at (x, y, z), zeros outside the tensor, counted on bar as the whole box.
inline void tensor_copy_3d(void* dst, const TensorMap3d& m, int x, int y, int z, const void* bar) {
  const unsigned row_bytes = m.box[0] * 2, chunks = row_bytes / 16;
  if (row_bytes % 16 != 0 || (m.swizzle128 && row_bytes != 128)) {
    std::fprintf(stderr, "cuda_emu: tensor map box not supported by the emulation\n");
    std::abort();
  }
  auto* out = static_cast<unsigned char*>(dst);
  for (unsigned zz = 0; zz < m.box[2]; ++zz)
    for (unsigned yy = 0; yy < m.box[1]; ++yy) {
      const unsigned R = zz * m.box[1] + yy;
      const std::uint64_t gy = std::uint64_t(y) + yy, gz = std::uint64_t(z) + zz;
      for (unsigned j = 0; j < chunks; ++j) {
        unsigned char* d = out + std::size_t(R) * row_bytes + 16 * (m.swizzle128 ? (j ^ (R & 7u)) : j);
        for (unsigned e = 0; e < 8; ++e) {
          const std::uint64_t gx = std::uint64_t(x) + 8 * j + e;
          unsigned short v = 0;
          if (gx < m.dim[0] && gy < m.dim[1] && gz < m.dim[2])
            std::memcpy(&v, static_cast<const unsigned char*>(m.base) + gz * m.stride[1] + gy * m.stride[0] + 2 * gx,
                        2);
          std::memcpy(d + 2 * e, &v, 2);
        }
      }
    }
  std::lock_guard<std::mutex> lock(g_mbar_mu);
  Mbarrier& mb = mbar_get(bar);
  mb.tx -= static_cast<long long>(row_bytes) * m.box[1] * m.box[2];
  mbar_complete_if_done(mb);
}
// cp.async.bulk.tensor.3d.global.shared::cta: the box at (x, y, z) from dst's layout (as tensor_copy_3d leaves it)
// back to the tensor, elements outside it dropped. Immediate here; on the GPU a bulk group the kernel waits for.
inline void tensor_store_3d(const TensorMap3d& m, int x, int y, int z, const void* src) {
  const unsigned row_bytes = m.box[0] * 2, chunks = row_bytes / 16;
  if (row_bytes % 16 != 0 || (m.swizzle128 && row_bytes != 128)) {
    std::fprintf(stderr, "cuda_emu: tensor map box not supported by the emulation\n");
    std::abort();
  }
  const auto* in = static_cast<const unsigned char*>(src);
  for (unsigned zz = 0; zz < m.box[2]; ++zz)
    for (unsigned yy = 0; yy < m.box[1]; ++yy) {
      const unsigned R = zz * m.box[1] + yy;
      const std::uint64_t gy = std::uint64_t(y) + yy, gz = std::uint64_t(z) + zz;
      for (unsigned j = 0; j < chunks; ++j) {
        const unsigned char* d = in + std::size_t(R) * row_bytes + 16 * (m.swizzle128 ? (j ^ (R & 7u)) : j);
        for (unsigned e = 0; e < 8; ++e) {
          const std::uint64_t gx = std::uint64_t(x) + 8 * j + e;
          if (gx < m.dim[0] && gy < m.dim[1] && gz < m.dim[2])
            std::memcpy(const_cast<unsigned char*>(static_cast<const unsigned char*>(m.base)) + gz * m.stride[1] +
                            gy * m.stride[0] + 2 * gx,
                        d + 2 * e, 2);
        }
      }
    }
}
// Waits until the phase of parity `parity` has completed (the barrier's current phase bit differs from it).
inline void mbar_wait_parity(const void* bar, unsigned parity) {
  std::unique_lock<std::mutex> lock(g_mbar_mu);
  if (!g_mbar_cv.wait_for(lock, std::chrono::seconds(20), [&] { return mbar_get(bar).phase != (parity & 1u); })) {
    std::fprintf(stderr, "cuda_emu: mbarrier wait on parity %u never completed (a hang on the GPU)\n", parity);
    std::abort();
  }
}

}  // namespace emu
