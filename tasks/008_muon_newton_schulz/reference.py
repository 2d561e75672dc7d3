"""Input generator and PyTorch reference for muon_newton_schulz.

Muon's orthogonalization of a batch of update matrices: normalize each matrix by its Frobenius norm, then run
`steps` quintic Newton-Schulz iterations X <- a X + (b A + c A^2) X with A = X X^T, on the wide orientation
(a matrix with more rows than columns is transposed first and transposed back at the end).
"""

import math

import torch


def generate_inputs(axes, params, seed, device):
    B, M, N = int(axes["B"]), int(axes["M"]), int(axes["N"])
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    # A momentum buffer of a real layer: a few dominant directions (rank r, singular values spread over an
    # order of magnitude) on top of isotropic noise, so the spectrum spans several decades and the small
    # singular values are far from converged after 5 steps (the regime Muon actually runs in).
    r = max(1, min(M, N) // 16)
    noise = torch.randn(B, M, N, generator=gen, device=device, dtype=torch.float32)
    u = torch.randn(B, M, r, generator=gen, device=device, dtype=torch.float32)
    v = torch.randn(B, r, N, generator=gen, device=device, dtype=torch.float32)
    scale = torch.exp(-2.0 * torch.rand(B, 1, r, generator=gen, device=device, dtype=torch.float32))
    low_rank = torch.bmm(u * scale, v) * (4.0 / math.sqrt(r))
    # Gradients are not normalized: give each matrix a Frobenius norm between 8 and about 440 (log-uniform), so
    # skipping the normalization makes the iteration diverge instead of passing by luck.
    G = noise + low_rank
    target = 8.0 * torch.exp(4.0 * torch.rand(B, 1, 1, generator=gen, device=device, dtype=torch.float32))
    G = (G * (target / G.norm(dim=(-2, -1), keepdim=True))).to(torch.bfloat16)
    return {"G": G}


def reference(G, *, steps, coef_a, coef_b, coef_c, eps):
    """Plain eager PyTorch, as in Muon's zeropower_via_newtonschulz5 (batched)."""
    X = G
    transposed = G.size(-2) > G.size(-1)
    if transposed:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + eps)
    for _ in range(steps):
        A = X @ X.mT
        B = coef_b * A + coef_c * A @ A
        X = coef_a * X + B @ X
    if transposed:
        X = X.mT
    return X.contiguous()
