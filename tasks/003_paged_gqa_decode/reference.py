"""Input generator and PyTorch reference for paged_gqa_decode.

One decode step of grouped-query attention over a paged KV cache. Sequence b has seq_lens[b] cached tokens; its
token t lives in slot t % PS of page block_table[b, t // PS] of k_cache and v_cache. Query head h reads key/value
head h // (HQ / HKV). For every sequence b and query head h:

    o[b, h] = sum_t softmax_t(sm_scale * q[b, h] . K_b[t, h // G]) V_b[t, h // G],   t = 0 .. seq_lens[b] - 1
"""

import torch

# Lengths are drawn log-normally: weights exp(LENGTH_SIGMA * z), so the lengths of a batch vary by a factor of
# about 3 between the 10th and the 90th percentile, as in a serving batch of requests at different stages.
LENGTH_SIGMA = 0.5
# From this many sequences on, one sequence has a single cached token (a request at its first decode step).
SINGLE_TOKEN_FROM_B = 3
# Standard deviation of q and k: scores sm_scale * q . k have a standard deviation of about 2.25 for
# sm_scale = D ** -0.5, so attention concentrates on a few keys, as in trained models.
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


def _draw_seq_lens(N, B, max_len, gen):
    """B context lengths in [1, max_len] summing to N; with B >= SINGLE_TOKEN_FROM_B one of them is 1."""
    if N < B or N > B * max_len:
        raise ValueError(f"need B <= N <= B * {max_len}, got N={N}, B={B}")
    weights = torch.exp(LENGTH_SIGMA * torch.randn(B, generator=gen, dtype=torch.float64))
    if B >= SINGLE_TOKEN_FROM_B and N - 1 <= (B - 1) * max_len:
        weights[int(torch.randint(0, B, (1,), generator=gen))] = 0.0
    lengths = 1 + _split_tokens(N - B, weights, max_len - 1)
    assert int(lengths.sum()) == N and int(lengths.min()) >= 1 and int(lengths.max()) <= max_len
    return lengths


def generate_inputs(axes, params, seed, device):
    B, HQ, HKV, D, PS, MAXP, P, N = (int(axes[a]) for a in ("B", "HQ", "HKV", "D", "PS", "MAXP", "P", "N"))
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))
    seq_lens = _draw_seq_lens(N, B, MAXP * PS, gen)
    npages = (seq_lens + PS - 1) // PS
    if int(npages.sum()) > P:
        raise ValueError(f"the pool of {P} pages cannot hold {int(npages.sum())} pages")
    # Pages come from a shuffled pool, as an allocator hands them out after some churn. Entries of the block table
    # past a sequence's last page are padding: they point at random pages of the pool (other sequences' or free
    # pages), so a kernel that reads them gets plausible but wrong data. The slots of a last page past the end of
    # its sequence hold stale data too.
    pool = torch.randperm(P, generator=gen)
    block_table = torch.randint(0, P, (B, MAXP), generator=gen, dtype=torch.int64)
    used = 0
    for b in range(B):
        n = int(npages[b])
        block_table[b, :n] = pool[used:used + n]
        used += n
    # The bulk draws run on the device's own generator (fast for the large caches), seeded from the same seed.
    dgen = torch.Generator(device=device)
    dgen.manual_seed(int(seed) * 7919 + 29)
    q = (QK_STD * torch.randn(B, HQ, D, generator=dgen, device=device)).to(torch.bfloat16)
    k_cache = (QK_STD * torch.randn(P, PS, HKV, D, generator=dgen, device=device)).to(torch.bfloat16)
    v_cache = torch.randn(P, PS, HKV, D, generator=dgen, device=device).to(torch.bfloat16)
    return {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_table": block_table.to(torch.int32).to(device),
        "seq_lens": seq_lens.to(torch.int32).to(device),
    }


def reference(q, k_cache, v_cache, block_table, seq_lens, *, sm_scale):
    """Plain eager PyTorch: per sequence, gather its pages, then scores, softmax and P @ V."""
    B, HQ, D = q.shape
    PS, HKV = k_cache.shape[1], k_cache.shape[2]
    group = HQ // HKV
    # Softmax in float32 at least (float64 when the inputs are float64).
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    o = torch.empty_like(q)
    lens = seq_lens.tolist()
    for b in range(B):
        n = lens[b]
        npages = (n + PS - 1) // PS
        pages = block_table[b, :npages].long()
        ks = k_cache[pages].reshape(npages * PS, HKV, D)[:n]              # [n, HKV, D]
        vs = v_cache[pages].reshape(npages * PS, HKV, D)[:n]
        ks = ks.transpose(0, 1).repeat_interleave(group, dim=0)           # [HQ, n, D]
        vs = vs.transpose(0, 1).repeat_interleave(group, dim=0)
        scores = torch.matmul(q[b].unsqueeze(1), ks.transpose(1, 2)).to(acc_dtype)  # [HQ, 1, n]
        scores *= sm_scale
        p = torch.softmax(scores, dim=-1).to(q.dtype)
        o[b] = torch.matmul(p, vs).squeeze(1)
    return o
