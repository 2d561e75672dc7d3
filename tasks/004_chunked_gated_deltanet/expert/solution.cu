// chunked_gated_deltanet: expert CUDA C++ solution (sm_90a: mma.sync, wgmma, TMA), the task's expert since
// 2026-12-07 (before: the Triton design, now bench/candidates/004_deltanet_triton, 4.194 ms on 16seq_64k on the
// H200). Developed in bench/candidates/004_deltanet_cuda: the CPU emulation check (cpu-check.sh, CTests), the GPU
// check of every form (gpu-check.sh), the device calls (ws-call.sh) and NOTES.md with every figure.
//
// Measured (NVIDIA H100 80GB HBM3, 2026-12-07, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
// --compile-baseline-timeout 60 (scripts/gpu-check.sh calibrate pairs)`, bench/suite_targets.py --record): 0.4096 /
// 1.69 / 1.239 / 0.1453 ms on qwen3_next_h32_4seq_16k / qwen3_next_h32_1seq_32k / qwen3_next_h32_16seq_64k /
// qwen3_next_tp2_h16_64seq_8k; 2003x / 2766x / 900.4x / 366.3x over eager (geometric mean 1163x, target 3.0x);
// 57.27% of speed-of-light on qwen3_next_h32_16seq_64k; naive kernel 10.4 / 48.95 / 31.96 / 1.869 ms (expert 25.4x
// / 28.97x / 25.78x / 12.86x faster); torch.compile - / - / - / - ms.
//
// Computes the gated delta rule over the packed sequences of a prefill batch, per sequence and head, with q and k
// L2-normalized: S_t = exp(g_t) (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T from S = 0 at every
// sequence start, o_t = scale S_t q_t (bf16 q, k, v, o; fp32 g, beta; K = V = 128).
//
// Design (the Triton design's fused path, rebuilt so that one step of the state's chain is short and every tile is
// read once per chunk):
//  - Chunkwise WY/UT form with 64-token chunks cut per sequence (G = chunk-local cumsum of g, gamma = exp(G),
//    T = (I + A)^-1, A = strictly_lower(beta_t k^_t.k^_i gamma_t / gamma_i)): per chunk entered with state S_0,
//    v_new = T diag(beta) (V - diag(gamma) K^ S_0^T), o = scale (diag(gamma) Q^ S_0^T + P v_new) with
//    P = (Q^ K^T * gamma_t / gamma_i, i <= t), S_C = gamma_C S_0 + v_new^T diag(gamma_C / gamma) K^.
//  - Three launches: a chunk table from cu_seqlens (sequences ranked longest first); a prep per (chunk, head),
//    persistent past 16 items per CTA (two k tiles, the next item's copies in flight), that builds A by wgmma, the
//    four 16 x 16 diagonal inverses T_ii by forward substitution and stores M (T_ii on the diagonal, -A_ij below) as
//    [T, H, 72] bf16 rows with G_t, beta_t, 1/|k_t| by one tensor store a chunk; a warp-specialized walk per
//    (sequence, head): eight state warps keep the fp32 state S (V x K) as wgmma accumulators (16 V rows a warp) and
//    run S_0 K^T, S_0 Q^T, v_new = T y by block substitution over M (four dependent 16-row steps, mma.sync) and the
//    state update, while a producer warpgroup makes the next chunk's P (wgmma) and per-token factors; q, k, M and v
//    by TMA into 128-byte-swizzled slots (three for q, k, M, two for v), mbarrier-driven, setmaxnreg for the roles.
//    With few (sequence, head) pairs (at most an eighth of the SMs) V is split over 2 or 4 CTAs running the classic
//    walk (state warps doing every product). Older forms stay behind flags for timing: -DD2K_T_FULL (the prep's
//    three block-substitution levels give T itself), -DD2K_PREP_TSTORE_OFF, -DD2K_PREP_ONE / -DD2K_PREP_PERSIST,
//    -DD2K_CLASSIC, -DD2K_WS (the producer building T), -DD2K_FUSE_T, -DD2K_WGMMA, -DD2K_WS_WGMMA=1/3, -DD2K_PREP_PACK.
//  - Numerics: bf16 mma operands (raw q and k; the normalizations and decays are fp32 row / column factors on the
//    products), fp32 accumulation, state and inverses, decays only as exp of non-positive log differences.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "d2k/solution.h"

#ifndef D2K_CPU_EMU
#include <cuda.h>  // CUtensorMap and its enums (the encoder comes through cudaGetDriverEntryPointByVersion)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
using TmaMap = CUtensorMap;
#define D2K_DYN_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#define D2K_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#else
#define D2K_DYN_SMEM(name) unsigned char* name = emu::t_cta->smem
using TmaMap = emu::TensorMap3d;
#define D2K_LAUNCH(kernel, grid, block, smem, stream) \
  (static_cast<void>(stream), emu::launcher(kernel, grid, block, smem))
#endif

namespace {

using bf16 = __nv_bfloat16;
using u32 = std::uint32_t;

constexpr int kChunk = 64;
// The default form (the header says why): D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2. -DD2K_CLASSIC: the walk of 2026-12-05;
// any variant flag (D2K_WS, D2K_FUSE_T, D2K_WGMMA) picks its own form.
#if !defined(D2K_CLASSIC) && !defined(D2K_WS) && !defined(D2K_FUSE_T) && !defined(D2K_WGMMA)
#define D2K_WS 1
#define D2K_WS_PREP 1
#define D2K_WS_WGMMA 2
#endif
// D2K_WGMMA: S_0 K^T and S_0 Q^T through wgmma (warpgroups of 4 warps; V splits of 2-warp CTAs keep mma.sync).
#ifdef D2K_WGMMA
constexpr bool kWgmma = true;
#else
constexpr bool kWgmma = false;
#endif
// D2K_WS_WGMMA (with D2K_WS): the warp-specialized walk's S_0 K^T and S_0 Q^T through wgmma, B read straight from
// the tensor copies' swizzled tiles; D2K_WS_WGMMA=2: the state update (S += v_new' K, K N-major) too.
// D2K_WS_WGMMA=3: o += v_new P^T too, and v_new = T y with -DD2K_T_FULL (whole 64 x 64 tiles, zeros above the
// diagonal).
#ifdef D2K_WS_WGMMA
#ifndef D2K_WS
#error "D2K_WS_WGMMA varies the walk of D2K_WS"
#endif
constexpr int kWsWgmma = D2K_WS_WGMMA + 0 == 0 ? 1 : D2K_WS_WGMMA + 0;
#else
constexpr int kWsWgmma = 0;
#endif
// D2K_WS_PREP (with D2K_WS): the warp-specialized walk reads T from the prep kernel (through the q/k slots' tensor
// copies) instead of building it in its producer warpgroup, which then makes only P and the factors.
#ifdef D2K_WS_PREP
#ifndef D2K_WS
#error "D2K_WS_PREP varies the walk of D2K_WS"
#endif
constexpr bool kWsPrepT = true;
#else
constexpr bool kWsPrepT = false;
#endif
constexpr int kMaxRanked = 1024;  // sequences ranked by length for the walk's order (more: batch order)
constexpr int kDim = 128;          // K = V
constexpr int kRowBf = 136;        // bf16 per shared row of the output's 64 x 128 staging tile (272 B)
constexpr int kTRowBf = 72;        // bf16 per shared row of T and P (144 B)
constexpr int kTileBytes = kChunk * kDim * 2;      // 16384: a q, k or v tile in 8 x 8 core matrices (toff)
constexpr int kOTileBytes = kChunk * kRowBf * 2;   // 17408
constexpr int kTTileBytes = kChunk * kTRowBf * 2;  // 9216

// walk: shared memory layout (bytes)
constexpr int kStQ = 0, kStK = kTileBytes, kStV = 2 * kTileBytes, kStT = 3 * kTileBytes;
constexpr int kStG = kStT + kTTileBytes, kStBeta = kStG + 256;
constexpr int kStageBytes = (kStBeta + 256 + 1023) / 1024 * 1024;  // the tensor copies' boxes are 1024-aligned
static_assert(kStK % 1024 == 0 && kStV % 1024 == 0 && kStT % 1024 == 0, "tensor copy boxes must be 1024-aligned");
constexpr int kWP = 2 * kStageBytes, kWO = kWP + kTTileBytes;
// per-token factors of the current chunk (64 floats each) and gamma_C
constexpr int kWG = kWO + kOTileBytes, kWFq = kWG + 256, kWRk = kWFq + 256, kWFy = kWRk + 256, kWFo = kWFy + 256;
constexpr int kWFs = kWFo + 256, kWEc = kWFs + 256;
constexpr int kWBar = kWEc + 16;  // two mbarriers, one per stage (the tensor copies)
constexpr int kWalkSmem = kWBar + 16 + 1024;  // + room to align the base to 1024 bytes (128-byte swizzle)
// T in global memory, one 144-byte row per (token, head): T's 64 bf16, then G_t (the chunk-local cumsum of g),
// beta_t and rk_t as floats and a pad, so that the tensor copy of T brings all the prep's per-token factors.
constexpr int kTRow = 72;
static_assert(kTRow == kTRowBf, "a T row lands in shared memory as it is in global memory");
// the walk that builds T itself (kFuseT) adds fp32 scratch for A, T and the block products
constexpr int kFRow = 72;  // floats per row of the fp32 64 x 64 matrices A and T
constexpr int kRRow = 24;  // floats per row of a 16 x 16 block product's scratch
constexpr int kWAs = kWalkSmem, kWTm = kWAs + kChunk * kFRow * 4, kWRs = kWTm + kChunk * kFRow * 4;
constexpr int kWalkSmemFused = kWRs + 3 * 16 * kRRow * 4;

// prep: shared memory layout (bytes)
constexpr int kPrepThreads = 128;
#ifdef D2K_PREP_PACK
// A variant to time (2026-12-06, CPU-checked only): T's fp32 blocks in A's matrix (T_ii over A_ii once inverted,
// T_ij, i > j, in A's unused block (j, i)), the block products' scratch over the k tile: 36 KB, six CTAs per SM.
constexpr bool kPrepPack = true;
constexpr int kPK = 0, kPR = 0, kPA = kTileBytes, kPT = kPA, kPG = kPA + kChunk * kFRow * 4, kPBeta = kPG + 256;
constexpr int kPGc = kPBeta + 256, kPRk = kPGc + 256;
constexpr int kPBar = kPRk + 256;  // the k tile's mbarrier
#else
// T's fp32 blocks reuse the bytes of the k tile (dead once A is built): 42.5 KB, five CTAs per SM.
constexpr bool kPrepPack = false;
constexpr int kPK = 0, kPT = 0, kPG = kChunk * kFRow * 4, kPBeta = kPG + 256, kPGc = kPBeta + 256;
constexpr int kPRk = kPGc + 256, kPA = kPRk + 256, kPR = kPA + kChunk * kFRow * 4;
constexpr int kPBar = kPR + 3 * 16 * kRRow * 4;  // the k tile's mbarrier
#endif
// The persistent prep (2026-12-06, prep_persist_kernel): CTAs each walking (chunk, head) items with the
// next item's k tile in flight while it builds the current one's T (ncu and the phase clocks saw the one-item CTAs
// wait ~7k of ~21k cycles for their loads). Two k tiles (the block products' scratch over the current one), T's
// blocks in A's matrix as in D2K_PREP_PACK: 52 KB, four CTAs per SM.
constexpr int kQK = 0, kQA = 2 * kTileBytes, kQG = kQA + kChunk * kFRow * 4, kQBeta = kQG + 256, kQGc = kQBeta + 256;
constexpr int kQRk = kQGc + 256, kQBar = kQRk + 256;  // two mbarriers, one per k tile
constexpr int kPrepPersistSmem = kQBar + 16 + 1024;
constexpr int kPrepPersistCtas = 4;  // per SM: (228 KB) / (kPrepPersistSmem + 1 KB reserved), registers allowing
// Used when there are at least 16 items per CTA of its grid (H100, 2026-12-06: 16seq_64k, 62 items a CTA, 1.460 ms
// against 1.507 warm; 64seq_8k, 4 a CTA, 0.167 against 0.156: few items leave fewer CTAs in flight than the one-item
// prep's five per SM, and no tile to overlap). -DD2K_PREP_PERSIST always, -DD2K_PREP_ONE never (timing variants).
#if defined(D2K_PREP_PERSIST)
constexpr int kPrepPersistMode = 2;
#elif defined(D2K_PREP_ONE)
constexpr int kPrepPersistMode = 0;
#else
constexpr int kPrepPersistMode = 1;
#endif
constexpr int kPrepPersistMinItems = 16;  // per CTA of the persistent grid
#ifdef D2K_PREP_MMA
constexpr bool kPrepWg = false;  // a variant to time: A's Gram matrix on mma.sync, as before 2026-12-06's ncu run
#else
constexpr bool kPrepWg = true;  // A's Gram matrix by wgmma (the mma.sync form's address and branch work was half the
                                // prep's instructions, ncu on an H100)
#endif
constexpr int kPrepSmem = kPBar + 16 + 1024;       // + room to align the base to 1024 bytes (128-byte swizzle)
static_assert(kChunk * kFRow * 4 >= kTileBytes, "T's blocks must cover the k tile they overwrite");
// kTSubst (the default since 2026-12-07; -DD2K_T_FULL the old form, T itself from the prep): the prep stops after
// the four 16 x 16 diagonal inverses and stores, in T's place, M: the inverses T_ii on the diagonal and -A_ij below
// it; the walk's state warps then get v_new from y by block substitution, v_new_i = (y_i + sum_{j < i} v_new_j
// M_ij^T) M_ii^T (ten 16 x 16 block products in a chain of four), instead of one product with T. The prep drops its
// three block-substitution levels (4.4k of its ~16k cycles an item in the phase clocks of 2026-12-06, H100); T's
// bytes and layout are unchanged. Measured 2026-12-07 (H100, warm): the prep 0.50 -> 0.36 ms, the walk 0.906 ->
// 0.914 ms on 16seq_64k.
#ifndef D2K_T_FULL
constexpr bool kTSubst = true;
#else
constexpr bool kTSubst = false;
#endif

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// Element offset of (row r, column c) in a 64 x 128 bf16 tile stored as 8 x 8 core matrices: the 8 rows of a core
// matrix are 16 contiguous bytes each (an ldmatrix 8 x 8 read is one 128-byte block, no bank conflicts), core
// matrices along a row 128 B apart, 8-row groups 2048 B apart: the canonical no-swizzle K-major layout of wgmma
// operands as well.
__device__ __forceinline__ int toff(int r, int c) { return (r >> 3) * 1024 + (c >> 3) * 64 + (r & 7) * 8 + (c & 7); }

// Element offset of (r, c) in a 64 x 128 bf16 tile as two tensor copies leave it: columns 0-63 then 64-127, each
// half 64 rows of 128 B with the 128-byte swizzle (16-byte chunk j of row r at chunk j ^ (r & 7)), so ldmatrix's
// eight rows of one logical chunk fall in distinct bank groups.
__device__ __forceinline__ int swz(int r, int c) {
  return (c >> 6) * 4096 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
}

// Rows L..63 of n consecutive swz tiles to zero, by threads tid = 0 .. nt - 1: a tensor copy brings the next
// sequence's tokens there (or zeros past the tensor's end), and the products read whole tiles.
__device__ __forceinline__ void zero_swz_rows(unsigned char* tiles, int n, int L, int tid, int nt) {
  for (int i = tid; i < (kChunk - L) * 16 * n; i += nt) {  // 16 chunks of 16 B per row: 8 in each half
    const int tile = i / ((kChunk - L) * 16), j = i % ((kChunk - L) * 16);
    *reinterpret_cast<uint4*>(tiles + tile * kChunk * kDim * 2 + (j & 8) * 1024 + (L + (j >> 4)) * 128 +
                              (j & 7) * 16) = uint4{0u, 0u, 0u, 0u};
  }
}

// The i-th of a tile's 1024 16-byte chunks, ordered so that a warp's 32 copies cover 8 rows x 64 contiguous bytes
// in global memory and fill whole core matrices in shared memory.
__device__ __forceinline__ void tile_chunk(int i, int& row, int& col) {
  row = ((i >> 7) << 3) | ((i >> 1) & 7);
  col = ((((i >> 4) & 7) << 1) | (i & 1)) * 8;
}

// ---------------------------------------------------------------- PTX wrappers (CPU counterparts in cuda_emu.hpp)

#ifndef D2K_CPU_EMU
__device__ __forceinline__ u32 smem_u32(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }
#endif

// The dynamic shared memory's base rounded up to 1024 bytes (the 128-byte swizzle of the tensor copies is a function
// of the address; the kernels reserve 1024 bytes for the shift). The emulation swizzles by row, whatever the address.
__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
#ifdef D2K_CPU_EMU
  return p;
#else
  return p + ((1024 - (smem_u32(p) & 1023)) & 1023);
#endif
}

