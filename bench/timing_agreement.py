"""Timing agreement and repeatability of d2k's evaluator (issue 3's measured targets); run on a GPU.

1. A kernel of known duration (bench/timing/spin_200us: 200 us of %globaltimer) through `d2k eval`:
   the median must be within 3% of 200 us (plus the scale work, which runs beside the spin).
2. The toy Triton kernel through `d2k eval` against triton.testing.do_bench on the same kernel and sizes
   (do_bench flushes L2 too): medians within 3%.
3. Repeatability: 5 evaluations of the same solution, every timed workload's median within 1.5% of the mean.
Prints a table last. Usage: python3 bench/timing_agreement.py BUILD_DIR
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
D2K = os.path.join(BUILD, "src", "d2k")
TASKS = os.path.join(ROOT, "tests", "fixtures", "base")


def d2k_eval(solution, workloads="big,huge"):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        subprocess.run([D2K, "eval", "--tasks", TASKS, "1", solution, "--workloads", workloads, "--json", out,
                        "--no-baselines"], check=False, capture_output=True, text=True)
        with open(out) as f:
            traces = json.load(f)[0]["traces"]
    return {t["workload"]: t["performance"]["solution"]["median_ms"] for t in traces if t["status"] == "passed"}


def do_bench_toy(n):
    import torch
    import triton
    sys.path.insert(0, os.path.join(TASKS, "001_toy_scale", "expert"))
    import solution  # the toy expert kernel
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    return triton.testing.do_bench(lambda: solution.solve(x, y, alpha=2.5), warmup=100, rep=2000,
                                   return_mode="median")


rows = []
spin = d2k_eval(os.path.join(ROOT, "bench", "timing", "spin_200us"))
for w, ms in spin.items():
    rows.append((f"spin 200us / {w}", ms * 1e3, 200.0, ms * 1e3 / 200.0 - 1))
toy = d2k_eval(os.path.join(ROOT, "tests", "fixtures", "solutions", "triton_ok"))
for w, n in (("big", 1 << 20), ("huge", 1 << 26)):
    ref = do_bench_toy(n)
    if w in toy:
        rows.append((f"toy triton / {w} vs do_bench", toy[w] * 1e3, ref * 1e3, toy[w] / ref - 1))
runs = [d2k_eval(os.path.join(ROOT, "tests", "fixtures", "solutions", "triton_ok"), "huge") for _ in range(5)]
meds = [r["huge"] for r in runs if "huge" in r]
if meds:
    m = statistics.mean(meds)
    worst = max(abs(x / m - 1) for x in meds)
    rows.append(("repeatability x5 / huge (worst dev)", m * 1e3, m * 1e3, worst))

print(f"{'measurement':<40} {'d2k_us':>10} {'expected_us':>12} {'deviation':>10}")
for name, got, want, dev in rows:
    print(f"{name:<40} {got:>10.2f} {want:>12.2f} {dev * 100:>9.2f}%")
