"""A CPU model of the coop candidate's list and passes on llama3_b256_v128256 (MIX 0), and of what per-row value
histograms built during the stream would save: how many rows need a whole-row pass, and how many passes.

The logits are drawn like tasks/007_topk_topp_sampling/reference.py's MIX 0 generator (same law, numpy's RNG, so
not the same numbers). The list follows solution.cu: an early bound (the kb-th largest of the 512 threads' maxima
over the first two 16 KB ring stages, kb = min(top_k, 128)), appends of every token at or above it, and a new bound
(the kb-th largest listed) whenever the list passes half its capacity. A row whose list holds top_k tokens or top_p of
the mass samples on the list; the others draw proposals from the full distribution (8 per pass): a proposal at or
above the bound is tested on the list, one below it needs a pass. With --bins N, a histogram of the values below the
bound (N bins over --range log2 units under the first stages' maximum, plus an under and an over bin) decides a
proposal unless its bin straddles the top_k count or the top_p mass; only undecided proposals need a pass.

Usage: python3 model_passes.py [--rows 256] [--vocab 128256] [--bins 0 512 2048] [--range 64] [--seed 1]
Needs numpy (pip install numpy). Prints a table; a model, not a GPU measurement.
"""

import argparse
import math

import numpy as np

LOG2E = 1.0 / math.log(2.0)
THREADS, STAGE, CAP = 512, 4096, 4096


def row_inputs(rng, V):
    x = 2.0 * rng.standard_normal(V)
    idx = rng.integers(0, V, 5)
    np.add.at(x, idx, 12.0 * rng.random(5) ** 2)
    T = rng.choice([0.5, 0.7, 0.8, 1.0, 1.0, 1.2])
    k = int(rng.choice([1, 5, 20, 40, 50, 100, 1000, V, V + 7]))
    p = float(rng.choice([0.5, 0.8, 0.9, 0.95, 1.0]))
    return (x.astype(np.float32).astype(np.float64) * LOG2E / T), k, p


def kept_mask(y, k, p):
    """K & P as reference.py defines them (ties kept), in float64."""
    order = np.argsort(-y, kind="stable")
    ys = y[order]
    w = np.exp2(ys - ys[0])
    Z = w.sum()
    # count strictly above each sorted position, ties resolved by value
    first = np.searchsorted(-ys, -ys, side="left")  # index of the first token equal to this value
    above_cnt = first
    cum = np.concatenate(([0.0], np.cumsum(w)))
    above_mass = cum[first] / Z
    keep_sorted = (above_cnt < k) & (above_mass < p)
    keep = np.zeros(len(y), bool)
    keep[order] = keep_sorted
    return keep, w, order


def list_bound(y, k):
    kb = min(k, THREADS // 4)
    first = y[: 2 * STAGE]
    maxima = np.full(THREADS, -np.inf)
    for s in range(2):  # thread t holds float4 t and t + 512 of each 4096-float stage
        st = first[s * STAGE:(s + 1) * STAGE]
        for half in range(2):
            part = st[half * 2048:(half + 1) * 2048].reshape(THREADS, 4).max(axis=1)
            maxima = np.maximum(maxima, part)
    theta = np.sort(maxima)[-kb]
    m_ref = maxima.max()
    listed = []
    n = 0
    for s in range(0, len(y), STAGE):
        st = y[s:s + STAGE]
        sel = st[st >= theta]
        listed.append(sel)
        n += len(sel)
        if n > CAP // 2:
            allv = np.concatenate(listed)
            theta = max(theta, np.sort(allv)[-kb])
            allv = allv[allv >= theta]
            listed, n = [allv], len(allv)
    return theta, m_ref


def histogram_decides(y, theta, m_ref, k, p, nbins, rng_log2, Z_w, w):
    """Per token below theta: True when the bins decide its membership (no pass needed)."""
    lo, hi = m_ref - rng_log2, m_ref + 8.0
    below = y < theta
    b = np.clip(np.floor((y - lo) / (hi - lo) * nbins).astype(np.int64) + 1, 0, nbins + 1)  # 0 under, nbins+1 over
    b[~below] = nbins + 2  # listed tokens: a bin above every other
    cnt = np.bincount(b, minlength=nbins + 3).astype(np.float64)
    mass = np.bincount(b, weights=w, minlength=nbins + 3) / Z_w
    cnt_above = np.cumsum(cnt[::-1])[::-1] - cnt  # tokens in strictly higher bins
    mass_above = np.cumsum(mass[::-1])[::-1] - mass
    # definitely in: every token of the bin above it; definitely out: the higher bins alone exceed
    cin = (cnt_above + cnt - 1 < k) & (mass_above + mass < p - 1e-4)
    cout = (cnt_above >= k) | (mass_above >= p + 1e-4)
    decided = (cin | cout)[b]
    decided[b == nbins + 1] = False  # over the bins' top: unknown ordering against the bound
    return decided


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--bins", type=int, nargs="*", default=[0, 256, 1024, 4096])
    ap.add_argument("--range", type=float, default=64.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    stats = {nb: [0, 0] for nb in a.bins}  # rows with a pass, passes
    list_rows = 0
    for _ in range(a.rows):
        y, k, p = row_inputs(rng, a.vocab)
        keep, w_sorted, order = kept_mask(y, k, p)
        w = np.exp2(y - y.max())
        Z = w.sum()
        theta, m_ref = list_bound(y, k)
        listed = y >= theta
        n_list = int(listed.sum())
        if n_list >= k or w[listed].sum() / Z >= p:
            list_rows += 1
            continue
        draws = rng.choice(a.vocab, size=64, p=w / Z)
        for nb in a.bins:
            dec = histogram_decides(y, theta, m_ref, k, p, nb, a.range, Z, w) if nb else np.zeros(a.vocab, bool)
            passes = 0
            r = 0
            while r < len(draws):
                i = draws[r]
                if listed[i] or dec[i]:
                    if keep[i]:
                        break
                    r += 1
                    continue
                passes += 1  # one pass settles this proposal and the next 7
                if keep[draws[r:r + 8]].any():
                    break
                r += 8
            stats[nb][0] += passes > 0
            stats[nb][1] += passes
    print(f"rows {a.rows}, V {a.vocab}: {list_rows} sample on their list; the others by proposals from the full "
          f"distribution ({a.rows - list_rows} rows)")
    print(f"{'histogram bins':>16} {'rows with a pass':>17} {'passes':>7}")
    for nb in a.bins:
        print(f"{nb if nb else 'none':>16} {stats[nb][0]:>17} {stats[nb][1]:>7}")


if __name__ == "__main__":
    main()
