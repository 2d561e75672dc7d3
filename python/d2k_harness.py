"""The data plane of a d2k worker process (run by the embedded interpreter of d2k-worker).

Requests arrive as JSON lines on stdin; each gets one JSON line on fd 3. Tensors travel as D2KT files.
The verdict is never computed here: this process may host hostile code, so it only produces inputs,
expected outputs (reference role) or solution outputs and timings (solution role), and the supervisor
compares them. The checker role runs only the task's trusted check() (outputs with check = "custom") and
answers (passed, message); the supervisor turns that into the status.
"""

import importlib.util
import json
import math
import os
import struct
import sys
import threading
import time
import traceback

import torch

try:
    import _d2k_native as native  # provided by d2k-worker
except ImportError:  # run as a plain script in tests
    native = None

MAGIC = b"D2KT\x01\x00\x00\x00"
DTYPES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "int64", "int32", "int16", "int8", "uint8", "bool"]


class HarnessError(Exception):
    """A failure with a trace status (e.g. runtime_error, incorrect_dtype)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def torch_dtype(name):
    t = getattr(torch, name, None)
    if t is None:
        raise HarnessError("runtime_error", f"this torch ({torch.__version__}) has no dtype {name}")
    return t


def dtype_code(t):
    for i, name in enumerate(DTYPES):
        if getattr(torch, name, None) == t:
            return i
    raise HarnessError("incorrect_dtype", f"dtype {t} is not a d2k dtype")


# A reference call slower than this is timed without warm-up samples: the call before the samples and the
# timer's own unblocked call already warm it, and three more calls of a seconds-long Python loop (task 004's
# eager reference) cost the evaluation tens of seconds without changing its median.
SLOW_CALL_S = 0.5

# Large tensors move between files and memory in chunks on a few threads: the files of the big workloads are
# hundreds of MB each (a 64 Mi-element output and its float64 expected value: 768 MB per reference run), and one
# thread copying device -> host -> tmpfs page by page left the machine's other cores idle. On the H200 (16 cores,
# 2026-12-03, bench/harness_io_speed.py) the threads alone gained little (512 MiB written in 0.60 -> 0.46 s, read
# in 0.50 -> 0.48 s): the pageable device <-> host copy was the bottleneck, so device tensors now move through a
# pinned buffer per thread (STAGING bytes). Below 4 cores the chunks go one after another.
IO_CHUNK = 64 << 20
STAGING = 16 << 20
IO_THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
_tls = threading.local()
_io_pool = None


def _io_map(fn, ranges):
    """fn(a, b) for every range, on the I/O threads when there is more than one; the first error is raised."""
    global _io_pool
    if len(ranges) <= 1 or IO_THREADS < 4:
        for a, b in ranges:
            fn(a, b)
        return
    if _io_pool is None:
        from concurrent.futures import ThreadPoolExecutor
        _io_pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="d2k-io")
    for f in [_io_pool.submit(fn, a, b) for a, b in ranges]:
        f.result()


def _chunks(n):
    return [(a, min(n, a + IO_CHUNK)) for a in range(0, n, IO_CHUNK)]


def _staging(nbytes):
    """This thread's pinned host buffer (STAGING bytes, allocated once) and its CUDA stream: copies from and to
    pinned memory are DMA transfers, where a pageable tensor's .cpu() or .to("cuda") is staged by the driver."""
    st = getattr(_tls, "staging", None)
    if st is None or st[0].numel() < nbytes:
        st = _tls.staging = (torch.empty(max(nbytes, STAGING), dtype=torch.uint8, pin_memory=True),
                             torch.cuda.Stream())
    return st[0][:nbytes], st[1]


