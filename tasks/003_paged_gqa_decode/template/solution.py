import torch
import triton
import triton.language as tl


# TODO: write your @triton.jit kernel(s) here.


def solve(q, k_cache, v_cache, block_table, seq_lens, o, sm_scale):
    """Paged GQA decode attention, destination-passing.

    q:           [B, HQ, D] bfloat16, the query of each request's new token (contiguous, on the GPU)
    k_cache:     [P, PS, HKV, D] bfloat16 key pages; v_cache alike. Query head h uses key/value head h // (HQ // HKV)
    block_table: [B, MAXP] int32; token t of request b is slot t % PS of page block_table[b, t // PS]; entries past
                 the request's last page are padding
    seq_lens:    [B] int32, cached tokens of each request (1 .. MAXP * PS)
    o:           [B, HQ, D] bfloat16 output, preallocated and poisoned by the harness
    sm_scale:    float, the softmax scale

    Write o[b, h] = softmax_t(sm_scale * q[b, h] . K_b[t]) @ V_b[t] over t < seq_lens[b]. Do not modify the
    inputs; do not synchronize with the host (no .item(), .tolist(), .cpu() of device tensors). The return value
    is ignored.
    """
    B, HQ, D = q.shape
    P, PS, HKV, _ = k_cache.shape
    MAXP = block_table.shape[1]
    # TODO: launch your kernel(s) here.
    raise NotImplementedError("paged_gqa_decode: solve() is not implemented yet")
