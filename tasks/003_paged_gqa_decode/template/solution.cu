// paged_gqa_decode: CUDA C++ solution (destination-passing; ABI in d2k/solution.h).
//
// inputs[0]  q            [B, HQ, D]          bfloat16  the query of each request's new token
// inputs[1]  k_cache      [P, PS, HKV, D]     bfloat16  key pages (query head h uses key/value head h / (HQ / HKV))
// inputs[2]  v_cache      [P, PS, HKV, D]     bfloat16  value pages
// inputs[3]  block_table  [B, MAXP]           int32     token t of request b: slot t % PS of page block_table[b][t / PS]
// inputs[4]  seq_lens     [B]                 int32     cached tokens per request, 1 .. MAXP * PS
// outputs[0] o            [B, HQ, D]          bfloat16  attention of each query over its request's cached tokens
// params[0]  sm_scale     float32 (in .f)
#include "d2k/solution.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

// TODO: write your kernel(s) here.

extern "C" int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
                         const d2k_param* params, int n_params, d2k_stream stream) {
  (void)stream;  // TODO: remove once your kernels are launched on it
  if (n_inputs != 5 || n_outputs != 1 || n_params != 1) return 1;
  const d2k_tensor& q = inputs[0];
  const d2k_tensor& k_cache = inputs[1];
  const d2k_tensor& v_cache = inputs[2];
  const d2k_tensor& block_table = inputs[3];
  const d2k_tensor& seq_lens = inputs[4];
  d2k_tensor& o = outputs[0];
  if (q.dtype != D2K_BFLOAT16 || k_cache.dtype != D2K_BFLOAT16 || v_cache.dtype != D2K_BFLOAT16 ||
      block_table.dtype != D2K_INT32 || seq_lens.dtype != D2K_INT32 || o.dtype != D2K_BFLOAT16)
    return 2;

  const int64_t B = q.shape[0];            // requests
  const int64_t HQ = q.shape[1];           // query heads
  const int64_t D = q.shape[2];            // head dimension (128)
  const int64_t P = k_cache.shape[0];      // pages in the pool
  const int64_t PS = k_cache.shape[1];     // tokens per page
  const int64_t HKV = k_cache.shape[2];    // key/value heads
  const int64_t MAXP = block_table.shape[1];
  if (HKV < 1 || HQ % HKV != 0 || D != 128 || block_table.shape[0] != B || seq_lens.shape[0] != B ||
      o.shape[0] != B || o.shape[1] != HQ)
    return 3;
  const float sm_scale = static_cast<float>(params[0].f);

  const __nv_bfloat16* q_ptr = static_cast<const __nv_bfloat16*>(q.data);  // device pointers, contiguous
  const __nv_bfloat16* k_ptr = static_cast<const __nv_bfloat16*>(k_cache.data);
  const __nv_bfloat16* v_ptr = static_cast<const __nv_bfloat16*>(v_cache.data);
  const int* bt_ptr = static_cast<const int*>(block_table.data);
  const int* lens_ptr = static_cast<const int*>(seq_lens.data);
  __nv_bfloat16* o_ptr = static_cast<__nv_bfloat16*>(o.data);
  if (!q_ptr || !k_ptr || !v_ptr || !bt_ptr || !lens_ptr || !o_ptr) return 4;
  (void)sm_scale;
  (void)P;
  (void)PS;
  (void)MAXP;

  // TODO: enqueue your kernel(s) on `stream` (the lengths live on the device: do not copy them to the host), e.g.
  //   my_kernel<<<grid, block, smem, reinterpret_cast<cudaStream_t>(stream)>>>(q_ptr, k_ptr, v_ptr, bt_ptr, ...);
  // then return 0 (or a non-zero code on failure).
  return -1;  // not implemented yet
}
