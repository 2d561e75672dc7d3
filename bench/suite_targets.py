"""The suite's measured targets (issue 8) from `d2k eval --json` traces of the expert and naive solutions.

Per task and timed workload: expert and naive medians, expert vs naive, vs eager and vs torch.compile, % of
speed-of-light; per task the geometric-mean speedup over eager and the verdict on each target:
  - every expert workload passed;
  - geometric-mean speedup vs eager >= the task's target_speedup (task.toml [performance]; 3x by default);
  - >= target_sol (40% by default) of speed-of-light on the largest workload (most bytes, or most flops for
    compute-bound tasks);
  - the expert beats the naive kernel on every workload;
  - flagged when the expert is within 10% of torch.compile on every workload (the guidance then adds little).
With --record, the figures are also written where the suite keeps them: each task README's maintainers section
(after `<!-- d2k:maintainers -->`, which agents never see) and the "Measured" paragraph of the expert solution's
header comment, with the GPU and the date.

Usage: python3 bench/suite_targets.py EXPERT.json [EXPERT2.json ...] [--naive NAIVE.json ...]
       python3 bench/suite_targets.py --pairs PAIRS.json [PAIRS2.json ...]   (`--solutions expert,naive` files)
       options: --record [--date YYYY-MM-DD] [--command "how the JSON was made"] [--tasks DIR]
                [--copy-gb-per-s GBPS]  (% of speed-of-light for memory-bound traces made without a calibration)
(the JSON files `d2k eval --json` writes; several may be given, one per task). Exits 1 when a target is missed.
"""

import datetime
import glob
import json
import math
import os
import sys
import textwrap
import tomllib

MARKER = "<!-- d2k:maintainers -->"
DEFAULT_TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks")


def manifest_targets(root):
    """{task name: (target_speedup, target_sol in %, task folder)} from the suite's task.toml files."""
    out = {}
    for path in glob.glob(os.path.join(root, "*", "task.toml")):
        with open(path, "rb") as f:
            m = tomllib.load(f)
        perf = m.get("performance", {})
        out[m.get("name")] = (perf.get("target_speedup", 3.0), 100 * perf.get("target_sol", 0.4), os.path.dirname(path))
    return out


def load(paths, solution=None):
    """{task: {workload: trace}} of the timed workloads, {task: [statuses of every workload]}, and the GPU named
    in the records; with `solution`, only the traces of solutions so named (a pairs file holds both)."""
    timed, statuses, gpus = {}, {}, set()
    for p in paths:
        with open(p) as f:
            for rec in json.load(f):
                if rec.get("environment", {}).get("gpu"):
                    gpus.add(rec["environment"]["gpu"])
                for t in rec["traces"]:
                    name = t.get("solution")  # {"name", "language", "sha256"} in d2k eval's records
                    if solution is not None and (name.get("name") if isinstance(name, dict) else name) != solution:
                        continue
                    statuses.setdefault(t["task"], []).append(t["status"])
                    if t["timed"]:
                        timed.setdefault(t["task"], {})[t["workload"]] = t
    return timed, statuses, gpus


def fill_speed_of_light(timed, copy_gb_per_s):
    """Percent of speed-of-light for memory-bound traces recorded without a calibration (a fresh machine where
    `d2k calibrate` had not run): achieved GB/s over a copy bandwidth measured by `d2k calibrate` elsewhere."""
    for rows in timed.values():
        for t in rows.values():
            perf = t.get("performance", {})
            if perf.get("pct_speed_of_light") or perf.get("bound") != "memory" or not perf.get("achieved_gb_per_s"):
                continue
            perf["pct_speed_of_light"] = 100.0 * perf["achieved_gb_per_s"] / copy_gb_per_s


def median(t, key="solution"):
    p = t.get("performance", {}).get(key)
    return p.get("median_ms") if isinstance(p, dict) else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, unit=""):
    return "-" if x is None else f"{x:.4g}{unit}"


