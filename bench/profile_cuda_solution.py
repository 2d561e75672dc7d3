"""Runs one CUDA C++ solution on one workload in a plain Python process, for profilers and quick variants.

`d2k eval` is the measurement of record, but its workers are sandboxed, get a scrubbed environment (a profiler's
injection variables do not reach them) and check every call. This tool builds `solution.cu` with the evaluator's
nvcc flags, draws the workload's inputs with the task's own generator, calls `d2k_solve` through ctypes and prints
the median of `--calls` CUDA-event timings (warm L2: a rough figure, not d2k's cold one). Under Nsight Compute:

  ncu --clock-control none --kernel-name regex:topk --launch-skip 3 --launch-count 1 --set full \\
      python3 bench/profile_cuda_solution.py tasks/007_topk_topp_sampling tasks/007_topk_topp_sampling/expert \\
      llama3_b256_v128256 --calls 5

Usage: python3 bench/profile_cuda_solution.py TASK_DIR SOLUTION_DIR WORKLOAD [--calls N] [--seed S] [--arch sm_90a]
       [--define NAME=VALUE ...] (passed to nvcc as -D, for variants of a solution without copying it)
       [--build-only] (build into the cache of built variants and stop: run several at once before timing)
       [--queued] (each call is enqueued behind a ~1 ms spin kernel, as `d2k eval` holds its stream, so the host's
       setup inside d2k_solve is not timed: the GPU's time alone)
Exit codes: 0 ran; 2 bad arguments or task files; 3 no GPU or no nvcc; 4 build failed; 5 d2k_solve failed.
"""

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))  # d2k_harness: the worker's dtype codes and typed params
MAX_DIMS = 8


class D2kTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class D2kParam(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("f", ctypes.c_double), ("i", ctypes.c_int64)]


def nvcc_command(nvcc, src, out, arch="sm_90a", defines=()):
    """The evaluator's build of a solution (the flags of src/eval/cuda_build.cpp; torch has loaded the shared CUDA
    runtime by the time the library is opened), plus any -D of a variant."""
    num = arch.split("_", 1)[1]
    cmd = [nvcc, "-std=c++17", "-O3", f"-gencode=arch=compute_{num},code=sm_{num}", "-Xcompiler", "-fPIC", "-shared",
           "-lineinfo", "-cudart", "shared", "-DNVTX_DISABLE", "-DCCCL_DISABLE_NVTX", "-I" + os.path.join(ROOT, "include")]
    cmd += ["-D" + d for d in defines]
    return cmd + ["-o", out, src]


def eval_dim(expr, axes):
    """A manifest shape entry: an integer, an axis name, or arithmetic over axes."""
    if isinstance(expr, int):
        return expr
    try:
        return int(eval(str(expr), {"__builtins__": {}}, dict(axes)))  # the suite's own files, not a solution's
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"profile_cuda_solution: shape entry {expr!r}: {e}") from None


def load_manifest(task_dir, workload):
    try:
        with open(os.path.join(task_dir, "task.toml"), "rb") as f:
            m = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"profile_cuda_solution: {task_dir}/task.toml: {e}", file=sys.stderr)
        sys.exit(2)
    w = next((w for w in m.get("workloads", []) if w.get("name") == workload), None)
    if w is None:
        names = ", ".join(w.get("name", "?") for w in m.get("workloads", []))
        print(f"profile_cuda_solution: no workload {workload!r} (have: {names})", file=sys.stderr)
        sys.exit(2)
    return m, w


def describe(t, dtype_code):
    d = D2kTensor()
    d.data = t.data_ptr()
    d.dtype = dtype_code(t.dtype)
    d.ndim = t.dim()
    for k in range(t.dim()):
        d.shape[k] = t.shape[k]
        d.strides[k] = t.stride(k)
    return d


def option(argv, name, default):
    if name in argv:
        i = argv.index(name)
        if i + 1 >= len(argv):
            raise SystemExit(f"profile_cuda_solution: {name} needs a value")
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return default


