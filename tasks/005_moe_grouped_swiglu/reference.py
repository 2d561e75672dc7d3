"""Input generator and PyTorch reference for moe_grouped_swiglu.

A mixture-of-experts MLP layer after routing: every token t is sent to its K experts topk_ids[t, :], each expert
e computes W_down[e] (silu(gate) * up) with [gate; up] = W_gate_up[e] x_t, and the K results are summed with the
router weights topk_weights[t, :].
"""

import math

import torch


def generate_inputs(axes, params, seed, device):
    T, D, F, E, K = (int(axes[k]) for k in ("T", "D", "F", "E", "K"))
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    # Activations after the pre-MLP RMSNorm: O(1) entries.
    hidden = torch.randn(T, D, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    # Router: softmax over E logits with a per-expert popularity bias (real routers are unbalanced: some experts
    # get several times the mean load, others few or no tokens), top-K distinct experts, weights renormalized
    # over the K chosen (Mixtral; Qwen3-MoE with norm_topk_prob).
    logits = torch.randn(T, E, generator=gen, device=device, dtype=torch.float32)
    logits += 1.5 * torch.randn(1, E, generator=gen, device=device, dtype=torch.float32)
    probs = torch.softmax(logits, dim=-1)
    topk_weights, topk_ids = torch.topk(probs, K, dim=-1)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    # Expert weights, scaled so that [gate; up] and the output have O(1) entries.
    w_gate_up = torch.randn(E, 2 * F, D, generator=gen, device=device, dtype=torch.bfloat16)
    w_gate_up.mul_(1.0 / math.sqrt(D))
    w_down = torch.randn(E, D, F, generator=gen, device=device, dtype=torch.bfloat16)
    w_down.mul_(2.0 / math.sqrt(F))
    return {
        "hidden": hidden,
        "topk_ids": topk_ids.to(torch.int32),
        "topk_weights": topk_weights.contiguous(),
        "w_gate_up": w_gate_up,
        "w_down": w_down,
    }


def reference(hidden, topk_ids, topk_weights, w_gate_up, w_down):
    """Plain eager PyTorch, as Hugging Face's Mixtral / Qwen3-MoE sparse MoE block computes it: a loop over the
    experts, gathering each expert's tokens, two matmuls, and a weighted index_add back."""
    E = w_gate_up.shape[0]
    F = w_down.shape[2]
    out = torch.zeros_like(hidden)
    expert_mask = torch.nn.functional.one_hot(topk_ids.long(), num_classes=E).permute(2, 1, 0)  # [E, K, T]
    for e in range(E):
        slot, token = torch.where(expert_mask[e])
        if token.numel() == 0:
            continue
        x = hidden[token]
        gate_up = x @ w_gate_up[e].t()
        h = torch.nn.functional.silu(gate_up[:, :F]) * gate_up[:, F:]
        y = (h @ w_down[e].t()) * topk_weights[token, slot, None].to(h.dtype)
        out.index_add_(0, token, y.to(out.dtype))
    return out
