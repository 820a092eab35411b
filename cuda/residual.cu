// Residual connection with the bias of the linear layer whose output it adds: out = a + (b +
// bias), so that layer's GEMM writes no bias. Its backward is a pass-through of the gradient,
// done in the model (src/model.h), so there is no kernel for it.
// (No __restrict__: the model may call residual_forward in place, out == a.)
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// the sum in fp32, stored in E; bias (C) broadcast over rows, may be null
template <class E>
__global__ void residual_forward_kernel(E* out, const E* a, const E* b, const float* bias, int C, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = from_f32<E>(f32(a[i]) + biased(b, bias, i, C));
}

}  // namespace

template <class A>
void residual_forward(A* out, const A* a, const A* b, const float* bias, int N, int C, cudaStream_t stream) {
    const size_t n = (size_t)N * C;
    if (n == 0) return;
    residual_forward_kernel<dev_t<A>><<<grid_for(n, 256), 256, 0, stream>>>(dev(out), dev(a), dev(b), bias, C, n);
    cudaCheckLaunch();
}

template void residual_forward(float*, const float*, const float*, const float*, int, int, cudaStream_t);
template void residual_forward(bf16_t*, const bf16_t*, const bf16_t*, const float*, int, int, cudaStream_t);

}  // namespace gpu
