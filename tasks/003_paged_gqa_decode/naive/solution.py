"""Naive paged decode attention: one program per (request, query head), walking the whole context serially.

Each program loads its query, then streams the request's cached tokens in blocks of BLOCK_N through the block
table with an online softmax, and writes its output. Correct for any lengths and page layout, but there are only
B * HQ programs, each as long as its request's context: a few long requests leave most SMs idle, the longest
request sets the time of the step, and the G query heads of a group each read their shared pages again. The
dot products run on the CUDA cores as elementwise products and row sums.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_N = 64


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, qk_scale, HQ, HKV, MAXP,
                   G: tl.constexpr, D: tl.constexpr, PS: tl.constexpr, BLOCK_N: tl.constexpr):
    h = tl.program_id(0)
    b = tl.program_id(1)
    kvh = h // G
    seqlen = tl.load(lens_ptr + b)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + (b * HQ + h) * D + offs_d).to(tl.float32)
    m_i = tl.full([1], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([D], dtype=tl.float32)
    for n0 in range(0, seqlen, BLOCK_N):
        tok = n0 + offs_n
        t_ok = tok < seqlen
        page = tl.load(bt_ptr + b * MAXP + tok // PS, mask=t_ok, other=0)
        row = (page.to(tl.int64) * PS + tok % PS) * HKV + kvh
        k = tl.load(k_ptr + row[:, None] * D + offs_d[None, :], mask=t_ok[:, None], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * qk_scale
        s = tl.where(t_ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        p = tl.exp2(s - m_new)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        v = tl.load(v_ptr + row[:, None] * D + offs_d[None, :], mask=t_ok[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new
    tl.store(o_ptr + (b * HQ + h) * D + offs_d, (acc / l_i).to(tl.bfloat16))


def solve(q, k_cache, v_cache, block_table, seq_lens, o, sm_scale):
    B, HQ, D = q.shape
    PS, HKV = k_cache.shape[1], k_cache.shape[2]
    MAXP = block_table.shape[1]
    _decode_kernel[(HQ, B)](q, k_cache, v_cache, block_table, seq_lens, o, sm_scale * LOG2E, HQ, HKV, MAXP,
                            G=HQ // HKV, D=D, PS=PS, BLOCK_N=BLOCK_N, num_warps=4)
