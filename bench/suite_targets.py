"""The suite's measured targets (issue 8) from `d2k eval --json` traces of the expert and naive solutions.

Per task and timed workload: expert and naive medians, expert vs naive, vs eager and vs torch.compile, % of
speed-of-light; per task the geometric-mean speedup over eager and the verdict on each target:
  - every expert workload passed;
  - geometric-mean speedup vs eager >= the task's target_speedup (task.toml [performance]; 3x by default);
  - >= target_sol (40% by default) of speed-of-light on the largest workload (most bytes, or most flops for
    compute-bound tasks);
  - the expert beats the naive kernel on every workload;
  - flagged when the expert is within 10% of torch.compile on every workload (the guidance then adds little).
Usage: python3 bench/suite_targets.py EXPERT.json [EXPERT2.json ...] [--naive NAIVE.json ...]
       python3 bench/suite_targets.py --pairs PAIRS.json [PAIRS2.json ...]   (`--solutions expert,naive` files)
(the JSON files `d2k eval --json` writes; several may be given, one per task). Exits 1 when a target is missed.
"""

import glob
import json
import math
import os
import sys
import tomllib


def manifest_targets():
    """{task name: (target_speedup, target_sol in %)} from the suite's task.toml files ([performance])."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks")
    out = {}
    for path in glob.glob(os.path.join(root, "*", "task.toml")):
        with open(path, "rb") as f:
            m = tomllib.load(f)
        perf = m.get("performance", {})
        out[m.get("name")] = (perf.get("target_speedup", 3.0), 100 * perf.get("target_sol", 0.4))
    return out


TARGETS = manifest_targets()


def load(paths, solution=None):
    """{task: {workload: trace}} of the timed workloads, plus {task: [statuses of every workload]}; with
    `solution`, only the traces of solutions so named (a pairs file holds the expert's and the naive kernel's)."""
    timed, statuses = {}, {}
    for p in paths:
        with open(p) as f:
            for rec in json.load(f):
                for t in rec["traces"]:
                    if solution is not None and t.get("solution") != solution:
                        continue
                    statuses.setdefault(t["task"], []).append(t["status"])
                    if t["timed"]:
                        timed.setdefault(t["task"], {})[t["workload"]] = t
    return timed, statuses


def median(t, key="solution"):
    p = t.get("performance", {}).get(key)
    return p.get("median_ms") if isinstance(p, dict) else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, unit=""):
    return "-" if x is None else f"{x:.4g}{unit}"


def main(argv):
    pairs = "--pairs" in argv  # files of `d2k eval --solutions expert,naive`: both solutions in each
    argv = [a for a in argv if a != "--pairs"]
    if "--naive" in argv:
        i = argv.index("--naive")
        expert_paths, naive_paths = argv[:i], argv[i + 1:]
    else:
        expert_paths, naive_paths = argv, []
    if not expert_paths:
        print(__doc__)
        return 2
    expert, statuses = load(expert_paths, "expert" if pairs else None)
    naive, _ = load(expert_paths if pairs else naive_paths, "naive" if pairs else None)
    missed = 0
    for task in sorted(set(expert) | set(statuses)):
        rows = expert.get(task, {})
        print(f"\n## {task}\n")
        print(f"{'workload':<34} {'expert_ms':>10} {'naive_ms':>10} {'vs_naive':>8} {'eager_ms':>10} {'vs_eager':>8} "
              f"{'compile_ms':>10} {'vs_compile':>10} {'%SOL':>6}")
        speedups, beats_naive, near_compile = [], [], []
        largest, largest_size = None, -1
        for w, t in rows.items():
            e, n = median(t), median(naive.get(task, {}).get(w, {}))
            eager, comp = median(t, "eager"), median(t, "torch_compile")
            perf = t.get("performance", {})
            size = perf.get("flops" if perf.get("bound") == "compute" else "bytes", 0) or 0
            if size > largest_size:
                largest, largest_size = w, size
            vs_eager = eager / e if e and eager else None
            vs_naive = n / e if e and n else None
            vs_comp = comp / e if e and comp else None
            speedups.append(vs_eager)
            beats_naive.append(vs_naive is not None and vs_naive > 1)
            near_compile.append(vs_comp is not None and vs_comp < 1.1)
            print(f"{w:<34} {fmt(e):>10} {fmt(n):>10} {fmt(vs_naive, 'x'):>8} {fmt(eager):>10} {fmt(vs_eager, 'x'):>8} "
                  f"{fmt(comp):>10} {fmt(vs_comp, 'x'):>10} {fmt(perf.get('pct_speed_of_light')):>6}")
        g = geomean(speedups)
        target, sol_target = TARGETS.get(task, (3.0, 40.0))
        sol = rows[largest]["performance"].get("pct_speed_of_light") if largest else None
        checks = [
            ("every workload passed", all(s == "passed" for s in statuses.get(task, [])) and bool(statuses.get(task))),
            (f"geomean speedup vs eager {fmt(g, 'x')} >= {target}x", g is not None and g >= target),
            (f"{fmt(sol, '%')} of speed-of-light on {largest} >= {sol_target:.0f}%", sol is not None and sol >= sol_target),
            ("beats the naive kernel on every workload" if naive.get(task) else "naive kernel not measured",
             bool(rows) and all(beats_naive)),
        ]
        for name, ok in checks:
            print(f"  [{'ok' if ok else 'MISSED'}] {name}")
            missed += not ok
        if rows and all(near_compile):
            print("  [FLAG] within 10% of torch.compile on every workload: the guidance adds little beyond fusion")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
