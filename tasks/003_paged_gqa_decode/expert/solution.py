"""paged_gqa_decode: expert Triton solution (H200, sm_90).

Computes one decode step of grouped-query attention over a paged KV cache: for every sequence b and query head h,
o[b, h] = softmax(sm_scale * q[b, h] . K_b[t]) @ V_b[t] over the seq_lens[b] cached tokens t of b, where token t
sits in slot t % PS of page block_table[b, t // PS] and key/value head h // G serves the G = HQ / HKV query heads
of its group. bf16 in, fp32 softmax and accumulation, bf16 out.

Design:
  - L1: split-KV (flash-decoding). The context of each (sequence, kv head) is cut into chunks of CHUNK tokens, one
    program per chunk, so that even 8 sequences give the H200's 132 SMs hundreds of programs; each program runs an
    online softmax over its chunk and writes a partial output and its log-sum-exp. A second kernel combines the
    partials of each (sequence, head) with weights exp(lse_i - max lse). CHUNK is chosen on the host from the
    batch size and the block table's width (the lengths stay on the device), about 4 programs per SM.
  - L2: GQA packing. A program owns one kv head and all G query heads of its group as the rows of a 16-row tile,
    so every K/V page is loaded once for the group and both products run on tensor cores (tl.dot with M = 16).
    Pages are gathered through the block table inside the loop: block n of BLOCK_N tokens reads BLOCK_N / PS (or
    one) table entries and the rows they point to; tokens past seq_lens[b] are masked, padded entries never read.
  - L3: exp2 with log2(e) folded into the scale and the LSE kept in base 2; 128-token blocks (8 pages of 16 or two
    of 64), 4 warps, 3 stages so that several blocks of K and V are in flight per program; the kv head varies
    fastest in the grid, so the HKV programs of one chunk read the neighbouring 256-byte head slices of the same
    cache rows together; programs past the end of their sequence exit at once; int64 cache offsets.

Measured (NVIDIA H200, 2026-12-03, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
--compile-baseline-timeout 60 (scripts/gpu-check.sh pairs)`, bench/suite_targets.py --record): 0.4045 / 0.2304 /
0.291 / 0.1778 ms on llama3_8b_b64_ctx6k / llama3_8b_b8_ctx24k / llama3_70b_b64_ctx4k_page64 / qwen2_7b_b128_ctx2k;
42.47x / 27.67x / 62.2x / 192.9x over eager (geometric mean 61.27x, target 3.0x); 93% of speed-of-light on
llama3_8b_b64_ctx6k; naive kernel 2.512 / 3.55 / 2.837 / 1.49 ms (expert 6.209x / 15.41x / 9.751x / 8.379x faster);
torch.compile - / - / - / - ms.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_N = 128         # tokens per block of the loop
MIN_CHUNK = 512       # tokens per split at least
PROGRAMS_PER_SM = 4   # target programs per SM for the split kernel
NUM_WARPS = 4
NUM_STAGES = 3


@triton.jit
def _mma(a, b, F32_DOT: tl.constexpr):
    # F32_DOT is set only for CPU tensors (Triton's interpreter mis-multiplies bf16 operands); the values are bf16
    # either way, so the fp32 product is the same.
    if F32_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _split_kv_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, part_o_ptr, part_lse_ptr,
                     qk_scale, HQ, HKV, MAXP, NSPLIT, CHUNK,
                     G: tl.constexpr, D: tl.constexpr, PS: tl.constexpr, BLOCK_H: tl.constexpr,
                     BLOCK_N: tl.constexpr, F32_DOT: tl.constexpr):
    kvh = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    seqlen = tl.load(lens_ptr + b)
    lo = split * CHUNK
    if lo < seqlen:
        hi = tl.minimum(lo + CHUNK, seqlen)
        offs_h = tl.arange(0, BLOCK_H)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        h_ok = offs_h < G
        heads = kvh * G + offs_h
        q = tl.load(q_ptr + (b * HQ + heads)[:, None] * D + offs_d[None, :], mask=h_ok[:, None], other=0.0)

        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, D], dtype=tl.float32)
        bt_row = bt_ptr + b.to(tl.int64) * MAXP
        for n0 in range(lo, hi, BLOCK_N):
            tok = n0 + offs_n
            t_ok = tok < hi
            page = tl.load(bt_row + tok // PS, mask=t_ok, other=0)
            row = (page.to(tl.int64) * PS + tok % PS) * HKV + kvh
            kv_off = row[:, None] * D + offs_d[None, :]
            k = tl.load(k_ptr + kv_off, mask=t_ok[:, None], other=0.0)
            s = _mma(q, tl.trans(k), F32_DOT) * qk_scale
            s = tl.where(t_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + kv_off, mask=t_ok[:, None], other=0.0)
            acc = acc * alpha[:, None] + _mma(p.to(tl.bfloat16), v, F32_DOT)
            m_i = m_new

        # Partial output (normalized) and its log-sum-exp in base 2, at [b, head, split].
        slot = (b * HQ + heads).to(tl.int64) * NSPLIT + split
        tl.store(part_o_ptr + slot[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=h_ok[:, None])
        tl.store(part_lse_ptr + slot, m_i + tl.log2(l_i), mask=h_ok)


@triton.jit
def _combine_kernel(part_o_ptr, part_lse_ptr, lens_ptr, o_ptr, HQ, NSPLIT, CHUNK,
                    D: tl.constexpr, BLOCK_S: tl.constexpr):
    h = tl.program_id(0)
    b = tl.program_id(1)
    seqlen = tl.load(lens_ptr + b)
    n_split = (seqlen + CHUNK - 1) // CHUNK
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_ok = offs_s < n_split
    slot = (b * HQ + h).to(tl.int64) * NSPLIT + offs_s
    lse = tl.load(part_lse_ptr + slot, mask=s_ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    part = tl.load(part_o_ptr + slot[:, None] * D + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    out = tl.sum(part * w[:, None], axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + (b * HQ + h).to(tl.int64) * D + offs_d, out.to(tl.bfloat16))


def solve(q, k_cache, v_cache, block_table, seq_lens, o, sm_scale):
    B, HQ, D = q.shape
    PS, HKV = k_cache.shape[1], k_cache.shape[2]
    MAXP = block_table.shape[1]
    G = HQ // HKV
    # The lengths stay on the device; the block table's width bounds them. Choose the number of splits so that the
    # longest possible sequence alone gives about PROGRAMS_PER_SM programs per SM over the batch, with chunks of at
    # least MIN_CHUNK tokens.
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    max_len = MAXP * PS
    want = triton.cdiv(PROGRAMS_PER_SM * sms, B * HKV)
    nsplit = max(1, min(want, triton.cdiv(max_len, MIN_CHUNK)))
    chunk = triton.cdiv(triton.cdiv(max_len, nsplit), BLOCK_N) * BLOCK_N
    nsplit = triton.cdiv(max_len, chunk)
    part_o = torch.empty((B, HQ, nsplit, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B, HQ, nsplit), dtype=torch.float32, device=q.device)
    block_h = max(16, triton.next_power_of_2(G))
    _split_kv_kernel[(HKV, nsplit, B)](
        q, k_cache, v_cache, block_table, seq_lens, part_o, part_lse,
        sm_scale * LOG2E, HQ, HKV, MAXP, nsplit, chunk,
        G=G, D=D, PS=PS, BLOCK_H=block_h, BLOCK_N=BLOCK_N, F32_DOT=not q.is_cuda,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    _combine_kernel[(HQ, B)](part_o, part_lse, seq_lens, o, HQ, nsplit, chunk,
                             D=D, BLOCK_S=triton.next_power_of_2(nsplit), num_warps=4)
