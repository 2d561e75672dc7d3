"""CPU simulation (numpy, float64) of the "stream" candidate's routes on 007's own generator: a streaming candidate
list with a window D below the running max and k-compactions at capacity CAP, then the pivot sampler on the list, or
plain rejection from the full distribution. Prints, per (D, CAP), the fraction of rows the list provably serves, the
fallback rows' settings and rounds, list sizes, appends and compactions (the figures quoted in NOTES.md).
Usage: python3 bench/candidates/007_topk_stream/sim_routes.py [--drop-stale]   (~1 minute; writes results.json
to $SIM_OUT or the current folder)"""
import sys, json, math, time, collections, os
import numpy as np
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tasks/007_topk_topp_sampling"))
import reference as R

LOG2E = 1.0 / math.log(2.0)
STAGE = 4096
DS = [12, 16, 20, 24]
CAPS = [2048, 4096]
MAXROUNDS = 10_000_000
DROP_STALE = "--drop-stale" in sys.argv   # variant: compaction also drops entries < m_t - D

def prep_row(l, T, k_raw, p, u_row, rng):
    V = l.size
    y = l.astype(np.float64) * (LOG2E / float(T))
    m = y.max()
    w = np.exp2(y - m)
    Z = w.sum()
    k = min(max(int(k_raw), 1), V)
    p = float(p)
    order = np.argsort(-y, kind="stable")
    ys = y[order]; ws = w[order]
    newg = np.empty(V, bool); newg[0] = True; newg[1:] = ys[1:] != ys[:-1]
    gstart = np.maximum.accumulate(np.where(newg, np.arange(V), 0))
    excl = np.cumsum(ws) - ws
    count_above = gstart
    mass_above = excl[gstart]
    kept_s = (count_above < k) & (mass_above < p * Z)
    kept = np.zeros(V, bool); kept[order] = kept_s
    need_test = (k < V) or (p < 1.0)
    # fallback: plain rejection from the full distribution
    cdf = np.cumsum(w)
    yj_list = []
    r = 0; accepted = False
    while not accepted and r < MAXROUNDS:
        n = 32 if r == 0 else min(max(r, 1024), 1 << 20)
        us = np.empty(n)
        if r == 0:
            us = u_row[:32].astype(np.float64)
        else:
            us = rng.random(n)
        j = np.minimum(np.searchsorted(cdf, us * cdf[-1], side="right"), V - 1)
        acc = kept[j]
        if acc.any():
            f = int(np.argmax(acc)); j = j[:f + 1]; accepted = True
        yj_list.append(y[j]); r += j.size
    fb_yj = np.concatenate(yj_list)
    return dict(y=y, w=w, Z=Z, m=m, k=k, p=p, kept=kept, need_test=need_test, fb_yj=fb_yj,
                fb_rounds=fb_yj.size, nS=int(kept.sum()), nAboveD={d:int((y>=m-d).sum()) for d in DS}, u=u_row.astype(np.float64), k_raw=int(k_raw), V=V)

def stream(row, D, CAP):
    y, k = row["y"], row["k"]
    V = y.size
    m_t = -np.inf; theta_k = -np.inf
    buf_idx = np.empty(0, np.int64)
    appends = 0; compactions = 0; overflow = False; still_big = 0; peak = 0
    for s0 in range(0, V, STAGE):
        seg = y[s0:s0 + STAGE]
        m_t = max(m_t, seg.max())
        theta = max(m_t - D, theta_k)
        c = np.nonzero(seg >= theta)[0] + s0
        appends += c.size
        buf_idx = np.concatenate([buf_idx, c])
        peak = max(peak, buf_idx.size)
        if buf_idx.size > CAP:
            if k <= CAP // 2:
                compactions += 1
                yb = y[buf_idx]
                theta_k = np.partition(yb, yb.size - k)[yb.size - k]   # k-th largest
                cut = max(theta_k, m_t - D) if DROP_STALE else theta_k
                buf_idx = buf_idx[yb >= cut]
                if buf_idx.size > CAP // 2:
                    still_big += 1
            else:
                overflow = True
                break
    Theta = max(m_t - D, theta_k)
    res = dict(appends=appends, compactions=compactions, overflow=overflow, still_big=still_big,
               end_size=buf_idx.size, peak=peak, Theta=Theta)
    if overflow:
        res["valid"] = False
        return res, buf_idx
    yb = y[buf_idx]
    sel = yb >= Theta
    valid = (sel.sum() >= k) or (row["w"][buf_idx][sel].sum() >= row["p"] * row["Z"])
    res["valid"] = bool(valid)
    res["end_above"] = int(sel.sum())
    return res, buf_idx

