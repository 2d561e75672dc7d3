/* d2k solution ABI for CUDA C++ solutions (destination-passing).
 *
 * The harness allocates every input and output on the GPU, fills the outputs with poison, and calls
 * d2k_solve once per evaluation call. The solution enqueues all of its work on `stream` and returns 0,
 * or a non-zero code on failure. Outputs must be fully written by the work enqueued on `stream`.
 * Tensors are in the manifest's order: inputs, then outputs; params in the manifest's order too.
 */
#ifndef D2K_SOLUTION_H
#define D2K_SOLUTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum d2k_dtype {
  D2K_FLOAT64 = 0,
  D2K_FLOAT32 = 1,
  D2K_FLOAT16 = 2,
  D2K_BFLOAT16 = 3,
  D2K_FLOAT8_E4M3FN = 4,
  D2K_FLOAT8_E5M2 = 5,
  D2K_INT64 = 6,
  D2K_INT32 = 7,
  D2K_INT16 = 8,
  D2K_INT8 = 9,
  D2K_UINT8 = 10,
  D2K_BOOL = 11
};

#define D2K_MAX_DIMS 8

typedef struct d2k_tensor {
  void* data;                       /* device pointer */
  int32_t dtype;                    /* enum d2k_dtype */
  int32_t ndim;
  int64_t shape[D2K_MAX_DIMS];
  int64_t strides[D2K_MAX_DIMS];    /* in elements; the harness passes contiguous tensors */
} d2k_tensor;

typedef struct d2k_param {
  const char* name;
  int32_t dtype;                    /* D2K_FLOAT64/32, D2K_INT64/32 or D2K_BOOL */
  double f;                         /* set for float params */
  int64_t i;                        /* set for integer and bool params */
} d2k_param;

typedef struct CUstream_st* d2k_stream;  /* the same type as cudaStream_t */

/* Implemented by the solution. */
int d2k_solve(const d2k_tensor* inputs, int n_inputs, d2k_tensor* outputs, int n_outputs,
              const d2k_param* params, int n_params, d2k_stream stream);

#ifdef __cplusplus
}
#endif

#endif
