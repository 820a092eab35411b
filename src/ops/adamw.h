// AdamW with torch.optim.AdamW semantics, and the sum of squares for the
// global gradient norm. CPU reference.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace cpu {

// g' = g * gscale (clipping); p -= lr*wd*p; m, v moments; bias-corrected step, eps outside the sqrt.
// The betas arrive in double and 1 - beta and the bias corrections are computed in double, as
// torch does on the host (in float, 1 - 0.999f is off by 1.3e-5 relative).
template <class T>
void adamw_update(T* p, const T* g, T* m, T* v, size_t n, float lr, double beta1, double beta2, float eps, float wd,
                  int t, float gscale) {
    const T b1 = T(beta1), c1 = T(1 - beta1), b2 = T(beta2), c2 = T(1 - beta2);
    const T bc1 = T(1 - std::pow(beta1, t)), bc2 = T(1 - std::pow(beta2, t));
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        T gi = g[i] * T(gscale);
        p[i] -= T(lr) * T(wd) * p[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        p[i] -= T(lr) * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + T(eps));
    }
}

// Fixed-size chunks summed in a fixed order: the result does not depend on the thread count.
template <class T>
double sum_squares(const T* x, size_t n) {
    const size_t chunk = 1 << 16;
    size_t nchunks = (n + chunk - 1) / chunk;
    std::vector<double> part(nchunks, 0.0);
#pragma omp parallel for
    for (size_t c = 0; c < nchunks; c++) {
        double s = 0;
        for (size_t i = c * chunk; i < n && i < (c + 1) * chunk; i++) s += (double)x[i] * x[i];
        part[c] = s;
    }
    double s = 0;
    for (double p : part) s += p;
    return s;
}

}  // namespace cpu
