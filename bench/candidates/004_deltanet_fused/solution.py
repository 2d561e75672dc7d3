"""chunked_gated_deltanet: fused candidate Triton solution (written for the H200, sm_90).

Computes the gated delta rule over the packed sequences of a prefill batch: per sequence and head, with q and k
L2-normalized, S_t = exp(g_t) (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T from S = 0 at the sequence
start, and o_t = scale * S_t q_t (bf16 q, k, v, o; fp32 g, beta; K = V = 128).

Design:
 - L1: the chunkwise WY/UT form, with h = S^T and chunks of C = 64 tokens cut per sequence. With gamma the
   exponential of the chunk-local cumulative log decay G and T = (I + strictly_lower(beta K K^T * gamma_t /
   gamma_i))^-1, a chunk entered with state h_0 gives v_new = T diag(beta) (V - diag(gamma) K h_0) (the
   expert's U - W h_0, without forming W or U), o = scale ((Q gamma) h_0 + (Q K^T * gamma_t / gamma_i, i <= t)
   v_new) and h_C = gamma_C h_0 + (K gamma_C / gamma)^T v_new; the state restarts at zero at every sequence start.
 - L2: two launches. A parallel prep kernel, one program per (chunk slot, head), finds its chunk by scanning
   cu_seqlens on the device, builds T and stores it in bf16 as rows of a [T, H, 64] scratch (row t holds token
   t's row of its chunk's T), and (head 0) ranks the sequences by length for the walk's schedule. The walk, one
   program per (sequence, head, V block), longest sequences first, keeps the fp32 state slice in registers and
   for each chunk computes v_new, the chunk's output block and the next state: no chunk state, W, U or v_new
   ever reaches HBM. Traffic per token and head, as an estimate: q, k, v, g, beta and o once (1032 B, the floor)
   plus k, g and beta again in the prep (264 B) and T written and read once (2 x 128 B): about 1.5x the floor,
   against about 4x for the four-launch expert.
 - L3: bf16 tl.dot operands with fp32 accumulation for every product with Q, K, V, T, v_new and the state; the
   walk feeds the raw bf16 q and k tiles to the dots and applies the fp32 normalizations 1 / |x| to the products'
   rows (to v_new's rows for the state update), so no normalized copy of either tile is kept; T's 16x16 diagonal
   blocks by row-wise forward substitution (four independent chains in one loop) and the blocks below by block
   substitution in fp32 (ieee); decays in log space (only non-positive differences exponentiated) and the carried
   state in fp32; the V block width (64, 32 or 16) is the widest that gives the walk two programs per SM; 4 warps,
   the walk's per-chunk loads pipelined (num_stages=2).

Measured (NVIDIA H200, 2026-12-04, d2k eval --seeds 1 --max-time 1 --no-baselines): 1.3348 / 3.9507 / 4.1565 /
0.3345 ms on the four timed workloads; see NOTES.md.
"""

import torch
import triton
import triton.language as tl

CHUNK = 64         # tokens per chunk (four 16-row blocks)
SUB = 16           # rows per block of the triangular inverse
BV_MAX = 64        # widest V block of the walk (see _walk_block)
WALK_WARPS = 4     # 8 fails to compile with Triton 3.1 for sm_90 (an mma -> mma layout conversion); 3.6 takes it
WALK_STAGES = 2    # software-pipelining depth of the walk's per-chunk loads


@triton.jit
def _unit_k_block(k_ptr, row, valid, eps, K: tl.constexpr):
    """The rows `row` of k (masked by `valid`), L2-normalized in fp32."""
    x = tl.load(k_ptr + row[:, None] * K + tl.arange(0, K)[None, :], mask=valid[:, None], other=0.0)
    x = x.to(tl.float32)
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=1) + eps))[:, None]


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
def _store_tblock(t_ptr, x, rowbase, valid, col0: tl.constexpr, C: tl.constexpr, R: tl.constexpr):
    """Store a 16x16 block of T (bf16) at columns col0 .. col0 + 15 of the rows `rowbase` of the [T, H, C] scratch."""
    cc = col0 + tl.arange(0, R)
    tl.store(t_ptr + rowbase[:, None] * C + cc[None, :], x.to(tl.bfloat16), mask=valid[:, None])