__device__ __forceinline__ float u32_as_float(u32 u) {
#ifdef D2K_CPU_EMU
  return emu::bits_to_float(u);
#else
  return __uint_as_float(u);
#endif
}
__device__ __forceinline__ float bf_lo(u32 r) { return u32_as_float(r << 16); }
__device__ __forceinline__ float bf_hi(u32 r) { return u32_as_float(r & 0xffff0000u); }

__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
#ifdef D2K_CPU_EMU
  return u32(__float2bfloat16_rn(lo).x) | u32(__float2bfloat16_rn(hi).x) << 16;
#else
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
#endif
}

__device__ __forceinline__ u32 tf32(float f) {
#ifdef D2K_CPU_EMU
  return emu::to_tf32(f);
#else
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
#endif
}

// exp(x) for the decays (x <= 0 where it matters): one multiply and ex2.approx.ftz, whose flush of results below
// 2^-126 to zero is the right value of a vanished decay (__expf without fast-math adds a range fix-up of 3 instructions).
__device__ __forceinline__ float exp_dec(float x) {
#ifdef D2K_CPU_EMU
  return std::exp(x);
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
#endif
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#ifdef D2K_CPU_EMU
  const u32 b[2] = {b0, b1};
  emu::mma_bf16_16816(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#ifdef D2K_CPU_EMU
  const u32 b[2] = {b0, b1};
  emu::mma_tf32_1688(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], const bf16* p) {
#ifdef D2K_CPU_EMU
  emu::ldmatrix_x4(r, p, false);
#else
  const u32 a = smem_u32(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}

__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], const bf16* p) {
#ifdef D2K_CPU_EMU
  emu::ldmatrix_x4(r, p, true);
#else
  const u32 a = smem_u32(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}

// 16 (or 4) bytes global -> shared; zero-filled when !full (the source address must still be valid).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool full) {
#ifdef D2K_CPU_EMU
  emu::cp_async(dst, src, 16, full);
#else
  const u32 d = smem_u32(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(full ? 16 : 0) : "memory");
#endif
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool full) {
#ifdef D2K_CPU_EMU
  emu::cp_async(dst, src, 4, full);
#else
  const u32 d = smem_u32(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(full ? 4 : 0) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef D2K_CPU_EMU
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#ifndef D2K_CPU_EMU
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

// mbarrier and tensor copies (sm_90): a stage lands through the copy engine in seven copies issued by one thread,
// so no warp stalls issuing it (the profile of 2026-12-05 found cp.async issue taking ~2,700 of a step's ~13,800
// cycles: the warps wait for the load/store unit to accept their requests; 256 per-row cp.async.bulk copies were
// worse, serialized one lane at a time).
[[maybe_unused]] __device__ __forceinline__ void mbar_init(void* bar, int count) {
#ifdef D2K_CPU_EMU
  emu::mbar_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(count)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
[[maybe_unused]] __device__ __forceinline__ void mbar_arrive_expect_tx(void* bar, u32 bytes) {
#ifdef D2K_CPU_EMU
  emu::mbar_arrive_expect_tx(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smem_u32(bar)),
               "r"(bytes)
               : "memory");
#endif
}
// The box of map at (x, y, z) (elements, innermost first) global -> shared, counted on bar when it lands.
[[maybe_unused]] __device__ __forceinline__ void tma_load_3d(void* dst, const TmaMap& map, int x, int y, int z,
                                                             void* bar) {
#ifdef D2K_CPU_EMU
  emu::tensor_copy_3d(dst, map, x, y, z, bar);
#else
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(x), "r"(y), "r"(z),
      "r"(smem_u32(bar))
      : "memory");
#endif
}
// The box of map at (x, y, z) shared -> global (clipped at the tensor's bounds), in the issuing thread's bulk group;
// its shared-memory source must stay unchanged until bulk_wait_read() and the kernel must not end before
// bulk_wait_all().
[[maybe_unused]] __device__ __forceinline__ void tma_store_3d(const TmaMap& map, int x, int y, int z,
                                                              const void* src) {
#ifdef D2K_CPU_EMU
  emu::tensor_store_3d(map, x, y, z, src);
#else
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                   reinterpret_cast<std::uint64_t>(&map)),
               "r"(x), "r"(y), "r"(z), "r"(smem_u32(src))
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
[[maybe_unused]] __device__ __forceinline__ void bulk_wait_read() {
#ifndef D2K_CPU_EMU
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}
[[maybe_unused]] __device__ __forceinline__ void bulk_wait_all() {
#ifndef D2K_CPU_EMU
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
// A plain arrival (no bytes), with release semantics: the arriving thread's writes before it are seen by a waiter.
[[maybe_unused]] __device__ __forceinline__ void mbar_arrive(void* bar) {
#ifdef D2K_CPU_EMU
  emu::mbar_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
#endif
}
// bar.sync id, n: the n threads (whole warps) of one role meet, the others go on (id 0 is __syncthreads).
[[maybe_unused]] __device__ __forceinline__ void named_bar(int id, int n) {
#ifdef D2K_CPU_EMU
  emu::named_barrier(id, static_cast<unsigned>(n));
#else
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}
// setmaxnreg: a warpgroup gives registers back (dec) or takes them (inc) from the CTA's pool; ptxas allocates the
// code after it to that count. The counts of all warpgroups must sum to the launch's, or an inc waits forever.
template <int N>
[[maybe_unused]] __device__ __forceinline__ void setmaxnreg_dec() {
#ifndef D2K_CPU_EMU
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N>
[[maybe_unused]] __device__ __forceinline__ void setmaxnreg_inc() {
#ifndef D2K_CPU_EMU
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
[[maybe_unused]] __device__ __forceinline__ void mbar_wait(void* bar, u32 parity) {
#ifdef D2K_CPU_EMU
  emu::mbar_wait_parity(bar, parity);
#else
  const u32 a = smem_u32(bar);
  u32 done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
#endif
}


// ---------------------------------------------------------------- wgmma (D2K_WGMMA): S_0 K^T and S_0 Q^T per warpgroup

// A shared-memory address as a descriptor holds it (the emulation's: the offset into the CTA's shared memory).
__device__ __forceinline__ std::uint64_t desc_addr(const bf16* p) {
#ifdef D2K_CPU_EMU
  return static_cast<std::uint64_t>(reinterpret_cast<const unsigned char*>(p) - emu::t_cta->smem);
#else
  return smem_u32(p);
#endif
}
// A 128-byte-swizzled operand's descriptor: 8-row groups 1024 B apart (stride byte offset), leading byte offset lbo.
__device__ __forceinline__ std::uint64_t sw128_desc_lbo(const bf16* p, unsigned lbo) {
  return ((desc_addr(p) >> 4) & 0x3fff) | (std::uint64_t(lbo >> 4) << 16) | (std::uint64_t(1024 >> 4) << 32) |
         (std::uint64_t(1) << 62);
}

// Shared-memory matrix descriptor of a K-major operand in the no-swizzle canonical layout of toff: core matrices
// 128 B apart along K (leading byte offset), 8-row groups 2048 B apart along N (stride byte offset).
__device__ __forceinline__ std::uint64_t kmajor_desc(const bf16* p) {
  const std::uint64_t addr = desc_addr(p);
  return ((addr >> 4) & 0x3fff) | (std::uint64_t(128 >> 4) << 16) | (std::uint64_t(2048 >> 4) << 32);
}

// The same for a K-major operand as the tensor copies leave it (swz: 128-byte rows, 8-row groups 1024 B apart, the
// 128-byte swizzle), p at a k-step inside a 64-column half: its start moves by 32 B per 16 columns; the swizzle
// follows the address bits, as the tensor copy's did, since the tiles are 1024-aligned.
__device__ __forceinline__ std::uint64_t sw128_desc(const bf16* p) { return sw128_desc_lbo(p, 16); }

// wgmma's accumulator operands: rows j0 .. j0 + 7 of d ([n][4], one 16 x 8 block per row), read and written.
#define D2K_ACC4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define D2K_ACC8(d, j0)                                                                                    \
  D2K_ACC4(d, j0), D2K_ACC4(d, j0 + 1), D2K_ACC4(d, j0 + 2), D2K_ACC4(d, j0 + 3), D2K_ACC4(d, j0 + 4), \
      D2K_ACC4(d, j0 + 5), D2K_ACC4(d, j0 + 6), D2K_ACC4(d, j0 + 7)

// d (this warp's 16 rows x 64 columns of the warpgroup's 64 x 64 fp32 accumulator, mma C layout per 8-column block)
// += A B: A from registers (this warp's 16 x 16 slice, the mma A layout), B (16 x 64, K-major) from shared memory.
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], const u32 (&a)[4], std::uint64_t desc_b) {
#ifdef D2K_CPU_EMU
  emu::wgmma_m64nNk16_rs<64>(&d[0][0], a, desc_b);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : D2K_ACC8(d, 0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}
// The state update's product (S += v_new' K): this warp's 16 rows x 128 columns of a 64 x 128 fp32 accumulator (mma C
// layout per 8-column block) += A B, A from registers, B (16 x 128) N-major in shared memory (imm-trans-b = 1).
__device__ __forceinline__ void wgmma_m64n128k16_nmajor(float (&d)[16][4], const u32 (&a)[4], std::uint64_t desc_b) {
#ifdef D2K_CPU_EMU
  emu::wgmma_m64nNk16_rs<128, true>(&d[0][0], a, desc_b);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : D2K_ACC8(d, 0), D2K_ACC8(d, 8)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}
// Descriptor of an N-major operand as the tensor copies leave a 64 x 128 tile (swz): N (the 128 columns) along the
// 128-byte rows, the second 64-column half 8192 B on (leading byte offset); K (the tile's rows) 128 B apart, 8-row
// groups 1024 B apart (stride byte offset); 128-byte swizzle. p at row 16 j of the tile (1024-aligned: base offset 0).
__device__ __forceinline__ std::uint64_t nmajor_sw128_desc(const bf16* p) { return sw128_desc_lbo(p, 8192); }
__device__ __forceinline__ void wgmma_fence() {
#ifndef D2K_CPU_EMU
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit_and_wait() {
#ifndef D2K_CPU_EMU
  asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}
// Keeps registers alive (and unmoved) up to this point: wgmma reads its A registers and writes its accumulators
// asynchronously, so the compiler must neither reuse the former nor read the latter before the wait.
template <int N>
__device__ __forceinline__ void reg_fence(float (&d)[N][4]) {
#ifndef D2K_CPU_EMU
  for (int j = 0; j < N; ++j) asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])::"memory");
#else
  (void)d;
#endif
}
__device__ __forceinline__ void reg_fence(u32 (&a)[4]) {
#ifndef D2K_CPU_EMU
  asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3])::"memory");
#else
  (void)a;
