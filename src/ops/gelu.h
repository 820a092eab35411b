// GELU, tanh approximation. CPU reference.
#pragma once
#include <cmath>
#include <cstddef>

namespace cpu {

template <class T>
constexpr T gelu_k() {
    return T(0.7978845608028654);
}  // sqrt(2/pi)

template <class T>
void gelu_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::tanh(gelu_k<T>() * (x + T(0.044715) * x * x * x)));
    }
}

// dinp = dout * gelu'(inp) (overwritten: the backward needs no zeroed buffer)
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        T x = inp[i];
        T u = gelu_k<T>() * (x + T(0.044715) * x * x * x);
        T th = std::tanh(u);
        T du = gelu_k<T>() * (T(1) + T(3 * 0.044715) * x * x);
        T sech2 = T(1) - th * th;
        dinp[i] = dout[i] * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
    }
}

}  // namespace cpu
