"""Naive muon_newton_schulz: every product of every step is a full GEMM.

Same normalization and strided (never materialized) transpose as the expert, and a plain tiled GEMM kernel
C = alpha * P Q + beta * D with fp32 accumulation for all three products of a step: A = X X^T, B = b A + c A A,
X' = a X + B X. Correct, but it computes both triangles of the two symmetric products (A and A A), about 1.4x to
1.5x the multiply-adds the symmetric formulation needs.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _sumsq_kernel(g_ptr, ss_ptr, MN, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    b = tl.program_id(1)
    offs = pid.to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    x = tl.load(g_ptr + b.to(tl.int64) * MN + offs, mask=offs < MN, other=0.0).to(tl.float32)
    tl.atomic_add(ss_ptr + b, tl.sum(x * x, axis=0))


@triton.jit
def _scale_kernel(g_ptr, ss_ptr, x_ptr, MN, eps, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    b = tl.program_id(1)
    inv = 1.0 / (tl.sqrt(tl.load(ss_ptr + b)) + eps)
    offs = pid.to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    base = b.to(tl.int64) * MN
    x = tl.load(g_ptr + base + offs, mask=offs < MN, other=0.0).to(tl.float32)
    tl.store(x_ptr + base + offs, (x * inv).to(tl.bfloat16), mask=offs < MN)


@triton.jit
def _gemm_kernel(p_ptr, q_ptr, d_ptr, c_ptr, Mr, Nc, K,
                 s_pb, s_pm, s_pk, s_qb, s_qk, s_qn, s_cb, s_cm, s_cn, alpha, beta,
                 HAS_D: tl.constexpr, DOT_F32: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = alpha * P Q (+ beta * D); D has C's strides. All operands strided, batch in grid axis 2."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    bat = tl.program_id(2).to(tl.int64)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pp = p_ptr + bat * s_pb + rm[:, None].to(tl.int64) * s_pm + rk[None, :].to(tl.int64) * s_pk
    pq = q_ptr + bat * s_qb + rk[:, None].to(tl.int64) * s_qk + rn[None, :].to(tl.int64) * s_qn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kmask = (k0 + rk) < K
        p = tl.load(pp, mask=(rm[:, None] < Mr) & kmask[None, :], other=0.0)
        q = tl.load(pq, mask=kmask[:, None] & (rn[None, :] < Nc), other=0.0)
        if DOT_F32:  # Triton 3.1's CPU interpreter multiplies bf16 dot operands as raw integers
            p = p.to(tl.float32)
            q = q.to(tl.float32)
        acc += tl.dot(p, q)
        pp += BK * s_pk
        pq += BK * s_qk
    out = acc * alpha
    cmask = (rm[:, None] < Mr) & (rn[None, :] < Nc)
    offs = bat * s_cb + rm[:, None].to(tl.int64) * s_cm + rn[None, :].to(tl.int64) * s_cn
    if HAS_D:
        out += beta * tl.load(d_ptr + offs, mask=cmask, other=0.0).to(tl.float32)
    tl.store(c_ptr + offs, out.to(tl.bfloat16), mask=cmask)


def _gemm(P, Q, D, C, Mr, Nc, K, sp, sq, sc, alpha, beta, has_d, dot_f32, nb):
    BM, BN, BK = 128, 128, 64
    grid = (triton.cdiv(Mr, BM), triton.cdiv(Nc, BN), nb)
    _gemm_kernel[grid](P, Q, D, C, Mr, Nc, K, sp[0], sp[1], sp[2], sq[0], sq[1], sq[2], sc[0], sc[1], sc[2],
                       alpha, beta, HAS_D=has_d, DOT_F32=dot_f32, BM=BM, BN=BN, BK=BK,
                       num_warps=8, num_stages=3)


def solve(G, X, *, steps, coef_a, coef_b, coef_c, eps):
    B, M, N = G.shape
    MN = M * N
    dot_f32 = not G.is_cuda
    ss = torch.zeros((B,), dtype=torch.float32, device=G.device)
    _sumsq_kernel[(triton.cdiv(MN, 4096), B)](G, ss, MN, BLOCK_E=4096)
    scratch = torch.empty((B, M, N), dtype=torch.bfloat16, device=G.device)
    bufs = [X, scratch]
    _scale_kernel[(triton.cdiv(MN, 4096), B)](G, ss, bufs[steps % 2], MN, eps, BLOCK_E=4096)
    if steps == 0:
        return
    if M > N:
        m, n, s_r, s_c = N, M, 1, N
    else:
        m, n, s_r, s_c = M, N, N, 1
    A = torch.empty((B, m, m), dtype=torch.bfloat16, device=G.device)
    S = torch.empty((B, m, m), dtype=torch.bfloat16, device=G.device)
    sq_mat = (m * m, m, 1)
    for s in range(steps):
        cur = bufs[(steps - s) % 2]
        nxt = bufs[(steps - s - 1) % 2]
        # A = X X^T: P = X [m, n], Q = X^T [n, m]
        _gemm(cur, cur, A, A, m, m, n, (MN, s_r, s_c), (MN, s_c, s_r), sq_mat, 1.0, 0.0, False, dot_f32, B)
        # S = b A + c A A
        _gemm(A, A, A, S, m, m, m, sq_mat, sq_mat, sq_mat, coef_c, coef_b, True, dot_f32, B)
        # X' = a X + S X
        _gemm(S, cur, cur, nxt, m, n, m, sq_mat, (MN, s_r, s_c), (MN, s_r, s_c), 1.0, coef_a, True, dot_f32, B)
