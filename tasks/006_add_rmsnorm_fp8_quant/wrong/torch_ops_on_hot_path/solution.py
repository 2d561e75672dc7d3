"""Known-bad: the add and the RMSNorm are PyTorch ops; only the group quantization is a Triton kernel.

Numerically right, but torch.rsqrt, Tensor.float and the tensor arithmetic on the hot path are forbidden (they
are the eager pipeline the task asks to replace).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _group_quant_kernel(y_ptr, q_ptr, s_ptr, amax_min, amax_max, GROUP: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    offs = g * GROUP + tl.arange(0, GROUP)
    y = tl.load(y_ptr + offs)
    amax = tl.max(tl.abs(y), axis=0)
    scale = tl.minimum(tl.maximum(amax, amax_min), amax_max) / 448.0
    q = tl.minimum(tl.maximum(y / scale, -448.0), 448.0)
    tl.store(q_ptr + offs, q.to(tl.float8e4nv))
    tl.store(s_ptr + g, scale)


def solve(x, residual, weight, residual_out, q, scale, *, eps, amax_min, amax_max):
    T, D = x.shape
    residual_out.copy_(x + residual)
    h = residual_out.float()
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    _group_quant_kernel[(T * D // 128,)](y, q, scale, amax_min, amax_max, GROUP=128)
