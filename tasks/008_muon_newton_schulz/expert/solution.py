"""muon_newton_schulz: expert Triton solution (written for the H200, sm_90).

Computes, for every matrix of a batch G [B, M, N] bf16: X = G / (||G||_F + eps) (on the wide orientation: G^T
when M > N), then `steps` quintic Newton-Schulz iterations X <- a X + (b A + c A A) X with A = X X^T, and writes
X (transposed back) to the output [B, M, N] bf16.

Design:
 - L1: A = X X^T and A A = A A^T (A is symmetric) are symmetric products: one kernel computes only the tiles on
   and below the diagonal and writes each off-diagonal tile twice (as computed, and transposed into the upper
   triangle), which halves the work of two of the three products of every step.
 - L2: per step three launches: the symmetric X X^T; the symmetric A A^T with b A + c (A A) fused into its
   epilogue (reads the A tile, writes B = b A + c A^2); a plain GEMM B X with a X + (B X) fused into its
   epilogue. The transposed case is never materialized: X is addressed through strides in G's own layout, and
   the last step writes the output in that layout. The Frobenius norm is one reduction pass (fp32 atomics per
   matrix) and a scaling pass; X ping-pongs between the output and one scratch buffer.
 - L3: 128x128x64 bf16 tiles feeding tensor cores (wgmma on sm_90), fp32 accumulation, every intermediate
   (A, B, X) stored in bf16 and every epilogue computed in fp32; grouped (swizzled) tile order for the B X
   GEMM, row-major lower-triangle order for the symmetric kernel (consecutive tiles share their row panel).

Measured (NVIDIA H200, 2026-12-03, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
--compile-baseline-timeout 60 (scripts/gpu-check.sh pairs)`, bench/suite_targets.py --record): 5.489 / 7.363 / 1.446
/ 3.144 ms on attn_qo_2x4096x4096 / mlp_up_14336x4096 / attn_kv_8x1024x4096 / mlp_gate_4x5632x2048; 1.157x / 1.373x
/ 1.29x / 1.695x over eager (geometric mean 1.365x, target 1.3x); 67.25% of speed-of-light on mlp_up_14336x4096;
naive kernel 7.921 / 10.63 / 1.583 / 4.12 ms (expert 1.443x / 1.444x / 1.095x / 1.31x faster); torch.compile 6.852 /
9.121 / 1.816 / 4.654 ms.
"""

import torch
import triton
import triton.language as tl

BLOCK = 128      # square output tiles: the symmetric kernel mirrors a tile into its transpose
BLOCK_K = 64
GROUP_M = 8
NUM_WARPS = 8
NUM_STAGES = 3


