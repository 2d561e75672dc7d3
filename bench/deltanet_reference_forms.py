"""Task 004's eager reference (all sequences advance together) against the per-sequence token loop it replaced:
the largest relative difference of their outputs and the time of each, on a few shapes.
Usage: python3 bench/deltanet_reference_forms.py [cpu|cuda] [float64|float32]"""

import importlib.util
import os
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
spec = importlib.util.spec_from_file_location("ref004", os.path.join(ROOT, "tasks", "004_chunked_gated_deltanet", "reference.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def per_sequence(q, k, v, g, beta, cu_seqlens, *, scale, eps):
    """The form before 2026-12-03: per sequence, token by token, the state of all heads at once."""
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + eps)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + eps)
    alpha = torch.exp(g)
    o = torch.empty(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        S = torch.zeros(q.shape[1], v.shape[2], q.shape[2], dtype=q.dtype, device=q.device)
        for t in range(bounds[b], bounds[b + 1]):
            Sk = torch.bmm(S, k[t].unsqueeze(-1)).squeeze(-1)
            S = S - beta[t, :, None, None] * Sk.unsqueeze(-1) * k[t].unsqueeze(1)
            S = alpha[t, :, None, None] * S + beta[t, :, None, None] * v[t].unsqueeze(-1) * k[t].unsqueeze(1)
            o[t] = scale * torch.bmm(S, q[t].unsqueeze(-1)).squeeze(-1)
    return o


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    if r.is_cuda:
        torch.cuda.synchronize()
    return r, time.perf_counter() - t0


device = sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu")
dt = getattr(torch, sys.argv[2] if len(sys.argv) > 2 else "float64")
print(f"{'T':>6} {'B':>4} {'H':>3} {'K=V':>4}  {'max rel diff':>12}  {'per sequence':>12}  {'together':>9}   ({device}, {dt})")
for T, B, H, D in ((1, 1, 2, 8), (37, 3, 2, 16), (200, 7, 4, 16), (130, 20, 2, 8), (64, 64, 1, 4), (8192, 16, 4, 32),
                   (4096, 1, 4, 32)):
    ins = ref.generate_inputs({"T": T, "H": H, "K": D, "V": D, "B": B}, {}, 3, device)
    args = [ins[n].to(dt) if ins[n].is_floating_point() else ins[n] for n in ("q", "k", "v", "g", "beta", "cu_seqlens")]
    a, ta = timed(lambda: per_sequence(*args, scale=D ** -0.5, eps=1e-6))
    b, tb = timed(lambda: ref.reference(*args, scale=D ** -0.5, eps=1e-6))
    d = ((a - b).abs().max() / a.abs().max()).item()
    print(f"{T:>6} {B:>4} {H:>3} {D:>4}  {d:>12.3e}  {ta:>10.3f} s  {tb:>7.3f} s")
