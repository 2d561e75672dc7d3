"""The compile worker's torch.compile of the reference (python/d2k_harness.py op_compile, op_baseline): one
compiled function per worker, so the workloads compiled ahead (while the reference runs elsewhere) are not
compiled again when their baseline is timed, and a compilation that fails is a skipped baseline, not an error.
torch.compile is replaced by a counting stand-in (the CPU machine's torch may predate it)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import d2k_harness as h  # noqa: E402


def setup(tmp_path, monkeypatch, fail=False):
    ref = tmp_path / "reference.py"
    ref.write_text("def reference(x, *, alpha):\n    return x * alpha\n")
    compiled = []

    def fake_compile(fn):
        compiled.append(fn)

        def run(*a, **k):
            if fail:
                raise RuntimeError("inductor says no")
            return fn(*a, **k)
        return run

    monkeypatch.setattr(torch, "compile", fake_compile, raising=False)
    w = h.Worker(out=None)
    w.device = "cpu"

    def req(n):
        path = tmp_path / f"x{n}.d2kt"
        h.write_tensor(str(path), torch.ones(n))
        return {"reference_path": str(ref), "workload": {"axes": {"n": n}},
                "inputs": [{"name": "x", "dtype": "float32", "shape": [n]}],
                "params": [{"name": "alpha", "dtype": "float32", "value": 2.0}], "input_files": {"x": str(path)}}
    return w, req, compiled


def test_workloads_compile_into_one_function(tmp_path, monkeypatch):
    w, req, compiled = setup(tmp_path, monkeypatch)
    for n in (8, 16, 32):
        r = w.op_compile(req(n))
        assert "skipped" not in r and r["compile_s"] >= 0
    assert len(compiled) == 1
    assert w.compiled_reference() is w.compiled  # what op_baseline(mode compile) times
    assert len(compiled) == 1


def test_a_failing_compilation_is_a_skipped_baseline(tmp_path, monkeypatch):
    w, req, _ = setup(tmp_path, monkeypatch, fail=True)
    r = w.op_compile(req(8))
    assert r["skipped"].startswith("torch.compile failed: RuntimeError: inductor says no")
