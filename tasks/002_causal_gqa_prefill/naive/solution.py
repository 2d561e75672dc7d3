"""Naive causal GQA prefill: two passes over the keys, one program per (query head, block of packed tokens).

Each program owns BLOCK_M consecutive tokens of the packed batch for one query head; a row's sequence start comes
from a scan of cu_seqlens, and a row sees the keys from its sequence start up to itself. The softmax needs the
row maximum and the row sum before any probability can weight a value, so a first pass over the keys computes
them, and a second pass recomputes the scores, normalizes them and accumulates P @ V. Correct, but it reads K
twice and computes Q K^T twice, masks every key block, and the G query heads of a group each read their shared
K/V again.
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
def _two_pass_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, sm_scale, T, B, HQ, HKV,
                          G: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          F32_DOT: tl.constexpr):
    blk = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // G
    rows = blk * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < T
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    # The start of each row's sequence: the last cu_seqlens[b] at or before it.
    row_start = tl.zeros([BLOCK_M], dtype=tl.int32)
    for b in range(0, B):
        s = tl.load(cu_ptr + b)
        row_start = tl.where(s <= rows, s, row_start)
    lo = tl.min(tl.where(row_ok, row_start, T), axis=0)
    hi = tl.minimum(blk * BLOCK_M + BLOCK_M, T)

    q = tl.load(q_ptr + (rows.to(tl.int64) * HQ + h)[:, None] * D + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # Pass 1: row maximum and row sum of exp.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        col_ok = cols < hi
        k = tl.load(k_ptr + (cols.to(tl.int64) * HKV + kvh)[:, None] * D + offs_d[None, :], mask=col_ok[:, None],
                    other=0.0)
        s = _dot(q, tl.trans(k), F32_DOT) * sm_scale
        visible = (cols[None, :] >= row_start[:, None]) & (cols[None, :] <= rows[:, None]) & col_ok[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_safe) + tl.sum(tl.exp(s - m_safe[:, None]), axis=1)
        m_i = m_new

    # Pass 2: normalized probabilities times V.
    m_safe = tl.where(m_i == float("-inf"), 0.0, m_i)
    inv_l = 1.0 / tl.where(l_i > 0, l_i, 1.0)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        col_ok = cols < hi
        kv_off = (cols.to(tl.int64) * HKV + kvh)[:, None] * D + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        v = tl.load(v_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        s = _dot(q, tl.trans(k), F32_DOT) * sm_scale
        visible = (cols[None, :] >= row_start[:, None]) & (cols[None, :] <= rows[:, None]) & col_ok[None, :]
        p = tl.where(visible, tl.exp(s - m_safe[:, None]) * inv_l[:, None], 0.0)
        acc += _dot(p.to(tl.bfloat16), v, F32_DOT)

    tl.store(o_ptr + (rows.to(tl.int64) * HQ + h)[:, None] * D + offs_d[None, :], acc.to(tl.bfloat16),
             mask=row_ok[:, None])


def solve(q, k, v, cu_seqlens, o, sm_scale):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    B = cu_seqlens.shape[0] - 1
    grid = (triton.cdiv(T, BLOCK_M), HQ)
    _two_pass_attn_kernel[grid](q, k, v, o, cu_seqlens, sm_scale, T, B, HQ, HKV,
                                G=HQ // HKV, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, F32_DOT=not q.is_cuda,
                                num_warps=4, num_stages=2)