def write_tensor(path, t):
    t = t.detach().contiguous()
    code = dtype_code(t.dtype)
    shape = list(t.shape)
    head = MAGIC + struct.pack("<ii", code, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    raw = t.reshape(-1).view(torch.uint8) if t.numel() > 0 else None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        os.ftruncate(fd, len(head) + (raw.numel() if raw is not None else 0))

        def put(data, off):
            view = memoryview(data)
            while len(view):
                done = os.pwrite(fd, view, off)
                view, off = view[done:], off + done

        def put_chunk(a, b):  # each chunk copied to the host by the thread that writes it, no whole-tensor copy
            if not raw.is_cuda:
                put(raw[a:b].numpy(), len(head) + a)
                return
            for c in range(a, b, STAGING):
                host, stream = _staging(min(b, c + STAGING) - c)
                with torch.cuda.stream(stream):
                    host.copy_(raw[c:c + host.numel()], non_blocking=True)
                stream.synchronize()
                put(host.numpy(), len(head) + c)

        put(head, 0)
        if raw is not None:
            if raw.is_cuda:  # the tensor was written on the caller's stream; the I/O threads copy on their own
                torch.cuda.current_stream(raw.device).synchronize()
            _io_map(put_chunk, _chunks(raw.numel()))
    finally:
        os.close(fd)


def read_tensor(path, device):
    # The data is read once, straight into the buffer the tensor wraps (inputs of the large workloads are
    # gigabytes: reading the file whole, slicing and copying it cost three copies), in chunks on the I/O threads.
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 16, 0)
        if len(head) < 16 or head[:8] != MAGIC:
            raise HarnessError("runtime_error", f"{path}: not a D2KT file")
        code, ndim = struct.unpack_from("<ii", head, 8)
        if not 0 <= ndim <= 16 or not 0 <= code < len(DTYPES):
            raise HarnessError("runtime_error", f"{path}: bad header (dtype {code}, ndim {ndim})")
        dims = os.pread(fd, 8 * ndim, 16)
        if len(dims) != 8 * ndim:
            raise HarnessError("runtime_error", f"{path}: the header is cut short")
        shape = list(struct.unpack(f"<{ndim}q", dims))
        dt = torch_dtype(DTYPES[code])
        start = 16 + 8 * ndim
        nbytes = math.prod(shape) * torch.empty((), dtype=dt).element_size() if all(d >= 0 for d in shape) else -1
        if nbytes < 0 or os.fstat(fd).st_size != start + nbytes:
            raise HarnessError("runtime_error", f"{path}: the data does not match the header's shape")
        if nbytes == 0:
            return torch.empty(shape, dtype=dt, device=device)

        def read_into(view, off):  # fills view with the data bytes from offset off on
            done = 0
            while done < len(view):
                got = os.preadv(fd, [view[done:]], start + off + done)
                if got <= 0:
                    raise HarnessError("runtime_error", f"{path}: the file ended early")
                done += got

        if torch.device(device).type == "cuda":
            raw = torch.empty(nbytes, dtype=torch.uint8, device=device)

            def get(a, b):  # file -> this thread's pinned buffer -> device, piece by piece
                for c in range(a, b, STAGING):
                    host, stream = _staging(min(b, c + STAGING) - c)
                    read_into(memoryview(host.numpy()), c)
                    with torch.cuda.stream(stream):
                        raw[c:c + host.numel()].copy_(host, non_blocking=True)
                    stream.synchronize()  # before the buffer is refilled, and before the caller uses raw

            # raw's memory came from the caller's stream: nothing queued there may still use it
            torch.cuda.current_stream(raw.device).synchronize()
        else:
            buf = bytearray(nbytes)
            raw = torch.frombuffer(buf, dtype=torch.uint8)
            view = memoryview(buf)

            def get(a, b):
                read_into(view[a:b], a)

        _io_map(get, _chunks(nbytes))
    finally:
        os.close(fd)
    return raw.view(dt).reshape(shape)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise HarnessError("runtime_error", f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def typed_params(specs, values):
    out = {}
    for p in specs:
        v = values.get(p["name"], p["value"])
        if p["dtype"] in ("int32", "int64"):
            out[p["name"]] = int(v)
        elif p["dtype"] == "bool":
            out[p["name"]] = bool(v)
        else:
            out[p["name"]] = float(v)
    return out


def poison_(t):
    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-0x5A if t.dtype != torch.uint8 else 0xA5)
    return t


def failure_status(e):
    """Triton's compilation errors surface at the first call; they are compile errors, not runtime ones."""
    for cls in type(e).__mro__:
        if cls.__module__.startswith("triton.compiler") or cls.__name__ == "CompilationError":
            return "compile_error"
    return "runtime_error"