#endif
}
// Makes the generic-proxy writes to shared memory (cp.async, st.shared) visible to wgmma's async-proxy reads.
__device__ __forceinline__ void fence_proxy_async() {
#ifndef D2K_CPU_EMU
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// ---------------------------------------------------------------- shared pieces of prep and walk

// acc = R C^T for rows 16w .. 16w + 15 (warp w of a warpgroup; all four call it) of a 64 x 64 product over 128
// columns, R and C 64 x 128 tiles in swz's layout (1024-aligned halves): R's rows through ldmatrix, C straight from its
// tile as wgmma's K-major B, kBatch k-steps per wait. The accumulator has the mma C layout per 8-column block.
template <int kBatch>
__device__ __forceinline__ void gram_wgmma(float (&acc)[8][4], const bf16* R, const bf16* C, int w, int lane) {
  static_assert(8 % kBatch == 0, "k-steps come in equal batches");
  const int ar = 16 * w + (lane & 7) + 8 * ((lane >> 3) & 1), ac = 8 * (lane >> 4);
  for (int n = 0; n < 8; ++n)
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  for (int kb = 0; kb < 8; kb += kBatch) {
    u32 a[kBatch][4];
    for (int j = 0; j < kBatch; ++j) ldsm_x4(a[j], R + swz(ar, 16 * (kb + j) + ac));
    wgmma_fence();
    for (int j = 0; j < kBatch; ++j)
      wgmma_m64n64k16(acc, a[j], sw128_desc(C + ((kb + j) >> 2) * 4096 + ((kb + j) & 3) * 16));
    wgmma_commit_and_wait();
    for (int j = 0; j < kBatch; ++j) reg_fence(a[j]);
    reg_fence(acc);
  }
}

// The decayed causal block of rows t = b + gq (+ 8) (b = 16 w, warp w of a warpgroup) of a product x (mma C layout):
// column i of row t is x f_t rk_i exp(G_t - G_i) where i < t (kStrict) or i <= t, else zero; every (t, i pair of
// columns) goes to emit(t, i, value) in order, zeros included (all zeros unless live, warp-uniform). Left of the
// diagonal block exp(G_t - G_i) = exp(G_t - G_b) exp(G_b - G_i), both logs non-positive (G falls with t): a row
// factor times a column factor; in it, per-element exps of the clamped difference and selects, no branch per element
// (ncu saw the branchy form issue once per ~9 cycles); right of it, zeros without arithmetic.
template <bool kStrict, class Emit>
__device__ __forceinline__ void decayed_rows(const float (&x)[8][4], const float* Gc, const float* rk,
                                             const float (&f)[2], int b, bool live, int lane, Emit emit) {
  const int gq = lane >> 2, tq = lane & 3;
  const float Gb = Gc[b];
  float Gt[2], rowf[2];
  for (int hi = 0; hi < 2; ++hi) {
    Gt[hi] = Gc[b + gq + 8 * hi];
    rowf[hi] = f[hi] * exp_dec(fminf(Gt[hi] - Gb, 0.f));
  }
  for (int n = 0; n < 8; ++n) {
    const int i = 8 * n + 2 * tq;
    float2 v[2] = {make_float2(0.f, 0.f), make_float2(0.f, 0.f)};
    if (8 * n < b + 16 && live) {  // warp-uniform
      const float2 ri = *reinterpret_cast<const float2*>(rk + i), Gi = *reinterpret_cast<const float2*>(Gc + i);
      if (8 * n < b) {
        const float c0 = ri.x * exp_dec(Gb - Gi.x), c1 = ri.y * exp_dec(Gb - Gi.y);
        for (int hi = 0; hi < 2; ++hi)
          v[hi] = make_float2(x[n][2 * hi] * rowf[hi] * c0, x[n][2 * hi + 1] * rowf[hi] * c1);
      } else {
        for (int hi = 0; hi < 2; ++hi) {
          const int t = b + gq + 8 * hi;
          const float e0 = exp_dec(fminf(Gt[hi] - Gi.x, 0.f)), e1 = exp_dec(fminf(Gt[hi] - Gi.y, 0.f));
          const float p0 = x[n][2 * hi] * f[hi] * ri.x * e0, p1 = x[n][2 * hi + 1] * f[hi] * ri.y * e1;
          v[hi] = make_float2((kStrict ? i < t : i <= t) ? p0 : 0.f, (kStrict ? i + 1 < t : i + 1 <= t) ? p1 : 0.f);
        }
      }
    }
    for (int hi = 0; hi < 2; ++hi) emit(b + gq + 8 * hi, i, v[hi]);
  }
}

// Sum of squares of chunks c8 .. c8 + NV - 1 (8 bf16 each) of a tile's row (several threads share a row).
template <int NV, bool kSwz = false>  // kSwz: the tile in swz's layout (else toff's core matrices)
__device__ __forceinline__ float partial_sumsq(const bf16* tile, int row, int c8) {
  float s = 0.f;
  for (int j = 0; j < NV; ++j) {
    const uint4 u =
        *reinterpret_cast<const uint4*>(tile + (kSwz ? swz(row, 8 * (c8 + j)) : toff(row, 8 * (c8 + j))));
    const u32 w[4] = {u.x, u.y, u.z, u.w};
    for (int e = 0; e < 4; ++e) {
      const float a = bf_lo(w[e]), b = bf_hi(w[e]);
      s += a * a + b * b;
    }
  }
  return s;
}

// Inclusive cumsum of 64 log decays held two per lane: lane l ends with G_{2l} and G_{2l+1}.
__device__ __forceinline__ void warp_cumsum64(const float* g, int lane, float& G_even, float& G_odd) {
  const float a = g[2 * lane], b = g[2 * lane + 1];
  float x = a + b;
  for (int d = 1; d < 32; d <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  G_even = x - b;
  G_odd = x;
}
// G_t from warp_cumsum64's registers (every lane must call it).
__device__ __forceinline__ float pick_cumsum(float G_even, float G_odd, int t) {
  const float e = __shfl_sync(0xffffffffu, G_even, t >> 1), o = __shfl_sync(0xffffffffu, G_odd, t >> 1);
  return (t & 1) ? o : e;
}

// ---------------------------------------------------------------- kernel 1: chunk table

// tbl[0] = number of chunks; tbl[1 + c] = first token of chunk c; tbl[1 + n_slots + c] = its length (1..64);
// tbl[1 + 2 n_slots + r] = the sequence of rank r by decreasing length (ties by index), so that the walk starts the
// longest chains first (for B > kMaxRanked, the identity: the ranking is quadratic, one sequence per thread).
__global__ void __launch_bounds__(1024) table_kernel(const int* __restrict__ cu, int B, int* __restrict__ tbl,
                                                     int n_slots) {
  D2K_DYN_SMEM(smem);
  int* part = reinterpret_cast<int*>(smem);
  const int tid = threadIdx.x;
  const int per = (B + 1023) / 1024;
  const int lo = imin(B, tid * per), hi = imin(B, lo + per);
  int sum = 0;
  for (int b = lo; b < hi; ++b) sum += (cu[b + 1] - cu[b] + kChunk - 1) / kChunk;
  part[tid] = sum;
  __syncthreads();
  for (int d = 1; d < 1024; d <<= 1) {
    const int x = tid >= d ? part[tid - d] : 0;
    __syncthreads();
    part[tid] += x;
    __syncthreads();
  }
  int off = part[tid] - sum;
  for (int b = lo; b < hi; ++b) {
    const int s = cu[b], len = cu[b + 1] - s;
    for (int j = 0; j * kChunk < len; ++j, ++off) {
      tbl[1 + off] = s + j * kChunk;
      tbl[1 + n_slots + off] = imin(kChunk, len - j * kChunk);
    }
  }
  if (tid == 1023) tbl[0] = part[1023];
  int* order = tbl + 1 + 2 * n_slots;
  if (B > kMaxRanked) {
    for (int b = tid; b < B; b += 1024) order[b] = b;
    return;
  }
  int* lens = part + 1024;  // B <= 1024: one length per thread
  if (tid < B) lens[tid] = cu[tid + 1] - cu[tid];
  __syncthreads();
  if (tid < B) {
    const int len = lens[tid];
    int rank = 0;
    for (int j = 0; j < B; ++j) rank += lens[j] > len || (lens[j] == len && j < tid);
    order[rank] = tid;
  }
}

// ---------------------------------------------------------------- kernel 2: T per (chunk, head)

// Float offset of T's element (r, c) in its fp32 scratch: row-major, or with kPack the blocks below the diagonal
// moved to the unused block above it ((i, j) to (j, i), i > j), Tm being A's matrix.
template <bool kPack>
__device__ __forceinline__ int tmi(int r, int c) {
  if (kPack && (r >> 4) > (c >> 4)) return ((c & ~15) + (r & 15)) * kFRow + (r & ~15) + (c & 15);
  return r * kFRow + c;
}

// Block (i, j), i > j, of T: T_ij = -T_ii sum_{k=j}^{i-1} A_ik T_kj, from blocks already in Tm (one warp).
template <bool kPack>
__device__ void offdiag_block(const float* As, float* Tm, float* Rs, int i, int j, int lane) {
  const int g = lane >> 2, t = lane & 3;
  float R[2][4] = {};
  for (int kb = j; kb < i; ++kb)
    for (int s = 0; s < 2; ++s) {
      const float* ar = As + (16 * i + g) * kFRow + 16 * kb + 8 * s + t;
      const u32 a[4] = {tf32(ar[0]), tf32(ar[8 * kFRow]), tf32(ar[4]), tf32(ar[8 * kFRow + 4])};
      const int r0 = 16 * kb + 8 * s + t, c0 = 16 * j + g;
      for (int nt = 0; nt < 2; ++nt)
        mma_tf32(R[nt], a, tf32(Tm[tmi<kPack>(r0, c0 + 8 * nt)]), tf32(Tm[tmi<kPack>(r0 + 4, c0 + 8 * nt)]));
    }
  for (int nt = 0; nt < 2; ++nt)
    for (int e = 0; e < 4; ++e) Rs[(g + 8 * (e >> 1)) * kRRow + 8 * nt + 2 * t + (e & 1)] = R[nt][e];
  __syncwarp();
  float X[2][4] = {};
  for (int s = 0; s < 2; ++s) {
    const float* ar = Tm + (16 * i + g) * kFRow + 16 * i + 8 * s + t;
    const u32 a[4] = {tf32(ar[0]), tf32(ar[8 * kFRow]), tf32(ar[4]), tf32(ar[8 * kFRow + 4])};
    const float* br = Rs + (8 * s + t) * kRRow + g;
    for (int nt = 0; nt < 2; ++nt) mma_tf32(X[nt], a, tf32(br[8 * nt]), tf32(br[4 * kRRow + 8 * nt]));
  }
  for (int nt = 0; nt < 2; ++nt)
    for (int e = 0; e < 4; ++e) Tm[tmi<kPack>(16 * i + g + 8 * (e >> 1), 16 * j + 8 * nt + 2 * t + (e & 1))] = -X[nt][e];
  __syncwarp();
}

// T = (I + A)^-1 of one chunk, A = strictly_lower(beta_t rk_t rk_i exp(G_t - G_i) k_t.k_i), from the raw k tile Ks
// (rows past L zero), beta, G and rk; written in bf16 with zeros above the diagonal to Tout (row stride out_stride
// elements, or swz's layout of a 64 x 64 tile with kOutSwz): rows t < L, and rows L..63 as zeros when zero_tail. As
// and Tm are fp32 64 x kFRow scratch (Tm may alias Ks: Ks is dead once A is built), Rs three 16 x kRRow blocks. NT
// threads (NT >= 64; tid = 0 .. NT - 1 among them) call it, meeting at sync(); it ends with one. side(phase, warp)
// is other work for warps that would wait: phase 0 after a warp's rows of A (warp w has w + 1 blocks), phase 1 by
// warps 2 .. during the forward substitution (warps 0 and 1).
// kPack: Tm is As (tmi's layout; the diagonal inverses wait for every read of A's diagonal blocks).
// kWg: A's Gram matrix by wgmma (NT = 128, one warpgroup) and its factors without branches per element.
template <int NT, bool kSwz, bool kOutSwz = false, bool kPack = false, bool kWg = false, class Sync,
          class Side>  // kSwz: k in swz's layout
__device__ void build_T(const bf16* Ks, const float* bs, const float* Gc, const float* rk, float* As, float* Tm,
                        float* Rs, bf16* Tout, long out_stride, int L, bool zero_tail, int tid, Sync sync,
                        Side side) {
  const int lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
  if constexpr (kWg) {
    static_assert(NT == 128 && kSwz, "one warpgroup, k as the tensor copies leave it");
    float acc[8][4];
    gram_wgmma<4>(acc, Ks, Ks, warp, lane);
    const int b = 16 * warp;
    float f[2];
    for (int hi = 0; hi < 2; ++hi) f[hi] = bs[b + gq + 8 * hi] * rk[b + gq + 8 * hi];
    decayed_rows<true>(acc, Gc, rk, f, b, true, lane,
                       [&](int t, int i, float2 v) { *reinterpret_cast<float2*>(As + t * kFRow + i) = v; });
  }
  // A: warp w computes rows 16w..16w+15 (warps 4.. idle).
  for (int mt = warp; !kWg && mt < 4; mt += NT / 32) {
    float acc[8][4] = {};
    for (int ks = 0; ks < 8; ++ks) {
      u32 a[4];
      const int ar = 16 * mt + (lane & 7) + 8 * ((lane >> 3) & 1), ac = 16 * ks + 8 * (lane >> 4);
      ldsm_x4(a, Ks + (kSwz ? swz(ar, ac) : toff(ar, ac)));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np > mt) continue;  // blocks above the diagonal stay zero
        u32 b[4];
        const int br = 16 * np + (lane & 7) + 8 * (lane >> 4), bc = 16 * ks + 8 * ((lane >> 3) & 1);
        ldsm_x4(b, Ks + (kSwz ? swz(br, bc) : toff(br, bc)));
        mma_bf16(acc[2 * np], a, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int t = 16 * mt + gq + 8 * (e >> 1), i = 8 * n + 2 * tq + (e & 1);
        As[t * kFRow + i] = i < t ? acc[n][e] * bs[t] * rk[t] * rk[i] * __expf(Gc[t] - Gc[i]) : 0.f;
      }
  }
  side(0, warp);
  sync();

  // The four 16 x 16 diagonal blocks of T: forward substitution, one thread per (block, column).
  const int d = tid >> 4, c = tid & 15;
  float x[16];
  if (tid < 64) {
#pragma unroll
    for (int t = 0; t < 16; ++t) {
      float s = t == c ? 1.f : 0.f;
      const float* ar = As + (16 * d + t) * kFRow + 16 * d;
#pragma unroll
      for (int j = 0; j < t; ++j) s -= ar[j] * x[j];
      x[t] = s;
    }
  } else {
    side(1, warp);
  }
  if constexpr (kPack) sync();  // T_dd goes over A_dd, which the block's other columns read
  if (tid < 64) {
#pragma unroll
    for (int t = 0; t < 16; ++t) Tm[(16 * d + t) * kFRow + 16 * d + c] = x[t];
  }
  sync();
  for (int lev = 1; !kTSubst && lev < 4; ++lev) {  // block (j + lev, j) needs the blocks of levels below lev
    for (int j = warp; j < 4 - lev; j += NT / 32) offdiag_block<kPack>(As, Tm, Rs + j * 16 * kRRow, j + lev, j, lane);
    sync();
  }

  for (int i = tid; i < 512; i += NT) {
    const int row = i >> 3, c0 = (i & 7) * 8;
    if (row >= L && !zero_tail) continue;
    // eight columns inside one 16-column block; with kTSubst, -A_ij left of the diagonal block (intact in As)
    const bool below = kTSubst && (c0 >> 4) < (row >> 4);
    const float* tr = below ? As + row * kFRow + c0 : Tm + tmi<kPack>(row, c0);
    const float sg = below ? -1.f : 1.f;
    u32 w[4];
    for (int e = 0; e < 4; ++e) {
      const int c = c0 + 2 * e;
      const bool live = row < L;
      w[e] = pack_bf16(live && c <= row ? sg * tr[2 * e] : 0.f, live && c + 1 <= row ? sg * tr[2 * e + 1] : 0.f);
    }
    *reinterpret_cast<uint4*>(Tout + (kOutSwz ? swz(row, c0) : row * out_stride + c0)) = uint4{w[0], w[1], w[2], w[3]};
  }
  sync();
}

// D2K_PREP_PHASES (a timing variant): thread 0 of every prep CTA sums clock64 deltas between the prep's barriers (its
// critical path: 0 the loads, 1 norms and cumsum, then build_T's barriers, the last phase the row tails) and the CTA's
// lifetime (globaltimer); the host prints the means and the kernel's time after the prep.
#if defined(D2K_PREP_PHASES) && !defined(D2K_CPU_EMU)
constexpr int kPrepPhases = 10;
__device__ unsigned long long g_prep_cycles[kPrepPhases];
__device__ unsigned long long g_prep_ns;     // CTA lifetimes summed
__device__ unsigned long long g_prep_ctas;   // CTAs that built a T
__device__ unsigned long long g_prep_items;  // (chunk, head) items built
#define D2K_PP_DECL                                            \
  long long pp_last = clock64();                               \
  unsigned long long pp_t0;                                    \
  int pp_i = 0;                                                \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(pp_t0));
#define D2K_PP()                                                                      \
  do {                                                                                \
    if (tid == 0) {                                                                   \
      const long long now = clock64();                                                \
      atomicAdd(&g_prep_cycles[pp_i < kPrepPhases ? pp_i : kPrepPhases - 1],          \
                static_cast<unsigned long long>(now - pp_last));                      \
      pp_last = now;                                                                  \
    }                                                                                 \
    ++pp_i;                                                                           \
  } while (0)
#define D2K_PP_ITEM                                            \
  do {                                                         \
    pp_i = 0;                                                  \
    if (tid == 0) atomicAdd(&g_prep_items, 1ull);              \
  } while (0)
#define D2K_PP_END                                             \
  do {                                                         \
    D2K_PP();                                                  \
    if (tid == 0) {                                            \
      unsigned long long pp_t1;                                \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(pp_t1)); \
      atomicAdd(&g_prep_ns, pp_t1 - pp_t0);                    \
      atomicAdd(&g_prep_ctas, 1ull);                           \
    }                                                          \
  } while (0)
#else
#define D2K_PP_DECL
#define D2K_PP() static_cast<void>(0)
#define D2K_PP_ITEM static_cast<void>(0)
#define D2K_PP_END static_cast<void>(0)
#endif

