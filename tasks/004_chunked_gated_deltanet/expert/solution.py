"""chunked_gated_deltanet: expert Triton solution (written for the H200, sm_90).

Computes the gated delta rule over the packed sequences of a prefill batch: per sequence and head, with q and k
L2-normalized, S_t = exp(g_t) (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T from S = 0 at the sequence
start, and o_t = scale * S_t q_t (bf16 q, k, v, o; fp32 g, beta; K = V = 128).

Design:
 - L1: the chunkwise WY/UT form. Within a chunk of C = 64 tokens of one sequence the C rank-1 updates collapse to
   h_end = gamma_C h_0 + (K * gamma_C / gamma)^T (U - W h_0) with W = T (beta gamma K), U = T (beta V) and
   T = (I + strictly_lower(beta K K^T * gamma_t / gamma_i))^-1 (gamma = exp of the chunk-local cumulative log
   decay), so every step is a dense matmul; the state only crosses chunk boundaries (C times fewer sequential
   steps), and chunks are cut per sequence, so the state restarts at zero at every sequence start.
 - L2: four launches: a tiny chunk table (per-sequence chunk offsets from cu_seqlens, on the device); the intra-chunk
   prep (one program per chunk and head: the A blocks, T by forward substitution on four 16x16 diagonal blocks merged
   with block products, W and U); the state recurrence (one program per (sequence, head, 32-wide V block), the
   fp32 state in registers, walking the sequence's chunks: stores the chunk's entry state, v_new = U - W h in place of
   U, h = gamma_C h + (K gamma_C / gamma)^T v_new); the output (one program per chunk, head and 64-wide V block:
   o = scale ((Q gamma) h_0 + (Q K^T * decay, causal) v_new)). Decays stay in log space as per-chunk cumulative
   sums, and only differences G_t - G_i <= 0 are exponentiated.
 - L3: bf16 tl.dot operands with fp32 accumulation for every product with K, V, W, U and the state; the 16x16
   inverse blocks in fp32 (ieee); normalization and decays in fp32; 4 warps, the state kernel pipelines its
   per-chunk loads (num_stages=2).

Measured (NVIDIA H200, 2026-12-03, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
--compile-baseline-timeout 60 (scripts/gpu-check.sh pairs)`, bench/suite_targets.py --record): 1.523 / 3.369 / 5.994
/ 0.4592 ms on qwen3_next_h32_4seq_16k / qwen3_next_h32_1seq_32k / qwen3_next_h32_16seq_64k /
qwen3_next_tp2_h16_64seq_8k; 976.1x / 2305x / 280.9x / 117x over eager (geometric mean 521.5x, target 3.0x); 8.427%
of speed-of-light on qwen3_next_h32_16seq_64k; naive kernel 9.616 / 47.8 / 32.11 / 1.901 ms (expert 6.312x / 14.19x
/ 5.357x / 4.14x faster); torch.compile - / - / - / - ms.
"""

import torch
import triton
import triton.language as tl

CHUNK = 64         # tokens per chunk (four 16-row blocks)
BV_STATE = 32      # V columns per state-recurrence program
BV_OUT = 64        # V columns per output program


@triton.jit
def _chunk_table_kernel(cu_ptr, cstart_ptr, cend_ptr, seq_off_ptr, B,
                        C: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_J: tl.constexpr):
    """Program b: seq_off[b] = chunks of the sequences before b; lists its chunks (start, end token);
    the last program also writes seq_off[B] = the total number of chunks."""
    b = tl.program_id(0)
    acc = tl.zeros([BLOCK_B], dtype=tl.int32)
    for b0 in range(0, b, BLOCK_B):
        bs = b0 + tl.arange(0, BLOCK_B)
        m = bs < b
        lo = tl.load(cu_ptr + bs, mask=m, other=0)
        hi = tl.load(cu_ptr + bs + 1, mask=m, other=0)
        acc += (hi - lo + C - 1) // C
    off = tl.sum(acc, axis=0).to(tl.int32)
    start = tl.load(cu_ptr + b)
    end = tl.load(cu_ptr + b + 1)
    n = (end - start + C - 1) // C
    tl.store(seq_off_ptr + b, off)
    if b == B - 1:
        tl.store(seq_off_ptr + B, off + n)
    for j0 in range(0, n, BLOCK_J):
        js = j0 + tl.arange(0, BLOCK_J)
        m = js < n
        s = start + js * C
        tl.store(cstart_ptr + off + js, s, mask=m)
        tl.store(cend_ptr + off + js, tl.minimum(s + C, end), mask=m)


