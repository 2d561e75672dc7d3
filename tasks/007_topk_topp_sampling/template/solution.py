import torch
import triton
import triton.language as tl


# TODO: write your @triton.jit kernel(s) here.


def solve(logits, temperature, top_k, top_p, u, ids):
    """Top-k / top-p sampling, destination-passing.

    logits: [B, V] float32; temperature: [B] float32 (> 0); top_k: [B] int32 (>= 1; >= V keeps all);
    top_p: [B] float32 (in (0, 1]; 1 keeps all); u: [B, 32] float32 uniform draws in [0, 1).
    ids: [B] int64 output, preallocated and poisoned by the harness.

    For each row: z = logits / T, p = softmax(z); K = tokens with fewer than top_k larger logits (ties kept);
    P = tokens whose strictly-more-likely tokens hold less than top_p of p (the crossing token kept);
    ids[b] ~ p restricted to K & P, renormalized, using u[b, :] as the only randomness.
    Do not modify the inputs. The return value is ignored.
    """
    B, V = logits.shape
    # TODO: launch your kernel(s) here.
    raise NotImplementedError("topk_topp_sampling: solve() is not implemented yet")