// One (chunk, head) item's T from its k tile Ks (rows past L zeroed and fenced for wgmma), gs and bs (zeros past L):
// k's norms, G's cumsum, build_T, the rows' tails. sync() is the CTA's barrier (it also clocks D2K_PREP_PHASES).
template <bool kPack, class Sync>  // kPack: T's blocks in A's matrix (Tm == As)
__device__ void prep_item(const bf16* Ks, const float* gs, const float* bs, float* Gc, float* rk, float* As, float* Tm,
                          float* Rs, bf16* Trow, long row_stride, int L, float eps, int tid, Sync sync) {
  const int lane = tid & 31, warp = tid >> 5;
  {
    float ss = partial_sumsq<8, true>(Ks, tid >> 1, 8 * (tid & 1));  // two threads per row
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    if ((tid & 1) == 0) rk[tid >> 1] = rsqrtf(ss + eps);
    if (warp == 0) {
      float G_even, G_odd;
      warp_cumsum64(gs, lane, G_even, G_odd);
      Gc[2 * lane] = G_even;
      Gc[2 * lane + 1] = G_odd;
    }
  }
  sync();
  build_T<kPrepThreads, true, false, kPack, kPrepWg>(
      Ks, bs, Gc, rk, As, Tm, Rs, Trow, row_stride, L, false, tid, sync, [](int, int) {});
  if (tid < L)  // the row's tail: G_t, beta_t, rk_t (build_T ended with a barrier; Gc, bs, rk are intact)
    *reinterpret_cast<float4*>(Trow + static_cast<long>(tid) * row_stride + kChunk) =
        make_float4(Gc[tid], bs[tid], rk[tid], 0.f);
}

// One CTA per (chunk, head); the k tile comes through mk (a tensor map over k).
__global__ void __launch_bounds__(kPrepThreads) prep_kernel(const float* __restrict__ g, const float* __restrict__ beta,
                                                            const int* __restrict__ tbl, bf16* __restrict__ Tg, int H,
                                                            float eps, int n_slots, const __grid_constant__ TmaMap mk) {
  D2K_DYN_SMEM(sm_raw);
  unsigned char* const sm = align1024(sm_raw);
  const int slot = blockIdx.x;
  if (slot >= tbl[0]) return;  // the whole CTA leaves together
  const int t0 = tbl[1 + slot], L = tbl[1 + n_slots + slot], h = blockIdx.y;
  const int tid = threadIdx.x;
  D2K_PP_DECL
  D2K_PP_ITEM;
  bf16* Ks = reinterpret_cast<bf16*>(sm + kPK);
  float* gs = reinterpret_cast<float*>(sm + kPG);
  float* bs = reinterpret_cast<float*>(sm + kPBeta);

  // The k tile by two tensor copies (cp.async of 16 KB per CTA, five CTAs per SM, waited on the load/store unit,
  // as the walk did), g and beta by cp.async.
  unsigned char* const bar = sm + kPBar;
  if (tid == 0) {
    mbar_init(bar, 1);
    mbar_arrive_expect_tx(bar, kTileBytes);
    tma_load_3d(Ks, mk, 0, h, t0, bar);
    tma_load_3d(Ks + kTileBytes / 4, mk, 64, h, t0, bar);
  }
  {
    const int row = tid & 63;
    const float* src = (tid < 64 ? g : beta) + static_cast<long>(t0 + imin(row, L - 1)) * H + h;
    cp_async4((tid < 64 ? gs : bs) + row, src, row < L);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();  // the barrier's initialization is visible
  mbar_wait(bar, 0);
  if (L < kChunk) {
    zero_swz_rows(sm + kPK, 1, L, tid, kPrepThreads);
    fence_proxy_async();  // the zeroed rows before wgmma reads them
    __syncthreads();
  }
  D2K_PP();
  prep_item<kPrepPack>(Ks, gs, bs, reinterpret_cast<float*>(sm + kPGc), reinterpret_cast<float*>(sm + kPRk),
                       reinterpret_cast<float*>(sm + kPA), reinterpret_cast<float*>(sm + kPT),
                       reinterpret_cast<float*>(sm + kPR), Tg + (static_cast<long>(t0) * H + h) * kTRow,
                       static_cast<long>(H) * kTRow, L, eps,
                       tid, [&] {
                         __syncthreads();
                         D2K_PP();
                       });
  D2K_PP_END;
}

// D2K_PREP_PERSIST: gridDim.x CTAs walk the items it = blockIdx.x + i gridDim.x (it = slot H + head) with two k
// tiles: item i + 1's tensor copies land while item i is built, item i + 2's are issued once item i's tile is dead.
// g and beta come through registers an item ahead. With kPrepAhead the chunk table's entries (first token, length)
// come through registers too, two items ahead, so that no thread waits on a table read at an item's start or end
// (the phase clocks of 2026-12-06 saw 3.7k cycles an item before its build, on an H100).
#ifdef D2K_PREP_AHEAD_OFF
constexpr bool kPrepAhead = false;  // a timing variant: the table read when each item needs it
#else
constexpr bool kPrepAhead = true;
#endif
// kPrepTStore: a whole chunk's T rows (and tails) are built in a 64 x 72 staging tile over its dead k tile, past the
// block products' scratch, and leave by one tensor store (mts) issued by thread 0, so no thread waits on 64 strided
// row stores; partial chunks (their rows past L are the next sequence's) keep the threads' stores. The k tile's next
// copy is then issued after the next item's first barrier, once the store has read the staging tile. The default
// since 2026-12-07 (H100, warm: the prep alone 0.560 -> 0.500 ms on 16seq_64k); -DD2K_PREP_TSTORE_OFF the old form.
#ifndef D2K_PREP_TSTORE_OFF
constexpr bool kPrepTStore = true;
#else
constexpr bool kPrepTStore = false;
#endif
constexpr int kQRsBytes = 3 * 16 * kRRow * 4;  // the block products' scratch at the k tile's start
static_assert(kQRsBytes % 128 == 0 && kQRsBytes + kChunk * kTRow * 2 <= kTileBytes, "T's staging tile fits past Rs");
__global__ void __launch_bounds__(kPrepThreads, kPrepPersistCtas) prep_persist_kernel(const float* __restrict__ g,
                                                                    const float* __restrict__ beta,
                                                                    const int* __restrict__ tbl,
                                                                    bf16* __restrict__ Tg, int H, float eps,
                                                                    int n_slots, const __grid_constant__ TmaMap mk,
                                                                    const __grid_constant__ TmaMap mts) {
  D2K_DYN_SMEM(sm_raw);
  unsigned char* const sm = align1024(sm_raw);
  const int n_items = tbl[0] * H, stride = static_cast<int>(gridDim.x);
  int it = blockIdx.x;
  if (it >= n_items) return;  // the whole CTA leaves together
  const int tid = threadIdx.x;
  D2K_PP_DECL
  float* gs = reinterpret_cast<float*>(sm + kQG);
  float* bs = reinterpret_cast<float*>(sm + kQBeta);
  auto k_tile = [&](int s) { return reinterpret_cast<bf16*>(sm + kQK + s * kTileBytes); };
  auto bar = [&](int s) { return sm + kQBar + 8 * s; };
  // An item's table entries (first token, length; zeros past the last item).
  struct Entry {
    int t0, L;
  };
  auto entry = [=](int item) {
    Entry e{0, 0};
    if (item < n_items) e = Entry{tbl[1 + item / H], tbl[1 + n_slots + item / H]};
    return e;
  };
  auto issue = [&](int item, int t0, int s) {  // thread 0
    mbar_arrive_expect_tx(bar(s), kTileBytes);
    tma_load_3d(k_tile(s), mk, 0, item % H, t0, bar(s));
    tma_load_3d(k_tile(s) + kTileBytes / 4, mk, 64, item % H, t0, bar(s));
  };
  auto load_gb = [=](int item, Entry e) {  // g (threads 0-63) or beta (64-127) of row tid % 64, zero past the end
    const int row = tid & 63;
    const float* src = tid < 64 ? g : beta;
    float x = 0.f;
    if (row < e.L) x = src[static_cast<long>(e.t0 + row) * H + item % H];
    return x;
  };
  Entry e_cur = entry(it), e_next = entry(it + stride), e_after{0, 0};
  int pending = -1, pending_t0 = 0, pending_slot = 0;  // kPrepTStore: the k copy thread 0 issues after a barrier
  if (tid == 0) {
    mbar_init(bar(0), 1);
    mbar_init(bar(1), 1);
    issue(it, e_cur.t0, 0);
    if (it + stride < n_items) issue(it + stride, e_next.t0, 1);
  }
  float gb = load_gb(it, e_cur);
  __syncthreads();  // the barriers' initialization is visible
  for (int i = 0; it < n_items; ++i, it += stride) {
    D2K_PP_ITEM;
    const int s = i & 1, h = it % H;
    if (!kPrepAhead) e_cur = entry(it), e_next = entry(it + stride);
    const int t0 = e_cur.t0, L = e_cur.L;
    if (kPrepAhead) e_after = entry(it + 2 * stride);  // used at the item's end and by the next item
    (tid < 64 ? gs : bs)[tid & 63] = gb;
    if (it + stride < n_items) gb = load_gb(it + stride, e_next);
    bf16* Ks = k_tile(s);
    mbar_wait(bar(s), (i >> 1) & 1);
    if (L < kChunk) {
      zero_swz_rows(reinterpret_cast<unsigned char*>(Ks), 1, L, tid, kPrepThreads);
      fence_proxy_async();  // the zeroed rows before wgmma reads them
    }
    __syncthreads();  // gs, bs and the zeroed rows are visible
    if (kPrepTStore && tid == 0 && pending >= 0) {
      bulk_wait_read();  // the last item's store has read its staging tile (in the slot this copy overwrites)
      issue(pending, pending_t0, pending_slot);
      pending = -1;
    }
    D2K_PP();
    float* As = reinterpret_cast<float*>(sm + kQA);
    const bool tstore = kPrepTStore && L == kChunk;
    bf16* const staging = reinterpret_cast<bf16*>(reinterpret_cast<unsigned char*>(Ks) + kQRsBytes);
    prep_item<true>(Ks, gs, bs, reinterpret_cast<float*>(sm + kQGc), reinterpret_cast<float*>(sm + kQRk), As, As,
                    reinterpret_cast<float*>(Ks), tstore ? staging : Tg + (static_cast<long>(t0) * H + h) * kTRow,
                    tstore ? kTRow : static_cast<long>(H) * kTRow, L, eps, tid, [&] {
                      __syncthreads();
                      D2K_PP();
                    });
    // Ks (the block products' scratch by now) goes back to the tensor copies: every thread's generic writes first;
    // the barrier also guards gs, bs, Gc and rk (read by the tails) against the next item's writes.
    fence_proxy_async();
    __syncthreads();
    if (!kPrepAhead) e_after = entry(it + 2 * stride);
    if (tid == 0 && tstore) tma_store_3d(mts, 0, h, t0, staging);
    if (tid == 0 && it + 2 * stride < n_items) {
      if (kPrepTStore)
        pending = it + 2 * stride, pending_t0 = e_after.t0, pending_slot = s;
      else
        issue(it + 2 * stride, e_after.t0, s);
    }
    e_cur = e_next;
    e_next = e_after;
  }
  if (kPrepTStore && tid == 0) bulk_wait_all();  // the stores are done before the CTA's shared memory goes
  D2K_PP_END;
}

// ---------------------------------------------------------------- kernel 3: the walk per (sequence, head)

// A-operand fragment (16 x 16, one k-step) from two adjacent accumulator tiles (16 x 8 each), rounded to bf16.
__device__ __forceinline__ void acc_to_a(u32 (&a)[4], const float (&x0)[4], const float (&x1)[4]) {
  a[0] = pack_bf16(x0[0], x0[1]);
  a[1] = pack_bf16(x0[2], x0[3]);
  a[2] = pack_bf16(x1[0], x1[1]);
  a[3] = pack_bf16(x1[2], x1[3]);
}

// The state warps' products of one chunk step, shared by walk_kernel and walk_ws_kernel. The tiles' layouts come as
// functors: ix(row, column) is the element offset of a 64 x 128 q, k or v tile, tix of the 64 x 64 T or P tile.
// ldmatrix.x4 lane offsets (row, column) into a tile indexed [row][column]: a_ for the A operand of an [m][k]
// tile, and with .trans for two B operands (n-tiles) of a [k][n] tile; bn_ for two B operands of an [n][k] tile,
// and with .trans for two accumulator-layout tiles of V^T.
__device__ __forceinline__ int a_row_of(int lane) { return (lane & 7) + 8 * ((lane >> 3) & 1); }
__device__ __forceinline__ int a_col_of(int lane) { return 8 * (lane >> 4); }
__device__ __forceinline__ int bn_row_of(int lane) { return (lane & 7) + 8 * (lane >> 4); }
__device__ __forceinline__ int bn_col_of(int lane) { return 8 * ((lane >> 3) & 1); }

// kh += S_0 K^T and ot += S_0 Q^T (both [v][t]) on mma.sync, the state fragments ht as A operands.
template <class Ix>
__device__ __forceinline__ void s0_products(const float (&ht)[16][4], const bf16* Ks, const bf16* Qs, Ix ix,
                                            float (&kh)[8][4], float (&ot)[8][4], int lane) {
  const int bn_row = bn_row_of(lane), bn_col = bn_col_of(lane);
  for (int ks = 0; ks < 8; ++ks) {
    u32 a[4];
    acc_to_a(a, ht[2 * ks], ht[2 * ks + 1]);
    for (int np = 0; np < 4; ++np) {
      u32 bk[4], bq[4];
      ldsm_x4(bk, Ks + ix(16 * np + bn_row, 16 * ks + bn_col));
      mma_bf16(kh[2 * np], a, bk[0], bk[1]);
      mma_bf16(kh[2 * np + 1], a, bk[2], bk[3]);
      ldsm_x4(bq, Qs + ix(16 * np + bn_row, 16 * ks + bn_col));
      mma_bf16(ot[2 * np], a, bq[0], bq[1]);
      mma_bf16(ot[2 * np + 1], a, bq[2], bq[3]);
    }
  }
}

// y = beta_t (v_t - gamma_t rk_t kh_t), in place of kh ([v][t]); V (columns v0 ..) arrives transposed through
// ldmatrix.trans; fy = beta_t gamma_t rk_t.
template <class Ix>
__device__ __forceinline__ void y_from_v(float (&kh)[8][4], const bf16* Vs, Ix ix, int v0, const float* bs,
                                         const float* fy, int lane) {
  const int tq = lane & 3;
  for (int j = 0; j < 4; ++j) {
    u32 vt[4];
    ldsm_x4_t(vt, Vs + ix(16 * j + bn_row_of(lane), v0 + bn_col_of(lane)));
    for (int half = 0; half < 2; ++half) {
      const int n = 2 * j + half;
      const u32 lo = vt[2 * half], hi = vt[2 * half + 1];  // rows gq and gq + 8
      const float vv[4] = {bf_lo(lo), bf_hi(lo), bf_lo(hi), bf_hi(hi)};
      const int t = 8 * n + 2 * tq;
      const float2 fb = *reinterpret_cast<const float2*>(bs + t), fk = *reinterpret_cast<const float2*>(fy + t);
      kh[n][0] = fb.x * vv[0] - fk.x * kh[n][0];
      kh[n][1] = fb.y * vv[1] - fk.y * kh[n][1];
      kh[n][2] = fb.x * vv[2] - fk.x * kh[n][2];
      kh[n][3] = fb.y * vv[3] - fk.y * kh[n][3];
    }
  }
}

// acc[v][t] += sum_i x[v][i] M[t][i] for a lower-triangular 64 x 64 M (T or P; the blocks above are skipped).
// acc += x M^T per warpgroup (x: this warp's 16 rows x 64 columns as accumulators; M: a 64 x 64 bf16 tile in swz's
// layout, 1024-aligned, rows = acc's columns): four m64n64k16 wgmma with M K-major. The whole tile is multiplied, so
// a triangular M must hold zeros above its diagonal.
__device__ __forceinline__ void wgmma_tile_product(float (&acc)[8][4], const float (&x)[8][4], const bf16* M) {
  u32 a[4][4];
  for (int ks = 0; ks < 4; ++ks) acc_to_a(a[ks], x[2 * ks], x[2 * ks + 1]);
  wgmma_fence();
  for (int ks = 0; ks < 4; ++ks) wgmma_m64n64k16(acc, a[ks], sw128_desc(M + 16 * ks));
  wgmma_commit_and_wait();
  for (int ks = 0; ks < 4; ++ks) reg_fence(a[ks]);
  reg_fence(acc);
}

template <class Ix>
__device__ __forceinline__ void tril_product(float (&acc)[8][4], const float (&x)[8][4], const bf16* M, Ix tix,
                                             int lane) {
  const int bn_row = bn_row_of(lane), bn_col = bn_col_of(lane);
  for (int ks = 0; ks < 4; ++ks) {
    u32 a[4];
    acc_to_a(a, x[2 * ks], x[2 * ks + 1]);
    for (int np = ks; np < 4; ++np) {
      u32 b[4];
      ldsm_x4(b, M + tix(16 * np + bn_row, 16 * ks + bn_col));
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// kTSubst: vn[v][t] = v_new^T from y (this warp's 16 rows of V x 64 tokens) and M (T_ii on the diagonal, -A_ij below
// it; row t = token): block i of v_new is (y_i + sum_{j < i} v_new_j M_ij^T) M_ii^T, v_new_j rounded to bf16 as an
// A operand. Rows of M past a chunk's end may hold another chunk's rows: they reach only v_new's columns past the
// end (M_ii and M_ij are lower triangular in t), which the callers keep out of the state and the output.
template <class Ix>
__device__ __forceinline__ void block_subst(float (&vn)[8][4], const float (&y)[8][4], const bf16* M, Ix tix,
                                            int lane) {
  const int bn_row = bn_row_of(lane), bn_col = bn_col_of(lane);
  u32 va[3][4];  // v_new's first three blocks as A fragments
  for (int i = 0; i < 4; ++i) {
    float r[2][4];
    for (int e = 0; e < 4; ++e) r[0][e] = y[2 * i][e], r[1][e] = y[2 * i + 1][e];
    for (int j = 0; j < i; ++j) {
      u32 b[4];
      ldsm_x4(b, M + tix(16 * i + bn_row, 16 * j + bn_col));
      mma_bf16(r[0], va[j], b[0], b[1]);
      mma_bf16(r[1], va[j], b[2], b[3]);
    }
    u32 a[4], b[4];
    acc_to_a(a, r[0], r[1]);
    ldsm_x4(b, M + tix(16 * i + bn_row, 16 * i + bn_col));
    for (int e = 0; e < 4; ++e) vn[2 * i][e] = vn[2 * i + 1][e] = 0.f;
    mma_bf16(vn[2 * i], a, b[0], b[1]);
    mma_bf16(vn[2 * i + 1], a, b[2], b[3]);
    if (i < 3) acc_to_a(va[i], vn[2 * i], vn[2 * i + 1]);
  }
}

// x[v][t] *= f[t] (per-token factors on the columns of an accumulator).
__device__ __forceinline__ void scale_cols(float (&x)[8][4], const float* f, int lane) {
  for (int n = 0; n < 8; ++n) {
    const float2 c = *reinterpret_cast<const float2*>(f + 8 * n + 2 * (lane & 3));
    x[n][0] *= c.x;
    x[n][1] *= c.y;
    x[n][2] *= c.x;
    x[n][3] *= c.y;
  }
}

// ht += vs K on mma.sync (vs: v_new with its columns scaled), K through ldmatrix.trans.
template <class Ix>
__device__ __forceinline__ void state_update(float (&ht)[16][4], const float (&vs)[8][4], const bf16* Ks, Ix ix,
                                             int lane) {
  const int a_row = a_row_of(lane), a_col = a_col_of(lane);
  for (int ks = 0; ks < 4; ++ks) {
    u32 a[4];
    acc_to_a(a, vs[2 * ks], vs[2 * ks + 1]);
    for (int np = 0; np < 8; ++np) {
      u32 bk[4];
      ldsm_x4_t(bk, Ks + ix(16 * ks + a_row, 16 * np + a_col));
      mma_bf16(ht[2 * np], a, bk[0], bk[1]);
      mma_bf16(ht[2 * np + 1], a, bk[2], bk[3]);
    }
  }
}

// D2K_PHASES (a timing variant for diagnose.sh): every warp's lane 0 sums clock64 deltas between the walk's phase
// boundaries over its chunks; the host prints the mean cycles per (warp, chunk) of each phase after the walk.
#if defined(D2K_PHASES) && !defined(D2K_CPU_EMU)
constexpr int kPhases = 11;
constexpr int kPhWarps = 12;  // the warp-specialized walk's producer warps are 8-11
__device__ unsigned long long g_phase_cycles[kPhWarps][kPhases];  // by warp of the CTA
__device__ unsigned long long g_phase_steps[kPhWarps];             // chunks summed, by warp
__device__ unsigned long long g_cta_ns;       // CTA wall time summed (globaltimer)
__device__ unsigned long long g_cta_chunks;   // chunks summed over CTAs
#define D2K_PH_DECL                     \
  long long ph_acc[kPhases] = {};       \
  long long ph_last = clock64();        \
  unsigned long long ph_t0;             \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ph_t0));
#define D2K_PH(i)                     \
  do {                                \
    const long long now = clock64();  \
    ph_acc[i] += now - ph_last;       \
    ph_last = now;                    \
  } while (0)
#define D2K_PH_END(chunks)                                                                     \
  do {                                                                                         \
    if (lane == 0) {                                                                           \
      for (int i = 0; i < kPhases; ++i)                                                        \
        atomicAdd(&g_phase_cycles[warp][i], static_cast<unsigned long long>(ph_acc[i]));       \
      atomicAdd(&g_phase_steps[warp], static_cast<unsigned long long>(chunks));                \
    }                                                                                          \
    if (tid == 0) {                                                                            \
      unsigned long long ph_t1;                                                                \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ph_t1));                                \
      atomicAdd(&g_cta_ns, ph_t1 - ph_t0);                                                     \
      atomicAdd(&g_cta_chunks, static_cast<unsigned long long>(chunks));                       \
    }                                                                                          \
  } while (0)
