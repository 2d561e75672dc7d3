"""bench/suite_targets.py: the verdicts on the suite's targets from `d2k eval --json` traces, and --record, which
writes the figures into the task README's maintainers section and the expert header's Measured paragraph."""

import importlib.util
import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
spec = importlib.util.spec_from_file_location("suite_targets", os.path.join(ROOT, "bench", "suite_targets.py"))
st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)


def trace(solution, workload, median, eager=None, compiled=None, sol=None):
    perf = {"solution": {"median_ms": median}, "bytes": 100 if workload == "big" else 10, "bound": "memory"}
    if eager:
        perf["eager"] = {"median_ms": eager}
    if compiled:
        perf["torch_compile"] = {"median_ms": compiled}
    else:
        perf["torch_compile_skipped"] = "torch.compile ran past 60 s"
    if sol is not None:
        perf["pct_speed_of_light"] = sol
    return {"task": "toy", "workload": workload, "timed": True, "status": "passed",
            "solution": {"name": solution, "language": "triton", "sha256": "0" * 64},  # as d2k eval writes it
            "performance": perf}


def make_tree(tmp_path, header):
    task = tmp_path / "tasks" / "001_toy"
    (task / "expert").mkdir(parents=True)
    (task / "task.toml").write_text('name = "toy"\n[performance]\ntarget_speedup = 2.0\n')
    (task / "README.md").write_text("# toy\n\nWhat the agent reads.\n")
    (task / "expert" / "solution.py").write_text(header)
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([
        {"environment": {"gpu": "NVIDIA H200"},
         "traces": [trace("expert", "small", 1.0, eager=4.0, compiled=1.5, sol=20.0),
                    trace("expert", "big", 2.0, eager=9.0, sol=55.0)]},
        {"environment": {"gpu": "NVIDIA H200"}, "traces": [trace("naive", "small", 3.0), trace("naive", "big", 5.0)]},
    ]))
    return task, pairs


HEADER = '"""toy: expert.\n\nDesign:\n - one pass.\n\nMeasured: pending H200 run through d2k eval.\n"""\n\nx = 1\n'


def test_pairs_verdicts(tmp_path, capsys):
    _, pairs = make_tree(tmp_path, HEADER)
    rc = st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "[ok] geomean speedup vs eager 4.243x >= 2.0x" in out
    assert "[ok] 55% of speed-of-light on big >= 40%" in out
    assert "[ok] beats the naive kernel on every workload" in out


def test_a_slower_expert_misses(tmp_path, capsys):
    _, pairs = make_tree(tmp_path, HEADER)
    data = json.loads(pairs.read_text())
    data[1]["traces"][0]["performance"]["solution"]["median_ms"] = 0.5  # the naive kernel faster on "small"
    pairs.write_text(json.dumps(data))
    assert st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks")]) == 1
    assert "[MISSED] beats the naive kernel on every workload" in capsys.readouterr().out


def test_record_writes_readme_and_header_once(tmp_path):
    task, pairs = make_tree(tmp_path, HEADER)
    args = ["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks"), "--record", "--date", "2026-12-03"]
    for _ in range(2):  # recording again replaces, never appends
        assert st.main(args) == 0
    readme = (task / "README.md").read_text()
    assert readme.startswith("# toy\n\nWhat the agent reads.\n\n" + st.MARKER)
    assert readme.count(st.MARKER) == 1
    assert "| big | 2 | 5 | 2.5x | 9 | 4.5x | - | - | 55% |" in readme
    assert "- torch.compile on big: torch.compile ran past 60 s." in readme
    assert "NVIDIA H200, 2026-12-03" in readme
    src = (task / "expert" / "solution.py").read_text()
    assert "pending" not in src
    flat = " ".join(src.split())
    assert "Measured (NVIDIA H200, 2026-12-03" in flat and "1 / 2 ms on small / big" in flat
    assert src.endswith('\n"""\n\nx = 1\n') and " - one pass.\n" in src
    assert all(len(line) <= 116 for line in src.split("\n"))


def test_record_keeps_the_comment_prefix_of_a_cuda_header(tmp_path):
    task, pairs = make_tree(tmp_path, HEADER)
    (task / "expert" / "solution.py").unlink()
    (task / "expert" / "solution.cu").write_text(
        "/* toy: expert.\n *\n * Measured: not yet measured on the H200\n * with `d2k eval`.\n */\n#include <x>\n")
    assert st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks"), "--record"]) == 0
    src = (task / "expert" / "solution.cu").read_text()
    assert "not yet measured" not in src and "with `d2k eval`." not in src
    body = src.split("\n")[2:-3]
    assert body and all(line.startswith(" * ") for line in body), src
    assert src.endswith(" */\n#include <x>\n")


def test_failures_are_one_line_each_and_grouped(tmp_path, capsys):
    """A naive kernel that failed is named with its status (its missing figure is not a silent '-'), and a
    compiler's multi-line error is recorded as its first line, once for all the workloads it hit."""
    task, pairs = make_tree(tmp_path, HEADER)
    data = json.loads(pairs.read_text())
    for t in data[0]["traces"]:
        t["performance"].pop("torch_compile", None)
        t["performance"]["torch_compile_skipped"] = "torch.compile failed: InductorError: TypeError\n\nSet VERBOSE=1\n."
    naive_big = data[1]["traces"][1]
    naive_big.update(status="compliance_violation", message="events say 0.1 ms but the device was busy 0.3 ms\nmore")
    naive_big["performance"] = {}
    pairs.write_text(json.dumps(data))
    assert st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks"), "--record"]) == 1
    out = capsys.readouterr().out
    assert "naive kernel on big: compliance_violation: events say 0.1 ms but the device was busy 0.3 ms" in out
    readme = (task / "README.md").read_text()
    assert "- torch.compile on small, big: torch.compile failed: InductorError: TypeError." in readme
    assert "VERBOSE" not in readme and "more" not in readme
    assert "- naive kernel on big: compliance_violation: events say 0.1 ms but the device was busy 0.3 ms." in readme


def test_copy_bandwidth_fills_a_missing_speed_of_light(tmp_path, capsys):
    _, pairs = make_tree(tmp_path, HEADER)
    data = json.loads(pairs.read_text())
    big = data[0]["traces"][1]["performance"]
    del big["pct_speed_of_light"]  # measured on a machine where `d2k calibrate` had not run
    big["achieved_gb_per_s"] = 1000.0
    pairs.write_text(json.dumps(data))
    st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks")])
    assert "[MISSED] - of speed-of-light on big" in capsys.readouterr().out
    st.main(["--pairs", str(pairs), "--tasks", str(tmp_path / "tasks"), "--copy-gb-per-s", "4000"])
    assert "[MISSED] 25% of speed-of-light on big >= 40%" in capsys.readouterr().out


def test_help_and_unknown_options(tmp_path, capsys):
    assert st.main(["--help"]) == 0
    assert "Usage:" in capsys.readouterr().out
    path = tmp_path / "pairs.json"
    path.write_text("[]")
    assert st.main(["--pair", str(path)]) == 2  # a misspelt option is not read as a file
    assert "unknown option --pair" in capsys.readouterr().err
