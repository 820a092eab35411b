// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), of x = inp + bias:
// the fc layer's GEMM writes its output without the bias and GELU adds it, forward and backward.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)

// out = gelu(x), W elements at a time
template <class E, int W>
struct GeluForward {
    E* out;
    const E* inp;
    const float* bias;
    __device__ void operator()(size_t i, int, int c) const {
        float x[W], y[W];
        biased_pack(x, inp, bias, i, c);
        for (int k = 0; k < W; k++)
            y[k] = 0.5f * x[k] * (1.0f + tanhf(kGeluK * (x[k] + 0.044715f * x[k] * x[k] * x[k])));
        store_pack(out, i, y);
    }
};

// dinp = dout * gelu'(x) (overwritten)
template <class E, int W>
struct GeluBackward {
    E* dinp;
    const E* inp;
    const float* bias;
    const E* dout;
    __device__ void operator()(size_t i, int, int c) const {
        float x[W], y[W];
        biased_pack(x, inp, bias, i, c);
        const Pack<E, W> d = load_pack<E, W>(dout, i);
        for (int k = 0; k < W; k++) {
            float th = tanhf(kGeluK * (x[k] + 0.044715f * x[k] * x[k] * x[k]));
            float du = kGeluK * (1.0f + 3.0f * 0.044715f * x[k] * x[k]);
            float sech2 = 1.0f - th * th;
            y[k] = f32(d.e[k]) * (0.5f * (1.0f + th) + 0.5f * x[k] * sech2 * du);
        }
        store_pack(dinp, i, y);
    }
};

}  // namespace

// 16-byte accesses when the rows and every pointer allow them (the bias is read per column)
template <class Act>
void gelu_forward(Act* out, const Act* inp, const float* bias, int N, int C) {
    const cudaStream_t stream = main_stream();
    using E = dev_t<Act>;
    with_pack<E>(C, {out, inp}, [&](auto w) {
        constexpr int W = decltype(w)::value;
        for_each_element<W>(GeluForward<E, W>{dev(out), dev(inp), bias}, N, C, stream);
    });
}

template <class Act>
void gelu_backward(Act* dinp, const Act* inp, const float* bias, const Act* dout, int N, int C) {
    const cudaStream_t stream = main_stream();
    using E = dev_t<Act>;
    with_pack<E>(C, {dinp, inp, dout}, [&](auto w) {
        constexpr int W = decltype(w)::value;
        for_each_element<W>(GeluBackward<E, W>{dev(dinp), dev(inp), bias, dev(dout)}, N, C, stream);
    });
}

GPU_INSTANTIATE(gelu_forward)
GPU_INSTANTIATE(gelu_backward)

}  // namespace gpu