@triton.jit
def _prep_kernel(k_ptr, g_ptr, beta_ptr, cu_ptr, t_ptr, order_ptr, B, H, eps,
                 C: tl.constexpr, R: tl.constexpr, K: tl.constexpr, BLOCK_B: tl.constexpr, DT: tl.constexpr):
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
    ka = _unit_k_block(k_ptr, ra, va, eps, K).to(tl.bfloat16).to(DT)
    kb = _unit_k_block(k_ptr, rb, vb, eps, K).to(tl.bfloat16).to(DT)
    kc = _unit_k_block(k_ptr, rc, vc, eps, K).to(tl.bfloat16).to(DT)
    kd = _unit_k_block(k_ptr, rd, vd, eps, K).to(tl.bfloat16).to(DT)
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

    # A in blocks (rows past the chunk's end have k = 0: their rows and columns of A vanish).
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

    # Diagonal blocks of T by forward substitution: with X = (I + a)^-1 and a strictly lower, row t of X is
    # e_t - a_t X, and a_t touches only the rows above t (already final). X starts as I; the four chains interleave.
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

    # Store T row-block by row-block; the blocks above the diagonal are zero and are stored too, so that the walk
    # reads whole 64-wide rows.
    zero = tl.zeros([R, R], dtype=tl.float32)
    _store_tblock(t_ptr, xaa, ra, va, 0, C, R)
    _store_tblock(t_ptr, zero, ra, va, R, C, R)
    _store_tblock(t_ptr, zero, ra, va, 2 * R, C, R)
    _store_tblock(t_ptr, zero, ra, va, 3 * R, C, R)
    _store_tblock(t_ptr, xba, rb, vb, 0, C, R)
    _store_tblock(t_ptr, xbb, rb, vb, R, C, R)
    _store_tblock(t_ptr, zero, rb, vb, 2 * R, C, R)
    _store_tblock(t_ptr, zero, rb, vb, 3 * R, C, R)
    _store_tblock(t_ptr, xca, rc, vc, 0, C, R)
    _store_tblock(t_ptr, xcb, rc, vc, R, C, R)
    _store_tblock(t_ptr, xcc, rc, vc, 2 * R, C, R)
    _store_tblock(t_ptr, zero, rc, vc, 3 * R, C, R)
    _store_tblock(t_ptr, xda, rd, vd, 0, C, R)
    _store_tblock(t_ptr, xdb, rd, vd, R, C, R)
    _store_tblock(t_ptr, xdc, rd, vd, 2 * R, C, R)
    _store_tblock(t_ptr, xdd, rd, vd, 3 * R, C, R)


@triton.jit
def _walk_kernel(q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, cu_ptr, t_ptr, order_ptr, o_ptr, H, scale, eps,
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


def _walk_block(H, B, V, sms):
    """V block width of the walk: the widest of BV_MAX, ..., 16 that still gives two programs per SM (wider blocks
    recompute Q K^T and the normalizations fewer times; narrower ones shorten the sequential chain's steps)."""
    bv = BV_MAX
    while bv > 16 and H * B * (V // bv) < 2 * sms:
        bv //= 2
    return bv


def _launch(q, k, v, g, beta, cu_seqlens, o, scale, eps, bv=None, num_warps=None):
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    dev = q.device
    # dot operands: bf16 on the GPU; fp32 holding the same bf16 values in Triton's CPU interpreter
    dt = tl.bfloat16 if q.is_cuda else tl.float32
    if bv is None:
        if q.is_cuda:
            bv = _walk_block(H, B, V, torch.cuda.get_device_properties(dev).multi_processor_count)
        else:
            bv = V   # the interpreter's cost is per program: one program covers all of V
    if num_warps is None:
        num_warps = WALK_WARPS
    # At most T / C + B chunks (every sequence adds at most one partial chunk): slots past the real count exit
    # after the scan, without a host synchronization.
    slots = triton.cdiv(T, CHUNK) + B
    tinv = torch.empty((T, H, CHUNK), dtype=torch.bfloat16, device=dev)
    order = torch.empty((B,), dtype=torch.int32, device=dev)
    block_b = min(1024, max(16, triton.next_power_of_2(B)))
    _prep_kernel[(slots, H)](k, g, beta, cu_seqlens, tinv, order, B, H, eps,
                             C=CHUNK, R=SUB, K=K, BLOCK_B=block_b, DT=dt, num_warps=4)
    _walk_kernel[(V // bv, H, B)](q, k, v, g, beta, cu_seqlens, tinv, order, o, H, scale, eps,
                                  C=CHUNK, K=K, V=V, BV=bv, DT=dt, num_warps=num_warps, num_stages=WALK_STAGES)


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    """q, k: [T, H, K] bf16; v: [T, H, V] bf16; g, beta: [T, H] fp32; cu_seqlens: [B + 1] int32;
    o: [T, H, V] bf16 output (written in place)."""
    _launch(q, k, v, g, beta, cu_seqlens, o, scale, eps)
