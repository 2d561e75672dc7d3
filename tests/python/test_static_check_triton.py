"""Tests of python/d2k_static_check.py, the static compliance checker for Triton solutions.

Known-bad snippets live in tests/fixtures/static/triton/bad/<rule>_<n>.py; the first line of each says which rule
must fire and on which line (`# expect: <rule> <line>`). Honest solutions in tests/fixtures/static/triton/good/ and
the real solutions of the tree must give no violation at all.
"""

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import d2k_static_check as sc  # noqa: E402

CHECKER = ROOT / "python" / "d2k_static_check.py"
FIXTURES = ROOT / "tests" / "fixtures" / "static" / "triton"
SCAN_TASK = ROOT / "tasks" / "001_varlen_segmented_scan"
TOY_TASK = ROOT / "tests" / "fixtures" / "base" / "001_toy_scale"
EXPECT = re.compile(r"^#\s*expect:\s*([a-z_]+)\s+(\d+)\s*$")


def requirements_of(task_dir):
    """The checker's requirements for a task, as the evaluator passes them: task.toml plus reference.py's names."""
    with open(task_dir / "task.toml", "rb") as f:
        req = tomllib.load(f).get("requirements", {})
    out = {k: req[k] for k in ("forbidden_calls", "allowed_torch_ops") if k in req}
    ref = task_dir / "reference.py"
    if ref.exists():
        out["reference_names"] = sc.reference_names(ref.read_text())
    return out


SCAN_REQ = requirements_of(SCAN_TASK)
TOY_REQ = requirements_of(TOY_TASK)


def check(path, req):
    return sc.check_triton(Path(path).read_text(), Path(path).name, req)


def show(violations):
    return "\n".join(f"  {v['rule']} line {v['line']}: {v['message']}" for v in violations) or "  (none)"


def expectation(path):
    first = Path(path).read_text().splitlines()[0]
    m = EXPECT.match(first)
    assert m, f"{path.name}: the first line must be '# expect: <rule> <line>', got {first!r}"
    return m.group(1), int(m.group(2))


BAD = sorted((FIXTURES / "bad").glob("*.py"))
GOOD = sorted((FIXTURES / "good").glob("*.py"))


# --- known-bad snippets ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_fixture_is_flagged_at_its_line(path):
    rule, line = expectation(path)
    assert rule in sc.RULES, f"{path.name}: unknown rule {rule}"
    assert path.stem.rsplit("_", 1)[0] == rule, f"{path.name}: the file name must start with its rule"
    violations = check(path, SCAN_REQ)
    assert any(v["rule"] == rule and v["line"] == line for v in violations), (
        f"{path.name}: expected {rule} on line {line}, got:\n{show(violations)}")


def test_every_rule_has_a_bad_fixture():
    covered = {expectation(p)[0] for p in BAD}
    assert covered == set(sc.RULES), f"rules without a bad fixture: {sorted(set(sc.RULES) - covered)}"


# --- honest code ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_good_fixture_is_clean(path):
    violations = check(path, SCAN_REQ)
    assert violations == [], f"{path.name}: false alarms:\n{show(violations)}"


@pytest.mark.parametrize("path,task", [
    (SCAN_TASK / "naive" / "solution.py", SCAN_TASK),
    (SCAN_TASK / "wrong" / "exclusive_scan" / "solution.py", SCAN_TASK),
    (SCAN_TASK / "wrong" / "ignores_restarts" / "solution.py", SCAN_TASK),
    (SCAN_TASK / "wrong" / "off_by_one_boundary" / "solution.py", SCAN_TASK),
    (SCAN_TASK / "wrong" / "partial_write" / "solution.py", SCAN_TASK),
    (TOY_TASK / "expert" / "solution.py", TOY_TASK),
    (ROOT / "tests" / "fixtures" / "solutions" / "triton_ok" / "solution.py", TOY_TASK),
], ids=lambda x: str(x.relative_to(ROOT)) if isinstance(x, Path) else None)
def test_real_honest_solution_is_clean(path, task):
    """Honest code of the tree (wrong/ ones here fail on numbers, not on compliance)."""
    violations = check(path, requirements_of(task))
    assert violations == [], f"{path.relative_to(ROOT)}: false alarms:\n{show(violations)}"


