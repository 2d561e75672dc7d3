"""Segmented scan as a three-pass reduce-then-scan over token tiles.

Pass 1 reduces every tile of BLOCK_T tokens to per-head tile sums, pass 2 scans the tile sums into tile
offsets, pass 3 rescans each tile with tl.cumsum and adds its offset. Every pass is fully parallel over tiles.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_sums_kernel(g_ptr, sums_ptr, T, H, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    tile = tl.program_id(0)
    hblk = tl.program_id(1)
    rows = tile * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = (rows < T)[:, None] & (cols < H)[None, :]
    x = tl.load(g_ptr + rows.to(tl.int64)[:, None] * H + cols[None, :], mask=mask, other=0.0)
    tl.store(sums_ptr + tile * H + cols, tl.sum(x, axis=0), mask=cols < H)


@triton.jit
def _scan_sums_kernel(sums_ptr, offs_ptr, n_tiles, H, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr):
    hblk = tl.program_id(0)
    cols = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    carry = tl.zeros([BLOCK_H], dtype=tl.float32)
    for n0 in range(0, n_tiles, BLOCK_N):
        tiles = n0 + tl.arange(0, BLOCK_N)
        mask = (tiles < n_tiles)[:, None] & (cols < H)[None, :]
        s = tl.load(sums_ptr + tiles[:, None] * H + cols[None, :], mask=mask, other=0.0)
        incl = tl.cumsum(s, axis=0)
        # exclusive offset of each tile = everything before it
        tl.store(offs_ptr + tiles[:, None] * H + cols[None, :], incl - s + carry[None, :], mask=mask)
        carry = carry + tl.sum(s, axis=0)


@triton.jit
def _tile_scan_kernel(g_ptr, offs_ptr, y_ptr, T, H, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    tile = tl.program_id(0)
    hblk = tl.program_id(1)
    rows = tile * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = (rows < T)[:, None] & (cols < H)[None, :]
    ptrs = rows.to(tl.int64)[:, None] * H + cols[None, :]
    x = tl.load(g_ptr + ptrs, mask=mask, other=0.0)
    off = tl.load(offs_ptr + tile * H + cols, mask=cols < H, other=0.0)
    tl.store(y_ptr + ptrs, tl.cumsum(x, axis=0) + off[None, :], mask=mask)


def solve(g, cu_seqlens, y):
    T, H = g.shape
    if T == 0:
        return
    BLOCK_H = min(triton.next_power_of_2(H), 32)
    BLOCK_T = max(16, 4096 // BLOCK_H)
    n_tiles = triton.cdiv(T, BLOCK_T)
    n_hblk = triton.cdiv(H, BLOCK_H)
    sums = torch.empty((n_tiles, H), dtype=torch.float32, device=g.device)
    offs = torch.empty((n_tiles, H), dtype=torch.float32, device=g.device)
    _tile_sums_kernel[(n_tiles, n_hblk)](g, sums, T, H, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H)
    _scan_sums_kernel[(n_hblk,)](sums, offs, n_tiles, H, BLOCK_N=128, BLOCK_H=BLOCK_H)
    _tile_scan_kernel[(n_tiles, n_hblk)](g, offs, y, T, H, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H)