#else
#define D2K_PH_DECL
#define D2K_PH(i) static_cast<void>(0)
#define D2K_PH_END(chunks) static_cast<void>(0)
#endif

// NW warps per CTA; the CTA owns state rows [16 NW j, 16 NW (j + 1)) of V, j = blockIdx.x % (8 / NW): NW < 8 only
// when there are too few (sequence, head) pairs to fill the GPU. kFuseT: build each chunk's T here (build_T, on the
// chain) instead of reading the prep's.
template <int NW, bool kFuseT>
__global__ void __launch_bounds__(32 * NW, 1)
    walk_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                const float* __restrict__ g, const float* __restrict__ beta, const int* __restrict__ cu,
                const int* __restrict__ order, const bf16* __restrict__ Tg, bf16* __restrict__ o, int H,
                float scale, float eps, const __grid_constant__ TmaMap mq, const __grid_constant__ TmaMap mk,
                const __grid_constant__ TmaMap mv, const __grid_constant__ TmaMap mT) {
  D2K_DYN_SMEM(sm_raw);
  unsigned char* const sm = align1024(sm_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
  constexpr int kThreads = 32 * NW, kSplit = 8 / NW;
  const int pair = blockIdx.x / kSplit, vbase = (blockIdx.x % kSplit) * 16 * NW;
  const int h = pair % H, b = order[pair / H];
  const int t_beg = cu[b], t_end = cu[b + 1];
  const int n_chunks = (t_end - t_beg + kChunk - 1) / kChunk;
  const long rs = static_cast<long>(H) * kDim;
  const int v0 = vbase + 16 * warp;  // this warp's state rows (V)
  bf16* Ps = reinterpret_cast<bf16*>(sm + kWP);
  bf16* Os = reinterpret_cast<bf16*>(sm + kWO);
  float* Gc = reinterpret_cast<float*>(sm + kWG);   // G_t
  float* fq = reinterpret_cast<float*>(sm + kWFq);  // scale rq_t
  float* rk = reinterpret_cast<float*>(sm + kWRk);  // rk_t
  float* fy = reinterpret_cast<float*>(sm + kWFy);  // beta_t gamma_t rk_t
  float* fo = reinterpret_cast<float*>(sm + kWFo);  // scale gamma_t rq_t
  float* fs = reinterpret_cast<float*>(sm + kWFs);  // gamma_C / gamma_t rk_t
  float* eC = reinterpret_cast<float*>(sm + kWEc);  // gamma_C
  const int a_row = a_row_of(lane), a_col = a_col_of(lane), bn_row = bn_row_of(lane), bn_col = bn_col_of(lane);

  // kTma (the default build): a stage arrives by seven tensor copies on the stage's mbarrier, issued by thread 0:
  // q, k and v as two swizzled 64-column boxes each (swz), T with the prep's per-token factors in its rows' tails.
  // The variants keep cp.async and toff's core-matrix layout (wgmma's descriptors read it).
  constexpr bool kTma = !kFuseT && !kWgmma;
  auto tix = [](int r, int c) { return kTma ? swz(r, c) : toff(r, c); };
  auto trow = [](int r, int c) { return r * kTRowBf + c; };  // T and P: rows of 144 B
  unsigned char* const bars = sm + kWBar;  // stage s's mbarrier: bars + 8 s
  if constexpr (kTma) {
    if (tid == 0) {
      mbar_init(bars, 1);
      mbar_init(bars + 8, 1);
    }
    __syncthreads();
  }
  auto load_stage = [&](int c, int s) {
    const int t0 = t_beg + c * kChunk, L = imin(kChunk, t_end - t0);
    unsigned char* st = sm + s * kStageBytes;
    if constexpr (kTma) {
      // Rows past the sequence's end bring the next sequence's tokens (zeros past the tensor's end); the wait
      // zeroes them.
      if (tid == 0) {
        unsigned char* bar = bars + 8 * s;
        mbar_arrive_expect_tx(bar, 3 * kTileBytes + kChunk * kTRow * 2);
        for (int half = 0; half < 2; ++half) {
          tma_load_3d(st + kStQ + half * (kTileBytes / 2), mq, 64 * half, h, t0, bar);
          tma_load_3d(st + kStK + half * (kTileBytes / 2), mk, 64 * half, h, t0, bar);
          tma_load_3d(st + kStV + half * (kTileBytes / 2), mv, 64 * half, h, t0, bar);
        }
        tma_load_3d(st + kStT, mT, 0, h, t0, bar);
      }
    } else {
      for (int i = tid; i < 3 * 1024; i += kThreads) {
        const int which = i >> 10;
        int row, col;
        tile_chunk(i & 1023, row, col);
        const bf16* src = (which == 0 ? q : which == 1 ? k : v) + (t0 + imin(row, L - 1)) * rs + h * kDim + col;
        cp_async16(reinterpret_cast<bf16*>(st + which * kTileBytes) + toff(row, col), src, row < L);
      }
      for (int i = tid; i < (kFuseT ? 0 : 512); i += kThreads) {
        const int row = i >> 3, col = i & 7;
        cp_async16(reinterpret_cast<bf16*>(st + kStT) + row * kTRowBf + col * 8,
                   Tg + (static_cast<long>(t0 + imin(row, L - 1)) * H + h) * kTRow + col * 8, row < L);
      }
      for (int i = tid; i < 128; i += kThreads) {
        const int row = i & 63;
        const float* src = (i < 64 ? g : beta) + static_cast<long>(t0 + imin(row, L - 1)) * H + h;
        cp_async4(reinterpret_cast<float*>(st + (i < 64 ? kStG : kStBeta)) + row, src, row < L);
      }
      cp_async_commit();
    }
  };

  float ht[16][4];  // S[v0 + gq (+8)][8n + 2tq (+1)], fp32
  for (int n = 0; n < 16; ++n)
    for (int e = 0; e < 4; ++e) ht[n][e] = 0.f;

  if (n_chunks > 0) load_stage(0, 0);
  D2K_PH_DECL
  for (int c = 0; c < n_chunks; ++c) {
    const int s = c & 1;
    const int t0 = t_beg + c * kChunk, L = imin(kChunk, t_end - t0);
    if constexpr (kTma) {
      mbar_wait(bars + 8 * s, (c >> 1) & 1);
      if (L < kChunk) {  // rows past the end: zeros (a stale NaN would spread through the products)
        unsigned char* st = sm + s * kStageBytes;
        zero_swz_rows(st + kStQ, 3, L, tid, kThreads);
        for (int i = tid; i < (kChunk - L) * 9; i += kThreads)
          *reinterpret_cast<uint4*>(st + kStT + (L + i / 9) * kTRow * 2 + (i % 9) * 16) = uint4{0u, 0u, 0u, 0u};
      }
    } else {
      cp_async_wait_all();
    }
    D2K_PH(0);  // 0: the stage's own wait
    // The async proxy (wgmma's reads; the bulk copies' next writes into these bytes) after this chunk's generic
    // accesses: every thread fences before the barrier.
    if constexpr (kWgmma || kTma) fence_proxy_async();
    __syncthreads();  // stage s has landed for every thread; the previous chunk is done with P, O and the factors
    D2K_PH(1);  // 1: the barrier
    if (c + 1 < n_chunks) load_stage(c + 1, s ^ 1);
    D2K_PH(2);  // 2: issuing the next stage
    const unsigned char* st = sm + s * kStageBytes;
    const bf16* Qs = reinterpret_cast<const bf16*>(st + kStQ);
    const bf16* Ks = reinterpret_cast<const bf16*>(st + kStK);
    const bf16* Vs = reinterpret_cast<const bf16*>(st + kStV);
    bf16* Ts = reinterpret_cast<bf16*>(sm + s * kStageBytes + kStT);
    const float* bs = reinterpret_cast<const float*>(st + kStBeta);
    if constexpr (kTma) {
      // Four threads per token t (warp w: t = 8w .. 8w + 7, then + 8 NW): q's norm here; G, beta and rk from the
      // prep, in T's row tails (zeros past the end).
      const float* tails = reinterpret_cast<const float*>(Ts + kChunk);  // row t: tails[t * kTRow / 2 + 0..2]
      const float GC = tails[(L - 1) * (kTRow / 2)];
      float* bw = reinterpret_cast<float*>(sm + s * kStageBytes + kStBeta);
      for (int tb = warp; tb < 8; tb += NW) {
        const int t = 8 * tb + (lane >> 2);
        float sq = partial_sumsq<4, true>(Qs, t, 4 * (lane & 3));
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2);
        if ((lane & 3) == 0) {
          const float4 f = *reinterpret_cast<const float4*>(tails + t * (kTRow / 2));  // G_t, beta_t, rk_t, 0
          const float rqt = rsqrtf(sq + eps), egt = __expf(f.x);
          Gc[t] = f.x;
          fq[t] = scale * rqt;
          rk[t] = f.z;
          fy[t] = f.y * egt * f.z;
          fo[t] = scale * egt * rqt;
          fs[t] = __expf(GC - f.x) * f.z;
          bw[t] = f.y;
          if (t == 0) eC[0] = __expf(GC);
        }
      }
    } else {
      // Four threads per token t (warp w: t = 8w .. 8w + 7, then + 8 NW); every warp scans the 64 log decays itself.
      float G_even, G_odd;
      warp_cumsum64(reinterpret_cast<const float*>(st + kStG), lane, G_even, G_odd);
      const float GC = pick_cumsum(G_even, G_odd, L - 1);
      for (int tb = warp; tb < 8; tb += NW) {
        const int t = 8 * tb + (lane >> 2);
        const int part = 4 * (lane & 3);
        float sq = partial_sumsq<4>(Qs, t, part), sk = partial_sumsq<4>(Ks, t, part);
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2);
        sk += __shfl_xor_sync(0xffffffffu, sk, 1);
        sk += __shfl_xor_sync(0xffffffffu, sk, 2);
        const float Gt = pick_cumsum(G_even, G_odd, t);
        if ((lane & 3) == 0) {
          const float rqt = rsqrtf(sq + eps), rkt = rsqrtf(sk + eps), egt = __expf(Gt);
          Gc[t] = Gt;
          fq[t] = scale * rqt;
          rk[t] = rkt;
          fy[t] = bs[t] * egt * rkt;
          fo[t] = scale * egt * rqt;
          fs[t] = __expf(GC - Gt) * rkt;
          if (t == 0) eC[0] = __expf(GC);
        }
      }
    }
    D2K_PH(3);  // 3: the factors
    __syncthreads();
    D2K_PH(4);  // 4: their barrier

    // P = scale (q.k) rq_t rk_i exp(G_t - G_i) for i <= t, in 8 tiles: tile p holds rows 16(p/2).., columns
    // 32(p%2).., and warp w computes tiles w, w + NW, ...
    for (int p = warp; p < 8; p += NW) {
      const int mt = p >> 1, nb = 4 * (p & 1);
      float acc[4][4] = {};
      if (8 * nb <= 16 * mt + 15) {
        for (int ks = 0; ks < 8; ++ks) {
          u32 a[4];
          ldsm_x4(a, Qs + tix(16 * mt + a_row, 16 * ks + a_col));
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            if (8 * nb + 16 * np > 16 * mt + 15) continue;  // both n-tiles above the diagonal: P is zero there
            u32 bb[4];
            ldsm_x4(bb, Ks + tix(8 * nb + 16 * np + bn_row, 16 * ks + bn_col));
            mma_bf16(acc[2 * np], a, bb[0], bb[1]);
            mma_bf16(acc[2 * np + 1], a, bb[2], bb[3]);
          }
        }
      }
      for (int n = 0; n < 4; ++n)
        for (int hi = 0; hi < 2; ++hi) {
          const int t = 16 * mt + gq + 8 * hi, i = 8 * (nb + n) + 2 * tq;
          const float f = fq[t], Gt = Gc[t];
          const float2 ri = *reinterpret_cast<const float2*>(rk + i), Gi = *reinterpret_cast<const float2*>(Gc + i);
          const float p0 = i <= t ? acc[n][2 * hi] * f * ri.x * __expf(Gt - Gi.x) : 0.f;
          const float p1 = i + 1 <= t ? acc[n][2 * hi + 1] * f * ri.y * __expf(Gt - Gi.y) : 0.f;
          *reinterpret_cast<u32*>(Ps + t * kTRowBf + i) = pack_bf16(p0, p1);
        }
    }

    D2K_PH(5);  // 5: P
    if constexpr (kFuseT)
      build_T<kThreads, false>(Ks, bs, Gc, rk, reinterpret_cast<float*>(sm + kWAs),
                               reinterpret_cast<float*>(sm + kWTm), reinterpret_cast<float*>(sm + kWRs), Ts, kTRowBf,
                               L, true, tid, [] { __syncthreads(); }, [](int, int) {});

    // kh = S_0 K^T and ot = S_0 Q^T (both [v][t]), from the state fragments as A operands.
    float kh[8][4], ot[8][4];
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) kh[n][e] = ot[n][e] = 0.f;
    if constexpr (kWgmma && NW >= 4) {
      // Per warpgroup (64 state rows): K and Q read once from shared memory by the tensor cores, not once per warp.
      // Four k-steps per batch: their A fragments stay live until the wait.
      for (int kb = 0; kb < 8; kb += 4) {
        u32 a[4][4];
        for (int j = 0; j < 4; ++j) acc_to_a(a[j], ht[2 * (kb + j)], ht[2 * (kb + j) + 1]);
        wgmma_fence();
        for (int j = 0; j < 4; ++j) {
          wgmma_m64n64k16(kh, a[j], kmajor_desc(Ks + toff(0, 16 * (kb + j))));
          wgmma_m64n64k16(ot, a[j], kmajor_desc(Qs + toff(0, 16 * (kb + j))));
        }
        wgmma_commit_and_wait();
        for (int j = 0; j < 4; ++j) reg_fence(a[j]);
        reg_fence(kh);
        reg_fence(ot);
      }
    } else {
      s0_products(ht, Ks, Qs, tix, kh, ot, lane);
    }

    D2K_PH(6);  // 6: S_0 K^T and S_0 Q^T (and build_T with kFuseT)
    y_from_v(kh, Vs, tix, v0, bs, fy, lane);
    float vn[8][4];  // v_new = T y
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) vn[n][e] = 0.f;
    if constexpr (kTSubst)
      block_subst(vn, kh, Ts, trow, lane);
    else
      tril_product(vn, kh, Ts, trow, lane);
    scale_cols(ot, fo, lane);  // the output's h_0 term: scale gamma_t rq_t (S_0 q_t)
    D2K_PH(7);  // 7: y, v_new, o's h_0 term
    __syncthreads();  // P complete
    D2K_PH(8);  // 8: the barrier
    tril_product(ot, vn, Ps, trow, lane);  // o += v_new P^T
    // S = gamma_C S_0 + (v_new * gamma_C / gamma_i * rk_i) K
    const float decay = eC[0];
    for (int n = 0; n < 16; ++n)
      for (int e = 0; e < 4; ++e) ht[n][e] *= decay;
    scale_cols(vn, fs, lane);
    state_update(ht, vn, Ks, tix, lane);

    D2K_PH(9);  // 9: o += v_new P^T and the state update
    // o through shared memory ([t][v]) for 16-byte global stores.
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int t = 8 * n + 2 * tq + (e & 1), vv = v0 + gq + 8 * (e >> 1);
        Os[t * kRowBf + vv] = __float2bfloat16_rn(ot[n][e]);
      }
    __syncthreads();
    for (int i = tid; i < L * 2 * NW; i += kThreads) {  // this CTA's 16 NW columns: 2 NW vectors per row
      const int row = i / (2 * NW), col = vbase / 8 + i % (2 * NW);
      *reinterpret_cast<uint4*>(o + (t0 + row) * rs + h * kDim + col * 8) =
          *reinterpret_cast<const uint4*>(Os + row * kRowBf + col * 8);
    }
    D2K_PH(10);  // 10: o staged, barrier, stored
  }
  D2K_PH_END(n_chunks);
}

