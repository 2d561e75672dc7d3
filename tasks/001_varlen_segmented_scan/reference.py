"""Input generator and PyTorch reference for varlen_segmented_scan.

y[t, h] = g[s, h] + g[s + 1, h] + ... + g[t, h], where s is the first token of the sequence that holds t.
The sequences are packed along the token axis; cu_seqlens[b] is the first token of sequence b and
cu_seqlens[B] == T.
"""

import torch

# The longest sequence the generator draws (a 1M-token context window); see the constraint in task.toml.
MAX_SEQLEN = 1 << 20
# Spread of the log-normal weights the sequence lengths are drawn from: lengths vary over orders of magnitude.
LENGTH_SIGMA = 1.5


def _split_tokens(total, weights, limit):
    """Split `total` extra tokens over the entries of `weights` in proportion to them, each entry getting at
    most `limit`; rounding goes by largest remainder. Returns an int64 tensor that sums to `total`."""
    n = weights.numel()
    extra = torch.zeros(n, dtype=torch.int64)
    free = weights > 0
    if not bool(free.any()):
        free = torch.ones(n, dtype=torch.bool)
    remaining = int(total)
    while remaining > 0:
        w = torch.where(free, weights, torch.zeros_like(weights))
        if float(w.sum()) <= 0.0:
            w = free.to(torch.float64)
        share = w / w.sum() * remaining
        add = torch.floor(share).to(torch.int64)
        short = remaining - int(add.sum())
        if short > 0:
            frac = torch.where(free, share - add.to(torch.float64), torch.full_like(share, -1.0))
            add[torch.topk(frac, short).indices] += 1
        room = limit - extra
        take = torch.minimum(add, room)
        extra += take
        remaining = int((add - take).sum())
        free = free & (extra < limit)
        if remaining > 0 and not bool(free.any()):
            free = extra < limit
    return extra


def _draw_seqlens(T, B, gen):
    """B sequence lengths, each in [1, MAX_SEQLEN], summing to T; log-normally spread, and with B >= 2 at
    least one sequence of a single token (a decode step in a mixed batch)."""
    if T < B or T > B * MAX_SEQLEN:
        raise ValueError(f"need B <= T <= B * {MAX_SEQLEN}, got T={T}, B={B}")
    weights = torch.exp(LENGTH_SIGMA * torch.randn(B, generator=gen, dtype=torch.float64))
    if B >= 2 and T > B and T - B <= (B - 1) * (MAX_SEQLEN - 1):
        single = int(torch.randint(0, B, (1,), generator=gen))
        weights[single] = 0.0
    lengths = 1 + _split_tokens(T - B, weights, MAX_SEQLEN - 1)
    assert int(lengths.sum()) == T and int(lengths.min()) >= 1 and int(lengths.max()) <= MAX_SEQLEN
    return lengths


def generate_inputs(axes, params, seed, device):
    T, H, B = int(axes["T"]), int(axes["H"]), int(axes["B"])
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))
    lengths = _draw_seqlens(T, B, gen)
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int64)
    cu_seqlens[1:] = torch.cumsum(lengths, dim=0)
    # Per-token, per-head log decay gates, as a gated linear-attention / Mamba layer makes them: logsigmoid of
    # a pre-activation. All negative, mean about -0.8, between about -5 and -0.005.
    g = torch.nn.functional.logsigmoid(torch.randn(T, H, generator=gen, dtype=torch.float32))
    return {
        "g": g.to(device),
        "cu_seqlens": cu_seqlens.to(torch.int32).to(device),
    }


def reference(g, cu_seqlens):
    """Plain eager PyTorch: one cumsum per sequence."""
    y = torch.empty_like(g)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        start, end = bounds[b], bounds[b + 1]
        y[start:end] = torch.cumsum(g[start:end], dim=0)
    return y
