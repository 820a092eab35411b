// GELU, tanh approximation, of x = inp + bias: the fc layer's GEMM writes its output without
// the bias and GELU adds it (one pass over the (N, F) activations fewer). CPU reference, a
// vector of channels at a time (vec.h). With u = sqrt(2/pi) (x + 0.044715 x^3),
// 0.5 x (1 + tanh u) = x s, s = 1 / (1 + exp(-2u)) (the logistic function of 2u), so one of
// SLEEF's exps per element gives it, and no cancellation near 1 + tanh u = 0 loses accuracy.
#pragma once
#include <cstddef>

#include "ops/vec.h"

namespace cpu {

template <class Real>
constexpr Real gelu_k() {
    return Real(0.7978845608028654);
}  // sqrt(2/pi)

// x = inp + bias of the (at most kLanes) channels [c, c + n) of row r (bias may be null)
template <class Real>
vec<Real> gelu_input(const Real* inp, const Real* bias, size_t r, int c, int n, int C) {
    const vec<Real> x = load_first(inp + r * C + c, n);
    return bias ? x + load_first(bias + c, n) : x;
}

// e = exp(-2u), whose s = 1 / (1 + e) = (1 + tanh u) / 2
template <class Real>
vec<Real> gelu_e(vec<Real> x) {
    return vexp(Real(-2) * gelu_k<Real>() * (x + Real(0.044715) * x * x * x));
}

// out (N,C) = gelu(inp + bias), bias (C) broadcast over rows (may be null)
template <class Real>
void gelu_forward(Real* out, const Real* inp, const Real* bias, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c += kLanes<Real>) {
            const vec<Real> x = gelu_input(inp, bias, r, c, C - c, C);
            store_first(out + (size_t)r * C + c, x / (Real(1) + gelu_e<Real>(x)), C - c);
        }
}

// dinp (N,C) = dout * gelu'(inp + bias) (overwritten: the backward needs no zeroed buffer):
// gelu' = (1 + tanh u) / 2 + x (1 - tanh^2 u) u' / 2 = s + 2 x s (1 - s) u', with 1 - s = e s
// (no cancellation where s is near 1)
template <class Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* bias, const Real* dout, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c += kLanes<Real>) {
            const size_t i = (size_t)r * C + c;
            const vec<Real> x = gelu_input(inp, bias, r, c, C - c, C);
            const vec<Real> e = gelu_e<Real>(x), s = Real(1) / (Real(1) + e);
            const vec<Real> du = gelu_k<Real>() * (Real(1) + Real(3 * 0.044715) * x * x);
            store_first(dinp + i, load_first(dout + i, C - c) * (s + Real(2) * x * e * s * s * du), C - c);
        }
}

}  // namespace cpu
