"""Split-KV paged decode attention: partial outputs per chunk of CHUNK tokens, then a combine kernel.

One program per (kv head, chunk, request) holds the G query heads of its group as the rows of a 16-row tile and
streams the chunk's tokens through the block table with an online softmax (exp2, log2(e) folded into the scale);
it writes its normalized partial output and its log-sum-exp. A request's context is the pages of its block table row; the
combine kernel merges the partials of each (request, query head) by their log-sum-exp.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
CHUNK = 256
BLOCK_N = 64


@triton.jit
def _dot(a, b, F32_DOT: tl.constexpr):
    # F32_DOT only for CPU tensors: Triton's interpreter mis-multiplies bf16 operands.
    if F32_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _partial_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, part_o_ptr, part_lse_ptr, qk_scale, B, HQ, HKV, MAXP,
                    NSPLIT, G: tl.constexpr, D: tl.constexpr, PS: tl.constexpr, CHUNK: tl.constexpr,
                    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, F32_DOT: tl.constexpr):
    kvh = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    seqlen = MAXP * PS  # every page of the request's block table row
    lo = split * CHUNK
    if lo < seqlen:
        offs_h = tl.arange(0, BLOCK_H)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        h_ok = offs_h < G
        heads = kvh * G + offs_h
        q = tl.load(q_ptr + (b * HQ + heads)[:, None] * D + offs_d[None, :], mask=h_ok[:, None], other=0.0)
        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, D], dtype=tl.float32)
        for n0 in range(lo, tl.minimum(lo + CHUNK, seqlen), BLOCK_N):
            tok = n0 + offs_n
            t_ok = tok < seqlen
            page = tl.load(bt_ptr + b * MAXP + tok // PS, mask=t_ok, other=0)
            row = (page.to(tl.int64) * PS + tok % PS) * HKV + kvh
            kv_off = row[:, None] * D + offs_d[None, :]
            k = tl.load(k_ptr + kv_off, mask=t_ok[:, None], other=0.0)
            s = _dot(q, tl.trans(k), F32_DOT) * qk_scale
            s = tl.where(t_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + kv_off, mask=t_ok[:, None], other=0.0)
            acc = acc * alpha[:, None] + _dot(p.to(tl.bfloat16), v, F32_DOT)
            m_i = m_new
        slot = (b * HQ + heads).to(tl.int64) * NSPLIT + split
        tl.store(part_o_ptr + slot[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=h_ok[:, None])
        tl.store(part_lse_ptr + slot, m_i + tl.log2(l_i), mask=h_ok)  # base-2 log-sum-exp


@triton.jit
def _combine_kernel(part_o_ptr, part_lse_ptr, lens_ptr, o_ptr, HQ, NSPLIT, MAXP,
                    D: tl.constexpr, PS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr):
    h = tl.program_id(0)
    b = tl.program_id(1)
    seqlen = MAXP * PS  # every page of the request's block table row
    n_split = (seqlen + CHUNK - 1) // CHUNK
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_ok = offs_s < n_split
    slot = (b * HQ + h).to(tl.int64) * NSPLIT + offs_s
    part = tl.load(part_o_ptr + slot[:, None] * D + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    lse = tl.load(part_lse_ptr + slot, mask=s_ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    out = tl.sum(part * w[:, None], axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + (b * HQ + h).to(tl.int64) * D + offs_d, out.to(tl.bfloat16))


def solve(q, k_cache, v_cache, block_table, seq_lens, o, sm_scale):
    B, HQ, D = q.shape
    PS, HKV = k_cache.shape[1], k_cache.shape[2]
    MAXP = block_table.shape[1]
    G = HQ // HKV
    nsplit = triton.cdiv(MAXP * PS, CHUNK)
    part_o = torch.empty((B, HQ, nsplit, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B, HQ, nsplit), dtype=torch.float32, device=q.device)
    _partial_kernel[(HKV, nsplit, B)](q, k_cache, v_cache, block_table, seq_lens, part_o, part_lse,
                                      sm_scale * LOG2E, B, HQ, HKV, MAXP, nsplit,
                                      G=G, D=D, PS=PS, CHUNK=CHUNK, BLOCK_H=max(16, triton.next_power_of_2(G)),
                                      BLOCK_N=BLOCK_N, F32_DOT=not q.is_cuda)
    _combine_kernel[(HQ, B)](part_o, part_lse, seq_lens, o, HQ, nsplit, MAXP,
                             D=D, PS=PS, CHUNK=CHUNK, BLOCK_S=triton.next_power_of_2(nsplit))
