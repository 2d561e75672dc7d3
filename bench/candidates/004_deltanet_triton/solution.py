"""chunked_gated_deltanet: Triton candidate, the expert until 2026-12-07 (written for the H200, sm_90).

Computes the gated delta rule over the packed sequences of a prefill batch: per sequence and head, with q and k
L2-normalized, S_t = exp(g_t) (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T from S = 0 at the sequence
start, and o_t = scale * S_t q_t (bf16 q, k, v, o; fp32 g, beta; K = V = 128).

Design:
 - L1: the chunkwise WY/UT form, with h = S^T and chunks of C = 64 tokens cut per sequence (the state restarts at
   zero at every sequence start). With gamma the exponential of the chunk-local cumulative log decay G and
   T = (I + strictly_lower(beta K K^T * gamma_t / gamma_i))^-1, a chunk entered with state h_0 gives
   v_new = U - W h_0 = T diag(beta) (V - diag(gamma) K h_0) (W = T (beta gamma K), U = T (beta V)),
   o = scale ((Q gamma) h_0 + (Q K^T * gamma_t / gamma_i, i <= t) v_new) and h_C = gamma_C h_0 + (K gamma_C /
   gamma)^T v_new: every step is a dense matmul, and the state only crosses chunk boundaries (C times fewer
   sequential steps).
 - L2: two paths, picked per call from the shapes and the SM count alone (no host synchronization). Fused, two
   launches: a parallel prep per (chunk slot, head) finds its chunk by scanning cu_seqlens on the device, stores T
   in bf16 as rows of a [T, H, 64] scratch and ranks the sequences by length; a walk per (sequence, head, V block),
   longest sequences first, keeps the fp32 state slice in registers and per chunk computes v_new, the chunk's output
   and the next state, so no chunk state, W, U or v_new reaches HBM. Split, the previous expert's four launches: a
   chunk table from cu_seqlens; a prep per (chunk, head) writing W and U; a state walk per (sequence, head, 32-wide
   V block) storing each chunk's entry state and v_new (over U); an output kernel per (chunk, head, 64-wide V
   block). Rule: the fused path when its walk gets two programs per SM with V blocks at least 32 wide, H B (V / 32)
   >= 2 SMs (at V = 128 on the H200's 132 SMs: H B >= 66 (sequence, head) chains); the split path otherwise. With
   few chains the walk is latency-bound, its time the chain's chunk count times one step's latency: the split walk's
   step is two dots deep (W h, then K^T v_new), the fused walk's three (K h, T y, K^T v_new) beside the output's Q
   K^T, Q h and P v_new, which the split path does afterwards in parallel over all chunks. With many chains the
   fused path's smaller traffic (about 1.5x the floor's bytes by estimate, against about 4x) wins.
 - L3: bf16 tl.dot operands with fp32 accumulation for every product with Q, K, V, T, W, U, v_new and the state;
   both preps build T alike (the fused prep through _tinv_blocks, the split prep through its own code): the 16x16
   diagonal blocks by row-wise forward substitution (four independent chains in one loop), the blocks below by block
   substitution in fp32 (ieee); the fused walk feeds the raw bf16 q and k tiles to the dots and applies the fp32
   normalizations 1 / |x| to the products' rows, the split path normalizes the tiles; decays in log space (only
   non-positive differences exponentiated), the carried state in fp32; the fused walk's V block is the widest of 64,
   32, 16 that gives two programs per SM (64 or 32 whenever that path runs), the split path's 32 (state) and 64
   (output); 4 warps, both walks pipeline their per-chunk loads (num_stages=2). In the CPU interpreter the dot
   operands are fp32 holding bf16 values, one program covers all of V, and the rule assumes the H200's 132 SMs.

Measured (NVIDIA H200, 2026-12-04, `d2k eval TASK --solutions expert,naive --seeds 1 --max-time 1
--compile-baseline-timeout 60 (scripts/gpu-check.sh pairs)`, bench/suite_targets.py --record): 1.334 / 3.428 / 4.194
/ 0.3349 ms on qwen3_next_h32_4seq_16k / qwen3_next_h32_1seq_32k / qwen3_next_h32_16seq_64k /
qwen3_next_tp2_h16_64seq_8k; 758.3x / 1414x / 267.2x / 141.5x over eager (geometric mean 448.7x, target 3.0x);
12.13% of speed-of-light on qwen3_next_h32_16seq_64k; naive kernel 9.216 / 49.07 / 33.93 / 1.882 ms (expert 6.908x /
14.31x / 8.09x / 5.618x faster); torch.compile - / - / - / - ms.
"""

