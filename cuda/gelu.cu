// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)

__global__ void gelu_forward_kernel(float* __restrict__ out, const float* __restrict__ inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(kGeluK * (x + 0.044715f * x * x * x)));
    }
}

// dinp += dout * gelu'(x)
__global__ void gelu_backward_kernel(float* __restrict__ dinp, const float* __restrict__ inp,
                                     const float* __restrict__ dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        float th = tanhf(kGeluK * (x + 0.044715f * x * x * x));
        float du = kGeluK * (1.0f + 3.0f * 0.044715f * x * x);
        float sech2 = 1.0f - th * th;
        dinp[i] += dout[i] * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du);
    }
}

}  // namespace

void gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    gelu_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, inp, n);
    cudaCheckLaunch();
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    gelu_backward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dinp, inp, dout, n);
    cudaCheckLaunch();
}

}  // namespace gpu
