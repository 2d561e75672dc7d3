// A toy_scale solution whose duration is known by construction: block 0 busy-waits 200 us of
// %globaltimer after the others have scaled the vector. Timing benchmarks expect ~200 us.
#include "d2k/solution.h"

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void scale_then_spin(const float* x, float* y, long long n, float alpha, unsigned long long spin_ns) {
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      unsigned long long t0 = global_ns();
      while (global_ns() - t0 < spin_ns) {
      }
    }
    return;
  }
  for (long long i = (blockIdx.x - 1) * (long long)blockDim.x + threadIdx.x; i < n; i += (gridDim.x - 1) * (long long)blockDim.x)
    y[i] = alpha * x[i];
}

extern "C" int d2k_solve(const d2k_tensor* in, int, d2k_tensor* out, int, const d2k_param* params, int,
                         d2k_stream stream) {
  long long n = in[0].shape[0];
  scale_then_spin<<<1 + 132 * 4, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (float*)out[0].data, n,
                                                                (float)params[0].f, 200000ull);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
