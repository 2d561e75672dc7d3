"""Input generator and PyTorch reference for causal_gqa_prefill.

Causal grouped-query attention over the packed sequences of a prefill batch. Sequence b holds tokens
cu_seqlens[b] .. cu_seqlens[b + 1] - 1 of q, k and v; query head h reads key/value head h // (HQ // HKV). For
every token i of a sequence and every query head h:

    o[i, h] = sum_j softmax_j(sm_scale * q[i, h] . k[j, h // G]) v[j, h // G],   j over the sequence's tokens <= i
"""

import torch

# The longest sequence the generator draws (see the constraint in task.toml). It also bounds the eager reference's
# memory: one sequence's score matrix is HQ x L x L, 34 GB in float64 for HQ = 64 and L = 8192.
MAX_SEQLEN = 8192
# Lengths are drawn with weights uniform in [1 - SPREAD, 1 + SPREAD] (a longest-to-shortest ratio of up to 3).
SPREAD = 0.5
# From this many sequences on, the batch holds one empty sequence and one of a single token.
EDGE_CASES_FROM_B = 5
# Standard deviation of q and k: scores sm_scale * q . k have a standard deviation of about 2.25 for
# sm_scale = D ** -0.5, so attention is peaked on a few keys, as in trained models, and outputs are not averages
# close to zero.
QK_STD = 1.5


def _split_tokens(total, weights, limit):
    """Split `total` tokens over the entries of `weights` in proportion to them, each entry getting at most
    `limit`; rounding goes by largest remainder. Returns an int64 tensor that sums to `total`."""
    n = weights.numel()
    out = torch.zeros(n, dtype=torch.int64)
    free = weights > 0
    remaining = int(total)
    while remaining > 0:
        if not bool(free.any()):
            raise ValueError("the lengths cannot hold all tokens under the limit")
        w = torch.where(free, weights, torch.zeros_like(weights))
        share = w / w.sum() * remaining
        add = torch.floor(share).to(torch.int64)
        short = remaining - int(add.sum())
        if short > 0:
            frac = torch.where(free, share - add.to(torch.float64), torch.full_like(share, -1.0))
            add[torch.topk(frac, short).indices] += 1
        take = torch.minimum(add, limit - out)
        out += take
        remaining = int((add - take).sum())
        free = free & (out < limit)
    return out


def _draw_seqlens(T, B, gen):
    """B sequence lengths in [0, MAX_SEQLEN] summing to T, in random order. With B >= EDGE_CASES_FROM_B, one
    sequence is empty and one has a single token."""
    if T < 1 or B < 1 or T > B * MAX_SEQLEN:
        raise ValueError(f"need 1 <= T <= B * {MAX_SEQLEN}, got T={T}, B={B}")
    weights = 1.0 + SPREAD * (2.0 * torch.rand(B, generator=gen, dtype=torch.float64) - 1.0)
    fixed = torch.zeros(B, dtype=torch.int64)
    if B >= EDGE_CASES_FROM_B and T >= 2 and T - 1 <= (B - 2) * MAX_SEQLEN:
        pick = torch.randperm(B, generator=gen)[:2]
        weights[pick] = 0.0
        fixed[pick[1]] = 1  # pick[0] stays empty
    lengths = fixed + _split_tokens(T - int(fixed.sum()), weights, MAX_SEQLEN - fixed)
    assert int(lengths.sum()) == T and int(lengths.min()) >= 0 and int(lengths.max()) <= MAX_SEQLEN
    return lengths


def generate_inputs(axes, params, seed, device):
    T, HQ, HKV, D, B = (int(axes[a]) for a in ("T", "HQ", "HKV", "D", "B"))
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))
    lengths = _draw_seqlens(T, B, gen)
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int64)
    cu_seqlens[1:] = torch.cumsum(lengths, dim=0)
    # The bulk draws run on the device's own generator (fast for the large workloads), seeded from the same seed.
    dgen = torch.Generator(device=device)
    dgen.manual_seed(int(seed) * 7919 + 17)
    q = (QK_STD * torch.randn(T, HQ, D, generator=dgen, device=device)).to(torch.bfloat16)
    k = (QK_STD * torch.randn(T, HKV, D, generator=dgen, device=device)).to(torch.bfloat16)
    v = torch.randn(T, HKV, D, generator=dgen, device=device).to(torch.bfloat16)
    return {"q": q, "k": k, "v": v, "cu_seqlens": cu_seqlens.to(torch.int32).to(device)}


def reference(q, k, v, cu_seqlens, *, sm_scale):
    """Plain eager PyTorch: per sequence, the full score matrix, a causal mask, softmax, and P @ V."""
    T, HQ, D = q.shape
    HKV = k.shape[1]
    group = HQ // HKV
    # Softmax in float32 at least (float64 when the inputs are float64).
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    o = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        start, end = bounds[b], bounds[b + 1]
        n = end - start
        if n == 0:
            continue
        qs = q[start:end].transpose(0, 1)                                  # [HQ, n, D]
        ks = k[start:end].transpose(0, 1).repeat_interleave(group, dim=0)  # [HQ, n, D]
        vs = v[start:end].transpose(0, 1).repeat_interleave(group, dim=0)  # [HQ, n, D]
        scores = torch.matmul(qs, ks.transpose(1, 2)).to(acc_dtype)      # [HQ, n, n]
        scores *= sm_scale
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)
        scores.masked_fill_(future, float("-inf"))
        p = torch.softmax(scores, dim=-1).to(q.dtype)
        o[start:end] = torch.matmul(p, vs).transpose(0, 1)
    return o
