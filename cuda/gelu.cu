// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), of x = inp + bias:
// the fc layer's GEMM writes its output without the bias and GELU adds it, forward and backward.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)

template <class E>
__global__ void gelu_forward_kernel(E* __restrict__ out, const E* __restrict__ inp, const float* __restrict__ bias,
                                    int C, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = biased(inp, bias, i, C);
        out[i] = from_f32<E>(0.5f * x * (1.0f + tanhf(kGeluK * (x + 0.044715f * x * x * x))));
    }
}

// dinp[i] = dout * gelu'(x) (overwritten), and v[0] = dinp[i] as stored: the term of the bias
// gradient (column_sums, common.cuh; the row and column it passes are not needed here)
template <class E>
struct GeluBackward {
    E* __restrict__ dinp;
    const E* __restrict__ inp;
    const float* __restrict__ bias;
    const E* __restrict__ dout;
    int C;
    __device__ void operator()(size_t i, int, int, float* v) const {
        float x = biased(inp, bias, i, C);
        float th = tanhf(kGeluK * (x + 0.044715f * x * x * x));
        float du = kGeluK * (1.0f + 3.0f * 0.044715f * x * x);
        float sech2 = 1.0f - th * th;
        store_summed(dinp, i, f32(dout[i]) * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du), v);
    }
};

}  // namespace

template <class A>
void gelu_forward(A* out, const A* inp, const float* bias, int N, int C, cudaStream_t stream) {
    const size_t n = (size_t)N * C;
    if (n == 0) return;
    gelu_forward_kernel<dev_t<A>><<<grid_for(n, 256), 256, 0, stream>>>(dev(out), dev(inp), bias, C, n);
    cudaCheckLaunch();
}

template <class A>
void gelu_backward(A* dinp, float* dbias, const A* inp, const float* bias, const A* dout, int N, int C,
                   cudaStream_t stream) {
    const GeluBackward<dev_t<A>> op{dev(dinp), dev(inp), bias, dev(dout), C};
    if (dbias)
        column_sums<1>(SumInto{dbias}, N, C, op, stream);  // the fc bias gradient from the values as written
    else
        for_each_element(op, N, C, stream);
}

#define INSTANTIATE(A)                                                              \
    template void gelu_forward(A*, const A*, const float*, int, int, cudaStream_t); \
    template void gelu_backward(A*, float*, const A*, const float*, const A*, int, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
