// topk_topp_sampling: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  logits       [B, V]   float32  finite logits, row-major
// inputs[1]  temperature  [B]      float32  > 0
// inputs[2]  top_k        [B]      int32    >= 1 (>= V keeps every token)
// inputs[3]  top_p        [B]      float32  in (0, 1] (1 keeps every token)
// inputs[4]  u            [B, 32]  float32  uniform draws in [0, 1), the only randomness
// outputs[0] ids          [B]      int64    the sampled token of every row
#include "d2k/solution.h"

#include <cuda_runtime.h>
#include <cstdint>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)params; (void)n_params; (void)stream;  // TODO: launch your kernels on `stream`
  if (n_inputs != 5 || n_outputs != 1) return 1;
  const d2k_tensor& logits = inputs[0];
  if (logits.dtype != D2K_FLOAT32 || logits.ndim != 2 || outputs[0].dtype != D2K_INT64) return 2;
  const int64_t B = logits.shape[0];  // rows
  const int64_t V = logits.shape[1];  // vocabulary
  (void)B; (void)V;
  // TODO: enqueue your kernels on `stream`, then return 0.
  return -1;  // not implemented yet
}
