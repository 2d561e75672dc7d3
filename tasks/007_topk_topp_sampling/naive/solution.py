"""Naive topk_topp_sampling: find the exact threshold of the kept set, then sample once.

One program per row. A max pass and a sum pass give the softmax normalizer; then a radix select over the 32-bit
order-preserving keys of z = logits / temperature finds the smallest key whose token passes both filters (fewer
than top_k tokens and less than top_p of the mass above it): eight passes, each testing the 16 values of one
4-bit digit at once. A mass pass over the kept set {key >= threshold} and an inverse-CDF pass with u[b, 0] give
the sample. Sort-free and exact, but it always pays ~12 passes over the row to build the kept set explicitly,
where rejection sampling with pivots accepts after one or two rounds without ever locating the threshold.
"""

import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _okey(z):
    """Order-preserving unsigned key of fp32 z, as int64 in [0, 2^32)."""
    b = z.to(tl.int32, bitcast=True).to(tl.int64)
    return tl.where(b >= 0, b + 2147483648, -1 - b)


@triton.jit
def _naive_sample(logits_ptr, temp_ptr, topk_ptr, topp_ptr, u_ptr, ids_ptr, V, stride_row,
                  R: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    inv_t = 1.0 / tl.load(temp_ptr + row)
    k = tl.load(topk_ptr + row)
    p = tl.load(topp_ptr + row)
    lanes = tl.arange(0, BLOCK)

    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + lanes
        mx = tl.maximum(mx, tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t)
    m = tl.max(mx, 0)
    sv = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + lanes
        sv += tl.exp(tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t - m)
    # top_p >= 1 keeps every token: no mass limit
    p_z = tl.where(p >= 1.0, float("inf"), p * tl.sum(sv, 0))

    # Radix select: the smallest key kappa whose token passes both filters; the kept set is {key >= kappa}.
    digits = tl.arange(0, 16)
    lo = (k * 0).to(tl.int64)
    for level in tl.static_range(8):
        step = 1 << (28 - 4 * level)
        piv = lo + (digits.to(tl.int64) + 1) * step - 1
        cnt = tl.zeros([16], tl.int32)
        mass = tl.zeros([16], tl.float32)
        for start in range(0, V, BLOCK):
            offs = start + lanes
            z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
            e = tl.exp(z - m)
            gt = (_okey(z)[None, :] > piv[:, None]) & (offs < V)[None, :]
            cnt += tl.sum(gt.to(tl.int32), 1)
            mass += tl.sum(tl.where(gt, e[None, :], 0.0), 1)
        ok = (cnt < k) & (mass < p_z)
        d = tl.min(tl.where(ok, digits, 15), 0)
        lo = lo + d.to(tl.int64) * step

    kept_mass = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + lanes
        z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
        kept_mass += tl.where((_okey(z) >= lo) & (offs < V), tl.exp(z - m), 0.0)
    target = tl.load(u_ptr + row * R) * tl.sum(kept_mass, 0)
    cum = m * 0.0
    found = k * 0 + V
    last = k * 0 - 1
    for start in range(0, V, BLOCK):
        offs = start + lanes
        z = tl.load(base + offs, mask=offs < V, other=float("-inf")) * inv_t
        keep = (_okey(z) >= lo) & (offs < V)
        e = tl.where(keep, tl.exp(z - m), 0.0)
        c = tl.cumsum(e, 0) + cum
        found = tl.minimum(found, tl.min(tl.where(keep & (c > target), offs, V), 0))
        last = tl.maximum(last, tl.max(tl.where(keep, offs, -1), 0))
        cum += tl.sum(e, 0)
    tl.store(ids_ptr + row, tl.where(found < V, found, last).to(tl.int64))


def solve(logits, temperature, top_k, top_p, u, ids):
    B, V = logits.shape
    block = min(BLOCK, max(128, triton.next_power_of_2(V)))
    _naive_sample[(B,)](logits, temperature, top_k, top_p, u, ids, V, logits.stride(0),
                        R=u.shape[1], BLOCK=block, num_warps=8)