// ---------------------------------------------------------------- kernel 3b: the warp-specialized walk (D2K_WS)

// P, T and the per-token factors do not depend on the state: a producer warpgroup (warps 8-11) builds them for
// chunk c + 1 while the eight state warps (0-7) walk chunk c, so the prep kernel, T's round trip through HBM and
// the walk's P and factor phases leave the state warps' step. Buffers: q and k in three slots (the producer reads
// them a chunk ahead of the state warps), v in two, T, P and the factors in two; all mbarrier-driven.
// Shared memory layout (bytes; tiles in swz's layout, T and P in its first 64-column half).
constexpr int kHalfTile = kChunk * 64 * 2;            // 8192: T or P
constexpr int kQkBytes = 2 * kTileBytes + (kWsPrepT ? kHalfTile : 0);  // q, then k (then the prep's T)
constexpr int kXQk = 0, kXV = 3 * kQkBytes;           // three q/k slots, two v slots
constexpr int kXBuf = kXV + 2 * kTileBytes;           // two buffers of (T,) P and the factors
constexpr int kBT = 0, kBP = kWsPrepT ? 0 : kHalfTile, kBF = kBP + kHalfTile;
constexpr int kBufBytes = kBF + 8 * 256;              // factors: G, fq, rk, beta, fy, fo, fs (64 floats each), gamma_C
constexpr int kXO = kXBuf + 2 * kBufBytes;            // per state warp: its 64 x 16 slice of o, staged
constexpr int kXA = kXO + 8 * kChunk * 16 * 2;        // the producer's fp32 scratch of build_T: A, T, block products
constexpr int kXT = kXA + kChunk * kFRow * 4, kXR = kXT + kChunk * kFRow * 4;
constexpr int kXBar = kWsPrepT ? kXA : kXR + 3 * 16 * kRRow * 4;  // mbarriers: q/k full x3, v full x2, ready x2, free x2
constexpr int kWsSmem = kXBar + 128 + 1024;           // + room to align the base to 1024 bytes
static_assert(kWsSmem <= 232448, "the warp-specialized walk must fit one SM's shared memory");
static_assert(kXV % 1024 == 0 && kXBuf % 1024 == 0 && kBufBytes % 1024 == 0 && kQkBytes % 1024 == 0,
              "tensor copy boxes 1024-aligned");
constexpr int kWsThreads = 384;
// Registers: 168 per thread at launch (65536 / 384); the state warps take kRegC, the producer gives back to kRegP,
// with 2 kRegC + kRegP = 3 x 168.
// ptxas (CUDA 13.0): no spills with 208 / 88 (D2K_WS_WGMMA=1: 72 B, =2: 40 B); D2K_WS_PREP's producer (P by wgmma,
// eight k-steps in flight) spilled 16-40 B at 88 and 104, none at 120, nor do the state warps at 192.
constexpr int kRegC = kWsPrepT ? 192 : 208, kRegP = kWsPrepT ? 120 : 88;
#ifdef D2K_P_BATCH
constexpr int kPBatch = D2K_P_BATCH;  // a timing variant: 4 or 8 (the default)
#else
constexpr int kPBatch = 8;            // D2K_WS_PREP: P's k-steps per wgmma wait
#endif
static_assert(8 % kPBatch == 0, "P's k-steps come in equal batches");
static_assert(2 * kRegC + kRegP == 3 * 168, "setmaxnreg counts must sum to the launch's");
constexpr int kBarC = 1, kBarP = 2;  // named barriers of the state warps (256 threads) and the producer (128)

