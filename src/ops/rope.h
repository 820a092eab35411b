// Rotary position embedding (RoPE) of q and k: adjacent pairs (2j, 2j+1) within
// each head rotated by the angle of the position (MODEL.md); the cos/sin tables
// are the position data's (pos.h). CPU reference.
#pragma once
#include <cstddef>

#include "pos.h"

namespace cpu {

// out = x = inp + bias (bias (3C) may be null) with each pair (x0, x1) of q and k rotated by
// +angle (sgn = 1) or -angle (sgn = -1, the transpose); v copied. k reads pos.kcos/ksin where
// the scheme has them (xpos's decay), else q's tables.
template <class Real>
void rope_rotate(Real* out, const Real* inp, const Real* bias, const PosData<Real>& pos, int B, int T, int C, int H,
                 Real sgn) {
    int D = C / H;
    const Real* kcos = pos.kcos ? pos.kcos : pos.cos;
    const Real* ksin = pos.ksin ? pos.ksin : pos.sin;
#pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const size_t row = (size_t)(bt % T) * D / 2;
        const Real* x = inp + (size_t)bt * 3 * C;
        Real* y = out + (size_t)bt * 3 * C;
        auto xb = [&](int i) { return x[i] + (bias ? bias[i] : Real(0)); };
        for (int i = 0; i < 2 * C; i += 2) {  // q and k: the first 2C channels
            const Real* c = (i < C ? pos.cos : kcos) + row;
            const Real* s = (i < C ? pos.sin : ksin) + row;
            int j = (i % D) / 2;
            Real x0 = xb(i), x1 = xb(i + 1);
            y[i] = x0 * c[j] - sgn * x1 * s[j];
            y[i + 1] = sgn * x0 * s[j] + x1 * c[j];
        }
        for (int i = 2 * C; i < 3 * C; i++) y[i] = xb(i);  // v is not rotated
    }
}

// out (B,T,3C) = rotated inp + bias (B,T,3C): the qkv GEMM writes its output without the bias
// and RoPE adds it (bias (3C) may be null); pos.cos, pos.sin (and kcos, ksin) (n, D/2) indexed by position t
template <class Real>
void rope_forward(Real* out, const Real* inp, const Real* bias, const PosData<Real>& pos, int B, int T, int C, int H) {
    rope_rotate(out, inp, bias, pos, B, T, C, H, Real(1));
}

// dinp (B,T,3C) = R^T dout (overwritten: the backward needs no zeroed buffer)
template <class Real>
void rope_backward(Real* dinp, const Real* dout, const PosData<Real>& pos, int B, int T, int C, int H) {
    rope_rotate(dinp, dout, (const Real*)nullptr, pos, B, T, C, H, Real(-1));
}

}  // namespace cpu
