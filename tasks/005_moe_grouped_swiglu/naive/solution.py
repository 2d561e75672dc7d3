"""Naive moe_grouped_swiglu: one program per (token, expert) assignment and output tile, no alignment.

Each program gathers its token's hidden row and multiplies it against its expert's weight rows (a matrix-vector
product on CUDA cores), so every expert's weights are read once per assignment that uses them instead of once
per call: T*K/E times more weight traffic than a grouped GEMM, and no tensor cores. SwiGLU is applied in the
first kernel, the router weight in the second, and a third sums each token's K rows in a fixed order.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gate_up_rowwise(x_ptr, ids_ptr, w_ptr, h_ptr, D, F, K, BN: tl.constexpr, BK: tl.constexpr):
    a = tl.program_id(0)                      # assignment t * K + k
    pn = tl.program_id(1)
    t = (a // K).to(tl.int64)
    e = tl.load(ids_ptr + a).to(tl.int64)
    rn = pn * BN + tl.arange(0, BN)
    nm = rn < F
    rk = tl.arange(0, BK)
    acc_g = tl.zeros([BN], dtype=tl.float32)
    acc_u = tl.zeros([BN], dtype=tl.float32)
    w_base = w_ptr + e * 2 * F * D
    for k0 in range(0, D, BK):
        x = tl.load(x_ptr + t * D + k0 + rk).to(tl.float32)
        wg = tl.load(w_base + rn[:, None].to(tl.int64) * D + k0 + rk[None, :], mask=nm[:, None], other=0.0)
        wu = tl.load(w_base + (F + rn[:, None]).to(tl.int64) * D + k0 + rk[None, :], mask=nm[:, None], other=0.0)
        acc_g += tl.sum(wg.to(tl.float32) * x[None, :], axis=1)
        acc_u += tl.sum(wu.to(tl.float32) * x[None, :], axis=1)
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(h_ptr + a.to(tl.int64) * F + rn, h.to(tl.bfloat16), mask=nm)


@triton.jit
def _down_rowwise(h_ptr, ids_ptr, tw_ptr, w_ptr, y_ptr, D, F, BN: tl.constexpr, BK: tl.constexpr):
    a = tl.program_id(0)
    pn = tl.program_id(1)
    e = tl.load(ids_ptr + a).to(tl.int64)
    rn = pn * BN + tl.arange(0, BN)
    nm = rn < D
    rk = tl.arange(0, BK)
    acc = tl.zeros([BN], dtype=tl.float32)
    w_base = w_ptr + e * D * F
    for k0 in range(0, F, BK):
        h = tl.load(h_ptr + a.to(tl.int64) * F + k0 + rk).to(tl.float32)
        w = tl.load(w_base + rn[:, None].to(tl.int64) * F + k0 + rk[None, :], mask=nm[:, None], other=0.0)
        acc += tl.sum(w.to(tl.float32) * h[None, :], axis=1)
    y = acc * tl.load(tw_ptr + a)
    tl.store(y_ptr + a.to(tl.int64) * D + rn, y.to(tl.bfloat16), mask=nm)


@triton.jit
def _sum_k(y_ptr, out_ptr, D, K, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    dm = d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for k in range(0, K):
        acc += tl.load(y_ptr + (t * K + k) * D + d, mask=dm, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * D + d, acc.to(tl.bfloat16), mask=dm)


def solve(hidden, topk_ids, topk_weights, w_gate_up, w_down, out):
    T, D = hidden.shape
    K = topk_ids.shape[1]
    F = w_down.shape[2]
    h = torch.empty((T * K, F), dtype=torch.bfloat16, device=hidden.device)
    y = torch.empty((T * K, D), dtype=torch.bfloat16, device=hidden.device)
    BN, BK = 64, 64
    _gate_up_rowwise[(T * K, triton.cdiv(F, BN))](hidden, topk_ids, w_gate_up, h, D, F, K, BN=BN, BK=BK)
    _down_rowwise[(T * K, triton.cdiv(D, BN))](h, topk_ids, topk_weights, w_down, y, D, F, BN=BN, BK=BK)
    _sum_k[(T, triton.cdiv(D, 1024))](y, out, D, K, BLOCK_D=1024)
