"""Naive varlen segmented scan: one program per (sequence, block of heads).

Each program walks its own sequence from start to end in blocks of BLOCK_T tokens, scans each block with
tl.cumsum and carries the running total to the next block. Correct for any segmentation, but the work per
program is the sequence length: a few long sequences leave most of the GPU idle while their programs walk
serially, and the loop never has more than one block of loads in flight.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _seq_scan_kernel(g_ptr, cu_ptr, y_ptr, H,
                     BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    seq = tl.program_id(0)
    hblk = tl.program_id(1)
    start = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)
    offs_t = tl.arange(0, BLOCK_T)
    offs_h = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = offs_h < H
    carry = tl.zeros([BLOCK_H], dtype=tl.float32)
    for t0 in range(start, end, BLOCK_T):
        rows = t0 + offs_t
        mask = (rows < end)[:, None] & mask_h[None, :]
        ptrs = rows.to(tl.int64)[:, None] * H + offs_h[None, :]
        x = tl.load(g_ptr + ptrs, mask=mask, other=0.0)
        s = tl.cumsum(x, axis=0) + carry[None, :]
        tl.store(y_ptr + ptrs, s, mask=mask)
        carry = carry + tl.sum(x, axis=0)


def solve(g, cu_seqlens, y):
    T, H = g.shape
    B = cu_seqlens.shape[0] - 1
    if T == 0:
        return
    BLOCK_H = min(triton.next_power_of_2(H), 32)
    BLOCK_T = max(16, 2048 // BLOCK_H)
    grid = (B, triton.cdiv(H, BLOCK_H))
    _seq_scan_kernel[grid](g, cu_seqlens, y, H, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H)