import torch
import triton
import triton.language as tl

CHUNK = 64         # tokens per chunk (four 16-row blocks)
SUB = 16           # rows per block of the triangular inverse
FUSED_MIN_BV = 32  # the fused path runs where its walk fills the GPU with V blocks at least this wide (_use_fused)
CPU_SMS = 132      # the SM count the rule assumes in the CPU interpreter: the H200's, so it takes the H200's path
# fused path
BV_MAX = 64        # widest V block of the fused walk (see _walk_block)
WALK_WARPS = 4     # 8 fails to compile with Triton 3.1 for sm_90 (an mma -> mma layout conversion); 3.6 takes it
WALK_STAGES = 2    # software-pipelining depth of the fused walk's per-chunk loads
# split path
BV_STATE = 32      # V columns per state-walk program
BV_OUT = 64        # V columns per output program


# ---------------------------------------------------------------- shared: T = (I + A)^-1 of one chunk

@triton.jit
def _gram_block(ki, kj, bi, Gi, Gj, DIAG: tl.constexpr, R: tl.constexpr):
    """One 16x16 block of A: beta_i (k_i . k_j) exp(G_i - G_j), the exponent clamped at 0 (only i > j survives);
    on a diagonal block the diagonal and upper triangle are zeroed."""
    a = tl.dot(ki, tl.trans(kj)) * bi[:, None] * tl.exp(tl.minimum(Gi[:, None] - Gj[None, :], 0.0))
    if DIAG:
        rr = tl.arange(0, R)
        a = tl.where(rr[:, None] > rr[None, :], a, 0.0)
    return a


@triton.jit
def _tinv_blocks(ka, kb, kc, kd, ba, bb, bc, bd, Ga, Gb, Gc, Gd, R: tl.constexpr):
    """T = (I + A)^-1 of one chunk, A = strictly_lower(beta_i (k_i . k_j) exp(G_i - G_j)), from its four 16-row
    blocks a..d of unit keys (dot operands; rows past the chunk's end zero, so their rows and columns of A vanish),
    beta and G. Returns the ten fp32 blocks on and below the diagonal: xaa, xba, xbb, xca, xcb, xcc, xda, xdb,
    xdc, xdd."""
    aaa = _gram_block(ka, ka, ba, Ga, Ga, True, R)
    abb = _gram_block(kb, kb, bb, Gb, Gb, True, R)
    acc_ = _gram_block(kc, kc, bc, Gc, Gc, True, R)
    add = _gram_block(kd, kd, bd, Gd, Gd, True, R)
    aba = _gram_block(kb, ka, bb, Gb, Ga, False, R)
    aca = _gram_block(kc, ka, bc, Gc, Ga, False, R)
    acb = _gram_block(kc, kb, bc, Gc, Gb, False, R)
    ada = _gram_block(kd, ka, bd, Gd, Ga, False, R)
    adb = _gram_block(kd, kb, bd, Gd, Gb, False, R)
    adc = _gram_block(kd, kc, bd, Gd, Gc, False, R)

    # Diagonal blocks by forward substitution: with X = (I + a)^-1 and a strictly lower, row t of X is
    # e_t - a_t X, and a_t touches only the rows above t (already final). X starts as I; the four chains interleave.
    r = tl.arange(0, R)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    xaa = eye
    xbb = eye
    xcc = eye
    xdd = eye
    for t in range(1, R):
        sel = r[:, None] == t
        ra_t = tl.sum(tl.where(sel, aaa, 0.0), axis=0)
        rb_t = tl.sum(tl.where(sel, abb, 0.0), axis=0)
        rc_t = tl.sum(tl.where(sel, acc_, 0.0), axis=0)
        rd_t = tl.sum(tl.where(sel, add, 0.0), axis=0)
        xaa -= tl.where(sel, tl.sum(ra_t[:, None] * xaa, axis=0)[None, :], 0.0)
        xbb -= tl.where(sel, tl.sum(rb_t[:, None] * xbb, axis=0)[None, :], 0.0)
        xcc -= tl.where(sel, tl.sum(rc_t[:, None] * xcc, axis=0)[None, :], 0.0)
        xdd -= tl.where(sel, tl.sum(rd_t[:, None] * xdd, axis=0)[None, :], 0.0)

    # Blocks below the diagonal: X_ij = -X_ii sum_{j <= l < i} A_il X_lj (fp32 products).
    xba = -tl.dot(xbb, tl.dot(aba, xaa, input_precision="ieee"), input_precision="ieee")
    xcb = -tl.dot(xcc, tl.dot(acb, xbb, input_precision="ieee"), input_precision="ieee")
    xdc = -tl.dot(xdd, tl.dot(adc, xcc, input_precision="ieee"), input_precision="ieee")
    sca = tl.dot(aca, xaa, input_precision="ieee") + tl.dot(acb, xba, input_precision="ieee")
    xca = -tl.dot(xcc, sca, input_precision="ieee")
    sdb = tl.dot(adb, xbb, input_precision="ieee") + tl.dot(adc, xcb, input_precision="ieee")
    xdb = -tl.dot(xdd, sdb, input_precision="ieee")
    sda = (tl.dot(ada, xaa, input_precision="ieee") + tl.dot(adb, xba, input_precision="ieee")
           + tl.dot(adc, xca, input_precision="ieee"))
    xda = -tl.dot(xdd, sda, input_precision="ieee")
    return xaa, xba, xbb, xca, xcb, xcc, xda, xdb, xdc, xdd


