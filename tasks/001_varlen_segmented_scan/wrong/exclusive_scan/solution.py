"""Per-sequence blocked scan: one program per (sequence, block of heads).

Each program walks its sequence in blocks of BLOCK_T tokens; the decay applied at token t is the sum of the
log gates accumulated before t, so the block scan is the running carry plus the block's prefix sums.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _seq_prefix_kernel(g_ptr, cu_ptr, y_ptr, H,
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
        incl = tl.cumsum(x, axis=0)
        # decay accumulated before each token of the block
        tl.store(y_ptr + ptrs, carry[None, :] + incl - x, mask=mask)
        carry = carry + tl.sum(x, axis=0)


def solve(g, cu_seqlens, y):
    T, H = g.shape
    B = cu_seqlens.shape[0] - 1
    if T == 0:
        return
    BLOCK_H = min(triton.next_power_of_2(H), 32)
    BLOCK_T = max(16, 2048 // BLOCK_H)
    _seq_prefix_kernel[(B, triton.cdiv(H, BLOCK_H))](g, cu_seqlens, y, H, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H)