__global__ void __launch_bounds__(kWsThreads, 1)
    walk_ws_kernel(const float* __restrict__ g, const float* __restrict__ beta, const int* __restrict__ cu,
                   const int* __restrict__ order, bf16* __restrict__ o, int H, float scale, float eps,
                   const __grid_constant__ TmaMap mq, const __grid_constant__ TmaMap mk,
                   const __grid_constant__ TmaMap mv, const __grid_constant__ TmaMap mT,
                   const bf16* __restrict__ Tg) {
  D2K_DYN_SMEM(sm_raw);
  unsigned char* const sm = align1024(sm_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.x % H, b = order[blockIdx.x / H];
  const int t_beg = cu[b], t_end = cu[b + 1];
  const int n_chunks = (t_end - t_beg + kChunk - 1) / kChunk;
  unsigned char* const bars = sm + kXBar;
  auto qk_full = [&](int c) { return bars + 8 * (c % 3); };       // chunk c's q and k landed
  auto v_full = [&](int c) { return bars + 24 + 8 * (c & 1); };   // chunk c's v landed
  auto ready = [&](int c) { return bars + 40 + 8 * (c & 1); };    // chunk c's T, P, factors written (128 arrivals)
  auto freed = [&](int c) { return bars + 56 + 8 * (c & 1); };    // the state warps are done with chunk c's buffer
  auto issue_qk = [&](int c) {
    unsigned char* st = sm + kXQk + (c % 3) * kQkBytes;
    const int t0 = t_beg + c * kChunk;
    mbar_arrive_expect_tx(qk_full(c), kQkBytes);
    for (int half = 0; half < 2; ++half) {
      tma_load_3d(st + half * (kTileBytes / 2), mq, 64 * half, h, t0, qk_full(c));
      tma_load_3d(st + kTileBytes + half * (kTileBytes / 2), mk, 64 * half, h, t0, qk_full(c));
    }
    if constexpr (kWsPrepT) tma_load_3d(st + 2 * kTileBytes, mT, 0, h, t0, qk_full(c));  // T's 64 columns
  };
  auto issue_v = [&](int c) {
    unsigned char* st = sm + kXV + (c & 1) * kTileBytes;
    mbar_arrive_expect_tx(v_full(c), kTileBytes);
    for (int half = 0; half < 2; ++half)
      tma_load_3d(st + half * (kTileBytes / 2), mv, 64 * half, h, t_beg + c * kChunk, v_full(c));
  };
  if (tid == 0) {
    for (int i = 0; i < 5; ++i) mbar_init(bars + 8 * i, 1);
    mbar_init(bars + 40, 128);
    mbar_init(bars + 48, 128);
    mbar_init(bars + 56, 1);
    mbar_init(bars + 64, 1);
  }
  __syncthreads();  // the barriers' initialization is visible; no CTA-wide barrier after this
  if (tid == 0) {
    for (int c = 0; c < imin(3, n_chunks); ++c) issue_qk(c);
    for (int c = 0; c < imin(2, n_chunks); ++c) issue_v(c);
  }
  auto factors = [&](int c) { return reinterpret_cast<float*>(sm + kXBuf + (c & 1) * kBufBytes + kBF); };
  auto q_tile = [&](int c) { return reinterpret_cast<bf16*>(sm + kXQk + (c % 3) * kQkBytes); };
  auto v_tile = [&](int c) { return reinterpret_cast<bf16*>(sm + kXV + (c & 1) * kTileBytes); };
  auto t_tile = [&](int c) {
    return reinterpret_cast<bf16*>(kWsPrepT ? sm + kXQk + (c % 3) * kQkBytes + 2 * kTileBytes
                                            : sm + kXBuf + (c & 1) * kBufBytes + kBT);
  };
  auto p_tile = [&](int c) { return reinterpret_cast<bf16*>(sm + kXBuf + (c & 1) * kBufBytes + kBP); };
  const int a_row = a_row_of(lane), a_col = a_col_of(lane), bn_row = bn_row_of(lane), bn_col = bn_col_of(lane);
  auto sw = [](int r, int c) { return swz(r, c); };
  D2K_PH_DECL

  if (warp >= 8) {
    // ------------------------------------------------ producer: T, P and the factors of chunk c, a chunk ahead
    setmaxnreg_dec<kRegP>();
    const int ptid = tid - 256, pw = warp - 8;
    // Chunk c's slots are full and its buffer free (the state warps are done with chunk c - 2); rows past the end
    // (the next sequence's tokens, or zeros past the tensor's end) zeroed in q, k and v.
    auto enter = [&](int c, int L, bf16* Qs) {
      mbar_wait(qk_full(c), (c / 3) & 1);
      if (c >= 2) mbar_wait(freed(c), ((c >> 1) - 1) & 1);
      D2K_PH(0);  // 0: waits
      if (L < kChunk) {
        mbar_wait(v_full(c), (c >> 1) & 1);
        zero_swz_rows(reinterpret_cast<unsigned char*>(Qs), 2, L, ptid, 128);
        zero_swz_rows(reinterpret_cast<unsigned char*>(v_tile(c)), 1, L, ptid, 128);
        fence_proxy_async();  // before wgmma reads the zeroed rows
      }
    };
    // The state warps' per-token factors from G, fq, rk, beta (F's first four rows): fy, fo, fs and gamma_C.
    auto token_factors = [&](float* F, int L) {
      if (ptid >= 64) return;
      const float *Gc = F, *fq = F + 64, *rk = F + 128, *bs = F + 192;
      const float GC = Gc[L - 1], Gt = Gc[ptid], egt = exp_dec(Gt);
      F[256 + ptid] = bs[ptid] * egt * rk[ptid];           // fy
      F[320 + ptid] = egt * fq[ptid];                      // fo
      F[384 + ptid] = exp_dec(fminf(GC - Gt, 0.f)) * rk[ptid];  // fs (0 past the end, where rk is)
      if (ptid == 0) F[448] = exp_dec(GC);
    };
    // Per-token inputs of the next chunk, loaded an iteration early (zeros past the end): with kWsPrepT the prep's
    // tail of T's rows (G_t, beta_t, rk_t) for token ptid (threads 0-63); else g (threads 0-63) and beta (64-127) of
    // token ptid % 64. T came with q and k when kWsPrepT: its rows past the end stay, as they reach only v_new's rows
    // past the end, which fs (0 there) keeps out of the state, and o's, never stored.
    auto load_next = [&](int c) {
      const int t0 = t_beg + c * kChunk, row = ptid & 63;
      if (row >= imin(kChunk, t_end - t0) || (kWsPrepT && ptid >= 64)) return make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (kWsPrepT)
        return *reinterpret_cast<const float4*>(Tg + (static_cast<long>(t0 + row) * H + h) * kTRow + kChunk);
      return make_float4((ptid < 64 ? g : beta)[static_cast<long>(t0 + row) * H + h], 0.f, 0.f, 0.f);
    };
    float4 in_next = n_chunks > 0 ? load_next(0) : make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (!kWsPrepT && kWsWgmma >= 3)  // P's blocks above the diagonal, never written below: zeros for wgmma
      for (int i = ptid; i < 2 * kHalfTile / 16; i += 128)
        *reinterpret_cast<uint4*>(p_tile(i / (kHalfTile / 16)) + (i % (kHalfTile / 16)) * 8) = uint4{0u, 0u, 0u, 0u};
    for (int c = 0; c < n_chunks; ++c) {
      const int L = imin(kChunk, t_end - (t_beg + c * kChunk));
      const float4 in = in_next;
      if (c + 1 < n_chunks) in_next = load_next(c + 1);
      float* F = factors(c);
      float *Gc = F, *fq = F + 64, *rk = F + 128, *bs = F + 192;
      bf16* Qs = q_tile(c);
      bf16* Ks = Qs + kTileBytes / 2;
      bf16* Ps = p_tile(c);
      enter(c, L, Qs);
      if constexpr (kWsPrepT) {
        if (ptid < 64) Gc[ptid] = in.x, bs[ptid] = in.y, rk[ptid] = in.z;
        const int r = ptid >> 1, c8 = 8 * (ptid & 1);  // two threads per row
        float sq = partial_sumsq<8, true>(Qs, r, c8);
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        if ((ptid & 1) == 0) fq[r] = scale * rsqrtf(sq + eps);
        D2K_PH(1);  // 1: the tail, q's norms
      } else {
        (ptid < 64 ? Gc : bs)[ptid & 63] = in.x;
        named_bar(kBarP, 128);
        const int r = ptid >> 1, c8 = 8 * (ptid & 1);  // two threads per row
        float sq = partial_sumsq<8, true>(Qs, r, c8), sk = partial_sumsq<8, true>(Ks, r, c8);
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sk += __shfl_xor_sync(0xffffffffu, sk, 1);
        if ((ptid & 1) == 0) {
          fq[r] = scale * rsqrtf(sq + eps);
          rk[r] = r < L ? rsqrtf(sk + eps) : 0.f;  // zero past the end: no A, P or state term there
        }
        if (pw == 0) {
          float G_even, G_odd;
          warp_cumsum64(Gc, lane, G_even, G_odd);
          Gc[2 * lane] = G_even;
          Gc[2 * lane + 1] = G_odd;
        }
        D2K_PH(1);  // 1: norms, cumsum
      }
      named_bar(kBarP, 128);
      D2K_PH(2);  // 2: their barrier
      token_factors(F, L);
      D2K_PH(3);  // 3: factors
      if constexpr (kWsPrepT) {
        // P = scale (q.k) rq_t rk_i exp(G_t - G_i), i <= t < L: Q K^T by the warpgroup's wgmma (this warp's 16 rows
        // of Q through ldmatrix, K straight from its tile), kPBatch k-steps per wait; zeros above the diagonal.
        float pa[8][4];
        gram_wgmma<kPBatch>(pa, Qs, Ks, pw, lane);
        D2K_PH(4);  // 4: Q K^T
        // This warp's rows t lie in the 16-row block starting at b = 16 pw; rows past the end get factor 0 (their G
        // is 0 there: decayed_rows clamps, no overflow).
        const int b = 16 * pw;
        float f[2];
        for (int hi = 0; hi < 2; ++hi) f[hi] = b + gq + 8 * hi < L ? fq[b + gq + 8 * hi] : 0.f;
        decayed_rows<false>(pa, Gc, rk, f, b, b < L, lane, [&](int t, int i, float2 v) {
          *reinterpret_cast<u32*>(Ps + swz(t, i)) = pack_bf16(v.x, v.y);
        });
      } else {
        // P's ten 16 x 16 blocks on or below the diagonal, as build_T's side work, for the warps that would wait
        // (phase 0, after A's rows: warps 0, 1, 2 take 3, 2, 1 blocks; phase 1, during the forward substitution:
        // warps 2 and 3 take 2 each).
        auto p_block = [&](int blk) {
          const int mt = blk < 1 ? 0 : blk < 3 ? 1 : blk < 6 ? 2 : 3, nt = blk - mt * (mt + 1) / 2;
          float acc[2][4] = {};
          for (int ks = 0; ks < 8; ++ks) {
            u32 a[4], bb[4];
            ldsm_x4(a, Qs + swz(16 * mt + a_row, 16 * ks + a_col));
            ldsm_x4(bb, Ks + swz(16 * nt + bn_row, 16 * ks + bn_col));
            mma_bf16(acc[0], a, bb[0], bb[1]);
            mma_bf16(acc[1], a, bb[2], bb[3]);
          }
          for (int n = 0; n < 2; ++n)
            for (int hi = 0; hi < 2; ++hi) {
              const int t = 16 * mt + gq + 8 * hi, i = 16 * nt + 8 * n + 2 * tq;
              const float f = fq[t], Gt = Gc[t];
              const float p0 = i <= t ? acc[n][2 * hi] * f * rk[i] * __expf(Gt - Gc[i]) : 0.f;
              const float p1 = i + 1 <= t ? acc[n][2 * hi + 1] * f * rk[i + 1] * __expf(Gt - Gc[i + 1]) : 0.f;
              *reinterpret_cast<u32*>(Ps + swz(t, i)) = pack_bf16(p0, p1);
            }
        };
        auto p_blocks = [&](int phase, int w) {
          const int first = phase == 0 ? (w == 0 ? 0 : w == 1 ? 3 : w == 2 ? 5 : 6) : (w == 2 ? 6 : 8);
          const int last = phase == 0 ? (w == 0 ? 3 : w == 1 ? 5 : 6) : (w == 2 ? 8 : 10);
          for (int blk = first; blk < last; ++blk) p_block(blk);
        };
        build_T<128, true, true>(Ks, bs, Gc, rk, reinterpret_cast<float*>(sm + kXA),
                                 reinterpret_cast<float*>(sm + kXT), reinterpret_cast<float*>(sm + kXR), t_tile(c), 0,
                                 L, true, ptid, [] { named_bar(kBarP, 128); }, p_blocks);
      }
      D2K_PH(6);  // 6: P (and T)
      fence_proxy_async();  // P's (and T's) generic writes before the state warps' wgmma reads (D2K_WS_WGMMA=3)
      mbar_arrive(ready(c));
    }
    D2K_PH_END(n_chunks);
    return;
  }

  // -------------------------------------------------- state warps: warp w owns rows [16w, 16w + 16) of S (V x K)
  setmaxnreg_inc<kRegC>();
  const long rs = static_cast<long>(H) * kDim;
  const int v0 = 16 * warp;
  bf16* Ow = reinterpret_cast<bf16*>(sm + kXO) + warp * kChunk * 16;  // [t][16], halves swapped when t & 4
  float ht[16][4];  // S[v0 + gq (+8)][8n + 2tq (+1)], fp32
  for (int n = 0; n < 16; ++n)
    for (int e = 0; e < 4; ++e) ht[n][e] = 0.f;
  for (int c = 0; c < n_chunks; ++c) {
    const int t0 = t_beg + c * kChunk, L = imin(kChunk, t_end - t0);
    const bf16* Qs = q_tile(c);
    const bf16* Ks = Qs + kTileBytes / 2;
    const bf16* Vs = v_tile(c);
    const bf16* Ts = t_tile(c);
    const bf16* Ps = p_tile(c);
    const float* F = factors(c);
    const float *bs = F + 192, *fy = F + 256, *fo = F + 320, *fs = F + 384;
    mbar_wait(ready(c), (c >> 1) & 1);
    mbar_wait(qk_full(c), (c / 3) & 1);  // complete already (the producer waited): the tensor copies' bytes seen
    mbar_wait(v_full(c), (c >> 1) & 1);
    D2K_PH(0);  // 0: waits

    // kh = S_0 K^T and ot = S_0 Q^T (both [v][t]), from the state fragments as A operands.
    float kh[8][4], ot[8][4];
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) kh[n][e] = ot[n][e] = 0.f;
    if constexpr (kWsWgmma >= 1) {
      // Per warpgroup (64 state rows), four k-steps per batch (their A fragments live until the wait); k-step ks
      // starts at column 16 ks: half ks / 4 (4096 elements on), 32 B per step inside it.
      for (int kb = 0; kb < 8; kb += 4) {
        u32 a[4][4];
        for (int j = 0; j < 4; ++j) acc_to_a(a[j], ht[2 * (kb + j)], ht[2 * (kb + j) + 1]);
        wgmma_fence();
        for (int j = 0; j < 4; ++j) {
          const int off = ((kb + j) >> 2) * 4096 + ((kb + j) & 3) * 16;
          wgmma_m64n64k16(kh, a[j], sw128_desc(Ks + off));
          wgmma_m64n64k16(ot, a[j], sw128_desc(Qs + off));
        }
        wgmma_commit_and_wait();
        for (int j = 0; j < 4; ++j) reg_fence(a[j]);
        reg_fence(kh);
        reg_fence(ot);
      }
    } else {
      s0_products(ht, Ks, Qs, sw, kh, ot, lane);
    }
    D2K_PH(6);  // 6: S_0 K^T and S_0 Q^T
    y_from_v(kh, Vs, sw, v0, bs, fy, lane);
    float vn[8][4];  // v_new = T y
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) vn[n][e] = 0.f;
    if constexpr (kTSubst)
      block_subst(vn, kh, Ts, sw, lane);
    else if constexpr (kWsWgmma >= 3)
      wgmma_tile_product(vn, kh, Ts);
    else
      tril_product(vn, kh, Ts, sw, lane);
    scale_cols(ot, fo, lane);  // the output's h_0 term: scale gamma_t rq_t (S_0 q_t)
    D2K_PH(7);  // 7: y, v_new, o's h_0 term
    if constexpr (kWsWgmma >= 3)  // o += v_new P^T
      wgmma_tile_product(ot, vn, Ps);
    else
      tril_product(ot, vn, Ps, sw, lane);
    // S = gamma_C S_0 + (v_new * gamma_C / gamma_i * rk_i) K
    const float decay = F[448];
    for (int n = 0; n < 16; ++n)
      for (int e = 0; e < 4; ++e) ht[n][e] *= decay;
    scale_cols(vn, fs, lane);
    if constexpr (kWsWgmma >= 2) {
      // Per warpgroup: K read once (N-major B, 16 tokens per k-step), all four k-steps before one wait.
      u32 a[4][4];
      for (int ks = 0; ks < 4; ++ks) acc_to_a(a[ks], vn[2 * ks], vn[2 * ks + 1]);
      wgmma_fence();
      for (int ks = 0; ks < 4; ++ks) wgmma_m64n128k16_nmajor(ht, a[ks], nmajor_sw128_desc(Ks + ks * 16 * 64));
      wgmma_commit_and_wait();
      for (int ks = 0; ks < 4; ++ks) reg_fence(a[ks]);
      reg_fence(ht);
    } else {
      state_update(ht, vn, Ks, sw, lane);
    }
    D2K_PH(9);  // 9: o += v_new P^T and the state update
    // o: each warp stages its own 64 x 16 slice (halves swapped on rows with t & 4: no bank conflicts) and stores
    // 32-byte row pieces, so no barrier across warps guards the staging.
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int t = 8 * n + 2 * tq + (e & 1), vv = gq + 8 * (e >> 1);
        Ow[t * 16 + (vv ^ (((t >> 2) & 1) << 3))] = __float2bfloat16_rn(ot[n][e]);
      }
    __syncwarp();
    // Every state warp is done with chunk c's slots and buffer: thread 0 frees the buffer for the producer and
    // refills the slots (the async proxy's writes after this chunk's generic reads: each thread fences first).
    fence_proxy_async();
    named_bar(kBarC, 256);
    if (tid == 0) {
      mbar_arrive(freed(c));
      if (c + 3 < n_chunks) issue_qk(c + 3);
      if (c + 2 < n_chunks) issue_v(c + 2);
    }
    for (int i = lane; i < 2 * L; i += 32) {
      const int row = i >> 1, half = i & 1;
      *reinterpret_cast<uint4*>(o + (t0 + row) * rs + h * kDim + v0 + 8 * half) =
          *reinterpret_cast<const uint4*>(Ow + row * 16 + 8 * (half ^ ((row >> 2) & 1)));
    }
    __syncwarp();  // the slice is read before the next chunk's writes
    D2K_PH(10);  // 10: o staged and stored, the barrier
  }
  D2K_PH_END(n_chunks);
}

// ---------------------------------------------------------------- host side

// D2K_FUSE_T: the walk builds T itself (no prep launch, no T in HBM), a variant to time against the prep.
#ifdef D2K_FUSE_T
constexpr bool kFuse = true;
#else
constexpr bool kFuse = false;
#endif
// D2K_WS: the warp-specialized walk (a producer warpgroup builds T, P and the factors; no prep launch), used when
// the V split is 1 (the split walks keep the prep).
#ifdef D2K_WS
#if defined(D2K_FUSE_T) || defined(D2K_WGMMA)
#error "D2K_WS replaces the walk that D2K_FUSE_T and D2K_WGMMA vary"
#endif
constexpr bool kWsOn = true;
#else
constexpr bool kWsOn = false;
#endif

