// varlen_segmented_scan: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  g           [T, H]   float32  per-token, per-head log decay gates
// inputs[1]  cu_seqlens  [B + 1]  int32    cu_seqlens[0] = 0, cu_seqlens[B] = T
// outputs[0] y           [T, H]   float32  y[t, h] = g[s, h] + ... + g[t, h], s = first token of t's sequence
#include "d2k/solution.h"

#include <cuda_runtime.h>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)params;
  (void)n_params;
  (void)stream;  // TODO: remove once your kernels are launched on it
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const d2k_tensor& g = inputs[0];
  const d2k_tensor& cu_seqlens = inputs[1];
  d2k_tensor& y = outputs[0];
  if (g.dtype != D2K_FLOAT32 || cu_seqlens.dtype != D2K_INT32 || y.dtype != D2K_FLOAT32) return 2;

  const int64_t T = g.shape[0];               // tokens
  const int64_t H = g.shape[1];               // heads
  const int64_t B = cu_seqlens.shape[0] - 1;  // sequences
  if (y.shape[0] != T || y.shape[1] != H || B < 1) return 3;

  const float* g_ptr = static_cast<const float*>(g.data);          // device pointers, contiguous
  const int* cu_ptr = static_cast<const int*>(cu_seqlens.data);
  float* y_ptr = static_cast<float*>(y.data);
  if (g_ptr == nullptr || cu_ptr == nullptr || y_ptr == nullptr) return 4;

  // TODO: enqueue your kernel(s) on `stream` (it may be the legacy default stream, 0), e.g.
  //   my_kernel<<<grid, block, 0, reinterpret_cast<cudaStream_t>(stream)>>>(g_ptr, cu_ptr, y_ptr, T, H, B);
  // then return 0 (or a non-zero code on failure).
  return -1;  // not implemented yet
}
