// Causal multi-head self-attention on a packed qkv (B, T, 3C), scores scaled
// by 1/sqrt(D). CPU reference, two ways to keep what backward needs:
//   attention_forward / attention_backward: the softmax probabilities (B,H,T,T);
//   attention_forward_lse / attention_backward_lse (the CPU twin of the flash kernels):
//   only each row's log-sum-exp (B,H,T); backward recomputes the probabilities row by row.
// Both run the same per-row code below, so they differ only where backward rebuilds a
// probability as exp(s - lse) instead of reading the stored exp(s - max) / sum.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace cpu {

// Row t of head (b,h): a[0..t] = softmax of the scaled scores, o (D) = sum a[t2] v_t2.
// Returns the row's log-sum-exp of the scaled scores.
template <class T>
T attention_row_forward(T* o, T* a, const T* qkv, int b, int h, int t, int Tn, int C, int H) {
    int D = C / H;
    T scale = T(1) / std::sqrt(T(D));
    const T* q = qkv + ((size_t)b * Tn + t) * 3 * C + h * D;
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
    for (int d = 0; d < D; d++) o[d] = 0;
    for (int t2 = 0; t2 <= t; t2++) {
        const T* v = qkv + ((size_t)b * Tn + t2) * 3 * C + 2 * C + h * D;
        for (int d = 0; d < D; d++) o[d] += a[t2] * v[d];
    }
    return mx + std::log(sum);
}

// Row t of head (b,h), given its probabilities a[0..t]: dv, dq, dk += gradient of dO_t.
// ds (t+1) is scratch.
template <class T>
void attention_row_backward(T* dqkv, T* ds, const T* a, const T* dout, const T* qkv, int b, int h, int t, int Tn, int C,
                            int H) {
    int D = C / H;
    T scale = T(1) / std::sqrt(T(D));
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

// out (B,T,C), att (B,H,T,T): att[b,h,t,t2] = softmax_t2<=t(q_t . k_t2 / sqrt(D))
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) {
    int D = C / H;
#pragma omp parallel for collapse(2)
    for (int bh = 0; bh < B * H; bh++)
        for (int t = 0; t < Tn; t++) {
            int b = bh / H, h = bh % H;
            T* a = att + ((size_t)bh * Tn + t) * Tn;
            attention_row_forward(out + ((size_t)b * Tn + t) * C + h * D, a, qkv, b, h, t, Tn, C, H);
            for (int t2 = t + 1; t2 < Tn; t2++) a[t2] = 0;
        }
}

// Zeroes the q, k and v channels of head h in every row of batch b of dqkv (B,T,3C): the
// backward overwrites its gradient, and the rows add into these.
template <class T>
void zero_head_grads(T* dqkv, int b, int h, int Tn, int C, int H) {
    const int D = C / H;
    for (int t = 0; t < Tn; t++)
        for (int part = 0; part < 3; part++)
            std::fill_n(dqkv + ((size_t)b * Tn + t) * 3 * C + part * C + h * D, D, T(0));
}

// dqkv (B,T,3C) = gradient (overwritten); scratch (B,H,T,T) holds d(scores).
// Parallel over (b,h) only: dk and dv of one head sum over all query rows t.
template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int H) {
#pragma omp parallel for
    for (int bh = 0; bh < B * H; bh++) {
        zero_head_grads(dqkv, bh / H, bh % H, Tn, C, H);
        for (int t = 0; t < Tn; t++)
            attention_row_backward(dqkv, scratch + ((size_t)bh * Tn + t) * Tn, att + ((size_t)bh * Tn + t) * Tn, dout,
                                   qkv, bh / H, bh % H, t, Tn, C, H);
    }
}

// out (B,T,C), lse (B,H,T): the same output as attention_forward, keeping only each row's
// log-sum-exp of the scaled scores.
template <class T>
void attention_forward_lse(T* out, T* lse, const T* qkv, int B, int Tn, int C, int H) {
    int D = C / H;
#pragma omp parallel
    {
        std::vector<T> a(Tn);  // one row of probabilities
#pragma omp for collapse(2)
        for (int bh = 0; bh < B * H; bh++)
            for (int t = 0; t < Tn; t++) {
                int b = bh / H, h = bh % H;
                lse[(size_t)bh * Tn + t] =
                    attention_row_forward(out + ((size_t)b * Tn + t) * C + h * D, a.data(), qkv, b, h, t, Tn, C, H);
            }
    }
}

// dqkv (B,T,3C) = gradient (overwritten), from the row log-sum-exps of attention_forward_lse: each row's
// probabilities are rebuilt as exp(q.k / sqrt(D) - lse). The forward output (B,T,C) is part
// of the signature for the GPU kernels (they take rowsum(dO * out)); this loop does not need it.
template <class T>
void attention_backward_lse(T* dqkv, const T* dout, const T* qkv, const T* /*out*/, const T* lse, int B, int Tn, int C,
                            int H) {
    int D = C / H;
    T scale = T(1) / std::sqrt(T(D));
#pragma omp parallel
    {
        std::vector<T> a(Tn), ds(Tn);
#pragma omp for
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H;
            zero_head_grads(dqkv, b, h, Tn, C, H);
            for (int t = 0; t < Tn; t++) {
                const T* q = qkv + ((size_t)b * Tn + t) * 3 * C + h * D;
                for (int t2 = 0; t2 <= t; t2++) {
                    const T* k = qkv + ((size_t)b * Tn + t2) * 3 * C + C + h * D;
                    T s = 0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    a[t2] = std::exp(s * scale - lse[(size_t)bh * Tn + t]);
                }
                attention_row_backward(dqkv, ds.data(), a.data(), dout, qkv, b, h, t, Tn, C, H);
            }
        }
    }
}

}  // namespace cpu