def test_calls_torch_cumsum_is_flagged_on_the_cumsum_line():
    path = SCAN_TASK / "wrong" / "calls_torch_cumsum" / "solution.py"
    cumsum_line = next(n.lineno for n in ast.walk(ast.parse(path.read_text()))
                       if isinstance(n, ast.Call) and ast.unparse(n.func) == "torch.cumsum")
    violations = check(path, SCAN_REQ)
    assert {(v["rule"], v["line"]) for v in violations} == {("forbidden_call", cumsum_line)}, show(violations)


def _task_solutions():
    """Every Triton solution of every task in the tree, with what its solution.toml expects."""
    out = []
    for toml_path in sorted((ROOT / "tasks").glob("*/task.toml")):
        task = toml_path.parent
        for sol in sorted(task.glob("*/solution.py")) + sorted(task.glob("wrong/*/solution.py")):
            kind = sol.parent.name if sol.parent.parent == task else "wrong"
            if kind not in ("expert", "naive", "wrong"):
                continue
            expect = "passed"
            meta = sol.parent / "solution.toml"
            if meta.exists():
                with open(meta, "rb") as f:
                    expect = tomllib.load(f).get("expect", "passed")
            out.append(pytest.param(sol, task, expect, id=str(sol.relative_to(ROOT / "tasks"))))
    return out


@pytest.mark.parametrize("path,task,expect", [p for p in _task_solutions() if p.values[2] == "passed"])
def test_task_solutions_that_should_pass_are_clean(path, task, expect):
    """Every Triton expert or naive solution in tasks/ passes the static check (false alarms break the suite).
    Wrong solutions are not swept: some expect compliance_violation for what only the runtime checks can see."""
    violations = check(path, requirements_of(task))
    assert violations == [], f"{path}: false alarms:\n{show(violations)}"


# --- API and behaviour ---------------------------------------------------------------------------------------

def test_violation_shape():
    violations = sc.check_triton("import os\n", "solution.py", SCAN_REQ)
    assert violations
    for v in violations:
        assert set(v) == {"rule", "file", "line", "message"}
        assert v["rule"] in sc.RULES and v["file"] == "solution.py"
        assert isinstance(v["line"], int) and v["line"] >= 0 and v["message"]


def test_syntax_error_is_one_violation_with_its_line():
    src = "import triton\n\n\ndef solve(x, y)\n    pass\n"
    assert [(v["rule"], v["file"], v["line"]) for v in sc.check_triton(src, "s.py", {})] == [("syntax", "s.py", 4)]
    fixture = ROOT / "tests" / "fixtures" / "solutions" / "triton_syntax_error" / "solution.py"
    assert [v["rule"] for v in check(fixture, TOY_REQ)] == ["syntax"]


def test_source_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    src = (f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(7)\n"
           "import triton\n@triton.jit\ndef k(x):\n    pass\ndef solve(x, y):\n    k[(1,)](x)\n")
    violations = sc.check_triton(src, "s.py", SCAN_REQ)
    assert not marker.exists()
    assert [v["rule"] for v in violations] == ["file_io"]


def test_bytes_follow_the_coding_cookie():
    src = "# -*- coding: latin-1 -*-\nimport triton\n@triton.jit\ndef k(x):\n    pass\ndef solve(x):\n    k[(1,)](x)\nS = '\xe9'\n"
    assert sc.check_triton(src.encode("latin-1"), "s.py", SCAN_REQ) == []


def test_requirements_may_be_partial():
    src = (ROOT / "tests" / "fixtures" / "solutions" / "triton_ok" / "solution.py").read_text()
    assert sc.check_triton(src, "s.py", {}) == []
    assert sc.check_triton(src, "s.py", None) == []
    # C++ names in forbidden_calls are for the CUDA checks; Python code is not matched against them.
    assert sc.check_triton(src, "s.py", {"forbidden_calls": ["cub::DeviceScan"]}) == []