@triton.jit
def _load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, blk: tl.constexpr,
                C: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    """Rows 16 blk .. 16 blk + 15 of the chunk that starts at token t0: the L2-normalized k (bf16), v (fp32), the
    chunk-local cumulative log decay G (fp32) and beta; rows at or past `end` are zero."""
    t = t0 + blk * 16 + tl.arange(0, 16)
    valid = t < end
    row = t.to(tl.int64) * H + h
    k = tl.load(k_ptr + row[:, None] * K + tl.arange(0, K)[None, :], mask=valid[:, None], other=0.0)
    k = k.to(tl.float32)
    k = k / tl.sqrt(tl.sum(k * k, axis=1) + eps)[:, None]
    v = tl.load(v_ptr + row[:, None] * V + tl.arange(0, V)[None, :], mask=valid[:, None], other=0.0)
    beta = tl.load(beta_ptr + row, mask=valid, other=0.0)
    # G[r] = g[t0] + ... + g[t]: the chunk's gates summed up to each row of this block
    tc = t0 + tl.arange(0, C)
    gall = tl.load(g_ptr + tc.to(tl.int64) * H + h, mask=tc < end, other=0.0)
    G = tl.sum(tl.where(tc[None, :] <= t[:, None], gall[None, :], 0.0), axis=1)
    return k.to(tl.bfloat16), v.to(tl.float32), G, beta


@triton.jit
def _inv_diag4(a0, a1, a2, a3):
    """(I + a)^-1 for four strictly lower 16x16 blocks, by forward substitution, the four interleaved:
    M = (I + a)^-1 - I satisfies M = -a - a M, and row t of M needs only the rows above it."""
    r = tl.arange(0, 16)
    m0 = tl.zeros([16, 16], dtype=tl.float32)
    m1 = tl.zeros([16, 16], dtype=tl.float32)
    m2 = tl.zeros([16, 16], dtype=tl.float32)
    m3 = tl.zeros([16, 16], dtype=tl.float32)
    for t in range(1, 16):
        sel = (r == t)[:, None]
        x0 = tl.sum(tl.where(sel, a0, 0.0), axis=0)
        x1 = tl.sum(tl.where(sel, a1, 0.0), axis=0)
        x2 = tl.sum(tl.where(sel, a2, 0.0), axis=0)
        x3 = tl.sum(tl.where(sel, a3, 0.0), axis=0)
        m0 = tl.where(sel, (-x0 - tl.sum(x0[:, None] * m0, axis=0))[None, :], m0)
        m1 = tl.where(sel, (-x1 - tl.sum(x1[:, None] * m1, axis=0))[None, :], m1)
        m2 = tl.where(sel, (-x2 - tl.sum(x2[:, None] * m2, axis=0))[None, :], m2)
        m3 = tl.where(sel, (-x3 - tl.sum(x3[:, None] * m3, axis=0))[None, :], m3)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    return m0 + eye, m1 + eye, m2 + eye, m3 + eye


