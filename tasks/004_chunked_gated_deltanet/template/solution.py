import torch
import triton
import triton.language as tl


# TODO: write your @triton.jit kernel(s) here.


def solve(q, k, v, g, beta, cu_seqlens, o, *, scale, eps):
    """Gated DeltaNet forward over a packed varlen batch, destination-passing.

    q, k:       [T, H, K] bfloat16 queries and keys, not normalized (contiguous, on the GPU); K = 128
    v:          [T, H, V] bfloat16 values; V = 128
    g:          [T, H] float32 log decay gates (alpha = exp(g) <= 1)
    beta:       [T, H] float32 write strengths in (0, 1)
    cu_seqlens: [B + 1] int32, cu_seqlens[0] = 0, cu_seqlens[B] = T, strictly increasing; sequence b is tokens
                cu_seqlens[b] .. cu_seqlens[b + 1] - 1
    o:          [T, H, V] bfloat16 output, preallocated and poisoned by the harness
    scale:      float (1 / sqrt(K)); eps: float (1e-6)

    Per sequence and head, with q_t <- q_t / sqrt(|q_t|^2 + eps) and k_t likewise, and S = 0 (V x K) at the
    sequence start: S_t = exp(g_t) (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T) + beta_t v_t k_t^T; o_t = scale S_t q_t.
    Do not modify the inputs; do not synchronize with the host (no .item(), .tolist(), .cpu() of device tensors).
    The return value is ignored.
    """
    T, H, K = q.shape
    V = v.shape[2]
    B = cu_seqlens.shape[0] - 1
    # TODO: launch your kernel(s) here.
    raise NotImplementedError("chunked_gated_deltanet: solve() is not implemented yet")
