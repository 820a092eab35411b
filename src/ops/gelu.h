// GELU, tanh approximation, of x = inp + bias: the fc layer's GEMM writes its output without
// the bias and GELU adds it (one pass over the (N, 4C) activations fewer). CPU reference.
#pragma once
#include <cmath>
#include <cstddef>

namespace cpu {

template <class T>
constexpr T gelu_k() {
    return T(0.7978845608028654);
}  // sqrt(2/pi)

// out (N,C) = gelu(inp + bias), bias (C) broadcast over rows (may be null)
template <class T>
void gelu_forward(T* out, const T* inp, const T* bias, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            T x = inp[i] + (bias ? bias[c] : T(0));
            out[i] = T(0.5) * x * (T(1) + std::tanh(gelu_k<T>() * (x + T(0.044715) * x * x * x)));
        }
}

// dinp (N,C) = dout * gelu'(inp + bias) (overwritten: the backward needs no zeroed buffer)
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* bias, const T* dout, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            T x = inp[i] + (bias ? bias[c] : T(0));
            T u = gelu_k<T>() * (x + T(0.044715) * x * x * x);
            T th = std::tanh(u);
            T du = gelu_k<T>() * (T(1) + T(3 * 0.044715) * x * x);
            T sech2 = T(1) - th * th;
            dinp[i] = dout[i] * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
        }
}

}  // namespace cpu
