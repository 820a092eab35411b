// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)

template <class E>
__global__ void gelu_forward_kernel(E* __restrict__ out, const E* __restrict__ inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = f32(inp[i]);
        out[i] = from_f32<E>(0.5f * x * (1.0f + tanhf(kGeluK * (x + 0.044715f * x * x * x))));
    }
}

// dinp = dout * gelu'(x) (overwritten)
template <class E>
__global__ void gelu_backward_kernel(E* __restrict__ dinp, const E* __restrict__ inp, const E* __restrict__ dout,
                                     size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = f32(inp[i]);
        float th = tanhf(kGeluK * (x + 0.044715f * x * x * x));
        float du = kGeluK * (1.0f + 3.0f * 0.044715f * x * x);
        float sech2 = 1.0f - th * th;
        dinp[i] = from_f32<E>(f32(dout[i]) * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du));
    }
}

}  // namespace

template <class A>
void gelu_forward(A* out, const A* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    gelu_forward_kernel<dev_t<A>><<<grid_for(n, 256), 256, 0, stream>>>(dev(out), dev(inp), n);
    cudaCheckLaunch();
}

template <class A>
void gelu_backward(A* dinp, const A* inp, const A* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    gelu_backward_kernel<dev_t<A>><<<grid_for(n, 256), 256, 0, stream>>>(dev(dinp), dev(inp), dev(dout), n);
    cudaCheckLaunch();
}

template void gelu_forward(float*, const float*, size_t, cudaStream_t);
template void gelu_forward(bf16_t*, const bf16_t*, size_t, cudaStream_t);
template void gelu_backward(float*, const float*, const float*, size_t, cudaStream_t);
template void gelu_backward(bf16_t*, const bf16_t*, const bf16_t*, size_t, cudaStream_t);

}  // namespace gpu