def fingerprints(tensors, stream_only=False):
    """A cheap content digest per tensor (sums of its raw words, all and every third), read back to the host
    without materializing a widened copy."""
    out = []
    for t in tensors:
        flat = t.detach().reshape(-1)
        if flat.numel() == 0:
            out.append((0, 0))
            continue
        raw = flat.view(torch.uint8)
        words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
        pair = torch.stack([words.sum(dtype=torch.int64), words[::3].sum(dtype=torch.int64)])
        if stream_only and pair.is_cuda:
            torch.cuda.current_stream().synchronize()
        out.append(tuple(int(v) for v in pair.cpu()))
    return out


def check_inputs_unchanged(specs, inputs, pristine):
    for spec, t, p in zip(specs, inputs, pristine):
        if not torch.equal(t, p) and not (t.is_floating_point() and torch.equal(t.isnan(), p.isnan())
                                          and torch.equal(t.nan_to_num(), p.nan_to_num())):
            raise HarnessError("compliance_violation", f"the solution modified its input '{spec['name']}'")


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Worker:
    def __init__(self, out):
        self.out = out
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.reference = None
        self.solve = None
        self.cuda_handle = None
        self.compiled = None  # torch.compile of the reference (compile role)

    # --- environment -------------------------------------------------------------------------
    def environment(self):
        env = {"torch": torch.__version__, "python": sys.version.split()[0], "device": self.device}
        try:
            import socket
            env["network_interfaces"] = sorted(name for _, name in socket.if_nameindex())
        except OSError:
            env["network_interfaces"] = []
        try:  # the installed version, without importing triton (~0.3 s on every worker's start)
            from importlib.metadata import version
            env["triton"] = version("triton")
        except Exception as e:  # noqa: BLE001 - report, never fail, on a missing triton
            env["triton"] = f"unavailable: {e}"
        if self.device == "cuda":
            p = torch.cuda.get_device_properties(0)
            env.update(gpu=p.name, sm_count=p.multi_processor_count, memory_bytes=p.total_memory,
                       cuda_runtime=torch.version.cuda, capability=f"{p.major}.{p.minor}")
            if native is not None:
                env.update(native.device_info())
        return env

    # --- reference role ----------------------------------------------------------------------
    def op_reference(self, req):
        """Inputs for (workload, seed) and the expected outputs in high precision, as files."""
        if self.reference is None:
            self.reference = load_module(req["reference_path"], "d2k_task_reference")
        ref = self.reference
        params = typed_params(req["params"], req["workload"].get("params", {}))
        gen = ref.generate_inputs(dict(req["workload"]["axes"]), dict(params), int(req["seed"]), self.device)
        files = {}
        ordered = []
        for spec in req["inputs"]:
            t = gen.get(spec["name"]) if isinstance(gen, dict) else None
            if not isinstance(t, torch.Tensor):
                raise HarnessError("runtime_error", f"generate_inputs gave no tensor '{spec['name']}'")
            if t.dtype != torch_dtype(spec["dtype"]):
                raise HarnessError("runtime_error",
                                   f"generate_inputs: '{spec['name']}' is {t.dtype}, the manifest says {spec['dtype']}")
            if list(t.shape) != spec["shape"]:
                raise HarnessError("runtime_error",
                                   f"generate_inputs: '{spec['name']}' has shape {list(t.shape)}, the manifest says {spec['shape']}")
            path = os.path.join(req["out_dir"], f"in_{spec['name']}.d2kt")
            write_tensor(path, t)
            files[spec["name"]] = path
            ordered.append(t)
        hp = torch.float64 if req.get("precision", "float64") == "float64" else torch.float32
        up = [t.to(hp) if t.is_floating_point() else t for t in ordered]
        with torch.no_grad():
            outs = ref.reference(*up, **params)
        if isinstance(outs, torch.Tensor):
            outs = (outs,)
        if len(outs) != len(req["outputs"]):
            raise HarnessError("runtime_error", f"reference returned {len(outs)} outputs, the manifest has {len(req['outputs'])}")
        expected = {}
        for spec, t in zip(req["outputs"], outs):
            path = os.path.join(req["private_dir"], f"exp_{spec['name']}.d2kt")
            write_tensor(path, t.to(torch.float64) if t.is_floating_point() else t)
            expected[spec["name"]] = path
        sync(self.device)
        return {"inputs": files, "expected": expected}

    def compiled_reference(self):
        """torch.compile of the reference, one per worker: every workload's shapes compile into it, so a workload
        compiled ahead (op compile, while the reference still runs elsewhere) is not compiled again when timed."""
        if self.compiled is None:
            self.compiled = torch.compile(self.reference.reference)
        return self.compiled

    def op_compile(self, req):
        """torch.compile of the reference, and its first call on the workload's inputs: the compilation, done
        before the baselines are timed (the supervisor sends this while the reference worker is still busy)."""
        if self.reference is None:
            self.reference = load_module(req["reference_path"], "d2k_task_reference")
        inputs = [read_tensor(req["input_files"][s["name"]], self.device) for s in req["inputs"]]
        params = typed_params(req["params"], req["workload"].get("params", {}))
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                self.compiled_reference()(*inputs, **params)
            sync(self.device)
        except Exception as e:  # noqa: BLE001 - torch.compile failing is a result, not an error
            return {"skipped": f"torch.compile failed: {type(e).__name__}: {str(e)[:300]}",
                    "compile_s": time.perf_counter() - t0}
        return {"compile_s": time.perf_counter() - t0}

    def op_baseline(self, req):
        """Times the reference on the task's own dtypes: eager, and torch.compile where it compiles."""
        if self.reference is None:
            self.reference = load_module(req["reference_path"], "d2k_task_reference")
        inputs = [read_tensor(req["input_files"][s["name"]], self.device) for s in req["inputs"]]
        params = typed_params(req["params"], req["workload"].get("params", {}))
        fn = self.reference.reference
        compile_s = None
        if req["mode"] == "compile":
            t0 = time.perf_counter()
            try:
                fn = self.compiled_reference()
                with torch.no_grad():
                    fn(*inputs, **params)  # compile (unless op compile did) outside the timed region
                sync(self.device)
            except Exception as e:  # noqa: BLE001 - torch.compile failing is a result, not an error
                return {"skipped": f"torch.compile failed: {type(e).__name__}: {str(e)[:300]}",
                        "compile_s": time.perf_counter() - t0}
            compile_s = time.perf_counter() - t0

        def launch():
            with torch.no_grad():
                fn(*inputs, **params)

        # The reference is trusted and may synchronize (e.g. .item() on sizes): no blocking kernel.
        cfg = dict(req.get("timing", {}), block_stream=False)
        t0 = time.perf_counter()
        launch()  # warm-up outside the samples
        sync(self.device)
        if time.perf_counter() - t0 > SLOW_CALL_S:
            cfg["warmup_samples"] = 0
        reply = {"timing": self.measure(launch, cfg)}
        if compile_s is not None:
            reply["compile_s"] = compile_s  # the evaluator's overhead is counted beyond compilation
        return reply

    def op_calibrate(self, req):
        """The device's ceilings for speed-of-light: copy bandwidth and dense matrix rates, timed cold."""
        if self.device != "cuda":
            raise HarnessError("runtime_error", "calibration needs a CUDA device")
        cfg = req.get("timing", {})
        n = int(req.get("copy_bytes", 4 << 30)) // 4
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        t = self.measure(lambda: dst.copy_(src), cfg)
        result = {"copy_gb_per_s": 2 * n * 4 / (t["median_ms"] * 1e-3) * 1e-9, "copy_timing": t}
        del src, dst
        m = int(req.get("matmul_size", 8192))
        for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            a = torch.randn(m, m, device="cuda").to(dt)
            b = torch.randn(m, m, device="cuda").to(dt)
            c = torch.empty(m, m, device="cuda", dtype=dt)
            if dt == torch.float32:
                torch.backends.cuda.matmul.allow_tf32 = False  # the plain fp32 rate, not tf32
            tm = self.measure(lambda: torch.matmul(a, b, out=c), cfg)
            result[f"{name}_tflop_per_s"] = 2 * m ** 3 / (tm["median_ms"] * 1e-3) * 1e-12
        return {"calibration": result}

    # --- checker role (trusted: never runs solution code) -------------------------------------
    def op_check(self, req):
        """The task's check() on one output with check = "custom": the output file is a copy the supervisor
        made out of the solution's reach; inputs as generated, expected as the reference wrote it. Replies
        {passed, message}; the supervisor turns it into a status. A check() that raises or returns anything
        but (bool, str) is an error of the task."""
        if self.reference is None:
            self.reference = load_module(req["reference_path"], "d2k_task_reference")
        check = getattr(self.reference, "check", None)
        if not callable(check):
            raise HarnessError("runtime_error", "reference.py defines no check()")
        inputs = {s["name"]: read_tensor(req["input_files"][s["name"]], self.device) for s in req["inputs"]}
        out = read_tensor(req["output_file"], self.device)
        expected = read_tensor(req["expected_file"], self.device)
        params = typed_params(req["params"], req["workload"].get("params", {}))
        with torch.no_grad():
            result = check(req["name"], out, expected, inputs, params)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise HarnessError("runtime_error", f"check() returned {type(result).__name__}, not (bool, str)")
        passed, message = result
        if isinstance(passed, torch.Tensor) and passed.numel() == 1 and passed.dtype == torch.bool:
            passed = bool(passed.item())
        if type(passed).__name__ not in ("bool", "bool_"):
            raise HarnessError("runtime_error", f"check() returned {type(passed).__name__} as its verdict, not bool")
        del inputs, out, expected
        if self.device == "cuda":
            torch.cuda.empty_cache()  # the solution's worker shares the device
        return {"passed": bool(passed), "message": str(message)[:4000]}

    # --- solution role -----------------------------------------------------------------------
    def op_load(self, req):
        if req["language"] == "triton":
            try:
                mod = load_module(req["path"], "solution")
            except SyntaxError:
                raise HarnessError("compile_error", "solution.py does not parse:\n" + traceback.format_exc(limit=2))
            except Exception:  # noqa: BLE001
                raise HarnessError("runtime_error", "importing the solution failed:\n" + traceback.format_exc(limit=6))
            if not callable(getattr(mod, "solve", None)):
                raise HarnessError("compliance_violation", "solution.py defines no solve()")
            self.solve = mod.solve
        else:
            if native is None or not native.has_cuda():
                raise HarnessError("runtime_error", "this worker cannot run CUDA solutions (no CUDA)")
            self.cuda_handle = native.load_cuda_solution(req["so_path"])
        return {}

    def call_solution(self, inputs, outputs, params, param_specs):
        if self.cuda_handle is not None:
            def desc(t):
                return (t.data_ptr(), dtype_code(t.dtype), list(t.shape), list(t.stride()))
            plist = [(p["name"], DTYPES.index(p["dtype"]), float(params[p["name"]]), int(params[p["name"]]))
                     for p in param_specs]
            rc = native.cuda_solve(self.cuda_handle, [desc(t) for t in inputs], [desc(t) for t in outputs], plist,
                                   torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise HarnessError("runtime_error", f"d2k_solve returned {rc}")
        else:
            self.solve(*inputs, *outputs, **params)

    def alloc_outputs(self, specs):
        return [poison_(torch.empty(s["shape"], dtype=torch_dtype(s["dtype"]), device=self.device)) for s in specs]

    def op_run(self, req):
        """One checked call: fresh poisoned outputs, solve, then the runtime checks, outputs to files."""
        inputs = [read_tensor(req["input_files"][s["name"]], self.device) for s in req["inputs"]]
        pristine = [t.clone() for t in inputs]
        outputs = self.alloc_outputs(req["outputs"])
        params = typed_params(req["params"], req["workload"].get("params", {}))
        sync(self.device)
        kernels, off_stream = None, []
        try:
            if req.get("profile") and self.device == "cuda":
                kernels, off_stream = self.profiled_call(inputs, outputs, params, req["params"],
                                                         os.path.join(req["out_dir"], "profile.json"))
            else:
                self.call_solution(inputs, outputs, params, req["params"])
            # Deferred writes: fingerprint the outputs once the given stream is done, then again after the
            # whole device and any helper thread had time to finish. Work outside the stream shows up here.
            first = fingerprints(outputs, stream_only=True) if req.get("defenses", True) else None
            sync(self.device)
            if first is not None:
                time.sleep(0.002)
                sync(self.device)
            if first is not None and fingerprints(outputs) != first:
                raise HarnessError("compliance_violation",
                                   "outputs changed after the call's stream finished: work ran outside the given "
                                   "stream (a side stream, a thread, or deferred work)")
        except HarnessError:
            raise
        except Exception as e:  # noqa: BLE001
            raise HarnessError(failure_status(e), "the solution raised:\n" + traceback.format_exc(limit=8))
        check_inputs_unchanged(req["inputs"], inputs, pristine)
        reply = {"outputs": self.write_outputs(req["outputs"], outputs, req["out_dir"])}
        if kernels is not None:
            reply["kernels"] = kernels
            reply["off_stream_kernels"] = off_stream
        return reply

    def profiled_call(self, inputs, outputs, params, param_specs, trace_path):
        """The call under the CUDA activity profiler. Returns (kernels, off_stream): the names of the GPU kernels
        it ran, and those of them that ran on another stream than the one it was given (a marker kernel
        launched on that stream first tells which it is). kernels is a string saying why they could not be
        listed when the profiler fails (the supervisor then records the check as not verified); off_stream
        is a string saying why when the streams could not be told apart."""
        try:
            from torch.profiler import ProfilerActivity, profile
        except Exception as e:  # noqa: BLE001
            self.call_solution(inputs, outputs, params, param_specs)
            return f"no profiler: {e}", []
        marker = torch.zeros(1, device=self.device)
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                marker.add_(1)
                self.call_solution(inputs, outputs, params, param_specs)
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")})
        except HarnessError:
            raise
        except Exception as e:  # noqa: BLE001 - a profiler failure is not the solution's
            if "solution" in traceback.format_exc():
                raise
            return f"profiler failed: {type(e).__name__}: {e}", []
        off_stream = []
        try:
            prof.export_chrome_trace(trace_path)
            with open(trace_path) as f:
                events = json.load(f).get("traceEvents", [])
            os.unlink(trace_path)
            gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                          and isinstance(e.get("args"), dict) and "stream" in e["args"]),
                         key=lambda e: e.get("ts", 0))
            if gpu:
                given = gpu[0]["args"]["stream"]  # the marker: the first GPU activity, on the given stream
                off_stream = sorted({e.get("name", "?") for e in gpu[1:] if e["args"]["stream"] != given})
        except Exception as e:  # noqa: BLE001 - the kernel list stands without the stream check
            return names, f"streams not checked: {type(e).__name__}: {e}"
        return names, off_stream

    def write_outputs(self, specs, outputs, out_dir, suffix=""):
        files = {}
        for spec, t in zip(specs, outputs):
            path = os.path.join(out_dir, f"out_{spec['name']}{suffix}.d2kt")
            write_tensor(path, t)
            files[spec["name"]] = path
        return files

    def op_time(self, req):
        """Cold timing over input sets of fresh seeds that no check call saw. The sets rotate through one more
        buffer slot than there are sets, so no address keeps its content from one call to the next; before
        every call, outside the timed window, the next set is copied into its slot and the slot's outputs are
        poisoned. One timed call per set, drawn uniformly from all of that set's timed calls (a reservoir sample: the
        solution cannot tell which, nor favour early or late calls), has its outputs sent back to the supervisor to be
        checked (files _timed<set>_0); a set that was never timed is run once more at the end in a slot that last held
        another set. The inputs must be unchanged."""
        import random
        rng = random.Random(req.get("rng_seed") or os.urandom(16))  # tests may fix it
        sets = [[read_tensor(files[s["name"]], self.device) for s in req["inputs"]] for files in req["input_sets"]]
        n_sets = len(sets)
        slots = [([torch.empty_like(t) for t in sets[0]], self.alloc_outputs(req["outputs"]))
                 for _ in range(n_sets + 1)]
        held = [None] * len(slots)  # which set each slot holds
        picked = {}                 # set -> [clones of the outputs of one of its timed calls]
        seen = [0] * n_sets         # timed calls of each set so far
        params = typed_params(req["params"], req["workload"].get("params", {}))
        state = {"i": 0, "slot": 0, "launched": None, "pick": False}

        def place(k, m):
            ins, outs = slots[m]
            for dst, src in zip(ins, sets[k]):
                dst.copy_(src)
            for t in outs:
                poison_(t)
            held[m] = k
            state["slot"] = m

        def prepare():
            m = state["launched"]
            # The n-th timed call of a set replaces the set's pick with probability 1/n: every call equally
            # likely to be the checked one, for ln(n) clones in all. (One pick per set, not up to two: on a
            # 64 Mi-element output, timing took 2.3 s instead of 2.9-3.3 s on the H200.)
            if state["pick"] and m is not None:
                k = held[m]
                seen[k] += 1
                if rng.random() * seen[k] < 1:
                    picked[k] = [[t.clone() for t in slots[m][1]]]
            i = state["i"]
            state["i"] += 1
            place(i % n_sets, i % len(slots))

        def launch():
            ins, outs = slots[state["slot"]]
            state["launched"] = state["slot"]
            self.call_solution(ins, outs, params, req["params"])

        try:
            # A random number of extra calls first (JIT compilation and module load stay out of the samples),
            # so no call count tells a timed call from a checked one.
            for _ in range(1 + rng.randrange(4)):
                prepare()
                launch()
            sync(self.device)
            if req.get("defenses", True):
                state["pick"] = True
                timing = self.measure(launch, req.get("timing", {}), prepare)
                prepare()  # the last timed call may be picked too
                state["pick"] = False
            else:  # the plain loop the defenses are measured against: one set, one slot, no poisoning
                state["slot"] = 0
                timing = self.measure(launch, req.get("timing", {}))
            used = set()
            for k in range(n_sets):
                if picked.get(k):
                    continue
                free = [m for m in range(len(slots)) if m not in used]
                m = next((m for m in free if held[m] not in (None, k)), free[0])
                place(k, m)
                launch()
                used.add(m)
                picked[k] = [slots[m][1]]
            sync(self.device)
        except HarnessError:
            raise
        except Exception as e:  # noqa: BLE001
            raise HarnessError(failure_status(e), "the solution raised while timed:\n" + traceback.format_exc(limit=8))
        for m, (ins, _) in enumerate(slots):
            if held[m] is not None:
                check_inputs_unchanged(req["inputs"], ins, sets[held[m]])
        timed_outputs = [self.write_outputs(req["outputs"], outs, req["out_dir"], f"_timed{k}_{j}")
                         for k in range(n_sets) for j, outs in enumerate(picked[k])]
        return {"timing": timing, "timed_outputs": timed_outputs}

    def measure(self, launch, cfg, prepare=None):
        if self.device != "cuda" or native is None or not native.has_cuda():
            raise HarnessError("runtime_error", "timing needs a CUDA device")
        stream = torch.cuda.current_stream().cuda_stream
        if cfg.get("mode") == "graph":
            r = native.measure_graph(launch, stream, cfg)
        else:
            r = native.measure_cold(launch, stream, cfg, prepare)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}

    def op_exit(self, req):
        return {}

    # --- loop --------------------------------------------------------------------------------
    def reply(self, obj):
        try:
            line = json.dumps(obj, allow_nan=False, default=str)
        except ValueError as e:  # NaN or Inf in a figure: say so rather than send invalid JSON
            line = json.dumps({"ok": False, "op": obj.get("op"), "status": "runtime_error",
                               "error": f"unencodable reply: {e}"})
        self.out.write(line + "\n")
        self.out.flush()

    def warm_profiler(self):
        """Starts the CUDA activity profiler once on a trivial op, so the first profiled check call does not pay
        for it (the supervisor asks for this while the reference still runs)."""
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.zeros(1, device=self.device).add_(1)
                torch.cuda.synchronize()
            prof.events()
        except Exception:  # noqa: BLE001 - the profiled call reports a profiler that does not work
            pass

    def serve(self, stdin):
        if os.environ.get("D2K_WARM_PROFILER") == "1" and self.device == "cuda":
            self.warm_profiler()
        self.reply({"event": "ready", "environment": self.environment()})
        for line in stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            op = req.get("op")
            t0 = time.perf_counter()
            try:
                handler = getattr(self, f"op_{op}", None)
                if handler is None:
                    raise HarnessError("runtime_error", f"unknown op {op!r}")
                body = handler(req)
                body.update(ok=True, op=op, seconds=time.perf_counter() - t0)
            except HarnessError as e:
                body = {"ok": False, "op": op, "status": e.status, "error": str(e)[-6000:]}
            except Exception:  # noqa: BLE001
                body = {"ok": False, "op": op, "status": "runtime_error", "error": traceback.format_exc(limit=8)[-6000:]}
            self.reply(body)
            if op == "exit":
                return


def main():
    out = os.fdopen(3, "w", buffering=1)
    Worker(out).serve(sys.stdin)


if __name__ == "__main__":
    main()