# ---------------------------------------------------------------- fused path: prep (T), fused walk

@triton.jit
def _fused_unit_k_block(k_ptr, row, valid, eps, K: tl.constexpr):
    """The rows `row` of k (masked by `valid`), L2-normalized in fp32."""
    x = tl.load(k_ptr + row[:, None] * K + tl.arange(0, K)[None, :], mask=valid[:, None], other=0.0)
    x = x.to(tl.float32)
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=1) + eps))[:, None]


@triton.jit
def _fused_store_tblock(t_ptr, x, rowbase, valid, col0: tl.constexpr, C: tl.constexpr, R: tl.constexpr):
    """Store a 16x16 block of T (bf16) at columns col0 .. col0 + 15 of the rows `rowbase` of the [T, H, C] scratch."""
    cc = col0 + tl.arange(0, R)
    tl.store(t_ptr + rowbase[:, None] * C + cc[None, :], x.to(tl.bfloat16), mask=valid[:, None])


@triton.jit
def _fused_prep_kernel(k_ptr, g_ptr, beta_ptr, cu_ptr, t_ptr, order_ptr, B, H, eps,
                       C: tl.constexpr, R: tl.constexpr, K: tl.constexpr, BLOCK_B: tl.constexpr,
                       DT: tl.constexpr):
    """Program (c, h): chunk slot c (chunks numbered sequence by sequence), head h. Writes T = (I + A)^-1 of that
    chunk as rows of the [T, H, C] scratch. Programs of head 0 with c < B also write order[rank of sequence c] = c,
    the ranks sorting the sequences by decreasing length. DT is the dtype that carries dot operands: bf16 on the
    GPU; fp32 holding bf16-rounded values in the CPU interpreter (Triton 3.1's interpreter mis-multiplies bf16)."""
    c = tl.program_id(0)
    h = tl.program_id(1)

    # One pass over cu_seqlens: where chunk slot c lies, and how many sequences come before sequence c in order.
    len_c = tl.load(cu_ptr + c + 1, mask=c < B, other=0) - tl.load(cu_ptr + c, mask=c < B, other=0)
    done = 0          # chunks of the sequences already scanned
    t0 = 0
    end = 0
    rank = 0
    for b0 in range(0, B, BLOCK_B):
        bs = b0 + tl.arange(0, BLOCK_B)
        m = bs < B
        lo = tl.load(cu_ptr + bs, mask=m, other=0)
        hi = tl.load(cu_ptr + bs + 1, mask=m, other=0)
        n = (hi - lo + C - 1) // C
        first = tl.cumsum(n, axis=0) - n + done        # first chunk number of each sequence
        hit = m & (first <= c) & (c < first + n)
        t0 += tl.sum(tl.where(hit, lo + (c - first) * C, 0), axis=0)
        end += tl.sum(tl.where(hit, hi, 0), axis=0)
        done += tl.sum(n, axis=0)
        ln = hi - lo
        ahead = m & ((ln > len_c) | ((ln == len_c) & (bs < c)))
        rank += tl.sum(ahead.to(tl.int32), axis=0)
    tl.store(order_ptr + rank, c, mask=(h == 0) & (c < B))
    if t0 >= end:
        return   # a slot past the last chunk

    # The chunk's four 16-row blocks: unit keys (bf16 dot operands), G = cumulative log decay, beta.
    r = tl.arange(0, R)
    ta = t0 + r
    tb = ta + R
    tc = tb + R
    td = tc + R
    va = ta < end
    vb = tb < end
    vc = tc < end
    vd = td < end
    ra = ta.to(tl.int64) * H + h
    rb = tb.to(tl.int64) * H + h
    rc = tc.to(tl.int64) * H + h
    rd = td.to(tl.int64) * H + h
    ka = _fused_unit_k_block(k_ptr, ra, va, eps, K).to(tl.bfloat16).to(DT)
    kb = _fused_unit_k_block(k_ptr, rb, vb, eps, K).to(tl.bfloat16).to(DT)
    kc = _fused_unit_k_block(k_ptr, rc, vc, eps, K).to(tl.bfloat16).to(DT)
    kd = _fused_unit_k_block(k_ptr, rd, vd, eps, K).to(tl.bfloat16).to(DT)
    ga = tl.load(g_ptr + ra, mask=va, other=0.0)
    gb = tl.load(g_ptr + rb, mask=vb, other=0.0)
    gc = tl.load(g_ptr + rc, mask=vc, other=0.0)
    gd = tl.load(g_ptr + rd, mask=vd, other=0.0)
    Ga = tl.cumsum(ga, axis=0)
    Gb = tl.cumsum(gb, axis=0) + tl.sum(ga, axis=0)
    Gc = tl.cumsum(gc, axis=0) + tl.sum(gb, axis=0) + tl.sum(ga, axis=0)
    Gd = tl.cumsum(gd, axis=0) + tl.sum(gc, axis=0) + tl.sum(gb, axis=0) + tl.sum(ga, axis=0)
    ba = tl.load(beta_ptr + ra, mask=va, other=0.0)
    bb = tl.load(beta_ptr + rb, mask=vb, other=0.0)
    bc = tl.load(beta_ptr + rc, mask=vc, other=0.0)
    bd = tl.load(beta_ptr + rd, mask=vd, other=0.0)

    xaa, xba, xbb, xca, xcb, xcc, xda, xdb, xdc, xdd = _tinv_blocks(ka, kb, kc, kd, ba, bb, bc, bd,
                                                                    Ga, Gb, Gc, Gd, R)

    # Store T row-block by row-block; the blocks above the diagonal are zero and are stored too, so that the walk
    # reads whole 64-wide rows.
    zero = tl.zeros([R, R], dtype=tl.float32)
    _fused_store_tblock(t_ptr, xaa, ra, va, 0, C, R)
    _fused_store_tblock(t_ptr, zero, ra, va, R, C, R)
    _fused_store_tblock(t_ptr, zero, ra, va, 2 * R, C, R)
    _fused_store_tblock(t_ptr, zero, ra, va, 3 * R, C, R)
    _fused_store_tblock(t_ptr, xba, rb, vb, 0, C, R)
    _fused_store_tblock(t_ptr, xbb, rb, vb, R, C, R)
    _fused_store_tblock(t_ptr, zero, rb, vb, 2 * R, C, R)
    _fused_store_tblock(t_ptr, zero, rb, vb, 3 * R, C, R)
    _fused_store_tblock(t_ptr, xca, rc, vc, 0, C, R)
    _fused_store_tblock(t_ptr, xcb, rc, vc, R, C, R)
    _fused_store_tblock(t_ptr, xcc, rc, vc, 2 * R, C, R)
    _fused_store_tblock(t_ptr, zero, rc, vc, 3 * R, C, R)
    _fused_store_tblock(t_ptr, xda, rd, vd, 0, C, R)
    _fused_store_tblock(t_ptr, xdb, rd, vd, R, C, R)
    _fused_store_tblock(t_ptr, xdc, rd, vd, 2 * R, C, R)
    _fused_store_tblock(t_ptr, xdd, rd, vd, 3 * R, C, R)


