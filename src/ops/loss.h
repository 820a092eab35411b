// Softmax + cross-entropy, fused: per row the loss, and (when dscale != 0) dlogits written over
// the logits, so probabilities are never stored. CPU reference.
//
// Each row is read from memory once: it goes in blocks of kLossBlock columns, each small enough
// to stay in L1 from its max to its exps (vec.h: SLEEF's, 1.0 ULP). A block's sum of exp(z - its
// max) folds into the row's running max and sum (RowStats), and in training the exps stay in the
// block, so that dlogits need one more pass over the row, still in L2 (4 * ld bytes: 196 KiB at
// ld = 50304), scaling each block by exp(its max - log-sum-exp) * dscale: one exp per logit.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/vec.h"

namespace cpu {

constexpr int kLossBlock = 1024;  // columns: 4 KiB of floats

// A row's softmax statistics so far: the max m and the sum s of exp(z - m).
template <class T>
struct RowStats {
    T m = -INFINITY, s = 0;
    // Takes in a block whose max is mb and whose sum of exp(z - mb) is sb.
    void add(T mb, T sb) {
        const T mm = std::max(m, mb);
        s = s * std::exp(m - mm) + sb * std::exp(mb - mm);
        m = mm;
    }
    T lse() const { return m + std::log(s); }
};

// Takes the row z[0..n) into st, block by block. With exps (n), each block of it receives the
// block's exp(z - block max) (exps may be z) and bmax (one per block) the block's max.
template <class T>
void row_stats(RowStats<T>& st, const T* z, int n, T* exps = nullptr, T* bmax = nullptr) {
    T scratch[kLossBlock];
    for (int b = 0, v0 = 0; v0 < n; b++, v0 += kLossBlock) {
        const int w = std::min(kLossBlock, n - v0);
        const T mb = max_n(z + v0, w);
        st.add(mb, exp_sum_n(exps ? exps + v0 : scratch, z + v0, mb, w));
        if (bmax) bmax[b] = mb;
    }
}

// The columns of a tile [v0, v0 + w) that are classes (< V).
inline int tile_classes(int w, int v0, int V) {
    return std::max(0, std::min(w, V - v0));
}

// Rows of ld >= V columns (the padded vocabulary; the columns [V, ld) are not classes):
// losses (N) = -log softmax(logits[:, :V])[target]; if dscale != 0, logits (N,ld) <-
// (softmax - onehot) * dscale on the first V columns and 0 on the padded ones.
template <class T>
void classifier_loss(T* logits, T* losses, const int* targets, int N, int V, int ld, T dscale) {
    const bool grad = dscale != T(0);
    const int blocks = (V + kLossBlock - 1) / kLossBlock;
#pragma omp parallel
    {
        std::vector<T> bmax(blocks);
#pragma omp for
        for (int i = 0; i < N; i++) {
            T* z = logits + (size_t)i * ld;
            const T target = z[targets[i]];  // before the exps overwrite it
            RowStats<T> st;
            if (grad)
                row_stats(st, z, V, z, bmax.data());
            else
                row_stats(st, z, V);
            const T lse = st.lse();
            losses[i] = lse - target;
            if (!grad) continue;
            for (int b = 0, v0 = 0; v0 < V; b++, v0 += kLossBlock)
                scale_n(z + v0, std::exp(bmax[b] - lse) * dscale, std::min(kLossBlock, V - v0));
            z[targets[i]] -= dscale;
            std::fill(z + V, z + ld, T(0));
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
    const int real = tile_classes(w, v0, V);
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* zi = z + (size_t)i * w;
        RowStats<T> st;
        if (v0 > 0) st.m = m[i], st.s = s[i];
        row_stats(st, zi, real);
        m[i] = st.m, s[i] = st.s;
        if (v0 == 0) losses[i] = NAN;
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
    const int real = tile_classes(w, v0, V);
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T* zi = z + (size_t)i * w;
        exp_sum_n(zi, zi, lse[i], real);
        scale_n(zi, dscale, real);
        std::fill(zi + real, zi + w, T(0));
        const int t = targets[i];
        if (t >= v0 && t < v0 + real) zi[t - v0] -= dscale;
    }
}

// losses (N) = -log softmax(logits)[target]; logits (N,V) <- (softmax - onehot) * dscale if dscale != 0
template <class T>
void softmax_crossentropy(T* logits, T* losses, const int* targets, int N, int V, T dscale) {
    classifier_loss(logits, losses, targets, N, V, V, dscale);
}

}  // namespace cpu
