import sys, os, ctypes, time, importlib.util, tomllib, statistics
import torch
TASK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "001_varlen_segmented_scan")
sys.path.insert(0, TASK)
import reference as R
man = tomllib.load(open(TASK + "/task.toml", "rb"))
atol, rtol = man["outputs"][0]["atol"], man["outputs"][0]["rtol"]
mode = sys.argv[1]
dev = "cuda"

class T(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]
def desc(t, code):
    d = T(); d.data = t.data_ptr(); d.dtype = code; d.ndim = t.dim()
    for i in range(t.dim()): d.shape[i] = t.shape[i]; d.strides[i] = t.stride(i)
    return d

class Cuda:
    def __init__(self, so):
        self.lib = ctypes.CDLL(so); self.lib.d2k_solve.restype = ctypes.c_int
    def solve(self, g, cu, y):
        ins = (T * 2)(desc(g, 1), desc(cu, 7)); outs = (T * 1)(desc(y, 1))
        rc = self.lib.d2k_solve(ins, 2, outs, 1, None, 0, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        assert rc == 0, rc

def load_py(path):
    spec = importlib.util.spec_from_file_location("m" + str(abs(hash(path))), path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def get(name):
    if name == "expert": return Cuda(os.environ["EXPERT_SO"])
    if name == "naive": return load_py(TASK + "/naive/solution.py")
    return load_py(TASK + f"/wrong/{name}/solution.py")

def check(sol, ax, seed, reps=1):
    inp = R.generate_inputs(ax, {}, seed, dev); g, cu = inp["g"], inp["cu_seqlens"]
    exp = R.reference(g.double(), cu)
    ok_all = True; worst = 0.0
    for r in range(reps):
        y = torch.full_like(g, float("nan")); g0 = g.clone(); cu0 = cu.clone()
        sol.solve(g, cu, y); torch.cuda.synchronize()
        assert torch.equal(g, g0) and torch.equal(cu, cu0)
        err = (y.double() - exp).abs(); tol = atol + rtol * exp.abs()
        ok = bool((err <= tol).all()); ok_all &= ok
        worst = max(worst, float((err / tol).nan_to_num(1e30).max()))
    return ok_all, worst

def all_workloads(): return man["correctness"] + man["workloads"]

if mode == "graph":
    # capture the expert's first call (empty state buffer -> stream-ordered allocation path) in a CUDA graph
    sol = get("expert")
    ax = man["workloads"][0]["axes"]
    inp = R.generate_inputs(ax, {}, 5, dev); g, cu = inp["g"], inp["cu_seqlens"]
    exp = R.reference(g.double(), cu)
    y = torch.full_like(g, float("nan"))
    s = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        sol.solve(g, cu, y)
    for i in range(3):
        y.fill_(float("nan")); graph.replay(); torch.cuda.synchronize()
        err = (y.double() - exp).abs(); print("graph replay", i, bool((err <= atol + rtol * exp.abs()).all()))
    sys.exit(0)

if mode == "check":
    names = sys.argv[2].split(",")
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    for name in names:
        sol = get(name); res = []
        for w in all_workloads():
            for seed in (11, 12, 13):
                ok, worst = check(sol, w["axes"], seed, reps)
                res.append((w["name"], seed, ok, worst))
        n_ok = sum(r[2] for r in res)
        print(f"== {name}: {n_ok}/{len(res)} checks pass; overall {'PASS' if n_ok == len(res) else 'FAIL'}")
        for wn, seed, ok, worst in res:
            if (not ok) or name in ("expert", "naive"):
                print(f"   {wn:28s} seed{seed} {'ok ' if ok else 'BAD'} max err/tol {worst:.3g}")
    sys.exit(0)

if mode == "time":
    names = sys.argv[2].split(",")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    for w in man["workloads"]:
        ax = w["axes"]; inp = R.generate_inputs(ax, {}, 21, dev); g, cu = inp["g"], inp["cu_seqlens"]
        nbytes = 8 * ax["T"] * ax["H"] + 4 * (ax["B"] + 1)
        line = f"{w['name']:24s} sol {nbytes/4.8e12*1e6:7.1f}us(@4.8TB/s)"
        for name in names:
            y = torch.empty_like(g)
            if name == "reference":
                fn = lambda: R.reference(g, cu); n = 3
            else:
                sol = get(name); fn = lambda: sol.solve(g, cu, y); n = 30
            fn(); torch.cuda.synchronize()
            ts = []
            for i in range(n):
                flush.zero_(); torch.cuda.synchronize()
                a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
                a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
            med = statistics.median(ts)
            line += f" | {name} {med:9.1f}us {nbytes/med/1e6:6.2f}TB/s"
        print(line, flush=True)
