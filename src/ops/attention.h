// Causal multi-head self-attention on a packed qkv (B, T, 3C), scores scaled
// by 1/sqrt(D). CPU reference: stores the softmax probabilities for backward.
#pragma once
#include <cmath>
#include <cstddef>

namespace cpu {

// out (B,T,C), att (B,H,T,T): att[b,h,t,t2] = softmax_t2<=t(q_t . k_t2 / sqrt(D))
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) {
  int D = C / H;
  T scale = T(1) / std::sqrt(T(D));
#pragma omp parallel for collapse(2)
  for (int bh = 0; bh < B * H; bh++)
    for (int t = 0; t < Tn; t++) {
      int b = bh / H, h = bh % H;
      const T* q = qkv + ((size_t)b * Tn + t) * 3 * C + h * D;
      T* a = att + ((size_t)bh * Tn + t) * Tn;
      T mx = -INFINITY;
      for (int t2 = 0; t2 <= t; t2++) {
        const T* k = qkv + ((size_t)b * Tn + t2) * 3 * C + C + h * D;
        T s = 0;
        for (int d = 0; d < D; d++) s += q[d] * k[d];
        a[t2] = s * scale;
        if (a[t2] > mx) mx = a[t2];
      }
      T sum = 0;
      for (int t2 = 0; t2 <= t; t2++) {
        a[t2] = std::exp(a[t2] - mx);
        sum += a[t2];
      }
      for (int t2 = 0; t2 <= t; t2++) a[t2] /= sum;
      for (int t2 = t + 1; t2 < Tn; t2++) a[t2] = 0;
      T* o = out + ((size_t)b * Tn + t) * C + h * D;
      for (int d = 0; d < D; d++) o[d] = 0;
      for (int t2 = 0; t2 <= t; t2++) {
        const T* v = qkv + ((size_t)b * Tn + t2) * 3 * C + 2 * C + h * D;
        for (int d = 0; d < D; d++) o[d] += a[t2] * v[d];
      }
    }
}

// dqkv (B,T,3C) += gradient; scratch (B,H,T,T) holds d(scores).
// Parallel over (b,h) only: dk and dv of one head sum over all query rows t.
template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int H) {
  int D = C / H;
  T scale = T(1) / std::sqrt(T(D));
#pragma omp parallel for
  for (int bh = 0; bh < B * H; bh++) {
    int b = bh / H, h = bh % H;
    for (int t = 0; t < Tn; t++) {
      const T* a = att + ((size_t)bh * Tn + t) * Tn;
      T* ds = scratch + ((size_t)bh * Tn + t) * Tn;
      const T* dO = dout + ((size_t)b * Tn + t) * C + h * D;
      // d(att) = dO . v ; dv += att * dO
      T dot = 0;
      for (int t2 = 0; t2 <= t; t2++) {
        const T* v = qkv + ((size_t)b * Tn + t2) * 3 * C + 2 * C + h * D;
        T* dv = dqkv + ((size_t)b * Tn + t2) * 3 * C + 2 * C + h * D;
        T da = 0;
        for (int d = 0; d < D; d++) {
          da += dO[d] * v[d];
          dv[d] += a[t2] * dO[d];
        }
        ds[t2] = da;
        dot += da * a[t2];
      }
      // softmax backward, then the scaled q.k product
      const T* q = qkv + ((size_t)b * Tn + t) * 3 * C + h * D;
      T* dq = dqkv + ((size_t)b * Tn + t) * 3 * C + h * D;
      for (int t2 = 0; t2 <= t; t2++) {
        T g = a[t2] * (ds[t2] - dot) * scale;
        const T* k = qkv + ((size_t)b * Tn + t2) * 3 * C + C + h * D;
        T* dk = dqkv + ((size_t)b * Tn + t2) * 3 * C + C + h * D;
        for (int d = 0; d < D; d++) {
          dq[d] += g * k[d];
          dk[d] += g * q[d];
        }
      }
    }
  }
}

}  // namespace cpu
