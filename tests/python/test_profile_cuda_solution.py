"""bench/profile_cuda_solution.py: its ctypes view of the solution ABI matches include/d2k/solution.h, its nvcc
command carries the evaluator's flags, and bad arguments get a clear error. Running a solution needs the GPU
(scripts/gpu-check.sh); on a CPU machine the tool says so and exits 3."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TOOL = os.path.join(ROOT, "bench", "profile_cuda_solution.py")
spec = importlib.util.spec_from_file_location("profile_cuda_solution", TOOL)
pcs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pcs)
TASK = os.path.join(ROOT, "tasks", "007_topk_topp_sampling")


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to read the header's layout")
def test_ctypes_layout_matches_the_header(tmp_path):
    prog = tmp_path / "layout.c"
    prog.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "d2k/solution.h"\nint main(void) {\n'
                    '  printf("%zu %zu %zu %zu %zu\\n", sizeof(d2k_tensor), offsetof(d2k_tensor, dtype),\n'
                    '         offsetof(d2k_tensor, shape), offsetof(d2k_tensor, strides), sizeof(d2k_param));\n'
                    '  printf("%zu %zu %zu\\n", offsetof(d2k_param, dtype), offsetof(d2k_param, f), offsetof(d2k_param, i));\n'
                    '  printf("%d %d %d\\n", D2K_FLOAT32, D2K_INT64, D2K_BOOL);\n  return 0;\n}\n')
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-I", os.path.join(ROOT, "include"), str(prog), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    T, P = pcs.D2kTensor, pcs.D2kParam
    import ctypes
    assert lines[0].split() == [str(x) for x in (ctypes.sizeof(T), T.dtype.offset, T.shape.offset, T.strides.offset,
                                                 ctypes.sizeof(P))]
    assert lines[1].split() == [str(x) for x in (P.dtype.offset, P.f.offset, P.i.offset)]
    pytest.importorskip("torch")
    import d2k_harness  # the dtype codes the tool (and the worker) use
    assert lines[2].split() == [str(d2k_harness.DTYPES.index(n)) for n in ("float32", "int64", "bool")]


def test_nvcc_command_carries_the_evaluators_flags():
    src = open(os.path.join(ROOT, "src", "eval", "cuda_build.cpp")).read()
    fmt_string = re.search(r'fmt::format\("(-std=c\+\+17[^"]*)"', src).group(1)
    cmd = pcs.nvcc_command("nvcc", "s.cu", "s.so", "sm_90a", ["X=1"])
    for flag in fmt_string.replace("{}", "").split():
        assert flag in cmd, flag
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd
    assert "-DX=1" in cmd and cmd[-3:] == ["-o", "s.so", "s.cu"]


def test_shape_entries():
    assert pcs.eval_dim(32, {"B": 4}) == 32
    assert pcs.eval_dim("B", {"B": 4}) == 4
    assert pcs.eval_dim("2 * B + 1", {"B": 4}) == 9
    with pytest.raises(SystemExit):
        pcs.eval_dim("__import__('os')", {})


def test_bad_arguments_are_named():
    r = run(TASK, os.path.join(TASK, "expert"), "no_such_workload")
    assert r.returncode == 2
    assert "no workload 'no_such_workload'" in r.stderr and "llama3_b256_v128256" in r.stderr
    r = run(TASK, os.path.join(TASK, "naive"), "llama3_b256_v128256")  # a Triton solution: no solution.cu
    assert r.returncode == 2 and "solution.cu: no such file" in r.stderr
    r = run(TASK, os.path.join(TASK, "expert"), "llama3_b256_v128256", "--calls", "many")
    assert r.returncode == 2


def test_without_a_gpu_it_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: scripts/gpu-check.sh runs the tool there")
    r = run(TASK, os.path.join(TASK, "expert"), "llama3_b256_v128256", "--calls", "2")
    assert r.returncode == 3 and "no CUDA device" in r.stderr
