"""Input generator, PyTorch reference and custom check for topk_topp_sampling.

One token per row from softmax(logits / temperature), restricted to the row's top-k and top-p sets (both taken
on the full temperature-scaled distribution, "joint") and renormalized over their intersection:

  K = {i : #{j : logits[j] > logits[i]} < top_k}                      (every token tied with the k-th kept)
  P = {i : sum of probs[j] over logits[j] > logits[i]  <  top_p}       (the token that crosses top_p kept)
  ids[b] ~ probs restricted to K & P, renormalized

The draws u[b, r] are independent uniforms in [0, 1); the reference uses u[b, 0] by inverse CDF over the kept
tokens in descending order. Other exact samplers map the draws to other ids, so check() judges the support of
every sample and, for rows that share one distribution, the distribution of the samples.
"""

import math

import torch

DRAWS = 32  # u has DRAWS uniforms per row (the manifest's shape)

# Mixes of sampling settings (the workload axis MIX).
SERVING, TIES, FLAT, GREEDY, NO_TOP_P, NO_TOP_K = 0, 1, 2, 3, 4, 5
DIST_CROSSING, DIST_TIES = 10, 11


def _llm_logits(B, V, gen):
    """Logits shaped like an LM head's: a broad base and, per row, a few boosted tokens (confident rows put
    most of the mass on one token, uncertain ones spread it)."""
    logits = 2.0 * torch.randn(B, V, generator=gen, dtype=torch.float64)
    n_boost = min(V, 5)
    idx = torch.randint(0, V, (B, n_boost), generator=gen)
    boost = 12.0 * torch.rand(B, n_boost, generator=gen, dtype=torch.float64) ** 2
    logits.scatter_add_(1, idx, boost)
    return logits


def _pick(values, n, gen):
    t = torch.tensor(values)
    return t[torch.randint(0, len(values), (n,), generator=gen)]


def _designed_row(V, head, T, gen):
    """A row whose softmax(logits / T) puts `head` on a few random tokens (a list of probabilities; equal
    entries are exact ties) and the rest of the mass on the other tokens with random weights."""
    w = torch.exp(torch.randn(V, generator=gen, dtype=torch.float64))
    head = torch.tensor(head, dtype=torch.float64)
    perm = torch.randperm(V, generator=gen)
    tail = perm[len(head):]
    w[tail] *= (1.0 - float(head.sum())) / float(w[tail].sum())
    w[perm[:len(head)]] = head
    offset = 4.0 * float(torch.rand(1, generator=gen)) - 2.0
    return (T * torch.log(w) + offset).to(torch.float32)


def generate_inputs(axes, params, seed, device):
    B, V, mix = int(axes["B"]), int(axes["V"]), int(axes["MIX"])
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))
    if mix in (DIST_CROSSING, DIST_TIES):
        if mix == DIST_CROSSING:
            # At T = 0.7: 0.30, 0.25, 0.20, 0.10, 0.05 and 0.10 spread over the tail. top_p = 0.6 keeps the
            # first three (exclusive masses 0, 0.30, 0.55; the third crosses 0.6), top_k = 50 does not bind.
            T, k, p = 0.7, 50, 0.6
            row = _designed_row(V, [0.30, 0.25, 0.20, 0.10, 0.05], T, gen)
        else:
            # At T = 1.6: 0.22, then four exactly tied tokens of 0.12, then 0.10, the rest spread. top_k = 3
            # cuts inside the tie, so all four are kept; top_p = 0.9 does not bind inside K.
            T, k, p = 1.6, 3, 0.9
            row = _designed_row(V, [0.22, 0.12, 0.12, 0.12, 0.12, 0.10], T, gen)
        logits = row.unsqueeze(0).expand(B, V).contiguous()
        temperature = torch.full((B,), T, dtype=torch.float32)
        top_k = torch.full((B,), k, dtype=torch.int32)
        top_p = torch.full((B,), p, dtype=torch.float32)
    else:
        logits = _llm_logits(B, V, gen)
        temperature = _pick([0.5, 0.7, 0.8, 1.0, 1.0, 1.2], B, gen).to(torch.float32)
        top_k = _pick([1, 5, 20, 40, 50, 100, 1000, V, V + 7], B, gen).clamp(max=2 ** 31 - 1).to(torch.int32)
        top_p = _pick([0.5, 0.8, 0.9, 0.95, 1.0], B, gen).to(torch.float32)
        if mix == TIES:
            # Logits on a coarse grid: exact ties everywhere, at the k-th token and at the top-p cut too.
            logits = torch.round(logits * 2.0) / 2.0
            top_k = _pick([1, 2, 3, 5, 10], B, gen).to(torch.int32)
        elif mix == FLAT:
            # Nearly flat rows with a small k: a rejection sampler needs many rounds here.
            logits = 0.02 * torch.randn(B, V, generator=gen, dtype=torch.float64)
            top_k = _pick([1, 2, 3, 4], B, gen).to(torch.int32)
            top_p = _pick([0.3, 0.6, 1.0], B, gen).to(torch.float32)
        elif mix == GREEDY:
            top_k = torch.ones(B, dtype=torch.int32)
            tied = torch.arange(B) % 2 == 0  # every other row has a tied maximum (then each is kept)
            top = logits.max(dim=1).values
            second = torch.randint(0, V, (B,), generator=gen)
            logits[tied, second[tied]] = top[tied]
        elif mix == NO_TOP_P:
            top_p = torch.ones(B, dtype=torch.float32)
        elif mix == NO_TOP_K:
            top_k = _pick([V, V + 1, 2 ** 31 - 1], B, gen).to(torch.int32)
            top_p = _pick([0.3, 0.6, 0.9, 0.99], B, gen).to(torch.float32)
        logits = logits.to(torch.float32)
    u = torch.rand(B, DRAWS, generator=gen, dtype=torch.float32)
    return {
        "logits": logits.to(device),
        "temperature": temperature.to(device),
        "top_k": top_k.to(device),
        "top_p": top_p.to(device),
        "u": u.to(device),
    }


