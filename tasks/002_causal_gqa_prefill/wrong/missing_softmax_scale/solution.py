"""Flash attention over the packed batch, one program per (query head, block of packed tokens).

Each row finds its sequence start in cu_seqlens and sees the keys of its own sequence up to its own position,
with an online softmax computed in base 2 (the scores are converted with log2(e)).
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64


@triton.jit
def _dot(a, b, F32_DOT: tl.constexpr):
    # F32_DOT only for CPU tensors: Triton's interpreter mis-multiplies bf16 operands.
    if F32_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _flash_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, qk_scale, T, B, HQ, HKV,
                  G: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  F32_DOT: tl.constexpr):
    blk = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // G  # the G consecutive query heads of a group share key/value head h // G
    rows = blk * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < T
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    # The start of each row's sequence: the last cu_seqlens[b] at or before it.
    row_start = tl.zeros([BLOCK_M], dtype=tl.int32)
    for b in range(0, B):
        s0 = tl.load(cu_ptr + b)
        row_start = tl.where(s0 <= rows, s0, row_start)
    lo = tl.min(tl.where(row_ok, row_start, T), axis=0)
    hi = tl.minimum(blk * BLOCK_M + BLOCK_M, T)

    q = tl.load(q_ptr + (rows.to(tl.int64) * HQ + h)[:, None] * D + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        col_ok = cols < hi
        kv_off = (cols.to(tl.int64) * HKV + kvh)[:, None] * D + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        s = _dot(q, tl.trans(k), F32_DOT) * qk_scale
        visible = (cols[None, :] >= row_start[:, None]) & (cols[None, :] <= rows[:, None]) & col_ok[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + _dot(p.to(tl.bfloat16), v, F32_DOT)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(o_ptr + (rows.to(tl.int64) * HQ + h)[:, None] * D + offs_d[None, :], out.to(tl.bfloat16),
             mask=row_ok[:, None])


def solve(q, k, v, cu_seqlens, o, sm_scale):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    B = cu_seqlens.shape[0] - 1
    qk_scale = 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    grid = (triton.cdiv(T, BLOCK_M), HQ)
    _flash_kernel[grid](q, k, v, o, cu_seqlens, qk_scale, T, B, HQ, HKV,
                        G=HQ // HKV, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, F32_DOT=not q.is_cuda,
                        num_warps=4, num_stages=2)
