"""The solution worker's timed phase (python/d2k_harness.py op_time), on the CPU with the GPU timer replaced by
a stand-in that calls prepare and launch like the real one: input sets rotate through one more slot than there
are sets, outputs are poisoned before every call, and the outputs sent back come from calls whose slot last held
another set. Needs torch (skipped without it)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import d2k_harness as h  # noqa: E402


class Recorder:
    def __init__(self, solve):
        self.solve = solve
        self.calls = []  # (input data_ptr, first input value) per call


def make_worker(tmp_path, solve):
    w = h.Worker(out=None)
    w.device = "cpu"
    w.solve = solve

    def fake_measure(launch, cfg, prepare=None):
        for _ in range(60):
            if prepare is not None:
                prepare()
            launch()
        return {"median_ms": 1.0}

    w.measure = fake_measure
    return w


def request(tmp_path, n_sets, seed=None):
    specs_in = [{"name": "x", "dtype": "float32", "shape": [8]}]
    specs_out = [{"name": "y", "dtype": "float32", "shape": [8]}]
    sets = []
    for k in range(n_sets):
        path = tmp_path / f"x{k}.d2kt"
        h.write_tensor(str(path), torch.full((8,), float(k + 1)))
        sets.append({"x": str(path)})
    out = tmp_path / "out"
    out.mkdir()
    return {"op": "time", "workload": {"axes": {}}, "inputs": specs_in, "outputs": specs_out,
            "params": [{"name": "alpha", "dtype": "float32", "value": 2.0}], "input_sets": sets, "timing": {},
            "out_dir": str(out), "rng_seed": seed}


def test_honest_solution_gets_each_set_back_right(tmp_path):
    seen = []

    def solve(x, y, *, alpha):
        seen.append((x.data_ptr(), float(x[0]), bool(torch.isnan(y).all())))
        y.copy_(x * alpha)

    w = make_worker(tmp_path, solve)
    r = w.op_time(request(tmp_path, 2))
    assert len(r["timed_outputs"]) == 2  # one per set
    for k in range(2):
        path = tmp_path / "out" / f"out_y_timed{k}_0.d2kt"
        assert torch.equal(h.read_tensor(str(path), "cpu"), torch.full((8,), 2.0 * (k + 1)))
        assert not (tmp_path / "out" / f"out_y_timed{k}_1.d2kt").exists()
    # Outputs are poisoned before every call, and an address does not keep its content from call to call.
    assert all(poisoned for _, _, poisoned in seen)
    assert len({p for p, _, _ in seen}) == 3  # 2 sets, 3 slots
    by_addr = {}
    changed = False
    for p, v, _ in seen:
        changed |= p in by_addr and by_addr[p] != v
        by_addr[p] = v
    assert changed


def test_cache_by_address_is_caught_in_the_timed_outputs(tmp_path):
    cache = {}

    def solve(x, y, *, alpha):
        if x.data_ptr() in cache:
            y.copy_(cache[x.data_ptr()])
        else:
            y.copy_(x * alpha)
            cache[x.data_ptr()] = y.clone()

    w = make_worker(tmp_path, solve)
    r = w.op_time(request(tmp_path, 2, seed=12345))
    wrong = [k for k in range(2)
             if not torch.equal(h.read_tensor(str(tmp_path / "out" / f"out_y_timed{k}_0.d2kt"), "cpu"),
                                torch.full((8,), 2.0 * (k + 1)))]
    assert wrong, "a cache keyed by input address must give a stale output on some timed set"


def test_the_checked_timed_call_is_drawn_from_all_calls(tmp_path):
    """Each set's checked call is uniform over its timed calls: a solution that is right only early (or only late)
    is caught on most draws, and the picks cover the whole run."""
    picks = []
    caught_late_cheat = 0
    for seed in range(40):
        calls = {"n": 0}

        def solve(x, y, *, alpha):
            calls["n"] += 1
            y.fill_(float(calls["n"]))  # the call's index, to see which call was picked

        d = tmp_path / f"s{seed}"
        d.mkdir()
        w = make_worker(d, solve)
        w.op_time(request(d, 2, seed=seed))
        idx = float(h.read_tensor(str(d / "out" / "out_y_timed0_0.d2kt"), "cpu")[0])
        picks.append(idx / calls["n"])
        caught_late_cheat += idx > 10  # a solution right on its first 10 calls only would be caught here
    assert min(picks) < 0.34 and max(picks) > 0.66, picks
    assert caught_late_cheat >= 30, caught_late_cheat


def test_input_mutation_while_timed_is_a_violation(tmp_path):
    def solve(x, y, *, alpha):
        y.copy_(x * alpha)
        x.add_(1)

    w = make_worker(tmp_path, solve)
    with pytest.raises(h.HarnessError) as e:
        w.op_time(request(tmp_path, 2))
    assert e.value.status == "compliance_violation"
