// Rotary position embedding (RoPE) of q and k, SPEC pairing: adjacent pairs
// (2j, 2j+1) within each head, theta_j = base^(-2j/D). CPU reference.
#pragma once
#include <cmath>
#include <vector>

namespace cpu {

// cos/sin tables (maxT, D/2), computed in double whatever the model's precision.
inline void rope_tables(std::vector<double>& cos_t, std::vector<double>& sin_t, int maxT, int D, double base) {
  cos_t.resize((size_t)maxT * D / 2);
  sin_t.resize((size_t)maxT * D / 2);
  for (int m = 0; m < maxT; m++)
    for (int j = 0; j < D / 2; j++) {
      double a = m * std::pow(base, -2.0 * j / D);
      cos_t[(size_t)m * D / 2 + j] = std::cos(a);
      sin_t[(size_t)m * D / 2 + j] = std::sin(a);
    }
}

// Rotates pair (x0, x1) by +angle (sgn = 1) or -angle (sgn = -1, the transpose).
template <class T>
void rope_rotate(T* out, const T* inp, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H, T sgn) {
  int D = C / H;
#pragma omp parallel for
  for (int bt = 0; bt < B * Tn; bt++) {
    const T* c = cos_t + (size_t)(bt % Tn) * D / 2;
    const T* s = sin_t + (size_t)(bt % Tn) * D / 2;
    const T* x = inp + (size_t)bt * 3 * C;
    T* y = out + (size_t)bt * 3 * C;
    for (int i = 0; i < 2 * C; i += 2) {  // q and k: the first 2C channels
      int j = (i % D) / 2;
      T x0 = x[i], x1 = x[i + 1];
      y[i] += x0 * c[j] - sgn * x1 * s[j];
      y[i + 1] += sgn * x0 * s[j] + x1 * c[j];
    }
    for (int i = 2 * C; i < 3 * C; i++) y[i] += x[i];  // v is not rotated
  }
}

// out (B,T,3C) = rotated inp (B,T,3C); tables (maxT, D/2) indexed by position t
template <class T>
void rope_forward(T* out, const T* inp, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H) {
  for (size_t i = 0; i < (size_t)B * Tn * 3 * C; i++) out[i] = 0;
  rope_rotate(out, inp, cos_t, sin_t, B, Tn, C, H, T(1));
}

// dinp += R^T dout
template <class T>
void rope_backward(T* dinp, const T* dout, const T* cos_t, const T* sin_t, int B, int Tn, int C, int H) {
  rope_rotate(dinp, dout, cos_t, sin_t, B, Tn, C, H, T(-1));
}

}  // namespace cpu
