// muon_newton_schulz: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  G  [B, M, N]  bfloat16  matrices to orthogonalize (row-major, contiguous)
// outputs[0] X  [B, M, N]  bfloat16  Newton-Schulz result (transposed back when M > N)
// params     steps (int, .i), coef_a, coef_b, coef_c, eps (float, .f), in this order
#include "d2k/solution.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)stream;  // TODO: remove once your kernels are launched on it
  if (n_inputs != 1 || n_outputs != 1 || n_params != 5) return 1;
  const d2k_tensor& G = inputs[0];
  d2k_tensor& X = outputs[0];
  if (G.dtype != D2K_BFLOAT16 || X.dtype != D2K_BFLOAT16 || G.ndim != 3) return 2;

  const int64_t B = G.shape[0];  // matrices
  const int64_t M = G.shape[1];  // rows
  const int64_t N = G.shape[2];  // columns
  if (X.shape[0] != B || X.shape[1] != M || X.shape[2] != N) return 3;

  const int steps = static_cast<int>(params[0].i);
  const float coef_a = static_cast<float>(params[1].f);
  const float coef_b = static_cast<float>(params[2].f);
  const float coef_c = static_cast<float>(params[3].f);
  const float eps = static_cast<float>(params[4].f);
  (void)steps; (void)coef_a; (void)coef_b; (void)coef_c; (void)eps;

  const __nv_bfloat16* g_ptr = static_cast<const __nv_bfloat16*>(G.data);  // device pointers
  __nv_bfloat16* x_ptr = static_cast<__nv_bfloat16*>(X.data);
  if (g_ptr == nullptr || x_ptr == nullptr) return 4;

  // TODO: allocate scratch stream-ordered (cudaMallocAsync on `stream`) for A, B and the X ping-pong buffer,
  // enqueue your kernels on `stream`, free the scratch (cudaFreeAsync), then return 0.
  return -1;  // not implemented yet
}
