// Residual connection, with the bias of the linear layer whose output it adds: that layer's
// GEMM writes no bias (one pass over the (N, C) activations fewer). Its backward is a
// pass-through, done by the model itself.
#pragma once
#include <cstddef>

namespace cpu {

// out (N,C) = a + (b + bias), bias (C) broadcast over rows (may be null); out may be a
template <class T>
void residual_forward(T* out, const T* a, const T* b, const T* bias, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            out[i] = a[i] + (b[i] + (bias ? bias[c] : T(0)));
        }
}

}  // namespace cpu