def test_absent_allowed_list_means_allocation_basics_but_explicit_list_is_exact():
    src = ("import torch\nimport triton\n@triton.jit\ndef k(x):\n    pass\n"
           "def solve(x, y):\n    s = torch.zeros(4, device=x.device)\n    k[(1,)](s)\n")
    assert sc.check_triton(src, "s.py", {}) == []
    assert [v["rule"] for v in sc.check_triton(src, "s.py", {"allowed_torch_ops": ["empty"]})] == ["torch_compute"]


def test_main_guard_is_skipped_unless_name_is_rebound():
    body = ("import triton\n@triton.jit\ndef k(x):\n    pass\ndef solve(x):\n    k[(1,)](x)\n"
            "if __name__ == '__main__':\n    import time\n    try:\n        print(time.time())\n    except Exception:\n"
            "        pass\n")
    assert sc.check_triton(body, "s.py", SCAN_REQ) == []
    rules = {v["rule"] for v in sc.check_triton("__name__ = '__main__'\n" + body, "s.py", SCAN_REQ)}
    assert {"dynamic_code", "forbidden_module", "try_fallback"} <= rules


def test_reference_names_come_from_reference_py():
    names = sc.reference_names((SCAN_TASK / "reference.py").read_text())
    assert {"reference", "generate_inputs", "_draw_seqlens"} <= set(names)
    assert "torch" not in names
    src = ("import triton\n@triton.jit\ndef k(x):\n    pass\ndef solve(g, c, y):\n    k[(1,)](g)\n"
           "    _draw_seqlens(10, 2, None)\n")
    req = dict(SCAN_REQ, reference_names=names)
    assert [(v["rule"], v["line"]) for v in sc.check_triton(src, "s.py", req)] == [("calls_reference", 7)]


def test_tl_cumsum_in_kernels_is_not_torch_cumsum():
    """Triton's own scans (tl.cumsum, x.cumsum(0) on a Triton tensor) are allowed where Tensor.cumsum is not."""
    src = ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
           "    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    tl.store(x_ptr + tl.arange(0, BLOCK), x.cumsum(0) + tl.cumsum(x, 0))\n"
           "def solve(g, c, y):\n    k[(1,)](g, BLOCK=16)\n")
    assert sc.check_triton(src, "s.py", SCAN_REQ) == []


def test_checker_uses_only_the_standard_library():
    tree = ast.parse(CHECKER.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


# --- CLI -----------------------------------------------------------------------------------------------------

def run_cli(request, stdin=None):
    return subprocess.run([sys.executable, str(CHECKER)], input=stdin if stdin is not None else json.dumps(request),
                          capture_output=True, text=True, timeout=60)


def test_cli_reports_violations_and_exits_0():
    path = SCAN_TASK / "wrong" / "calls_torch_cumsum" / "solution.py"
    req = {k: v for k, v in SCAN_REQ.items() if k != "reference_names"}
    p = run_cli({"source_path": str(path), "requirements": req, "filename": "solution.py",
                 "reference_path": str(SCAN_TASK / "reference.py")})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert [(v["rule"], v["file"]) for v in out["violations"]] == [("forbidden_call", "solution.py")]


def test_cli_clean_file_exits_0_with_no_violations():
    p = run_cli({"source_path": str(SCAN_TASK / "naive" / "solution.py"), "requirements": SCAN_REQ})
    assert p.returncode == 0 and json.loads(p.stdout) == {"violations": []}


def test_cli_syntax_error_is_a_violation_not_an_error():
    path = ROOT / "tests" / "fixtures" / "solutions" / "triton_syntax_error" / "solution.py"
    p = run_cli({"source_path": str(path), "requirements": {}})
    assert p.returncode == 0
    assert [v["rule"] for v in json.loads(p.stdout)["violations"]] == ["syntax"]


@pytest.mark.parametrize("request_text", [
    json.dumps({"source_path": "/nonexistent/solution.py", "requirements": {}}),
    "not json",
    json.dumps({"requirements": {}}),
    json.dumps({"source_path": "x.py", "requirements": []}),
], ids=["missing_file", "not_json", "no_source_path", "bad_requirements"])
def test_cli_unreadable_request_exits_2_with_an_error(request_text):
    p = run_cli(None, stdin=request_text)
    assert p.returncode == 2
    assert "error" in json.loads(p.stdout)
