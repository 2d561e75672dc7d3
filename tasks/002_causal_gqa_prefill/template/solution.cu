// causal_gqa_prefill: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  q           [T, HQ, D]   bfloat16  queries
// inputs[1]  k           [T, HKV, D]  bfloat16  keys (query head h uses key/value head h / (HQ / HKV))
// inputs[2]  v           [T, HKV, D]  bfloat16  values
// inputs[3]  cu_seqlens  [B + 1]      int32     cu_seqlens[0] = 0, cu_seqlens[B] = T, non-decreasing
// outputs[0] o           [T, HQ, D]   bfloat16  causal attention within each sequence
// params[0]  sm_scale    float32 (in .f)
#include "d2k/solution.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)stream;  // TODO: remove once your kernels are launched on it
  if (n_inputs != 4 || n_outputs != 1 || n_params != 1) return 1;
  const d2k_tensor& q = inputs[0];
  const d2k_tensor& k = inputs[1];
  const d2k_tensor& v = inputs[2];
  const d2k_tensor& cu_seqlens = inputs[3];
  d2k_tensor& o = outputs[0];
  if (q.dtype != D2K_BFLOAT16 || k.dtype != D2K_BFLOAT16 || v.dtype != D2K_BFLOAT16 ||
      cu_seqlens.dtype != D2K_INT32 || o.dtype != D2K_BFLOAT16)
    return 2;

  const int64_t T = q.shape[0];               // tokens
  const int64_t HQ = q.shape[1];              // query heads
  const int64_t D = q.shape[2];               // head dimension (128)
  const int64_t HKV = k.shape[1];             // key/value heads
  const int64_t B = cu_seqlens.shape[0] - 1;  // sequences
  if (HKV < 1 || HQ % HKV != 0 || D != 128 || o.shape[0] != T || o.shape[1] != HQ || B < 1) return 3;
  const float sm_scale = static_cast<float>(params[0].f);

  const __nv_bfloat16* q_ptr = static_cast<const __nv_bfloat16*>(q.data);  // device pointers, contiguous
  const __nv_bfloat16* k_ptr = static_cast<const __nv_bfloat16*>(k.data);
  const __nv_bfloat16* v_ptr = static_cast<const __nv_bfloat16*>(v.data);
  const int* cu_ptr = static_cast<const int*>(cu_seqlens.data);
  __nv_bfloat16* o_ptr = static_cast<__nv_bfloat16*>(o.data);
  if (!q_ptr || !k_ptr || !v_ptr || !cu_ptr || !o_ptr) return 4;
  (void)sm_scale;

  // TODO: enqueue your kernel(s) on `stream` (the lengths live on the device: do not copy them to the host), e.g.
  //   my_kernel<<<grid, block, smem, reinterpret_cast<cudaStream_t>(stream)>>>(q_ptr, k_ptr, v_ptr, cu_ptr, o_ptr, ...);
  // then return 0 (or a non-zero code on failure).
  return -1;  // not implemented yet
}
