"""Timing agreement, repeatability and the cost of the integrity layer (issues 3 and 4); run on a GPU.

1. Known duration: bench/timing/spin_200us (200 us of %globaltimer, plus the toy scale) through `d2k eval`:
   the median must be within 3% of 200 us.
2. The toy Triton kernel through `d2k eval` against triton.testing.do_bench on the same kernel and sizes
   (do_bench flushes L2 too): medians within 3%.
3. Repeatability: 5 evaluations of the same solution; every median within 1.5% of their mean.
4. Defenses: honest solutions evaluated with and without the integrity layer (`--no-defenses`): evaluation
   wall time, and the timed medians (must move by less than 1%).
Rows print as they are measured, so a run cut short keeps what it had.
Usage: python3 bench/timing_agreement.py BUILD_DIR [SECTIONS], SECTIONS a comma list of known,dobench,repeat,defenses
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
D2K = os.path.join(BUILD, "src", "d2k")
TASKS = os.path.join(ROOT, "tests", "fixtures", "base")
SOLUTIONS = os.path.join(ROOT, "tests", "fixtures", "solutions")
SECTIONS = set((sys.argv[2] if len(sys.argv) > 2 else "known,dobench,repeat,defenses").split(","))


def d2k_eval(solution, workloads, *extra):
    """Medians (ms) of the passed timed workloads, and the evaluation's wall time (s)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        t0 = time.perf_counter()
        p = subprocess.run([D2K, "eval", "--tasks", TASKS, "1", solution, "--workloads", workloads, "--json", out,
                            "--no-baselines", "--seeds", "1", "--max-time", "3", *extra],
                           check=False, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if not os.path.exists(out):
            print(f"  d2k eval {os.path.basename(solution)} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}", flush=True)
            return {}, wall
        with open(out) as f:
            traces = json.load(f)[0]["traces"]
    for t in traces:
        if t["status"] != "passed":
            print(f"  {os.path.basename(solution)} / {t['workload']}: {t['status']}: {t.get('message', '')[:300]}",
                  flush=True)
    return {t["workload"]: t["performance"]["solution"]["median_ms"] for t in traces
            if t["status"] == "passed" and t["timed"]}, wall


def do_bench_toy(n):
    import torch
    import triton
    sys.path.insert(0, os.path.join(SOLUTIONS, "triton_ok"))
    import solution
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    return triton.testing.do_bench(lambda: solution.solve(x, y, alpha=2.5), warmup=100, rep=1000,
                                   return_mode="median")


def row(name, got_us, want_us, note=""):
    dev = got_us / want_us - 1 if want_us else float("nan")
    print(f"{name:<46} {got_us:>11.2f} {want_us:>12.2f} {dev * 100:>9.2f}%  {note}", flush=True)


print(f"{'measurement':<46} {'d2k_us':>11} {'expected_us':>12} {'deviation':>10}", flush=True)
if "known" in SECTIONS:
    spin, _ = d2k_eval(os.path.join(ROOT, "bench", "timing", "spin_200us"), "big", "--no-static-checks")
    for w, ms in spin.items():
        row(f"known duration: spin 200us / {w}", ms * 1e3, 200.0)

if "dobench" in SECTIONS:
    toy, _ = d2k_eval(os.path.join(SOLUTIONS, "triton_ok"), "big,huge")
    for w, n in (("big", 1 << 20), ("huge", 1 << 26)):
        if w in toy:
            row(f"toy triton / {w} vs do_bench", toy[w] * 1e3, do_bench_toy(n) * 1e3)

meds = []
if "repeat" in SECTIONS:
    meds = [m.get("huge") for m, _ in (d2k_eval(os.path.join(SOLUTIONS, "triton_ok"), "huge") for _ in range(5))]
    meds = [m for m in meds if m]
if meds:
    mean = statistics.mean(meds)
    worst = max(meds, key=lambda x: abs(x / mean - 1))
    row(f"repeatability x{len(meds)} / huge (worst vs mean)", worst * 1e3, mean * 1e3,
        "runs: " + " ".join(f"{m * 1e3:.2f}" for m in meds))

for sol in ("triton_ok", "cuda_ok") if "defenses" in SECTIONS else ():
    on, off = [], []
    for _ in range(2):  # alternate, so drift hits both alike
        on.append(d2k_eval(os.path.join(SOLUTIONS, sol), "huge"))
        off.append(d2k_eval(os.path.join(SOLUTIONS, sol), "huge", "--no-defenses"))
    m_on = [m["huge"] for m, _ in on if "huge" in m]
    m_off = [m["huge"] for m, _ in off if "huge" in m]
    if m_on and m_off:
        row(f"defenses on vs off: {sol} / huge median", statistics.mean(m_on) * 1e3, statistics.mean(m_off) * 1e3,
            f"eval wall {statistics.mean(w for _, w in on):.1f} s vs {statistics.mean(w for _, w in off):.1f} s")