def reference(logits, temperature, top_k, top_p, u):
    """Plain eager PyTorch: temperature, softmax, sort, thresholds by value, cumsum, inverse CDF with u[:, 0]."""
    V = logits.size(-1)
    z = logits / temperature.unsqueeze(-1)
    probs = torch.softmax(z, dim=-1)
    z_sorted, order = torch.sort(z, dim=-1, descending=True)
    probs_sorted = probs.gather(-1, order)
    # top-k: every token whose value reaches the k-th largest (ties kept)
    k = top_k.to(torch.int64).clamp(min=1, max=V)
    kth = z_sorted.gather(-1, (k - 1).unsqueeze(-1))
    keep_k = z_sorted >= kth
    # top-p on the full distribution: the first positions whose exclusive mass is below top_p, then every
    # token tied with the last of them
    exclusive = torch.cumsum(probs_sorted, dim=-1) - probs_sorted
    n_p = (exclusive < top_p.unsqueeze(-1).to(probs.dtype)).sum(dim=-1).clamp(min=1)
    cut = z_sorted.gather(-1, (n_p - 1).unsqueeze(-1))
    keep_p = z_sorted >= cut
    kept = torch.where(keep_k & keep_p, probs_sorted, torch.zeros_like(probs_sorted))
    cdf = torch.cumsum(kept, dim=-1)
    target = u[:, :1].to(cdf.dtype) * cdf[:, -1:]
    pos = torch.searchsorted(cdf, target, right=True).clamp(max=V - 1)
    return order.gather(-1, pos).squeeze(-1)


# ------------------------------------------------------------------------------------------- the check
# Support tolerances, for fp32 kernels judged in float64: a logit within LOGIT_TOL (relative) of the sampled
# one counts as tied with it, and a mass within MASS_TOL of top_p counts as below it. Wrong filters are off by
# whole tokens (masses of 1e-3 and more), far outside both.
LOGIT_TOL = 1e-6
MASS_TOL = 1e-4
# The distribution test: groups of at least MIN_GROUP rows with identical (logits, temperature, top_k, top_p)
# are draws from one distribution. Each cell's count must lie within the two-sided Bernstein bound at
# ALPHA / cells, so a correct sampler fails a group by chance with probability below ALPHA.
MIN_GROUP = 400
ALPHA = 1e-9
MIN_CELL = 5.0


def _kept_mask(l, T, k, p):
    """Exact K & P of one row in float64 (no tolerance)."""
    z = l / T
    probs = torch.softmax(z, dim=-1)
    V = l.numel()
    kk = min(max(int(k), 1), V)
    kth = torch.topk(l, kk).values[-1]
    keep_k = l >= kth
    zs, order = torch.sort(z, descending=True)
    ps = probs[order]
    # mass strictly above each sorted position, equal for every member of a tie group
    uniq, inverse = torch.unique_consecutive(zs, return_inverse=True)
    group_mass = torch.zeros(uniq.numel(), dtype=ps.dtype, device=ps.device).index_add_(0, inverse, ps)
    above = (torch.cumsum(group_mass, 0) - group_mass)[inverse]
    keep_p = torch.zeros_like(keep_k)
    keep_p[order] = above < float(p)
    return keep_k & keep_p, probs


