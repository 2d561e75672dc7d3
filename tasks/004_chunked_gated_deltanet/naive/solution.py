"""Naive chunked_gated_deltanet: the token-by-token recurrence in one kernel, the state on chip.

One program per (V block of 32 columns, head, sequence) keeps its [K, 32] slice of the state h = S^T in fp32
registers from the sequence start (zero) to its end, and per token: normalizes q and k, decays the state, computes
S k, applies the delta-rule update and writes o = scale * S q. Correct, and it reads q, k, v once per V block, but
every token is a dependent step of matrix-vector work (no tensor cores), and a sequence of L tokens is L steps
long whatever the number of programs.
"""

import torch
import triton
import triton.language as tl

BV = 32


@triton.jit
def _recurrent_kernel(q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, cu_ptr, o_ptr, H, scale, eps,
                      K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    vb = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    start = tl.load(cu_ptr + b)
    end = tl.load(cu_ptr + b + 1)
    rk = tl.arange(0, K)
    rv = vb * BV + tl.arange(0, BV)
    state = tl.zeros([K, BV], dtype=tl.float32)   # h = S^T: h[i, j] = S[j, i]
    for i in range(0, end - start):
        row = (start.to(tl.int64) + i) * H + h
        k = tl.load(k_ptr + row * K + rk).to(tl.float32)
        q = tl.load(q_ptr + row * K + rk).to(tl.float32)
        v = tl.load(v_ptr + row * V + rv).to(tl.float32)
        alpha = tl.exp(tl.load(g_ptr + row))
        beta = tl.load(beta_ptr + row)
        k = k / tl.sqrt(tl.sum(k * k, axis=0) + eps)
        q = q / tl.sqrt(tl.sum(q * q, axis=0) + eps)
        sk = tl.sum(state * k[:, None], axis=0)                       # S_{t-1} k_t, this V block
        state = alpha * (state - beta * k[:, None] * sk[None, :]) + beta * k[:, None] * v[None, :]
        o = tl.sum(state * q[:, None], axis=0) * scale                # S_t q_t
        tl.store(o_ptr + row * V + rv, o.to(tl.bfloat16))


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    bv = BV if q.is_cuda else V   # on the CPU, where the interpreter's cost is per program step: all of V
    _recurrent_kernel[(V // bv, H, B)](q, k, v, g, beta, cu_seqlens, o, H, scale, eps, K=K, V=V, BV=bv,
                                       num_warps=4)
