"""Input generator and PyTorch reference for add_rmsnorm_fp8_quant.

One decoder-layer boundary of an FP8 inference engine (DeepSeek-V3, Qwen3 FP8): add the layer's output to the
residual stream, RMS-normalize the sum, and quantize the normalized activations to float8_e4m3fn with one fp32
scale per token and group of 128 channels, ready for the next block-scaled FP8 GEMM.

    h            = x + residual                                   (bf16: the new residual stream)
    y            = h * rsqrt(mean(h^2) + eps) * weight            (fp32, per token row of D channels)
    amax[t, g]   = max |y[t, 128 g : 128 g + 128]|
    scale[t, g]  = clamp(amax[t, g], amax_min, amax_max) / 448
    q[t, c]      = e4m3(clamp(y[t, c] / scale[t, c // 128], -448, 448))   (round to nearest even)
"""

import math

import torch

GROUP = 128          # channels per quantization group (DeepSeek-V3's 1x128 activation blocks)
FP8_MAX = 448.0      # largest finite float8_e4m3fn


def generate_inputs(axes, params, seed, device):
    T, D = int(axes["T"]), int(axes["D"])
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))

    def rand(*shape):
        return torch.rand(*shape, generator=gen, device=device, dtype=torch.float32)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)

    # The residual stream: per-token magnitudes spread over a factor of 32 (log-uniform, 0.25 to 8); the layer's
    # output x is about half as large. Per-channel gains (log-normal, sigma 0.5) make the groups of one token
    # differ in range, as real hidden states do.
    row_gain = torch.exp(math.log(0.25) + math.log(32.0) * rand(T, 1))
    chan_gain = torch.exp(0.5 * randn(1, D))
    residual = randn(T, D) * chan_gain * row_gain
    x = 0.5 * randn(T, D) * chan_gain * row_gain

    # Special tokens, by row: row 0 is an attention-sink token and rows are sinks with probability 1/64 (one
    # massive activation, 100 to 1000 times the row's scale, in a channel fixed per draw); row 1 is a near-zero
    # token and rows are with probability 1/64 (rms 1e-4 to 3e-3: mean(h^2) of the order of eps, so the place of
    # eps matters); row 2 cancels exactly (x = -residual: h = 0) and so do rows with probability 1/256.
    kind = torch.zeros(T, dtype=torch.int64, device=device)
    u = rand(T)
    kind[u < 1.0 / 64] = 1
    kind[(u >= 1.0 / 64) & (u < 2.0 / 64)] = 2
    kind[(u >= 2.0 / 64) & (u < 2.0 / 64 + 1.0 / 256)] = 3
    kind[0] = 1
    if T > 1:
        kind[1] = 2
    if T > 2:
        kind[2] = 3
    sink = kind == 1
    if bool(sink.any()):
        channel = int(torch.randint(0, D, (1,), generator=gen, device=device))
        sign = torch.where(rand(T) < 0.5, -1.0, 1.0)
        massive = sign * torch.exp(math.log(100.0) + math.log(10.0) * rand(T)) * row_gain[:, 0]
        residual[sink, channel] = massive[sink]
    tiny = (kind == 2).to(torch.float32)[:, None]
    tiny_gain = torch.exp(math.log(1e-4) + math.log(30.0) * rand(T, 1)) / row_gain
    scale_rows = tiny * tiny_gain + (1.0 - tiny)
    residual = (residual * scale_rows).to(torch.bfloat16)
    x = (x * scale_rows).to(torch.bfloat16)
    cancel = kind == 3
    x[cancel] = -residual[cancel]

    # RMSNorm gains: positive, log-normal around 1 (0.5 to 2 for most channels).
    weight = torch.exp(0.3 * randn(D)).to(torch.bfloat16)
    return {"x": x, "residual": residual, "weight": weight}


def reference(x, residual, weight, *, eps, amax_min, amax_max):
    """Plain eager PyTorch, as a practitioner writes it (one kernel per op)."""
    T, D = x.shape
    h = x + residual
    acc = torch.promote_types(h.dtype, torch.float32)  # fp32 for bf16 inputs, float64 for the expected outputs
    hf = h.to(acc)
    rstd = torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = hf * rstd * weight.to(acc)
    yg = y.view(T, D // GROUP, GROUP)
    amax = yg.abs().amax(dim=-1, keepdim=True)
    scale = amax.clamp(min=amax_min, max=amax_max) / FP8_MAX
    q = (yg / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return h, q.view(T, D), scale.view(T, D // GROUP)
