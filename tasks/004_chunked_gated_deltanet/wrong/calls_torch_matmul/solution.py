"""Gated delta rule whose normalization is a Triton kernel but whose state products are torch.matmul.

A Triton kernel L2-normalizes q and k; the recurrence itself then runs on the host, token by token, with
torch.matmul for S k and S q (cuBLAS). Numerically fine, but torch.matmul is a forbidden PyTorch compute op (and the
host loop reads cu_seqlens with a sync).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _l2norm_kernel(x_ptr, y_ptr, eps, K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x = tl.load(x_ptr + row * K + tl.arange(0, K)).to(tl.float32)
    tl.store(y_ptr + row * K + tl.arange(0, K), x / tl.sqrt(tl.sum(x * x, axis=0) + eps))


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    T, H, K = q.shape
    V = v.shape[2]
    qn = torch.empty((T, H, K), dtype=torch.float32, device=q.device)
    kn = torch.empty((T, H, K), dtype=torch.float32, device=q.device)
    _l2norm_kernel[(T * H,)](q, qn, eps, K=K)
    _l2norm_kernel[(T * H,)](k, kn, eps, K=K)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        S = torch.zeros((H, V, K), dtype=torch.float32, device=q.device)
        for t in range(bounds[b], bounds[b + 1]):
            kt = kn[t].unsqueeze(-1)
            Sk = torch.matmul(S, kt)
            bt = beta[t].view(H, 1, 1)
            S = g[t].exp().view(H, 1, 1) * (S - bt * Sk * kt.transpose(1, 2)) \
                + bt * v[t].float().unsqueeze(-1) * kt.transpose(1, 2)
            o[t] = (scale * torch.matmul(S, qn[t].unsqueeze(-1)).squeeze(-1)).to(o.dtype)
