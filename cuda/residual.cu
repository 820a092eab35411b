// Residual connection: out = a + b. Its backward is a pass-through of the gradient, done in
// the model (src/model.h), so there is no kernel for it.
// (No __restrict__: the model may call residual_forward in place, out == a.)
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

}  // namespace

void residual_forward(float* out, const float* a, const float* b, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    residual_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, a, b, n);
    cudaCheckLaunch();
}

}  // namespace gpu