@triton.jit
def _sumsq_kernel(g_ptr, ss_ptr, MN, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    """ss[b] += sum of squares of one CHUNK of matrix b (fp32)."""
    pid = tl.program_id(0)
    b = tl.program_id(1)
    base = g_ptr + b.to(tl.int64) * MN
    acc = tl.zeros([BLOCK_E], dtype=tl.float32)
    for off in range(0, CHUNK, BLOCK_E):
        offs = pid.to(tl.int64) * CHUNK + off + tl.arange(0, BLOCK_E)
        x = tl.load(base + offs, mask=offs < MN, other=0.0).to(tl.float32)
        acc += x * x
    tl.atomic_add(ss_ptr + b, tl.sum(acc, axis=0))


@triton.jit
def _scale_kernel(g_ptr, ss_ptr, x_ptr, MN, eps, BLOCK_E: tl.constexpr):
    """x = bf16(g / (sqrt(ss[b]) + eps)), same layout as g."""
    pid = tl.program_id(0)
    b = tl.program_id(1)
    inv = 1.0 / (tl.sqrt(tl.load(ss_ptr + b)) + eps)
    offs = pid.to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < MN
    base = b.to(tl.int64) * MN
    x = tl.load(g_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + base + offs, (x * inv).to(tl.bfloat16), mask=mask)


@triton.jit
def _sym_kernel(p_ptr, d_ptr, c_ptr, m, K, s_pb, s_pr, s_pc, alpha, beta,
                HAS_D: tl.constexpr, DOT_F32: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_KK: tl.constexpr):
    """C = alpha * P P^T (+ beta * D), C and D [m, m] row-major per matrix, P [m, K] with strides (s_pr, s_pc).
    Only tiles (i, j) with i >= j are computed; an off-diagonal tile is also written transposed at (j, i)."""
    t = tl.program_id(0)
    bat = tl.program_id(1).to(tl.int64)
    # t -> (i, j), j <= i, row-major over the lower triangle: t = i (i + 1) / 2 + j.
    i = ((tl.sqrt(8.0 * t.to(tl.float32) + 1.0) - 1.0) * 0.5).to(tl.int32)
    i = tl.where((i + 1) * (i + 2) // 2 <= t, i + 1, i)
    i = tl.where(i * (i + 1) // 2 > t, i - 1, i)
    j = t - i * (i + 1) // 2

    rm = i * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = j * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_KK)
    p_base = p_ptr + bat * s_pb
    pa = p_base + rm[:, None].to(tl.int64) * s_pr + rk[None, :].to(tl.int64) * s_pc
    pb = p_base + rn[:, None].to(tl.int64) * s_pr + rk[None, :].to(tl.int64) * s_pc
    acc = tl.zeros([BLOCK_M, BLOCK_M], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_KK):
        kmask = (k0 + rk) < K
        a = tl.load(pa, mask=(rm[:, None] < m) & kmask[None, :], other=0.0)
        b = tl.load(pb, mask=(rn[:, None] < m) & kmask[None, :], other=0.0)
        if DOT_F32:  # Triton 3.1's CPU interpreter multiplies bf16 dot operands as raw integers
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc += tl.dot(a, tl.trans(b))
        pa += BLOCK_KK * s_pc
        pb += BLOCK_KK * s_pc

    out = acc * alpha
    c_base = bat * m * m
    cmask = (rm[:, None] < m) & (rn[None, :] < m)
    if HAS_D:
        d = tl.load(d_ptr + c_base + rm[:, None].to(tl.int64) * m + rn[None, :], mask=cmask, other=0.0)
        out += beta * d.to(tl.float32)
    outb = out.to(tl.bfloat16)
    tl.store(c_ptr + c_base + rm[:, None].to(tl.int64) * m + rn[None, :], outb, mask=cmask)
    if i != j:
        # the mirror tile: C[rn, rm] = out[rm, rn]^T
        tl.store(c_ptr + c_base + rn[:, None].to(tl.int64) * m + rm[None, :], tl.trans(outb),
                 mask=(rn[:, None] < m) & (rm[None, :] < m))


@triton.jit
def _bx_kernel(s_ptr, x_ptr, y_ptr, m, n, s_xb, s_xr, s_xc, a_coef,
               DOT_F32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_KK: tl.constexpr, GROUP: tl.constexpr):
    """Y = a X + S X, S [m, m] row-major per matrix; X and Y [m, n] with strides (s_xr, s_xc)."""
    pid = tl.program_id(0)
    bat = tl.program_id(1).to(tl.int64)
    grid_m = tl.cdiv(m, BLOCK_M)
    grid_n = tl.cdiv(n, BLOCK_N)
    per_group = GROUP * grid_n
    first_m = (pid // per_group) * GROUP
    group_size = tl.minimum(grid_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % group_size
    pn = (pid % per_group) // group_size

    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_KK)
    s_base = s_ptr + bat * m * m
    x_base = x_ptr + bat * s_xb
    ps = s_base + rm[:, None].to(tl.int64) * m + rk[None, :]
    px = x_base + rk[:, None].to(tl.int64) * s_xr + rn[None, :].to(tl.int64) * s_xc
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, m, BLOCK_KK):
        kmask = (k0 + rk) < m
        s = tl.load(ps, mask=(rm[:, None] < m) & kmask[None, :], other=0.0)
        x = tl.load(px, mask=kmask[:, None] & (rn[None, :] < n), other=0.0)
        if DOT_F32:
            s = s.to(tl.float32)
            x = x.to(tl.float32)
        acc += tl.dot(s, x)
        ps += BLOCK_KK
        px += BLOCK_KK * s_xr

    omask = (rm[:, None] < m) & (rn[None, :] < n)
    offs = rm[:, None].to(tl.int64) * s_xr + rn[None, :].to(tl.int64) * s_xc
    x_old = tl.load(x_base + offs, mask=omask, other=0.0).to(tl.float32)
    tl.store(y_ptr + bat * s_xb + offs, (acc + a_coef * x_old).to(tl.bfloat16), mask=omask)


def solve(G, X, *, steps, coef_a, coef_b, coef_c, eps):
    """G: [B, M, N] bf16; X: [B, M, N] bf16 output (written in place)."""
    B, M, N = G.shape
    MN = M * N
    dot_f32 = not G.is_cuda
    # Frobenius norms (fp32 atomics), then X0 = G / (norm + eps) in G's layout.
    ss = torch.zeros((B,), dtype=torch.float32, device=G.device)
    chunk = 16384
    _sumsq_kernel[(triton.cdiv(MN, chunk), B)](G, ss, MN, CHUNK=chunk, BLOCK_E=1024)
    scratch = torch.empty((B, M, N), dtype=torch.bfloat16, device=G.device)
    bufs = [X, scratch]              # X_s lives in bufs[(steps - s) % 2]: the last step lands in X
    _scale_kernel[(triton.cdiv(MN, 4096), B)](G, ss, bufs[steps % 2], MN, eps, BLOCK_E=4096)
    if steps == 0:
        return
    # The wide orientation, addressed through strides in G's own layout: X_log [m, n] with m <= n.
    if M > N:
        m, n, s_r, s_c = N, M, 1, N
    else:
        m, n, s_r, s_c = M, N, N, 1
    A = torch.empty((B, m, m), dtype=torch.bfloat16, device=G.device)
    S = torch.empty((B, m, m), dtype=torch.bfloat16, device=G.device)
    nt = triton.cdiv(m, BLOCK)
    sym_grid = (nt * (nt + 1) // 2, B)
    bx_grid = (nt * triton.cdiv(n, BLOCK), B)
    for s in range(steps):
        cur = bufs[(steps - s) % 2]
        nxt = bufs[(steps - s - 1) % 2]
        # A = X X^T (lower triangle, mirrored)
        _sym_kernel[sym_grid](cur, A, A, m, n, MN, s_r, s_c, 1.0, 0.0, HAS_D=False, DOT_F32=dot_f32,
                              BLOCK_M=BLOCK, BLOCK_KK=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        # S = b A + c A A^T (A symmetric: A A^T = A^2), lower triangle, mirrored
        _sym_kernel[sym_grid](A, A, S, m, m, m * m, m, 1, coef_c, coef_b, HAS_D=True, DOT_F32=dot_f32,
                              BLOCK_M=BLOCK, BLOCK_KK=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        # X' = a X + S X
        _bx_kernel[bx_grid](S, cur, nxt, m, n, MN, s_r, s_c, coef_a, DOT_F32=dot_f32,
                            BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_KK=BLOCK_K, GROUP=GROUP_M,
                            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
