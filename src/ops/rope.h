// Rotary position embedding (RoPE) of q and k: adjacent pairs (2j, 2j+1) within
// each head rotated by the angle of the position (MODEL.md); the cos/sin tables
// come from rope_tables in pos.h. CPU reference.
#pragma once
#include <cstddef>

namespace cpu {

// out = x = inp + bias (bias (3C) may be null) with each pair (x0, x1) of q and k rotated by
// +angle (sgn = 1) or -angle (sgn = -1, the transpose); v copied.
template <class T>
void rope_rotate(T* out, const T* inp, const T* bias, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H,
                 T sgn) {
    int D = C / H;
#pragma omp parallel for
    for (int bt = 0; bt < B * Tn; bt++) {
        const T* c = cos_t + (size_t)(bt % Tn) * D / 2;
        const T* s = sin_t + (size_t)(bt % Tn) * D / 2;
        const T* x = inp + (size_t)bt * 3 * C;
        T* y = out + (size_t)bt * 3 * C;
        auto xb = [&](int i) { return x[i] + (bias ? bias[i] : T(0)); };
        for (int i = 0; i < 2 * C; i += 2) {  // q and k: the first 2C channels
            int j = (i % D) / 2;
            T x0 = xb(i), x1 = xb(i + 1);
            y[i] = x0 * c[j] - sgn * x1 * s[j];
            y[i + 1] = sgn * x0 * s[j] + x1 * c[j];
        }
        for (int i = 2 * C; i < 3 * C; i++) y[i] = xb(i);  // v is not rotated
    }
}

// out (B,T,3C) = rotated inp + bias (B,T,3C): the qkv GEMM writes its output without the bias
// and RoPE adds it (bias (3C) may be null); tables (n, D/2) indexed by position t
template <class T>
void rope_forward(T* out, const T* inp, const T* bias, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H) {
    rope_rotate(out, inp, bias, cos_t, sin_t, B, Tn, C, H, T(1));
}

// dinp (B,T,3C) = R^T dout (overwritten: the backward needs no zeroed buffer)
template <class T>
void rope_backward(T* dinp, const T* dout, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H) {
    rope_rotate(dinp, dout, (const T*)nullptr, cos_t, sin_t, B, Tn, C, H, T(-1));
}

}  // namespace cpu