def pivot(row, buf_idx, rng):
    y, w, k, pZ = row["y"], row["w"], row["k"], row["p"] * row["Z"]
    yb = y[buf_idx]; wb = w[buf_idx]
    o = np.argsort(-yb, kind="stable"); ys = yb[o]; wsrt = wb[o]
    low = -np.inf; r = 0
    while True:
        u = row["u"][r] if r < 32 else rng.random()
        cand = yb > low
        cw = np.cumsum(wb[cand])
        t = np.minimum(np.searchsorted(cw, u * cw[-1], side="right"), cw.size - 1)
        j = buf_idx[cand][t]; yj = y[j]
        r += 1
        above = ys > yj
        if above.sum() < k and wsrt[above].sum() < pZ:
            assert row["kept"][j], "pivot accepted a token outside S*"
            return r
        low = yj
        assert r < 100000

def load(B, V, MIX, seed):
    d = R.generate_inputs(axes={"B": B, "V": V, "MIX": MIX}, params={}, seed=seed, device="cpu")
    return (d["logits"].numpy(), d["temperature"].numpy(), d["top_k"].numpy(), d["top_p"].numpy(), d["u"].numpy())

def run_workload(name, specs, configs):
    t0 = time.time()
    rows = []
    for (B, V, MIX, seed) in specs:
        L, T, K, P, U = load(B, V, MIX, seed)
        rng = np.random.default_rng(1000 + seed * 7 + MIX)
        for b in range(B):
            rows.append(prep_row(L[b], T[b], K[b], P[b], U[b], rng))
        del L
    print(f"[{name}] prepared {len(rows)} rows in {time.time()-t0:.1f}s", flush=True)
    out = {}
    for D, CAP in configs:
        rng = np.random.default_rng(D * 10007 + CAP)
        st = collections.defaultdict(list)
        fb_hist = collections.Counter()
        for row in rows:
            res, buf = stream(row, D, CAP)
            st["valid"].append(res["valid"]); st["overflow"].append(res["overflow"])
            st["appends"].append(res["appends"]); st["compactions"].append(res["compactions"])
            st["end_size"].append(res["end_size"]); st["peak"].append(res["peak"])
            st["still_big"].append(res["still_big"])
            if res["valid"]:
                # S* subset of buffer
                inbuf = np.zeros(row["V"], bool); inbuf[buf] = True
                assert not (row["kept"] & ~inbuf).any(), "S* not subset of buffer"
                st["end_above"].append(res["end_above"])
                st["v_end"].append(res["end_size"]); st["v_app"].append(res["appends"]); st["v_cmp"].append(res["compactions"]); st["v_peak"].append(res["peak"])
                st["pivot_rounds"].append(pivot(row, buf, rng))
            else:
                Vr = row["V"]
                kk = "V" if row["k_raw"] == Vr else ("V+7" if row["k_raw"] == Vr + 7 else
                      ("V+1" if row["k_raw"] == Vr + 1 else ("2^31-1" if row["k_raw"] == 2**31 - 1 else str(row["k_raw"]))))
                fb_hist[(kk, round(row["p"], 2))] += 1
                st["fb_rounds"].append(row["fb_rounds"])
                st["fb_notest"].append(not row["need_test"])
                if row["need_test"]:
                    if res["overflow"]:
                        reread = row["fb_rounds"]        # buffer incomplete: every test needs a pass
                        reread_brief = int((row["fb_yj"] < res["Theta"]).sum())
                    else:
                        reread = int((row["fb_yj"] < res["Theta"]).sum())
                        reread_brief = reread
                else:
                    reread = reread_brief = 0
                st["fb_reread"].append(reread); st["fb_reread_brief"].append(reread_brief)
                st["fb_over"].append(res["overflow"])
                if row["need_test"]: st["fb_nS"].append(row["nS"]); st["fb_nAboveD"].append(row["nAboveD"][D])
        out[(D, CAP)] = (st, fb_hist)
    print(f"[{name}] done in {time.time()-t0:.1f}s", flush=True)
    return rows, out