// A 3-D tensor map over bf16 [d2][d1][d0] (row strides s1, s2 bytes), box b0 x 1 x b2, zeros outside.
#ifndef D2K_CPU_EMU
PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;  // fetched once, under g_scratch_mu
#endif
cudaError_t make_map(TmaMap* m, const void* base, std::uint64_t d0, std::uint64_t d1, std::uint64_t d2,
                     std::uint64_t s1, std::uint64_t s2, unsigned b0, unsigned b2, bool swizzle128) {
#ifdef D2K_CPU_EMU
  *m = TmaMap{base, {d0, d1, d2}, {s1, s2}, {b0, 1, b2}, swizzle128};
  return cudaSuccess;
#else
  if (g_encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult qr = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr);
    if (e != cudaSuccess) return e;
    if (qr != cudaDriverEntryPointSuccess || fn == nullptr) return cudaErrorNotSupported;
    g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  const cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {s1, s2};
  const cuuint32_t box[3] = {b0, 1, b2}, elem_strides[3] = {1, 1, 1};
  const CUresult r = g_encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
#endif
}

template <int NW, bool F>
cudaError_t launch_walk(dim3 grid, cudaStream_t stream, const bf16* q, const bf16* k, const bf16* v, const float* g,
                        const float* beta, const int* cu, const int* order, const bf16* Tg, bf16* o, int H,
                        float scale, float eps, const TmaMap& mq, const TmaMap& mk, const TmaMap& mv,
                        const TmaMap& mT) {
  const int smem = F ? kWalkSmemFused : kWalkSmem;
  auto* kernel = walk_kernel<NW, F>;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  D2K_LAUNCH(kernel, grid, dim3(32 * NW), smem, stream)(q, k, v, g, beta, cu, order, Tg, o, H, scale, eps, mq, mk,
                                                        mv, mT);
  return cudaSuccess;
}

struct Scratch {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  int device = -1;
};
Scratch g_scratch;
std::mutex g_scratch_mu;  // also guards g_maps
// The tensor maps of the last call, re-encoded only when an address or a shape changes: encoding runs on the host
// between the launches, inside the timed region.
struct MapCache {
  const void* ptr[4] = {};
  std::int64_t T = -1, H = -1;
  int device = -1;
  bool ws = false;  // T's map: 64 x 64 swizzled boxes for the warp-specialized walk, 64 x 72 plain ones otherwise
  TmaMap maps[5] = {};  // q, k, v, T for the walk; T as 64 x 72 plain boxes (the prep's stores, kPrepTStore)
};
MapCache g_maps;  // kept across calls (grown outside stream capture; a capture gets a stream-ordered buffer)

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream_) {
  if (n_inputs != 6 || n_outputs != 1 || n_params != 2) return 1;
  const d2k_tensor &tq = inputs[0], &tk = inputs[1], &tv = inputs[2], &tg = inputs[3], &tb = inputs[4];
  const d2k_tensor &tc = inputs[5], &to = outputs[0];
  if (tq.dtype != D2K_BFLOAT16 || tk.dtype != D2K_BFLOAT16 || tv.dtype != D2K_BFLOAT16 || tg.dtype != D2K_FLOAT32 ||
      tb.dtype != D2K_FLOAT32 || tc.dtype != D2K_INT32 || to.dtype != D2K_BFLOAT16)
    return 2;
  if (tq.ndim != 3 || tk.ndim != 3 || tv.ndim != 3 || to.ndim != 3 || tg.ndim != 2 || tb.ndim != 2 || tc.ndim != 1)
    return 3;
  const int64_t T = tq.shape[0], H = tq.shape[1], B = tc.shape[0] - 1;
  for (const d2k_tensor* t : {&tq, &tk, &tv, &to})
    if (t->shape[0] != T || t->shape[1] != H || t->shape[2] != kDim || !aligned16(t->data)) return 3;
  if (tg.shape[0] != T || tg.shape[1] != H || tb.shape[0] != T || tb.shape[1] != H || B < 1) return 3;
  if (T > (int64_t(1) << 31) / 2 || H > 65535 || B * H > 0x7fffffff / 4) return 3;
  if (T == 0) return 0;
  const float scale = static_cast<float>(params[0].f), eps = static_cast<float>(params[1].f);
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_);

  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  // Split V over 2 or 4 CTAs per (sequence, head) only with very few chains (at most an eighth of the SMs): each
  // split CTA still loads whole tiles and builds its own P and factors, and on the H100 (2026-12-05) one
  // 32k-token sequence of 32 heads ran in 3.11 ms at split 1, 3.21 at split 2 and 4.67 at split 4.
  int sms = 0;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
  int split = 1;
  while (split < 4 && B * H * split * 8 <= sms) split *= 2;
#ifdef D2K_SPLIT
  split = D2K_SPLIT;  // timing variants: force 1, 2 or 4
#endif
  const bool ws = kWsOn && split == 1;

  const int n_slots = static_cast<int>((T + kChunk - 1) / kChunk + B);
  const bool prep = !kFuse && (!ws || kWsPrepT);  // T through HBM
  const std::size_t t_bytes = prep ? static_cast<std::size_t>(T) * H * kTRow * sizeof(bf16) : 0;
  const std::size_t need = t_bytes + sizeof(int) * (1 + 2 * static_cast<std::size_t>(n_slots) + B);
  std::lock_guard<std::mutex> lock(g_scratch_mu);
  void* buf = nullptr;
  bool temporary = false;
  if (g_scratch.device != device || g_scratch.bytes < need) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    err = cudaStreamIsCapturing(stream, &cs);
    if (err != cudaSuccess) return err;
    if (cs == cudaStreamCaptureStatusNone) {
      if (g_scratch.ptr != nullptr && g_scratch.device == device) cudaFree(g_scratch.ptr);
      g_scratch = Scratch{};
      err = cudaMalloc(&g_scratch.ptr, need);
      if (err != cudaSuccess) return err;
      g_scratch.bytes = need;
      g_scratch.device = device;
      buf = g_scratch.ptr;
    } else {
      err = cudaMallocAsync(&buf, need, stream);
      if (err != cudaSuccess) return err;
      temporary = true;
    }
  } else {
    buf = g_scratch.ptr;
  }
  bf16* Tg = static_cast<bf16*>(buf);
  int* tbl = reinterpret_cast<int*>(static_cast<char*>(buf) + t_bytes);

  const bf16* q = static_cast<const bf16*>(tq.data);
  const bf16* k = static_cast<const bf16*>(tk.data);
  const bf16* v = static_cast<const bf16*>(tv.data);
  const float* g = static_cast<const float*>(tg.data);
  const float* beta = static_cast<const float*>(tb.data);
  const int* cu = static_cast<const int*>(tc.data);
  bf16* o = static_cast<bf16*>(to.data);
  const int h = static_cast<int>(H);

#ifdef D2K_PREP_GRID
  const int prep_grid = D2K_PREP_GRID;  // a test variant: few CTAs, many items each
#else
  const int prep_grid = static_cast<int>(std::min<int64_t>(int64_t(n_slots) * H, int64_t(sms) * kPrepPersistCtas));
#endif
  const bool persist = kPrepPersistMode == 2 ||
                       (kPrepPersistMode == 1 && int64_t(n_slots) * H >= int64_t(kPrepPersistMinItems) * prep_grid);
  if (prep && (err = persist ? cudaFuncSetAttribute(prep_persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    kPrepPersistSmem)
                             : cudaFuncSetAttribute(prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    kPrepSmem)) != cudaSuccess)
    return err;
  const dim3 walk_grid(static_cast<unsigned>(B * H * split));
  // Tensor copies: q, k, v as [T][H][128] in swizzled 64 x 64 boxes, T's rows as 64 x 72 boxes (the prep reads k
  // through maps[1]; the default walk all four).
  const TmaMap* maps = g_maps.maps;
  if (!kFuse) {
    const void* ptrs[4] = {q, k, v, prep ? Tg : nullptr};
    bool same = g_maps.T == T && g_maps.H == H && g_maps.device == device && g_maps.ws == ws;
    for (int i = 0; i < 4; ++i) same = same && g_maps.ptr[i] == ptrs[i];
    if (!same) {
      g_maps.T = -1;  // invalid until every map is encoded
      const std::uint64_t row = kDim * 2;
      for (int i = 0; i < 3; ++i)
        if ((err = make_map(&g_maps.maps[i], ptrs[i], kDim, H, T, row, row * H, 64, kChunk, true)) != cudaSuccess)
          return err;
      if (prep && (err = make_map(&g_maps.maps[3], Tg, kTRow, H, T, kTRow * 2, kTRow * 2 * H, ws ? 64 : kTRow,
                                  kChunk, ws)) != cudaSuccess)
        return err;
      if (prep && kPrepTStore &&
          (err = make_map(&g_maps.maps[4], Tg, kTRow, H, T, kTRow * 2, kTRow * 2 * H, kTRow, kChunk, false)) !=
              cudaSuccess)
        return err;
      for (int i = 0; i < 4; ++i) g_maps.ptr[i] = ptrs[i];
      g_maps.T = T, g_maps.H = H, g_maps.device = device, g_maps.ws = ws;
    }
  }
  const int* order = tbl + 1 + 2 * n_slots;

  // D2K_ONLY_PREP / D2K_ONLY_WALK: timing variants for bench/profile_cuda_solution.py (wrong results). The table
  // (~13 us) runs in both, so the walk alone still walks the real order.
  D2K_LAUNCH(table_kernel, dim3(1), dim3(1024), 8192, stream)(cu, static_cast<int>(B), tbl, n_slots);
#ifndef D2K_ONLY_WALK
#if defined(D2K_PREP_PHASES) && !defined(D2K_CPU_EMU)
  cudaEvent_t pp_ev[2];
  if (prep) {
    static const unsigned long long zero[kPrepPhases + 2] = {};
    cudaMemcpyToSymbolAsync(g_prep_cycles, zero, 8 * kPrepPhases, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_prep_ns, zero, 8, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_prep_ctas, zero, 8, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_prep_items, zero, 8, 0, cudaMemcpyHostToDevice, stream);
    cudaEventCreate(&pp_ev[0]);
    cudaEventCreate(&pp_ev[1]);
    cudaEventRecord(pp_ev[0], stream);
  }
#endif
  if (prep && persist)
    D2K_LAUNCH(prep_persist_kernel, dim3(prep_grid), dim3(kPrepThreads), kPrepPersistSmem, stream)(
        g, beta, tbl, Tg, h, eps, n_slots, maps[1], maps[4]);
  else if (prep)
    D2K_LAUNCH(prep_kernel, dim3(n_slots, h), dim3(kPrepThreads), kPrepSmem, stream)(g, beta, tbl, Tg, h, eps, n_slots,
                                                                                     maps[1]);
#if defined(D2K_PREP_PHASES) && !defined(D2K_CPU_EMU)
  if (prep) {
    unsigned long long cyc[kPrepPhases], ns = 0, ctas = 0, items = 0;
    float ms = 0.f;
    int sms = 0, dev = 0;
    cudaEventRecord(pp_ev[1], stream);
    cudaEventSynchronize(pp_ev[1]);
    cudaEventElapsedTime(&ms, pp_ev[0], pp_ev[1]);
    cudaEventDestroy(pp_ev[0]);
    cudaEventDestroy(pp_ev[1]);
    cudaMemcpyFromSymbol(cyc, g_prep_cycles, sizeof cyc);
    cudaMemcpyFromSymbol(&ns, g_prep_ns, 8);
    cudaMemcpyFromSymbol(&ctas, g_prep_ctas, 8);
    cudaMemcpyFromSymbol(&items, g_prep_items, 8);
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    // resident CTAs per SM on average: the CTAs' lifetimes summed over (SMs x the kernel's time)
    std::fprintf(stderr, "prep phases%s: thread 0's cycles per item:", persist ? " (persistent)" : "");
    for (int i = 0; i < kPrepPhases; ++i)
      if (cyc[i]) std::fprintf(stderr, " %d:%.0f", i, items ? double(cyc[i]) / items : 0.0);
    std::fprintf(stderr,
                 "; CTA lifetime %.0f ns, %llu CTAs, %llu items, kernel %.3f ms, mean resident CTAs per SM %.2f\n",
                 ctas ? double(ns) / ctas : 0.0, ctas, items, ms, ms > 0 ? double(ns) / (1e6 * ms * sms) : 0.0);
  }
#endif
#endif
#ifndef D2K_ONLY_PREP
  auto walk = split == 1 ? launch_walk<8, kFuse> : split == 2 ? launch_walk<4, kFuse> : launch_walk<2, kFuse>;
#if defined(D2K_PHASES) && !defined(D2K_CPU_EMU)
  {
    static const unsigned long long zero[kPhWarps * kPhases] = {};
    cudaMemcpyToSymbolAsync(g_phase_cycles, zero, sizeof zero, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_phase_steps, zero, 8 * kPhWarps, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_cta_ns, zero, 8, 0, cudaMemcpyHostToDevice, stream);
    cudaMemcpyToSymbolAsync(g_cta_chunks, zero, 8, 0, cudaMemcpyHostToDevice, stream);
  }
#endif
  if (ws) {
    if ((err = cudaFuncSetAttribute(walk_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmem)) !=
        cudaSuccess)
      return err;
    D2K_LAUNCH(walk_ws_kernel, walk_grid, dim3(kWsThreads), kWsSmem, stream)(g, beta, cu, order, o, h, scale, eps,
                                                                             maps[0], maps[1], maps[2], maps[3], Tg);
  } else if ((err = walk(walk_grid, stream, q, k, v, g, beta, cu, order, Tg, o, h, scale, eps, maps[0], maps[1],
                         maps[2], maps[3])) != cudaSuccess) {
    return err;
  }
#if defined(D2K_PHASES) && !defined(D2K_CPU_EMU)
  {
    unsigned long long cyc[kPhWarps][kPhases], steps[kPhWarps], ns = 0, chunks = 0;
    cudaStreamSynchronize(stream);
    cudaMemcpyFromSymbol(cyc, g_phase_cycles, sizeof cyc);
    cudaMemcpyFromSymbol(steps, g_phase_steps, sizeof steps);
    cudaMemcpyFromSymbol(&ns, g_cta_ns, 8);
    cudaMemcpyFromSymbol(&chunks, g_cta_chunks, 8);
    // per phase: the mean over warps of cycles per chunk, then [the least, the most] of the warps' means; the state
    // warps (0-7) and, in the warp-specialized walk, the producer (8-11) apart
    double total = 0;
    std::fprintf(stderr, "phases split %d ws %d: cycles per warp-chunk, mean [min max over warps]:", split, ws ? 1 : 0);
    for (int role = 0; role < 2; ++role) {
      const int w0 = role == 0 ? 0 : 8, w1 = role == 0 ? 8 : kPhWarps;
      if (role == 1 && steps[8] == 0) break;
      std::fprintf(stderr, role == 0 ? " state warps" : "; producer");
      total = 0;
      for (int i = 0; i < kPhases; ++i) {
        double sum = 0, lo = 1e30, hi = 0;
        int n = 0;
        for (int w = w0; w < w1; ++w) {
          if (steps[w] == 0) continue;
          const double x = double(cyc[w][i]) / double(steps[w]);
          sum += x, lo = x < lo ? x : lo, hi = x > hi ? x : hi, ++n;
        }
        const double mean = n ? sum / n : 0.0;
        total += mean;
        if (mean > 0) std::fprintf(stderr, " %d:%.0f[%.0f %.0f]", i, mean, n ? lo : 0.0, hi);
      }
      std::fprintf(stderr, " total:%.0f", total);
    }
    std::fprintf(stderr, "; CTA ns per chunk %.1f (%llu chunks)\n", chunks ? double(ns) / chunks : 0.0, chunks);
  }
#endif
#endif
  err = cudaGetLastError();
  if (temporary) {
    const cudaError_t ferr = cudaFreeAsync(buf, stream);
    if (err == cudaSuccess) err = ferr;
  }
  return err;
}