def _bernstein(n, q, L):
    var = n * q * (1.0 - q)
    return L / 3.0 + math.sqrt((L / 3.0) ** 2 + 2.0 * var * L)


def check(name, out, expected, inputs, params):
    logits = inputs["logits"].to(torch.float64)
    temperature = inputs["temperature"].to(torch.float64)
    top_k = inputs["top_k"].to(torch.int64)
    top_p = inputs["top_p"].to(torch.float64)
    B, V = logits.shape
    ids = out.to(torch.int64)
    bad = ((ids < 0) | (ids >= V)).nonzero()
    if bad.numel():
        b = int(bad[0])
        return False, f"row {b}: id {int(ids[b])} is not a token (V = {V}); {bad.numel()} such rows"
    # (1) support: every sample in its row's K & P (up to the fp32 tolerances)
    l_j = logits.gather(1, ids.unsqueeze(1))
    z = logits / temperature.unsqueeze(1)
    m = z.max(dim=1, keepdim=True).values
    e = torch.exp(z - m)
    probs = e / e.sum(dim=1, keepdim=True)
    gap = LOGIT_TOL * (1.0 + l_j.abs())
    strictly_above = logits > l_j + gap
    count_above = strictly_above.sum(dim=1)
    mass_above = torch.where(strictly_above, probs, torch.zeros_like(probs)).sum(dim=1)
    in_k = count_above < top_k
    in_p = mass_above < top_p + MASS_TOL
    wrong = (~(in_k & in_p)).nonzero()
    if wrong.numel():
        b = int(wrong[0])
        why = []
        if not bool(in_k[b]):
            why.append(f"{int(count_above[b])} tokens have larger logits, top_k = {int(top_k[b])}")
        if not bool(in_p[b]):
            why.append(f"the tokens above it hold {float(mass_above[b]):.6f} of the mass, top_p = {float(top_p[b]):.6f}")
        return False, (f"{wrong.numel()} of {B} samples outside their top-k/top-p set; row {b}: id {int(ids[b])} "
                       f"({'; '.join(why)})")
    # (2) distribution: rows sharing one distribution
    if B < MIN_GROUP:
        return True, ""
    key = torch.cat([logits, temperature.unsqueeze(1), top_k.unsqueeze(1).to(torch.float64), top_p.unsqueeze(1)], 1)
    _, group, counts = torch.unique(key, dim=0, return_inverse=True, return_counts=True)
    msgs = []
    for g in (counts >= MIN_GROUP).nonzero().flatten().tolist():
        rows = (group == g).nonzero().flatten()
        b0 = int(rows[0])
        n = rows.numel()
        kept, pr = _kept_mask(logits[b0], float(temperature[b0]), int(top_k[b0]), float(top_p[b0]))
        q = torch.where(kept, pr, torch.zeros_like(pr))
        q = q / q.sum()
        hist = torch.bincount(ids[rows], minlength=V).to(torch.float64)
        big = q * n >= MIN_CELL
        cells_q = q[big].tolist()
        cells_n = hist[big].tolist()
        cells_id = big.nonzero().flatten().tolist()
        rest_q = float(q[~big].sum())
        rest_n = float(hist[~big].sum())
        if rest_q > 0 or rest_n > 0:
            cells_q.append(rest_q)
            cells_n.append(rest_n)
            cells_id.append(None)
        L = math.log(2.0 * len(cells_q) / ALPHA)
        worst = None
        for tok, cq, cn in zip(cells_id, cells_q, cells_n):
            dev = abs(cn - n * cq)
            bound = _bernstein(n, cq, L)
            if dev > bound and (worst is None or dev / bound > worst[0]):
                worst = (dev / bound, tok, cq, cn, bound)
        if worst is not None:
            _, tok, cq, cn, bound = worst
            cell = f"token {tok}" if tok is not None else "the tokens of small probability together"
            msgs.append(f"{n} rows share row {b0}'s distribution: {cell} was drawn {int(cn)} times, expected "
                        f"{n * cq:.1f} (q = {cq:.4f}), allowed deviation {bound:.1f} (false-failure bound {ALPHA:g})")
    if msgs:
        return False, "samples do not follow the renormalized distribution: " + "; ".join(msgs)
    return True, ""
