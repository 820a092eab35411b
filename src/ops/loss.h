// Softmax + cross-entropy, fused: per row the loss, and (when dscale != 0)
// dlogits written over the logits, so probabilities are never stored. CPU reference.
#pragma once
#include <algorithm>
#include <cmath>

namespace cpu {

// Rows of ld >= V columns (the padded vocabulary; the columns [V, ld) are not classes):
// losses (N) = -log softmax(logits[:, :V])[target]; if dscale != 0, logits (N,ld) <-
// (softmax - onehot) * dscale on the first V columns and 0 on the padded ones.
template <class T>
void classifier_loss(T* logits, T* losses, const int* targets, int N, int V, int ld, T dscale) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T* z = logits + (size_t)i * ld;
        T mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += std::exp(z[v] - mx);
        T logsum = std::log(sum) + mx;
        losses[i] = logsum - z[targets[i]];
        if (dscale != T(0)) {
#pragma omp simd
            for (int v = 0; v < V; v++) z[v] = std::exp(z[v] - logsum) * dscale;
            z[targets[i]] -= dscale;
            for (int v = V; v < ld; v++) z[v] = T(0);
        }
    }
}

// The same over tiles of the vocabulary (GPT::classifier_tiles): all N rows at once, w columns
// at a time, so only one tile z (N, w) of logits exists, holding the padded vocabulary's columns
// [v0, v0 + w); columns >= V are not classes. Two passes over the tiles, the logits computed again
// in the second.
// Pass 1, per tile: each row's running max m and sum of exp s (N) take in the tile's columns
// (the first tile, v0 == 0, sets them), and losses (N) keeps the target's logit (NaN for a
// target outside [0, V)).
template <class T>
void classifier_tile_lse(const T* z, T* m, T* s, T* losses, const int* targets, int N, int w, int v0, int V) {
    const int real = std::max(0, std::min(w, V - v0));  // the tile's columns that are classes
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* zi = z + (size_t)i * w;
        T tm = -INFINITY, ts = 0;
        for (int v = 0; v < real; v++) tm = zi[v] > tm ? zi[v] : tm;
        for (int v = 0; v < real; v++) ts += std::exp(zi[v] - tm);
        if (v0 == 0) {
            m[i] = tm, s[i] = ts, losses[i] = NAN;
        } else if (real > 0) {
            T mm = std::max(m[i], tm);
            s[i] = s[i] * std::exp(m[i] - mm) + ts * std::exp(tm - mm);
            m[i] = mm;
        }
        const int t = targets[i];
        if (t >= v0 && t < v0 + real) losses[i] = zi[t - v0];
    }
}

// After pass 1: m <- the log-sum-exp, losses <- log-sum-exp - the target's logit.
template <class T>
void classifier_tile_loss(T* losses, T* m, const T* s, int N) {
    for (int i = 0; i < N; i++) {
        m[i] += std::log(s[i]);
        losses[i] = m[i] - losses[i];
    }
}

// Pass 2, per tile: z (N, w) <- (softmax - onehot) * dscale, from each row's log-sum-exp lse;
// 0 in the columns >= V.
template <class T>
void classifier_tile_dlogits(T* z, const T* lse, const int* targets, int N, int w, int v0, int V, T dscale) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T* zi = z + (size_t)i * w;
        for (int v = 0; v < w; v++) zi[v] = v0 + v < V ? std::exp(zi[v] - lse[i]) * dscale : T(0);
        const int t = targets[i];
        if (t >= v0 && t < std::min(v0 + w, V)) zi[t - v0] -= dscale;
    }
}

// losses (N) = -log softmax(logits)[target]; logits (N,V) <- (softmax - onehot) * dscale if dscale != 0
template <class T>
void softmax_crossentropy(T* logits, T* losses, const int* targets, int N, int V, T dscale) {
    classifier_loss(logits, losses, targets, N, V, V, dscale);
}

}  // namespace cpu