@triton.jit
def _prep_kernel(k_ptr, v_ptr, g_ptr, beta_ptr, cstart_ptr, cend_ptr, seq_off_ptr, w_ptr, u_ptr, B, H, eps,
                 C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, DT: tl.constexpr):
    """One program per (chunk, head): W = T (beta gamma k), U = T (beta v) with T = (I + A)^-1, in 16-row blocks.
    DT is the dtype the dot operands are handed over in: bf16 on the GPU; fp32 (holding the same bf16 values) on
    the CPU, where Triton 3.1's interpreter mis-multiplies bf16 operands."""
    c = tl.program_id(0)
    h = tl.program_id(1)
    if c >= tl.load(seq_off_ptr + B):
        return
    t0 = tl.load(cstart_ptr + c)
    end = tl.load(cend_ptr + c)
    k0, v0, G0, b0 = _load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 0, C, K, V)
    k1, v1, G1, b1 = _load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 1, C, K, V)
    k2, v2, G2, b2 = _load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 2, C, K, V)
    k3, v3, G3, b3 = _load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 3, C, K, V)
    k0 = k0.to(DT)
    k1 = k1.to(DT)
    k2 = k2.to(DT)
    k3 = k3.to(DT)
    # A_ij = beta_i (k_i . k_j) exp(G_i - G_j), strictly below the diagonal (only differences <= 0 exponentiated)
    r = tl.arange(0, 16)
    lower = r[:, None] > r[None, :]
    a00 = tl.where(lower, tl.dot(k0, tl.trans(k0)) * b0[:, None] * tl.exp(tl.minimum(G0[:, None] - G0[None, :], 0.0)), 0.0)
    a11 = tl.where(lower, tl.dot(k1, tl.trans(k1)) * b1[:, None] * tl.exp(tl.minimum(G1[:, None] - G1[None, :], 0.0)), 0.0)
    a22 = tl.where(lower, tl.dot(k2, tl.trans(k2)) * b2[:, None] * tl.exp(tl.minimum(G2[:, None] - G2[None, :], 0.0)), 0.0)
    a33 = tl.where(lower, tl.dot(k3, tl.trans(k3)) * b3[:, None] * tl.exp(tl.minimum(G3[:, None] - G3[None, :], 0.0)), 0.0)
    a10 = tl.dot(k1, tl.trans(k0)) * b1[:, None] * tl.exp(tl.minimum(G1[:, None] - G0[None, :], 0.0))
    a20 = tl.dot(k2, tl.trans(k0)) * b2[:, None] * tl.exp(tl.minimum(G2[:, None] - G0[None, :], 0.0))
    a21 = tl.dot(k2, tl.trans(k1)) * b2[:, None] * tl.exp(tl.minimum(G2[:, None] - G1[None, :], 0.0))
    a30 = tl.dot(k3, tl.trans(k0)) * b3[:, None] * tl.exp(tl.minimum(G3[:, None] - G0[None, :], 0.0))
    a31 = tl.dot(k3, tl.trans(k1)) * b3[:, None] * tl.exp(tl.minimum(G3[:, None] - G1[None, :], 0.0))
    a32 = tl.dot(k3, tl.trans(k2)) * b3[:, None] * tl.exp(tl.minimum(G3[:, None] - G2[None, :], 0.0))

    # T's diagonal blocks by forward substitution; the blocks below by block forward substitution,
    # X_ij = -X_ii sum_{j <= l < i} A_il X_lj (fp32, full precision).
    x00, x11, x22, x33 = _inv_diag4(a00, a11, a22, a33)
    x10 = -tl.dot(x11, tl.dot(a10, x00, input_precision="ieee"), input_precision="ieee")
    x21 = -tl.dot(x22, tl.dot(a21, x11, input_precision="ieee"), input_precision="ieee")
    x32 = -tl.dot(x33, tl.dot(a32, x22, input_precision="ieee"), input_precision="ieee")
    x20 = -tl.dot(x22, tl.dot(a20, x00, input_precision="ieee") + tl.dot(a21, x10, input_precision="ieee"),
                  input_precision="ieee")
    x31 = -tl.dot(x33, tl.dot(a31, x11, input_precision="ieee") + tl.dot(a32, x21, input_precision="ieee"),
                  input_precision="ieee")
    x30 = -tl.dot(x33, tl.dot(a30, x00, input_precision="ieee") + tl.dot(a31, x10, input_precision="ieee")
                  + tl.dot(a32, x20, input_precision="ieee"), input_precision="ieee")

    # the right-hand sides beta gamma k and beta v, and T, as bf16 dot operands
    kg0 = (k0.to(tl.float32) * (b0 * tl.exp(G0))[:, None]).to(tl.bfloat16).to(DT)
    kg1 = (k1.to(tl.float32) * (b1 * tl.exp(G1))[:, None]).to(tl.bfloat16).to(DT)
    kg2 = (k2.to(tl.float32) * (b2 * tl.exp(G2))[:, None]).to(tl.bfloat16).to(DT)
    kg3 = (k3.to(tl.float32) * (b3 * tl.exp(G3))[:, None]).to(tl.bfloat16).to(DT)
    vb0 = (v0 * b0[:, None]).to(tl.bfloat16).to(DT)
    vb1 = (v1 * b1[:, None]).to(tl.bfloat16).to(DT)
    vb2 = (v2 * b2[:, None]).to(tl.bfloat16).to(DT)
    vb3 = (v3 * b3[:, None]).to(tl.bfloat16).to(DT)
    y00 = x00.to(tl.bfloat16).to(DT)
    y10 = x10.to(tl.bfloat16).to(DT)
    y11 = x11.to(tl.bfloat16).to(DT)
    y20 = x20.to(tl.bfloat16).to(DT)
    y21 = x21.to(tl.bfloat16).to(DT)
    y22 = x22.to(tl.bfloat16).to(DT)
    y30 = x30.to(tl.bfloat16).to(DT)
    y31 = x31.to(tl.bfloat16).to(DT)
    y32 = x32.to(tl.bfloat16).to(DT)
    y33 = x33.to(tl.bfloat16).to(DT)
    w0 = tl.dot(y00, kg0)
    u0 = tl.dot(y00, vb0)
    w1 = tl.dot(y11, kg1, tl.dot(y10, kg0))
    u1 = tl.dot(y11, vb1, tl.dot(y10, vb0))
    w2 = tl.dot(y22, kg2, tl.dot(y21, kg1, tl.dot(y20, kg0)))
    u2 = tl.dot(y22, vb2, tl.dot(y21, vb1, tl.dot(y20, vb0)))
    w3 = tl.dot(y33, kg3, tl.dot(y32, kg2, tl.dot(y31, kg1, tl.dot(y30, kg0))))
    u3 = tl.dot(y33, vb3, tl.dot(y32, vb2, tl.dot(y31, vb1, tl.dot(y30, vb0))))

    rk = tl.arange(0, K)[None, :]
    rv = tl.arange(0, V)[None, :]
    t = t0 + r
    row = t.to(tl.int64) * H + h
    tl.store(w_ptr + row[:, None] * K + rk, w0.to(tl.bfloat16), mask=(t < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u0.to(tl.bfloat16), mask=(t < end)[:, None])
    row += 16 * H
    tl.store(w_ptr + row[:, None] * K + rk, w1.to(tl.bfloat16), mask=(t + 16 < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u1.to(tl.bfloat16), mask=(t + 16 < end)[:, None])
    row += 16 * H
    tl.store(w_ptr + row[:, None] * K + rk, w2.to(tl.bfloat16), mask=(t + 32 < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u2.to(tl.bfloat16), mask=(t + 32 < end)[:, None])
    row += 16 * H
    tl.store(w_ptr + row[:, None] * K + rk, w3.to(tl.bfloat16), mask=(t + 48 < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u3.to(tl.bfloat16), mask=(t + 48 < end)[:, None])


@triton.jit
def _state_kernel(k_ptr, g_ptr, w_ptr, u_ptr, hs_ptr, cu_ptr, seq_off_ptr, H, eps,
                  C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr):
    """One program per (V block, head, sequence): walks the sequence's chunks with the fp32 state in registers.
    Per chunk: hs[c] = h (bf16); v_new = U - W h, written over U; h = gamma_C h + (k gamma_C / gamma)^T v_new."""
    vb = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    seq_start = tl.load(cu_ptr + b)
    seq_end = tl.load(cu_ptr + b + 1)
    c0 = tl.load(seq_off_ptr + b)
    rk = tl.arange(0, K)
    rv = vb * BV + tl.arange(0, BV)
    r = tl.arange(0, C)
    state = tl.zeros([K, BV], dtype=tl.float32)   # h = S^T, the [K, V block] slice; zero at the sequence start
    for j in range(0, tl.cdiv(seq_end - seq_start, C)):
        c = c0 + j
        t = seq_start + j * C + r
        valid = t < seq_end
        row = t.to(tl.int64) * H + h
        sb = state.to(tl.bfloat16)
        tl.store(hs_ptr + (c.to(tl.int64) * H + h) * K * V + rk[:, None] * V + rv[None, :], sb)
        w = tl.load(w_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0)
        u = tl.load(u_ptr + row[:, None] * V + rv[None, :], mask=valid[:, None], other=0.0)
        k = tl.load(k_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        G = tl.cumsum(tl.load(g_ptr + row, mask=valid, other=0.0), axis=0)
        v_new = (u.to(tl.float32) - tl.dot(w.to(DT), sb.to(DT))).to(tl.bfloat16)
        tl.store(u_ptr + row[:, None] * V + rv[None, :], v_new, mask=valid[:, None])
        g_last = tl.sum(tl.where(r == C - 1, G, 0.0), axis=0)   # padded rows add 0: the chunk's total
        # normalized k, times gamma_C / gamma_t
        kd = k * (tl.exp(g_last - G) / tl.sqrt(tl.sum(k * k, axis=1) + eps))[:, None]
        state = state * tl.exp(g_last) + tl.dot(tl.trans(kd.to(tl.bfloat16).to(DT)), v_new.to(DT))


@triton.jit
def _output_kernel(q_ptr, k_ptr, g_ptr, vn_ptr, hs_ptr, o_ptr, cstart_ptr, cend_ptr, seq_off_ptr, B, H, scale, eps,
                   C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr):
    """One program per (chunk, head, V block): o = scale ((q gamma) h_0 + (q k^T gamma_t / gamma_i, i <= t) v_new)."""
    c = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    if c >= tl.load(seq_off_ptr + B):
        return
    t0 = tl.load(cstart_ptr + c)
    end = tl.load(cend_ptr + c)
    r = tl.arange(0, C)
    t = t0 + r
    valid = t < end
    row = t.to(tl.int64) * H + h
    rk = tl.arange(0, K)
    rv = vb * BV + tl.arange(0, BV)
    q = tl.load(q_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    k = tl.load(k_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    G = tl.cumsum(tl.load(g_ptr + row, mask=valid, other=0.0), axis=0)
    q = q / tl.sqrt(tl.sum(q * q, axis=1) + eps)[:, None]
    k = k / tl.sqrt(tl.sum(k * k, axis=1) + eps)[:, None]
    hs = tl.load(hs_ptr + (c.to(tl.int64) * H + h) * K * V + rk[:, None] * V + rv[None, :])
    vn = tl.load(vn_ptr + row[:, None] * V + rv[None, :], mask=valid[:, None], other=0.0)
    s = tl.dot(q.to(tl.bfloat16).to(DT), tl.trans(k.to(tl.bfloat16).to(DT)))
    s = tl.where(r[:, None] >= r[None, :], s * tl.exp(tl.minimum(G[:, None] - G[None, :], 0.0)), 0.0)
    acc = tl.dot((q * tl.exp(G)[:, None]).to(tl.bfloat16).to(DT), hs.to(DT))
    acc = tl.dot(s.to(tl.bfloat16).to(DT), vn.to(DT), acc)
    tl.store(o_ptr + row[:, None] * V + rv[None, :], (acc * scale).to(tl.bfloat16), mask=valid[:, None])


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    """q, k: [T, H, K] bf16; v: [T, H, V] bf16; g, beta: [T, H] fp32; cu_seqlens: [B + 1] int32;
    o: [T, H, V] bf16 output (written in place)."""
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    dev = q.device
    # dot operands: bf16 on the GPU; fp32 holding the same bf16 values in Triton's CPU interpreter
    dt = tl.bfloat16 if q.is_cuda else tl.float32
    # Every sequence adds at most one partial chunk: T / C + B chunk slots bound the real count without a sync;
    # slots past the real count exit at once.
    nc_max = triton.cdiv(T, CHUNK) + B
    cstart = torch.empty((nc_max,), dtype=torch.int32, device=dev)
    cend = torch.empty((nc_max,), dtype=torch.int32, device=dev)
    seq_off = torch.empty((B + 1,), dtype=torch.int32, device=dev)
    _chunk_table_kernel[(B,)](cu_seqlens, cstart, cend, seq_off, B, C=CHUNK, BLOCK_B=1024, BLOCK_J=256)

    w = torch.empty((T, H, K), dtype=torch.bfloat16, device=dev)
    u = torch.empty((T, H, V), dtype=torch.bfloat16, device=dev)   # U, then v_new in place
    hs = torch.empty((nc_max, H, K, V), dtype=torch.bfloat16, device=dev)
    _prep_kernel[(nc_max, H)](k, v, g, beta, cstart, cend, seq_off, w, u, B, H, eps,
                              C=CHUNK, K=K, V=V, DT=dt, num_warps=4)
    # (On the CPU, where the interpreter's cost is per program, one program covers all of V.)
    bv_state, bv_out = (BV_STATE, BV_OUT) if q.is_cuda else (V, V)
    _state_kernel[(V // bv_state, H, B)](k, g, w, u, hs, cu_seqlens, seq_off, H, eps,
                                         C=CHUNK, K=K, V=V, BV=bv_state, DT=dt,
                                         num_warps=4, num_stages=2)
    _output_kernel[(nc_max, H, V // bv_out)](q, k, g, u, hs, o, cstart, cend, seq_off, B, H, scale, eps,
                                             C=CHUNK, K=K, V=V, BV=bv_out, DT=dt, num_warps=4)
