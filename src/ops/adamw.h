// AdamW with torch.optim.AdamW semantics, and the sum of squares for the
// global gradient norm. CPU reference.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace cpu {

// g' = g * gscale (clipping); p -= lr*wd*p; m, v moments; bias-corrected step, eps outside the sqrt
template <class T>
void adamw_update(T* p, const T* g, T* m, T* v, size_t n, float lr, float beta1, float beta2, float eps, float wd,
                  int t, float gscale) {
  T bc1 = T(1) - std::pow(T(beta1), t), bc2 = T(1) - std::pow(T(beta2), t);
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) {
    T gi = g[i] * T(gscale);
    p[i] -= T(lr) * T(wd) * p[i];
    m[i] = T(beta1) * m[i] + (T(1) - T(beta1)) * gi;
    v[i] = T(beta2) * v[i] + (T(1) - T(beta2)) * gi * gi;
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