def main(argv):
    argv = list(argv)
    try:
        calls = int(option(argv, "--calls", "20"))
        seed = int(option(argv, "--seed", "1"))
    except ValueError as e:
        print(f"profile_cuda_solution: {e}", file=sys.stderr)
        return 2
    arch = option(argv, "--arch", "sm_90a")
    defines = []
    build_only = "--build-only" in argv
    queued = "--queued" in argv
    if queued:
        argv.remove("--queued")
    if build_only:
        argv.remove("--build-only")
    while "--define" in argv:
        defines.append(option(argv, "--define", ""))
    if len(argv) != 3 or calls < 1:
        print(__doc__, file=sys.stderr)
        return 2
    task_dir, sol_dir, workload = argv
    src = os.path.join(sol_dir, "solution.cu")
    if not os.path.isfile(src):
        print(f"profile_cuda_solution: {src}: no such file", file=sys.stderr)
        return 2
    manifest, w = load_manifest(task_dir, workload)

    import torch  # after the argument checks: a usage error should not wait for torch's import
    if not torch.cuda.is_available():
        print("profile_cuda_solution: no CUDA device here (this tool runs a solution on the GPU)", file=sys.stderr)
        return 3
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        print("profile_cuda_solution: nvcc not found", file=sys.stderr)
        return 3

    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read() + repr((arch, defines)).encode()).hexdigest()[:16]
    so = os.path.join(tempfile.gettempdir(), f"d2k-profile-{digest}.so")
    if not os.path.exists(so):
        cmd = nvcc_command(nvcc, src, so, arch, defines)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(" ".join(cmd) + "\n" + r.stdout + r.stderr, file=sys.stderr)
            return 4
    if build_only:
        print(so)
        return 0
    lib = ctypes.CDLL(so)
    lib.d2k_solve.restype = ctypes.c_int
    lib.d2k_solve.argtypes = [ctypes.POINTER(D2kTensor), ctypes.c_int, ctypes.POINTER(D2kTensor), ctypes.c_int,
                              ctypes.POINTER(D2kParam), ctypes.c_int, ctypes.c_void_p]

    spec = importlib.util.spec_from_file_location("task_reference", os.path.join(task_dir, "reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    import d2k_harness as h
    specs = manifest.get("params", [])
    params = h.typed_params(specs, w.get("params", {}))  # as the worker types them
    inputs = ref.generate_inputs(dict(w["axes"]), dict(params), seed, "cuda")
    in_list = [inputs[s["name"]].contiguous() for s in manifest["inputs"]]
    outs = [torch.empty([eval_dim(d, w["axes"]) for d in s["shape"]], dtype=h.torch_dtype(s["dtype"]), device="cuda")
            for s in manifest["outputs"]]
    c_in = (D2kTensor * len(in_list))(*[describe(t, h.dtype_code) for t in in_list])
    c_out = (D2kTensor * len(outs))(*[describe(t, h.dtype_code) for t in outs])
    name_bytes = [p["name"].encode() for p in specs]
    c_par = (D2kParam * max(1, len(specs)))(*[D2kParam(n, h.DTYPES.index(p["dtype"]), float(params[p["name"]]),
                                                       int(params[p["name"]])) for n, p in zip(name_bytes, specs)])
    stream = torch.cuda.current_stream()
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queued:
            torch.cuda._sleep(2_000_000)  # cycles: ~1 ms, longer than any host setup of one call
        start.record(stream)
        rc = lib.d2k_solve(c_in, len(in_list), c_out, len(outs), c_par, len(specs), stream.cuda_stream)
        end.record(stream)
        if rc != 0:
            print(f"profile_cuda_solution: d2k_solve returned {rc}", file=sys.stderr)
            return 5
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    print(f"{os.path.basename(os.path.normpath(sol_dir))} on {workload}: median {times[len(times) // 2]:.4f} ms, "
          f"min {times[0]:.4f} ms over {calls} calls (warm L2, CUDA events{', queued' if queued else ''}; "
          f"d2k eval's cold figure is the record)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
