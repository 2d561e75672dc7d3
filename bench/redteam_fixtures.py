"""The red team without the test binaries: `d2k eval` on the toy task with each fixture of tests/fixtures/solutions
(the same arguments as tests/cli/eval_test.cpp), one table row per fixture: the status it must get, the statuses
its workloads got, and the verdict. For a GPU machine where building the tests costs time that measuring needs.
Usage: python3 bench/redteam_fixtures.py BUILD_DIR [REGEX] [DEADLINE_S]; exits 1 when a fixture is not caught.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
PATTERN = re.compile(sys.argv[2] if len(sys.argv) > 2 else ".")
DEADLINE = time.monotonic() + (float(sys.argv[3]) if len(sys.argv) > 3 else 1e9)
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "solutions")

failed = 0
print(f"{'fixture':<26} {'expected':<22} {'got (per workload)':<44} {'sandbox':<10} verdict", flush=True)
for name in sorted(os.listdir(FIXTURES)):
    if not PATTERN.search(name):
        continue
    if time.monotonic() > DEADLINE - 20:
        print(f"{name:<26} not run: deadline", flush=True)
        continue
    with open(os.path.join(FIXTURES, name, "solution.toml"), "rb") as f:
        want = tomllib.load(f)["expect"]
    workloads = "ragged,huge" if name.startswith("gpu_") or name == "cuda_async_scratch" else "ragged,big"  # as eval_test.cpp
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        env = dict(os.environ, D2K_CACHE=os.path.join(tmp, "cache"))
        try:
            p = subprocess.run([os.path.join(BUILD, "src", "d2k"), "eval", "--tasks",
                                os.path.join(ROOT, "tests", "fixtures", "base"), "1", os.path.join(FIXTURES, name),
                                "--workloads", workloads, "--json", out, "--call-timeout", "20", "--max-time", "2",
                                "--no-compile-baseline", "--no-static-checks"],
                               capture_output=True, text=True, env=env,
                               timeout=max(10, min(150, DEADLINE - time.monotonic())))
        except subprocess.TimeoutExpired:
            print(f"{name:<26} {want:<22} {'(d2k eval ran out of time)':<44} {'':<10} NOT CAUGHT", flush=True)
            failed += 1
            continue
        if not os.path.exists(out):
            print(f"{name:<26} {want:<22} {'(no JSON: ' + p.stderr.strip()[-30:] + ')':<44} {'':<10} NOT CAUGHT",
                  flush=True)
            failed += 1
            continue
        with open(out) as f:
            result = json.load(f)[0]
    got = [t["status"] for t in result["traces"] if not t.get("skipped")]
    sandbox = (result.get("solution_environment") or {}).get("sandbox", "-").split(":")[0]
    if not got:
        why = next((t["skipped"] for t in result["traces"] if t.get("skipped")), "no workload ran")
        print(f"{name:<26} {want:<22} {'(skipped: ' + why[:30] + ')':<44} {sandbox:<10} skipped", flush=True)
        continue
    if want == "passed":
        ok = all(s == "passed" for s in got)
    else:  # caught when some workload gets the expected status (a timing-only cheat leaves untimed ones honest),
        # as in tests/cli/eval_test.cpp; another workload may be rejected by another defense first (a call counter
        # that stops launching anything meets the no-kernel check on the workloads after the one it was caught on)
        ok = want in got
    failed += not ok
    print(f"{name:<26} {want:<22} {','.join(got):<44} {sandbox:<10} {'ok' if ok else 'NOT CAUGHT'}", flush=True)
sys.exit(1 if failed else 0)
