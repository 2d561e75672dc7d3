// moe_grouped_swiglu: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  hidden        [T, D]       bfloat16  token activations
// inputs[1]  topk_ids      [T, K]       int32     the K distinct experts of each token, in [0, E)
// inputs[2]  topk_weights  [T, K]       float32   router weights
// inputs[3]  w_gate_up     [E, 2F, D]   bfloat16  rows 0..F-1: gate, rows F..2F-1: up
// inputs[4]  w_down        [E, D, F]    bfloat16
// outputs[0] out           [T, D]       bfloat16  sum_k w[t,k] * W_down[e] (silu(g) * u)
#include "d2k/solution.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)params;
  (void)n_params;
  (void)stream;  // TODO: remove once your kernels are launched on it
  if (n_inputs != 5 || n_outputs != 1) return 1;
  const d2k_tensor& hidden = inputs[0];
  const d2k_tensor& topk_ids = inputs[1];
  const d2k_tensor& topk_weights = inputs[2];
  const d2k_tensor& w_gate_up = inputs[3];
  const d2k_tensor& w_down = inputs[4];
  d2k_tensor& out = outputs[0];
  if (hidden.dtype != D2K_BFLOAT16 || topk_ids.dtype != D2K_INT32 || topk_weights.dtype != D2K_FLOAT32 ||
      w_gate_up.dtype != D2K_BFLOAT16 || w_down.dtype != D2K_BFLOAT16 || out.dtype != D2K_BFLOAT16)
    return 2;

  const int64_t T = hidden.shape[0];
  const int64_t D = hidden.shape[1];
  const int64_t K = topk_ids.shape[1];
  const int64_t E = w_gate_up.shape[0];
  const int64_t F = w_down.shape[2];
  if (w_gate_up.shape[1] != 2 * F || w_gate_up.shape[2] != D || w_down.shape[1] != D || out.shape[0] != T ||
      out.shape[1] != D)
    return 3;
  (void)K;
  (void)E;

  // Device pointers, contiguous.
  const __nv_bfloat16* x_ptr = static_cast<const __nv_bfloat16*>(hidden.data);
  const int* ids_ptr = static_cast<const int*>(topk_ids.data);
  const float* tw_ptr = static_cast<const float*>(topk_weights.data);
  const __nv_bfloat16* wgu_ptr = static_cast<const __nv_bfloat16*>(w_gate_up.data);
  const __nv_bfloat16* wd_ptr = static_cast<const __nv_bfloat16*>(w_down.data);
  __nv_bfloat16* out_ptr = static_cast<__nv_bfloat16*>(out.data);
  if (!x_ptr || !ids_ptr || !tw_ptr || !wgu_ptr || !wd_ptr || !out_ptr) return 4;

  // TODO: allocate scratch stream-ordered (cudaMallocAsync on `stream`), enqueue your kernels on `stream`
  // without synchronizing with the host, free the scratch (cudaFreeAsync), then return 0.
  return -1;  // not implemented yet
}
