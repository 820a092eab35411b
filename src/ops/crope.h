// CRoPE: the Q, K and V projections are complex-linear on RoPE's pairs.
// Each stores A and B (C/2, C/2); the equivalent real matrix has 2x2 blocks
// [[a, -b], [b, a]]. The forward expands A,B into the real (3C, C) weight and
// uses an ordinary matmul; the backward folds the real gradient back into dA, dB.
#pragma once
#include <cstddef>

namespace cpu {

// w (3C, C) from A, Bm (3, C/2, C/2); index 0,1,2 = q,k,v
template <class Real>
void crope_expand(Real* w, const Real* A, const Real* Bm, int C) {
    int h = C / 2;
#pragma omp parallel for
    for (int pi = 0; pi < 3 * h; pi++) {  // (projection, output pair)
        int p = pi / h, i = pi % h;
        Real* r0 = w + (size_t)(p * C + 2 * i) * C;
        Real* r1 = r0 + C;
        for (int j = 0; j < h; j++) {
            Real a = A[(size_t)pi * h + j], b = Bm[(size_t)pi * h + j];
            r0[2 * j] = a;
            r0[2 * j + 1] = -b;
            r1[2 * j] = b;
            r1[2 * j + 1] = a;
        }
    }
}

// dA += dW[2i,2j] + dW[2i+1,2j+1] ; dB += dW[2i+1,2j] - dW[2i,2j+1]
template <class Real>
void crope_fold(Real* dA, Real* dB, const Real* dw, int C) {
    int h = C / 2;
#pragma omp parallel for
    for (int pi = 0; pi < 3 * h; pi++) {
        int p = pi / h, i = pi % h;
        const Real* r0 = dw + (size_t)(p * C + 2 * i) * C;
        const Real* r1 = r0 + C;
        for (int j = 0; j < h; j++) {
            dA[(size_t)pi * h + j] += r0[2 * j] + r1[2 * j + 1];
            dB[(size_t)pi * h + j] += r1[2 * j] - r0[2 * j + 1];
        }
    }
}

}  // namespace cpu