def summarize(name, rows, out):
    N = len(rows)
    print(f"\n=== {name}: {N} rows ===")
    hdr = ("D   CAP  valid  fallbk(ovfl) | rereads/fb mean max (brief-def) | fbRounds mean max | endBuf mean max | "
           "peak max | appends mean max | compact mean max | stillBig rows | pivotRounds mean max")
    print(hdr)
    summ = {}
    for (D, CAP), (st, h) in out.items():
        a = {k: np.array(v) for k, v in st.items()}
        nfb = N - a["valid"].sum()
        def mm(key):
            v = a.get(key, np.array([]))
            return (float(v.mean()) if v.size else float("nan"), float(v.max()) if v.size else float("nan"))
        r = dict(valid=float(a["valid"].mean()), fallback=float(nfb / N), overflow=float(a["overflow"].mean()),
                 reread=mm("fb_reread"), reread_brief=mm("fb_reread_brief"), fb_rounds=mm("fb_rounds"),
                 end_size=mm("end_size"), peak=mm("peak"), appends=mm("appends"), compactions=mm("compactions"),
                 still_big_rows=int((a["still_big"] > 0).sum()), pivot=mm("pivot_rounds"),
                 pivot_gt32=int((a.get("pivot_rounds", np.array([0])) > 32).sum()),
                 fb_hist={f"{k}|{p}": c for (k, p), c in sorted(h.items())})
        r["fb_nS_tested"] = (np.percentile(a["fb_nS"], [50, 90, 100]).tolist() if a.get("fb_nS", np.array([])).size else None)
        r["fb_nAboveD_tested"] = (np.percentile(a["fb_nAboveD"], [50, 90, 100]).tolist() if a.get("fb_nAboveD", np.array([])).size else None)
        r["fb_frac_notest"] = float(a["fb_notest"].mean()) if a.get("fb_notest", np.array([])).size else None
        r.update(v_end=mm("v_end"), v_app=mm("v_app"), v_cmp=mm("v_cmp"), v_peak=mm("v_peak"), end_above=mm("end_above"))
        summ[f"{D},{CAP}"] = r
        print(f"{D:<3d} {CAP:<4d} {r['valid']:.3f} {r['fallback']:.3f}({r['overflow']:.3f}) | "
              f"{r['reread'][0]:.2f} {r['reread'][1]:.0f} ({r['reread_brief'][0]:.2f}) | "
              f"{r['fb_rounds'][0]:.1f} {r['fb_rounds'][1]:.0f} | {r['end_size'][0]:.0f} {r['end_size'][1]:.0f} | "
              f"{r['peak'][1]:.0f} | {r['appends'][0]:.0f} {r['appends'][1]:.0f} | "
              f"{r['compactions'][0]:.2f} {r['compactions'][1]:.0f} | {r['still_big_rows']} | "
              f"{r['pivot'][0]:.2f} {r['pivot'][1]:.0f} (>32: {r['pivot_gt32']})")
    print("  valid rows only: D,CAP | endBuf mean max | endBuf>=Theta mean max | peak mean max | appends mean max | compactions mean max")
    for key, r in summ.items():
        print(f"    {key} | {r['v_end'][0]:.0f} {r['v_end'][1]:.0f} | {r['end_above'][0]:.0f} {r['end_above'][1]:.0f} | {r['v_peak'][0]:.0f} {r['v_peak'][1]:.0f} | {r['v_app'][0]:.0f} {r['v_app'][1]:.0f} | {r['v_cmp'][0]:.2f} {r['v_cmp'][1]:.0f}")
    for key, r in summ.items():
        print(f"  fallback (k|p) hist D,CAP={key}: {r['fb_hist']}")
        print(f"     fb no-test frac {r['fb_frac_notest']}; tested fb rows |S*| p50/p90/max {r['fb_nS_tested']}; #(y>=m-D) p50/p90/max {r['fb_nAboveD_tested']}")
    return summ

if __name__ == "__main__":
    allres = {}
    seeds = [1, 2, 3, 4]
    cfgs = [(D, C) for D in DS for C in CAPS]
    for name, specs in [
        ("llama3 B=256 V=128256 MIX0", [(256, 128256, 0, s) for s in seeds]),
        ("qwen B=128 V=151936 MIX0", [(128, 151936, 0, s) for s in seeds]),
    ]:
        rows, out = run_workload(name, specs, cfgs)
        allres[name] = summarize(name, rows, out)
        del rows, out
    mixes = [(24, 4099, 2), (32, 3001, 1), (16, 2047, 3), (16, 1025, 4), (16, 1023, 5),
             (1024, 256, 10), (1024, 256, 11), (33, 1000, 0)]
    for (B, V, MIX) in mixes:
        name = f"corr B={B} V={V} MIX={MIX}"
        rows, out = run_workload(name, [(B, V, MIX, s) for s in seeds], cfgs)
        allres[name] = summarize(name, rows, out)
    json.dump(allres, open(os.path.join(os.environ.get("SIM_OUT", "."), "results%s.json" % ("_dropstale" if DROP_STALE else "")), "w"), indent=1)
