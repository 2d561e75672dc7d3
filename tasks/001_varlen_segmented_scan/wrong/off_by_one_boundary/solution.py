"""Segmented scan with head flags and a segmented associative scan.

A first kernel marks the sequence boundaries in a flag array; a second one walks the packed tokens in blocks,
one program per block of heads, with a segmented (value, flag) associative scan: a flagged element starts a new
running sum. The carry from the previous block only reaches the elements before the block's first flag.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _mark_boundaries_kernel(cu_ptr, flags_ptr, B, BLOCK: tl.constexpr):
    b = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = b < B
    # last token of every sequence: cu_seqlens[b + 1] - 1
    ends = tl.load(cu_ptr + b + 1, mask=mask, other=1)
    tl.store(flags_ptr + ends - 1, tl.full([BLOCK], 1, tl.int32), mask=mask)


@triton.jit
def _seg_combine(v1, f1, v2, f2):
    v = tl.where(f2 != 0, v2, v1 + v2)
    f = f1 | f2
    return v, f


@triton.jit
def _seg_scan_kernel(g_ptr, flags_ptr, y_ptr, T, H, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    hblk = tl.program_id(0)
    cols = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = cols < H
    carry = tl.zeros([BLOCK_H], dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        rows = t0 + tl.arange(0, BLOCK_T)
        mask_t = rows < T
        mask = mask_t[:, None] & mask_h[None, :]
        ptrs = rows.to(tl.int64)[:, None] * H + cols[None, :]
        x = tl.load(g_ptr + ptrs, mask=mask, other=0.0)
        f = tl.load(flags_ptr + rows, mask=mask_t, other=0)
        f2 = tl.broadcast_to(f[:, None], [BLOCK_T, BLOCK_H])
        v, seen = tl.associative_scan((x, f2), 0, _seg_combine)
        out = tl.where(seen != 0, v, v + carry[None, :])
        tl.store(y_ptr + ptrs, out, mask=mask)
        last = tl.sum(tl.where((rows == tl.minimum(t0 + BLOCK_T, T) - 1)[:, None], out, 0.0), axis=0)
        carry = last


def solve(g, cu_seqlens, y):
    T, H = g.shape
    B = cu_seqlens.shape[0] - 1
    if T == 0:
        return
    flags = torch.zeros(T, dtype=torch.int32, device=g.device)
    _mark_boundaries_kernel[(triton.cdiv(B, 256),)](cu_seqlens, flags, B, BLOCK=256)
    BLOCK_H = min(triton.next_power_of_2(H), 32)
    BLOCK_T = max(16, 2048 // BLOCK_H)
    _seg_scan_kernel[(triton.cdiv(H, BLOCK_H),)](g, flags, y, T, H, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H)
