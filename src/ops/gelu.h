// GELU, tanh approximation, of x = inp + bias: the fc layer's GEMM writes its output without
// the bias and GELU adds it (one pass over the (N, 4C) activations fewer). CPU reference, a
// vector of channels at a time with SLEEF's tanh (vec.h).
#pragma once
#include <cstddef>

#include "ops/vec.h"

namespace cpu {

template <class T>
constexpr T gelu_k() {
    return T(0.7978845608028654);
}  // sqrt(2/pi)

// x = inp + bias of the (at most kLanes) channels [c, c + n) of row r (bias may be null)
template <class T>
vec<T> gelu_input(const T* inp, const T* bias, size_t r, int c, int n, int C) {
    const vec<T> x = load_first(inp + r * C + c, n);
    return bias ? x + load_first(bias + c, n) : x;
}

// tanh(sqrt(2/pi) (x + 0.044715 x^3)), the approximation's tanh
template <class T>
vec<T> gelu_tanh(vec<T> x) {
    return vtanh(gelu_k<T>() * (x + T(0.044715) * x * x * x));
}

// out (N,C) = gelu(inp + bias), bias (C) broadcast over rows (may be null)
template <class T>
void gelu_forward(T* out, const T* inp, const T* bias, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c += kLanes<T>) {
            const vec<T> x = gelu_input(inp, bias, r, c, C - c, C);
            store_first(out + (size_t)r * C + c, T(0.5) * x * (T(1) + gelu_tanh<T>(x)), C - c);
        }
}

// dinp (N,C) = dout * gelu'(inp + bias) (overwritten: the backward needs no zeroed buffer)
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* bias, const T* dout, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c += kLanes<T>) {
            const size_t i = (size_t)r * C + c;
            const vec<T> x = gelu_input(inp, bias, r, c, C - c, C);
            const vec<T> th = gelu_tanh<T>(x);
            const vec<T> du = gelu_k<T>() * (T(1) + T(3 * 0.044715) * x * x);
            const vec<T> sech2 = T(1) - th * th;
            store_first(dinp + i, load_first(dout + i, C - c) * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du),
                        C - c);
        }
}

}  // namespace cpu
