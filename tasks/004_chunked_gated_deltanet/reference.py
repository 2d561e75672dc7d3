"""Input generator and PyTorch reference for chunked_gated_deltanet.

The gated delta rule (Gated DeltaNet; the linear-attention layers of Qwen3-Next) over the packed sequences of a
prefill batch. Sequence b holds tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1. Per head, a state S (V x K) starts
at zero at every sequence start, and for every token t of the sequence:

    q_t <- q_t / sqrt(|q_t|^2 + eps),  k_t <- k_t / sqrt(|k_t|^2 + eps)       (L2 normalization per head)
    S_t  = exp(g_t) * (S_{t-1} - beta_t * (S_{t-1} k_t) k_t^T) + beta_t * v_t k_t^T
    o_t  = scale * S_t q_t
"""

import math

import torch

# The longest sequence the generator draws (see the constraint in task.toml).
MAX_SEQLEN = 65536
# Lengths are drawn with weights uniform in [1 - SPREAD, 1 + SPREAD] (a longest-to-shortest ratio up to 3).
SPREAD = 0.5
# From this many sequences on, the batch holds one sequence of a single token.
SINGLE_FROM_B = 5


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
    """B lengths in [1, MAX_SEQLEN] summing to T, in random order; with B >= SINGLE_FROM_B, one sequence has a
    single token (a short chat turn packed with long prompts)."""
    if B < 1 or T < B or T > B * MAX_SEQLEN:
        raise ValueError(f"need 1 <= B <= T <= B * {MAX_SEQLEN}, got T={T}, B={B}")
    weights = 1.0 + SPREAD * (2.0 * torch.rand(B, generator=gen, dtype=torch.float64) - 1.0)
    if B >= SINGLE_FROM_B and T > B:
        weights[int(torch.randint(0, B, (1,), generator=gen))] = 0.0
    lengths = 1 + _split_tokens(T - B, weights, MAX_SEQLEN - 1)
    assert int(lengths.sum()) == T and int(lengths.min()) >= 1 and int(lengths.max()) <= MAX_SEQLEN
    return lengths


def generate_inputs(axes, params, seed, device):
    T, H, K, V, B = (int(axes[a]) for a in ("T", "H", "K", "V", "B"))
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))
    lengths = _draw_seqlens(T, B, gen)
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int64)
    cu_seqlens[1:] = torch.cumsum(lengths, dim=0)
    # Per-head decay rates as a Gated DeltaNet / Mamba-2 layer parametrizes them: g = -A * softplus(x + dt_bias),
    # A in [1, 16], softplus(dt_bias) log-uniform in [1e-3, 1e-1]. Slow heads keep alpha = exp(g) near 0.999
    # (a memory of thousands of tokens), fast heads near 0.7.
    A = 1.0 + 15.0 * torch.rand(H, generator=gen, dtype=torch.float64)
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(H, generator=gen,
                                                                                   dtype=torch.float64))
    dt_bias = torch.log(torch.expm1(dt))
    # The bulk draws run on the device's own generator (fast for the large workloads), seeded from the same seed.
    dgen = torch.Generator(device=device)
    dgen.manual_seed(int(seed) * 7919 + 17)
    x = torch.randn(T, H, generator=dgen, device=device, dtype=torch.float32)
    g = -A.to(device, torch.float32) * torch.nn.functional.softplus(x + dt_bias.to(device, torch.float32))
    beta = torch.sigmoid(torch.randn(T, H, generator=dgen, device=device, dtype=torch.float32))
    # q and k arrive unnormalized (their norms vary token to token), v at unit scale.
    qs = torch.exp(0.5 * torch.randn(T, H, 1, generator=dgen, device=device))
    ks = torch.exp(0.5 * torch.randn(T, H, 1, generator=dgen, device=device))
    q = (qs * torch.randn(T, H, K, generator=dgen, device=device)).to(torch.bfloat16)
    k = (ks * torch.randn(T, H, K, generator=dgen, device=device)).to(torch.bfloat16)
    v = torch.randn(T, H, V, generator=dgen, device=device).to(torch.bfloat16)
    return {"q": q, "k": k, "v": v, "g": g, "beta": beta, "cu_seqlens": cu_seqlens.to(torch.int32).to(device)}


def reference(q, k, v, g, beta, cu_seqlens, *, scale, eps):
    """Plain eager PyTorch, token by token: the sequences advance together (step i updates every sequence still
    running with its own i-th token), the states of all of them and of all heads at once."""
    T, H, K = q.shape
    V = v.shape[2]
    out_dtype = q.dtype  # bfloat16 as generated; float64 for the expected outputs
    acc = torch.promote_types(q.dtype, torch.float32)
    q, k, v, g, beta = q.to(acc), k.to(acc), v.to(acc), g.to(acc), beta.to(acc)
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + eps)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + eps)
    alpha = torch.exp(g)
    o = torch.empty(T, H, V, dtype=acc, device=q.device)
    starts = cu_seqlens[:-1].long()
    lengths = cu_seqlens[1:].long() - starts
    order = torch.argsort(lengths, descending=True)  # the sequences still running are a prefix of this order
    starts, lengths = starts[order], lengths[order]
    running, first = lengths.tolist(), (int(starts[0]) if len(starts) else 0)
    S = torch.zeros(len(running), H, V, K, dtype=acc, device=q.device)
    for i in range(running[0] if running else 0):
        while running[-1] <= i:
            running.pop()
        n = len(running)
        S = S[:n]
        t = slice(first + i, first + i + 1) if n == 1 else starts[:n] + i  # [n] tokens, one per sequence
        kt = k[t]                                                           # [n, H, K]
        Sk = torch.matmul(S, kt.unsqueeze(-1)).squeeze(-1)                 # [n, H, V]: S_{t-1} k_t
        b = beta[t][..., None, None]
        S = S - b * Sk.unsqueeze(-1) * kt.unsqueeze(-2)
        S = alpha[t][..., None, None] * S + b * v[t].unsqueeze(-1) * kt.unsqueeze(-2)
        o[t] = scale * torch.matmul(S, q[t].unsqueeze(-1)).squeeze(-1)
    return o.to(out_dtype)