@triton.jit
def _fused_walk_kernel(q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, cu_ptr, t_ptr, order_ptr, o_ptr, H, scale, eps,
                       C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr):
    """Program (V block, head, rank): walks the chunks of sequence order[rank] in order with h[:, V block]
    (K x BV, fp32) in registers, from zero. Per chunk: v_new = T (beta (v - gamma (K h))), the chunk's output
    o = scale ((Q gamma) h + (Q K^T * gamma_t / gamma_i, i <= t) v_new), then h = gamma_C h + (K gamma_C / gamma)^T
    v_new."""
    pv = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.load(order_ptr + tl.program_id(2))
    start = tl.load(cu_ptr + b)
    end = tl.load(cu_ptr + b + 1)
    r = tl.arange(0, C)
    rk = tl.arange(0, K)
    rv = pv * BV + tl.arange(0, BV)
    causal = r[:, None] >= r[None, :]
    state = tl.zeros([K, BV], dtype=tl.float32)
    for j in range(0, tl.cdiv(end - start, C)):
        t = start + j * C + r
        valid = t < end
        row = t.to(tl.int64) * H + h
        # loads (independent of the state: the pipeliner can issue them a chunk ahead)
        kt = tl.load(k_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0)
        qt = tl.load(q_ptr + row[:, None] * K + rk[None, :], mask=valid[:, None], other=0.0)
        vv = tl.load(v_ptr + row[:, None] * V + rv[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        tm = tl.load(t_ptr + row[:, None] * C + r[None, :], mask=valid[:, None], other=0.0)
        gv = tl.load(g_ptr + row, mask=valid, other=0.0)
        bt = tl.load(beta_ptr + row, mask=valid, other=0.0)
        # Per-row factors. The raw bf16 q and k tiles are the dot operands; their normalizations 1 / |x| are
        # applied to the products' rows (or, for the state update, to v_new's rows), so no normalized fp32 copy
        # of either tile stays live. Decays: every exponent is <= 0.
        kf = kt.to(tl.float32)
        qf = qt.to(tl.float32)
        rkn = 1.0 / tl.sqrt(tl.sum(kf * kf, axis=1) + eps)
        rqn = 1.0 / tl.sqrt(tl.sum(qf * qf, axis=1) + eps)
        G = tl.cumsum(gv, axis=0)
        g_tot = tl.sum(gv, axis=0)
        gam = tl.exp(G)
        kop = kt.to(DT)
        qop = qt.to(DT)
        # intra-chunk attention block, scale included (does not depend on the state)
        p = tl.dot(qop, tl.trans(kop))
        p = tl.where(causal, p * ((scale * rqn)[:, None] * rkn[None, :])
                     * tl.exp(tl.minimum(G[:, None] - G[None, :], 0.0)), 0.0)
        # the chain: h -> K h -> v_new -> h
        hop = state.to(tl.bfloat16).to(DT)
        kh = tl.dot(kop, hop)
        y = bt[:, None] * (vv - (gam * rkn)[:, None] * kh)
        vn = tl.dot(tm.to(DT), y.to(tl.bfloat16).to(DT))
        acc = tl.dot(qop, hop) * (scale * rqn * gam)[:, None]
        acc = tl.dot(p.to(tl.bfloat16).to(DT), vn.to(tl.bfloat16).to(DT), acc)
        tl.store(o_ptr + row[:, None] * V + rv[None, :], acc.to(tl.bfloat16), mask=valid[:, None])
        vs = (vn * (rkn * tl.exp(g_tot - G))[:, None]).to(tl.bfloat16).to(DT)
        state = state * tl.exp(g_tot) + tl.dot(tl.trans(kop), vs)


# ---------------------------------------------------------------- split path (the expert's): table, prep (W, U),
#                                                                  state walk, output

@triton.jit
def _split_chunk_table_kernel(cu_ptr, cstart_ptr, cend_ptr, seq_off_ptr, B,
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
def _split_load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, blk: tl.constexpr,
                      C: tl.constexpr, R: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    """Rows R blk .. R blk + R - 1 of the chunk that starts at token t0: the L2-normalized k (bf16), v (fp32), the
    chunk-local cumulative log decay G (fp32) and beta; rows at or past `end` are zero."""
    t = t0 + blk * R + tl.arange(0, R)
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
def _split_inv_diag4(a0, a1, a2, a3):
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
def _split_prep_kernel(k_ptr, v_ptr, g_ptr, beta_ptr, cstart_ptr, cend_ptr, seq_off_ptr, w_ptr, u_ptr, B, H, eps,
                       C: tl.constexpr, R: tl.constexpr, K: tl.constexpr, V: tl.constexpr, DT: tl.constexpr):
    """One program per (chunk, head): W = T (beta gamma k), U = T (beta v) with T = (I + A)^-1, in 16-row blocks.
    DT is the dtype the dot operands are handed over in: bf16 on the GPU; fp32 (holding the same bf16 values) on
    the CPU, where Triton 3.1's interpreter mis-multiplies bf16 operands."""
    c = tl.program_id(0)
    h = tl.program_id(1)
    if c >= tl.load(seq_off_ptr + B):
        return
    t0 = tl.load(cstart_ptr + c)
    end = tl.load(cend_ptr + c)
    k0, v0, G0, b0 = _split_load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 0, C, R, K, V)
    k1, v1, G1, b1 = _split_load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 1, C, R, K, V)
    k2, v2, G2, b2 = _split_load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 2, C, R, K, V)
    k3, v3, G3, b3 = _split_load_block(k_ptr, v_ptr, g_ptr, beta_ptr, t0, end, h, H, eps, 3, C, R, K, V)
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
    x00, x11, x22, x33 = _split_inv_diag4(a00, a11, a22, a33)
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
    t = t0 + tl.arange(0, R)
    row = t.to(tl.int64) * H + h
    tl.store(w_ptr + row[:, None] * K + rk, w0.to(tl.bfloat16), mask=(t < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u0.to(tl.bfloat16), mask=(t < end)[:, None])
    row += R * H
    tl.store(w_ptr + row[:, None] * K + rk, w1.to(tl.bfloat16), mask=(t + R < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u1.to(tl.bfloat16), mask=(t + R < end)[:, None])
    row += R * H
    tl.store(w_ptr + row[:, None] * K + rk, w2.to(tl.bfloat16), mask=(t + 2 * R < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u2.to(tl.bfloat16), mask=(t + 2 * R < end)[:, None])
    row += R * H
    tl.store(w_ptr + row[:, None] * K + rk, w3.to(tl.bfloat16), mask=(t + 3 * R < end)[:, None])
    tl.store(u_ptr + row[:, None] * V + rv, u3.to(tl.bfloat16), mask=(t + 3 * R < end)[:, None])


@triton.jit
def _split_state_kernel(k_ptr, g_ptr, w_ptr, u_ptr, hs_ptr, cu_ptr, seq_off_ptr, H, eps,
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
def _split_output_kernel(q_ptr, k_ptr, g_ptr, vn_ptr, hs_ptr, o_ptr, cstart_ptr, cend_ptr, seq_off_ptr, B, H,
                         scale, eps,
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


# ---------------------------------------------------------------- host side: the rule and the two launch sequences

def _use_fused(H, B, V, sms):
    """The rule, from shapes and the SM count only: the fused path when its walk gets two programs per SM with
    V blocks of FUSED_MIN_BV or wider (then _walk_block picks 64 or 32), i.e. H B (V / 32) >= 2 SMs; otherwise
    the chains are too few to hide the fused walk's longer steps and the split path runs (module docstring, L2)."""
    return H * B * (V // FUSED_MIN_BV) >= 2 * sms


def _walk_block(H, B, V, sms):
    """V block width of the fused walk: the widest of BV_MAX, ..., 16 that still gives two programs per SM (wider
    blocks recompute Q K^T and the normalizations fewer times; narrower ones shorten the sequential chain's steps)."""
    bv = BV_MAX
    while bv > 16 and H * B * (V // bv) < 2 * sms:
        bv //= 2
    return bv


def _solve_fused(q, k, v, g, beta, cu_seqlens, o, scale, eps, sms):
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    dev = q.device
    # dot operands: bf16 on the GPU; fp32 holding the same bf16 values in Triton's CPU interpreter
    dt = tl.bfloat16 if q.is_cuda else tl.float32
    # the interpreter's cost is per program: on the CPU one program covers all of V
    bv = _walk_block(H, B, V, sms) if q.is_cuda else V
    # At most T / C + B chunks (every sequence adds at most one partial chunk): slots past the real count exit
    # after the scan, without a host synchronization.
    slots = triton.cdiv(T, CHUNK) + B
    tinv = torch.empty((T, H, CHUNK), dtype=torch.bfloat16, device=dev)
    order = torch.empty((B,), dtype=torch.int32, device=dev)
    block_b = min(1024, max(16, triton.next_power_of_2(B)))
    _fused_prep_kernel[(slots, H)](k, g, beta, cu_seqlens, tinv, order, B, H, eps,
                                   C=CHUNK, R=SUB, K=K, BLOCK_B=block_b, DT=dt, num_warps=4)
    _fused_walk_kernel[(V // bv, H, B)](q, k, v, g, beta, cu_seqlens, tinv, order, o, H, scale, eps,
                                        C=CHUNK, K=K, V=V, BV=bv, DT=dt,
                                        num_warps=WALK_WARPS, num_stages=WALK_STAGES)


def _solve_split(q, k, v, g, beta, cu_seqlens, o, scale, eps):
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    dev = q.device
    # dot operands: bf16 on the GPU; fp32 holding the same bf16 values in Triton's CPU interpreter
    dt = tl.bfloat16 if q.is_cuda else tl.float32
    # T / C + B chunk slots bound the real count without a sync; slots past the real count exit at once.
    nc_max = triton.cdiv(T, CHUNK) + B
    cstart = torch.empty((nc_max,), dtype=torch.int32, device=dev)
    cend = torch.empty((nc_max,), dtype=torch.int32, device=dev)
    seq_off = torch.empty((B + 1,), dtype=torch.int32, device=dev)
    _split_chunk_table_kernel[(B,)](cu_seqlens, cstart, cend, seq_off, B, C=CHUNK, BLOCK_B=1024, BLOCK_J=256)

    w = torch.empty((T, H, K), dtype=torch.bfloat16, device=dev)
    u = torch.empty((T, H, V), dtype=torch.bfloat16, device=dev)   # U, then v_new in place
    hs = torch.empty((nc_max, H, K, V), dtype=torch.bfloat16, device=dev)
    _split_prep_kernel[(nc_max, H)](k, v, g, beta, cstart, cend, seq_off, w, u, B, H, eps,
                                    C=CHUNK, R=SUB, K=K, V=V, DT=dt, num_warps=4)
    # the interpreter's cost is per program: on the CPU one program covers all of V
    bv_state, bv_out = (BV_STATE, BV_OUT) if q.is_cuda else (V, V)
    _split_state_kernel[(V // bv_state, H, B)](k, g, w, u, hs, cu_seqlens, seq_off, H, eps,
                                               C=CHUNK, K=K, V=V, BV=bv_state, DT=dt,
                                               num_warps=4, num_stages=2)
    _split_output_kernel[(nc_max, H, V // bv_out)](q, k, g, u, hs, o, cstart, cend, seq_off, B, H, scale, eps,
                                                   C=CHUNK, K=K, V=V, BV=bv_out, DT=dt, num_warps=4)


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    """q, k: [T, H, K] bf16; v: [T, H, V] bf16; g, beta: [T, H] fp32; cu_seqlens: [B + 1] int32;
    o: [T, H, V] bf16 output (written in place)."""
    H = q.shape[1]
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else CPU_SMS
    if _use_fused(H, B, V, sms):
        _solve_fused(q, k, v, g, beta, cu_seqlens, o, scale, eps, sms)
    else:
        _solve_split(q, k, v, g, beta, cu_seqlens, o, scale, eps)
