// AdamW with torch.optim.AdamW semantics, the sum of squares for the global gradient norm and
// the clip scale. CPU reference. The step's changing scalars (learning rate, bias corrections,
// clip scale, the sum of squares) live in a StepScalars (src/step.h) in backend memory, here host
// memory, as the CUDA twins read and write theirs in device memory.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "step.h"

namespace cpu {

// g' = g * s->gscale (clipping); p -= lr*wd*p; m, v moments; bias-corrected step, eps outside the
// sqrt. The betas arrive in double and 1 - beta is computed in double, as torch does on the host
// (in float, 1 - 0.999f is off by 1.3e-5 relative); so are the bias corrections (adamw_scalars).
template <class Real>
void adamw_update(Real* p, const Real* g, Real* m, Real* v, size_t n, const StepScalars* s, double beta1, double beta2,
                  float eps, float wd) {
    const Real b1 = Real(beta1), c1 = Real(1 - beta1), b2 = Real(beta2), c2 = Real(1 - beta2);
    const Real lr = Real(s->lr), bc1 = Real(s->bc1), bc2 = Real(s->bc2), gscale = Real(s->gscale);
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        Real gi = g[i] * gscale;
        p[i] -= lr * Real(wd) * p[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        p[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + Real(eps));
    }
}

// Fixed-size chunks, each summed in vector lanes (omp simd), then the chunks in a fixed order:
// the result does not depend on the thread count.
template <class Real>
double sum_squares(const Real* x, size_t n) {
    const size_t chunk = 1 << 16;
    size_t nchunks = (n + chunk - 1) / chunk;
    std::vector<double> part(nchunks, 0.0);
#pragma omp parallel for
    for (size_t c = 0; c < nchunks; c++) {
        double s = 0;
        const size_t end = std::min(n, (c + 1) * chunk);
#pragma omp simd reduction(+ : s)
        for (size_t i = c * chunk; i < end; i++) s += (double)x[i] * x[i];
        part[c] = s;
    }
    double s = 0;
    for (double p : part) s += p;
    return s;
}

// The same into backend memory (the GPU's stays on the device).
template <class Real>
void sum_squares_to(double* out, const Real* x, size_t n) {
    *out = sum_squares(x, n);
}

// s->gscale from s->sumsq: clip_scale of the norm (grad_clip 0 = off), rounded to float as the
// AdamW kernels read it.
inline void clip_grad(StepScalars* s, double grad_clip) {
    s->gscale = (float)clip_scale(grad_clip, std::sqrt(s->sumsq));
}

}  // namespace cpu