def one_line(message, limit=200):
    """The first non-empty line of a message, cut to `limit` characters (a compiler's traceback is not a figure)."""
    line = next((l.strip() for l in str(message).splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def grouped(reasons):
    """{reason: [workloads]} from {workload: reason}, in first-seen order."""
    out = {}
    for w, why in reasons.items():
        out.setdefault(why, []).append(w)
    return out


def summarize(task, rows, naive_rows, statuses, targets):
    """The figures and verdicts of one task."""
    out = {"task": task, "rows": [], "skipped": {}, "naive_failed": {}}
    speedups, beats_naive, near_compile = [], [], []
    largest, largest_size = None, -1
    for w, t in rows.items():
        e, n = median(t), median(naive_rows.get(w, {}))
        eager, comp = median(t, "eager"), median(t, "torch_compile")
        perf = t.get("performance", {})
        size = perf.get("flops" if perf.get("bound") == "compute" else "bytes", 0) or 0
        if size > largest_size:
            largest, largest_size = w, size
        row = {"workload": w, "expert": e, "naive": n, "vs_naive": n / e if e and n else None, "eager": eager,
               "vs_eager": eager / e if e and eager else None, "compile": comp,
               "vs_compile": comp / e if e and comp else None, "sol": perf.get("pct_speed_of_light")}
        if perf.get("torch_compile_skipped"):
            out["skipped"][w] = one_line(perf["torch_compile_skipped"])
        nt = naive_rows.get(w)
        if nt is not None and nt.get("status") != "passed":
            out["naive_failed"][w] = f"{nt.get('status')}: {one_line(nt.get('message', ''))}"
        out["rows"].append(row)
        speedups.append(row["vs_eager"])
        beats_naive.append(row["vs_naive"] is not None and row["vs_naive"] > 1)
        near_compile.append(row["vs_compile"] is not None and row["vs_compile"] < 1.1)
    g = geomean(speedups)
    target, sol_target, folder = targets.get(task, (3.0, 40.0, None))
    sol = rows[largest]["performance"].get("pct_speed_of_light") if largest else None
    out.update(geomean=g, target=target, largest=largest, largest_sol=sol, folder=folder,
               flag=bool(rows) and all(near_compile))
    out["checks"] = [
        ("every workload passed", all(s == "passed" for s in statuses) and bool(statuses)),
        (f"geomean speedup vs eager {fmt(g, 'x')} >= {target}x", g is not None and g >= target),
        (f"{fmt(sol, '%')} of speed-of-light on {largest} >= {sol_target:.0f}%", sol is not None and sol >= sol_target),
        ("beats the naive kernel on every workload" if naive_rows else "naive kernel not measured",
         bool(rows) and all(beats_naive)),
    ]
    return out


def print_summary(s):
    print(f"\n## {s['task']}\n")
    print(f"{'workload':<34} {'expert_ms':>10} {'naive_ms':>10} {'vs_naive':>8} {'eager_ms':>10} {'vs_eager':>8} "
          f"{'compile_ms':>10} {'vs_compile':>10} {'%SOL':>6}")
    for r in s["rows"]:
        print(f"{r['workload']:<34} {fmt(r['expert']):>10} {fmt(r['naive']):>10} {fmt(r['vs_naive'], 'x'):>8} "
              f"{fmt(r['eager']):>10} {fmt(r['vs_eager'], 'x'):>8} {fmt(r['compile']):>10} "
              f"{fmt(r['vs_compile'], 'x'):>10} {fmt(r['sol']):>6}")
    for why, ws in grouped(s["naive_failed"]).items():
        print(f"  naive kernel on {', '.join(ws)}: {why}")
    for name, ok in s["checks"]:
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    if s["flag"]:
        print("  [FLAG] within 10% of torch.compile on every workload: the guidance adds little beyond fusion")


def readme_section(s, gpu, date, command):
    lines = [MARKER, "## Measured (for maintainers: agents never see what follows the marker above)", "",
             f"{gpu}, {date}, `{command}` (written by `bench/suite_targets.py --record`; docs/MEASUREMENTS.md).", "",
             "| workload | expert ms | naive ms | expert vs naive | eager ms | vs eager | torch.compile ms | vs torch.compile "
             "| % of speed-of-light |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in s["rows"]:
        lines.append(f"| {r['workload']} | {fmt(r['expert'])} | {fmt(r['naive'])} | {fmt(r['vs_naive'], 'x')} | "
                     f"{fmt(r['eager'])} | {fmt(r['vs_eager'], 'x')} | {fmt(r['compile'])} | "
                     f"{fmt(r['vs_compile'], 'x')} | {fmt(r['sol'], '%')} |")
    lines.append("")
    for why, ws in grouped(s["skipped"]).items():
        lines.append(f"- torch.compile on {', '.join(ws)}: {why.rstrip('.')}.")
    for why, ws in grouped(s["naive_failed"]).items():
        lines.append(f"- naive kernel on {', '.join(ws)}: {why.rstrip('.')}.")
    if s["skipped"] or s["naive_failed"]:
        lines.append("")
    lines += [f"- [{'ok' if ok else 'MISSED'}] {name}" for name, ok in s["checks"]]
    if s["flag"]:
        lines.append("- [FLAG] within 10% of torch.compile on every workload: the guidance adds little beyond fusion")
    return "\n".join(lines) + "\n"


def header_paragraph(s, gpu, date, command):
    rows = s["rows"]
    slash = " / ".join
    parts = [f"Measured ({gpu}, {date}, `{command}`, bench/suite_targets.py --record):",
             f"{slash(fmt(r['expert']) for r in rows)} ms on {slash(r['workload'] for r in rows)};",
             f"{slash(fmt(r['vs_eager'], 'x') for r in rows)} over eager (geometric mean {fmt(s['geomean'], 'x')},"
             f" target {s['target']}x);",
             f"{fmt(s['largest_sol'], '%')} of speed-of-light on {s['largest']};",
             f"naive kernel {slash(fmt(r['naive']) for r in rows)} ms (expert {slash(fmt(r['vs_naive'], 'x') for r in rows)}"
             f" faster); torch.compile {slash(fmt(r['compile']) for r in rows)} ms."]
    return " ".join(parts)


def record(s, gpu, date, command):
    """Rewrites the README's maintainers section and the expert header's Measured paragraph; returns the paths."""
    folder = s["folder"]
    if folder is None:
        raise SystemExit(f"--record: no task folder for {s['task']}")
    written = []
    readme = os.path.join(folder, "README.md")
    with open(readme) as f:
        text = f.read()
    head = text.split(MARKER)[0].rstrip("\n") + "\n\n"
    with open(readme, "w") as f:
        f.write(head + readme_section(s, gpu, date, command))
    written.append(readme)

    sources = [p for p in glob.glob(os.path.join(folder, "expert", "solution.*")) if not p.endswith(".toml")]
    for src in sources:
        with open(src) as f:
            lines = f.read().split("\n")
        at = next((i for i, l in enumerate(lines[:80]) if "Measured" in l), None)
        if at is None:
            print(f"  {src}: no 'Measured' paragraph in its header; not changed", file=sys.stderr)
            continue
        prefix = lines[at][:lines[at].index("Measured")]
        end = at + 1
        while end < len(lines):  # the paragraph ends at a blank comment line or the comment's end
            body = lines[end].strip().lstrip("*#/").strip()
            if not body or lines[end].strip() in ('"""', "*/") or lines[end].strip().endswith('"""'):
                break
            end += 1
        wrapped = textwrap.wrap(header_paragraph(s, gpu, date, command), width=116 - len(prefix),
                                break_on_hyphens=False)
        lines[at:end] = [prefix + w for w in wrapped]
        with open(src, "w") as f:
            f.write("\n".join(lines))
        written.append(src)
    return written


def option(argv, name, default):
    if name in argv:
        i = argv.index(name)
        value = argv[i + 1] if i + 1 < len(argv) else default
        del argv[i:i + 2]
        return value
    return default


def main(argv):
    argv = list(argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    pairs = "--pairs" in argv  # files of `d2k eval --solutions expert,naive`: both solutions in each
    do_record = "--record" in argv
    argv = [a for a in argv if a not in ("--pairs", "--record")]
    date = option(argv, "--date", datetime.date.today().isoformat())
    command = option(argv, "--command", "d2k eval --solutions expert,naive")
    targets = manifest_targets(option(argv, "--tasks", DEFAULT_TASKS))
    copy_bw = option(argv, "--copy-gb-per-s", None)
    unknown = [a for a in argv if a.startswith("-") and a != "--naive"]
    if unknown:
        print(f"suite_targets: unknown option {unknown[0]} (see --help)", file=sys.stderr)
        return 2
    if "--naive" in argv:
        i = argv.index("--naive")
        expert_paths, naive_paths = argv[:i], argv[i + 1:]
    else:
        expert_paths, naive_paths = argv, []
    if not expert_paths:
        print(__doc__)
        return 2
    expert, statuses, gpus = load(expert_paths, "expert" if pairs else None)
    if not statuses:
        print("suite_targets: no trace of an expert solution in " + ", ".join(expert_paths), file=sys.stderr)
        return 2
    naive, _, _ = load(expert_paths if pairs else naive_paths, "naive" if pairs else None)
    if copy_bw:
        fill_speed_of_light(expert, float(copy_bw))
    missed = 0
    for task in sorted(set(expert) | set(statuses)):
        s = summarize(task, expert.get(task, {}), naive.get(task, {}), statuses.get(task, []), targets)
        print_summary(s)
        missed += sum(not ok for _, ok in s["checks"])
        if do_record:
            for p in record(s, " / ".join(sorted(gpus)) or "no GPU named", date, command):
                print(f"  recorded in {p}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
