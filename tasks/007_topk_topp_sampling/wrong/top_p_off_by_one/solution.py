"""The expert's rejection sampler that accepts a token only while the mass including its own stays below top_p."""

import triton
import triton.language as tl

BLOCK = 2048
NUM_WARPS = 8


@triton.jit
def _topk_topp_sample(logits_ptr, temp_ptr, topk_ptr, topp_ptr, u_ptr, ids_ptr, V, stride_row,
                      R: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    inv_t = 1.0 / tl.load(temp_ptr + row)
    k = tl.load(topk_ptr + row)
    p = tl.load(topp_ptr + row)
    lanes = tl.arange(0, BLOCK)

    # Pass 0: per-lane online max, rescaled sums and argmax; reduced once.
    m_vec = tl.full([BLOCK], float("-inf"), tl.float32)
    s_vec = tl.zeros([BLOCK], tl.float32)
    i_vec = tl.zeros([BLOCK], tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + lanes
        z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
        m_new = tl.maximum(m_vec, z)
        live = m_new > float("-inf")
        s_vec = tl.where(live, s_vec * tl.exp(m_vec - m_new) + tl.exp(z - m_new), 0.0)
        i_vec = tl.where(z > m_vec, offs, i_vec)
        m_vec = m_new
    m = tl.max(m_vec, 0)
    Z = tl.sum(tl.where(m_vec > float("-inf"), s_vec * tl.exp(m_vec - m), 0.0), 0)
    argmax = tl.min(tl.where(m_vec == m, i_vec, V), 0)

    p_z = tl.where(p >= 1.0, float("inf"), p * Z)   # top_p >= 1: no mass limit
    n_test = tl.where((k < V) | (p < 1.0), V, 0)   # both filters off: every draw is accepted

    zero_i = k * 0
    low = m * 0.0 + float("-inf")      # C(low) false: the kept set lies in {z > low}
    high = m                 # C(high) true: {z >= high} lies in the kept set
    mass_low = Z             # mass of {z > low}, in units of exp(z - m)
    sel = argmax + zero_i
    done = zero_i
    r = zero_i
    while (r < R) & (done == 0):
        # Sampling pass: inverse CDF over {z > low}, stopping at the tile that holds the draw.
        target = tl.load(u_ptr + row * R + r) * mass_low
        cum = Z * 0.0
        found = zero_i + V
        last = zero_i - 1
        start = zero_i
        while (start < V) & (found == V):
            offs = start + lanes
            z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
            ok = z > low
            e = tl.where(ok, tl.exp(z - m), 0.0)
            c = tl.cumsum(e, 0) + cum
            found = tl.min(tl.where(ok & (c > target), offs, V), 0)
            last = tl.maximum(last, tl.max(tl.where(ok, offs, -1), 0))
            cum += tl.sum(e, 0)
            start += BLOCK
        j = tl.where(found < V, found, last)   # fp32 rounding can leave the target past the last prefix
        zj = tl.load(base + tl.maximum(j, 0)) * inv_t
        mid = (zj + high) * 0.5

        # Test pass: count and mass strictly above both pivots, per lane until the end.
        c0 = tl.zeros([BLOCK], tl.int32)
        c1 = tl.zeros([BLOCK], tl.int32)
        s0 = tl.zeros([BLOCK], tl.float32)
        s1 = tl.zeros([BLOCK], tl.float32)
        for t0 in range(0, n_test, BLOCK):
            offs = t0 + lanes
            z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
            e = tl.exp(z - m)
            a0 = z > zj
            a1 = z > mid
            c0 += a0.to(tl.int32)
            c1 += a1.to(tl.int32)
            s0 += tl.where(z >= zj, e, 0.0)   # the mass up to and including the drawn token
            s1 += tl.where(a1, e, 0.0)
        mass0 = tl.sum(s0, 0)
        mass1 = tl.sum(s1, 0)
        accept = (tl.sum(c0, 0) < k) & (mass0 < p_z)
        mid_ok = (tl.sum(c1, 0) < k) & (mass1 < p_z)
        sel = tl.where(accept, j, sel)
        done = accept.to(tl.int32)
        low = tl.where(mid_ok, zj, mid)
        mass_low = tl.where(mid_ok, mass0, mass1)
        high = tl.where(mid_ok, mid, high)
        r += 1
    tl.store(ids_ptr + row, sel.to(tl.int64))


def solve(logits, temperature, top_k, top_p, u, ids):
    """logits [B, V] fp32, temperature [B] fp32, top_k [B] int32, top_p [B] fp32, u [B, R] fp32;
    ids [B] int64 (output, written in place)."""
    B, V = logits.shape
    block = min(BLOCK, max(128, triton.next_power_of_2(V)))
    _topk_topp_sample[(B,)](logits, temperature, top_k, top_p, u, ids, V, logits.stride(0),
                            R=u.shape[1], BLOCK=block, num_warps=NUM_WARPS if block >= 1024 else 4)
