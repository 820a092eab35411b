// Softmax + cross-entropy, fused: per row the loss, and (when dscale != 0) dlogits written over
// the logits, so probabilities are never stored. CPU reference (the twins of cuda/loss.cu), and
// the CPU trainer's LM head with its loss, fused by vocabulary tiles (classifier_head, below).
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

#include "ops/matmul.h"
#include "ops/vec.h"

namespace cpu {

constexpr int kLossBlock = 1024;  // columns: 4 KiB of floats

// A row's softmax statistics so far: the max m and the sum s of exp(z - m).
template <class Real>
struct RowStats {
    Real m = -INFINITY, s = 0;
    // Takes in a block whose max is mb and whose sum of exp(z - mb) is sb.
    void add(Real mb, Real sb) {
        const Real mm = std::max(m, mb);
        s = s * std::exp(m - mm) + sb * std::exp(mb - mm);
        m = mm;
    }
    Real lse() const { return m + std::log(s); }
};

// Takes the row z[0..n) into st, block by block. With exps (n), each block of it receives the
// block's exp(z - block max) (exps may be z) and bmax (one per block) the block's max.
template <class Real>
void row_stats(RowStats<Real>& st, const Real* z, int n, Real* exps = nullptr, Real* bmax = nullptr) {
    Real scratch[kLossBlock];
    for (int b = 0, v0 = 0; v0 < n; b++, v0 += kLossBlock) {
        const int w = std::min(kLossBlock, n - v0);
        const Real mb = max_n(z + v0, w);
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
template <class Real>
void classifier_loss(Real* logits, Real* losses, const int* targets, int N, int V, int ld, Real dscale) {
    const bool grad = dscale != Real(0);
    const int blocks = (V + kLossBlock - 1) / kLossBlock;
#pragma omp parallel
    {
        std::vector<Real> bmax(blocks);
#pragma omp for
        for (int i = 0; i < N; i++) {
            Real* z = logits + (size_t)i * ld;
            const Real target = z[targets[i]];  // before the exps overwrite it
            RowStats<Real> st;
            if (grad)
                row_stats(st, z, V, z, bmax.data());
            else
                row_stats(st, z, V);
            const Real lse = st.lse();
            losses[i] = lse - target;
            if (!grad) continue;
            for (int b = 0, v0 = 0; v0 < V; b++, v0 += kLossBlock)
                scale_n(z + v0, std::exp(bmax[b] - lse) * dscale, std::min(kLossBlock, V - v0));
            z[targets[i]] -= dscale;
            std::fill(z + V, z + ld, Real(0));
        }
    }
}

// The tied LM head and the loss of one chunk of N rows, fused (classifier.h on the CPU): the
// logits x wte^T (N, Vp) of the rows x (N, C), the losses, and with dscale != 0 the head's
// gradients: dx (N, C) = dlogits wte (overwritten), dwte (Vp, C) += dlogits^T x, where dlogits =
// (softmax - onehot) * dscale. It goes by vocabulary tiles of head_tile_cols columns, each thread
// its own tiles, its BLAS on one core (OpenBLAS runs serially inside a parallel region), so that
// a tile's logits (N, w) stay in that core's cache from the GEMM that writes them through their max
// and exps to the GEMM of its share of dx (the exps times its rows of wte); the logits buffer
// holds the tiles one after another. Then each row's tile statistics merge, in tile order, into
// its log-sum-exp, which gives each (tile, row) its scale, exp(tile max - lse) * dscale; dx is
// the shares, scaled, added in tile order; each tile's rows of dwte take its exps, read from
// memory once more, times x's rows scaled. The onehot part goes in row by row. The same bits for
// any thread count: every tile's work is its own, and every sum over tiles goes in tile order.
// A tile's logits: 1.5 MiB, most of a 2 MiB L2. Where L2 is 1 MiB (AMD EPYC, family 26) tiles
// of 0.75 and 0.5 MiB measured no faster, with OpenBLAS's AVX2 and its AVX-512 kernels alike.
constexpr size_t kHeadTileBytes = 3 << 19;

// Columns per tile: a multiple of 128, at most kLossBlock (a row of the tile stays in L1 from
// its max to its exps).
template <class Real>
int head_tile_cols(int N, int Vp) {
    const int w = (int)(kHeadTileBytes / ((size_t)std::max(N, 1) * sizeof(Real))) / 128 * 128;
    return std::min(std::max(w, 128), std::min(kLossBlock, Vp));
}
// Elements of classifier_head's scratch: per tile and row the max, the sum of exp and the
// share of dx (C); per row the log-sum-exp.
template <class Real>
size_t classifier_head_scratch(int N, int C, int Vp) {
    const int w = head_tile_cols<Real>(N, Vp);
    return (size_t)(Vp + w - 1) / w * N * (2 + (size_t)C) + N;
}

template <class Real>
void classifier_head(Real* logits, Real* losses, const int* targets, const Real* x, const Real* wte, Real* dx,
                     Real* dwte, Real* scratch, int N, int C, int V, int Vp, Real dscale) {
    const bool grad = dscale != Real(0);
    const int w0 = head_tile_cols<Real>(N, Vp), tiles = (Vp + w0 - 1) / w0;
    Real* tmax = scratch;                   // (tiles, N) the max of each tile's row
    Real* tsum = tmax + (size_t)tiles * N;  // (tiles, N) its sum of exp(z - max)
    Real* lse = tsum + (size_t)tiles * N;   // (N)
    Real* part = lse + N;  // (tiles, N, C) each tile's exps times its wte rows; then x scaled for its d wte
    auto tile = [&](int t, int& v0, int& w, int& real) {
        v0 = t * w0, w = std::min(w0, Vp - v0), real = tile_classes(w, v0, V);
        return logits + (size_t)v0 * N;  // (N, w)
    };
    // the scale of tile t's exps in row i: exp(z - tile max) * it = softmax * dscale
    auto scale = [&](int t, int i) { return std::exp(tmax[(size_t)t * N + i] - lse[i]) * dscale; };
#pragma omp parallel
    {
        std::vector<Real> exps(grad ? 0 : w0);  // evaluation keeps no exps
#pragma omp for schedule(static)
        for (int t = 0; t < tiles; t++) {
            int v0, w, real;
            Real* z = tile(t, v0, w, real);
            const Real* wt = wte + (size_t)v0 * C;
            gemm(false, true, N, w, C, Real(1), x, C, wt, C, Real(0), z, w);
            for (int i = 0; i < N; i++) {
                Real* zi = z + (size_t)i * w;
                const int tg = targets[i] - v0;
                if (tg >= 0 && tg < real) losses[i] = zi[tg];                  // before the exps overwrite it
                const Real mi = real > 0 ? max_n(zi, real) : Real(-INFINITY);  // a tile of padding only adds 0
                tmax[(size_t)t * N + i] = mi;
                tsum[(size_t)t * N + i] = exp_sum_n(grad ? zi : exps.data(), zi, mi, real);
                if (grad) std::fill(zi + real, zi + w, Real(0));
            }
            // d lnf's share, while the exps are in L2; each row's scale comes once the lse is known
            if (grad) gemm(false, false, N, C, w, Real(1), z, w, wt, C, Real(0), part + (size_t)t * N * C, C);
        }
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++) {
            RowStats<Real> st;
            for (int t = 0; t < tiles; t++) st.add(tmax[(size_t)t * N + i], tsum[(size_t)t * N + i]);
            lse[i] = st.lse();
            const int tg = targets[i];
            losses[i] = tg >= 0 && tg < V ? lse[i] - losses[i] : Real(NAN);
        }
        if (grad) {
            // d lnf: the tiles' shares scaled and added in tile order, less dscale times the target's wte row
#pragma omp for schedule(static)
            for (int i = 0; i < N; i++) {
                Real* d = dx + (size_t)i * C;
                std::fill(d, d + C, Real(0));
                for (int t = 0; t < tiles; t++) {
                    const Real a = scale(t, i);
                    const Real* p = part + ((size_t)t * N + i) * C;
                    for (int c = 0; c < C; c++) d[c] += a * p[c];
                }
                const int tg = targets[i];
                if (tg >= 0 && tg < V)
                    for (int c = 0; c < C; c++) d[c] -= dscale * wte[(size_t)tg * C + c];
            }
            // d wte's tile rows: exps^T (x's rows times their scales, over the tile's share, now
            // added up) less dscale onehot^T x
#pragma omp for schedule(static)
            for (int t = 0; t < tiles; t++) {
                int v0, w, real;
                const Real* z = tile(t, v0, w, real);
                Real *dw = dwte + (size_t)v0 * C, *xs = part + (size_t)t * N * C;
                for (int i = 0; i < N; i++) {
                    const Real a = scale(t, i);
                    for (int c = 0; c < C; c++) xs[(size_t)i * C + c] = a * x[(size_t)i * C + c];
                }
                gemm(true, false, w, C, N, Real(1), z, w, xs, C, Real(1), dw, C);
                for (int i = 0; i < N; i++) {  // rows in order: a class several rows target gets them in order
                    const int tg = targets[i] - v0;
                    if (tg < 0 || tg >= real) continue;
                    for (int c = 0; c < C; c++) dw[(size_t)tg * C + c] -= dscale * x[(size_t)i * C + c];
                }
            }
        }
    }
}

// The same over tiles of the vocabulary (classifier_tiles, src/classifier.h): all N rows at once, w columns
// at a time, so only one tile z (N, w) of logits exists, holding the padded vocabulary's columns
// [v0, v0 + w); columns >= V are not classes. Two passes over the tiles, the logits computed again
// in the second.
// Pass 1, per tile: each row's running max m and sum of exp s (N) take in the tile's columns
// (the first tile, v0 == 0, sets them), and losses (N) keeps the target's logit (NaN for a
// target outside [0, V)).
template <class Real>
void classifier_tile_lse(const Real* z, Real* m, Real* s, Real* losses, const int* targets, int N, int w, int v0,
                         int V) {
    const int real = tile_classes(w, v0, V);
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const Real* zi = z + (size_t)i * w;
        RowStats<Real> st;
        if (v0 > 0) st.m = m[i], st.s = s[i];
        row_stats(st, zi, real);
        m[i] = st.m, s[i] = st.s;
        if (v0 == 0) losses[i] = NAN;
        const int t = targets[i];
        if (t >= v0 && t < v0 + real) losses[i] = zi[t - v0];
    }
}

// After pass 1: m <- the log-sum-exp, losses <- log-sum-exp - the target's logit.
template <class Real>
void classifier_tile_loss(Real* losses, Real* m, const Real* s, int N) {
    for (int i = 0; i < N; i++) {
        m[i] += std::log(s[i]);
        losses[i] = m[i] - losses[i];
    }
}

// Pass 2, per tile: z (N, w) <- (softmax - onehot) * dscale, from each row's log-sum-exp lse;
// 0 in the columns >= V.
template <class Real>
void classifier_tile_dlogits(Real* z, const Real* lse, const int* targets, int N, int w, int v0, int V, Real dscale) {
    const int real = tile_classes(w, v0, V);
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        Real* zi = z + (size_t)i * w;
        exp_sum_n(zi, zi, lse[i], real);
        scale_n(zi, dscale, real);
        std::fill(zi + real, zi + w, Real(0));
        const int t = targets[i];
        if (t >= v0 && t < v0 + real) zi[t - v0] -= dscale;
    }
}

// The head without logits in memory (classifier_fused, --classifier fused; the twin of
// cuda/loss.cu's kernels, in the same three passes): the logits of a block of kFusedRows rows
// and a tile of kLossBlock classes at a time, computed by a GEMM into a thread's cache-sized
// buffer and taken there by the vocabulary tiles' ops above. The forward folds each block's
// tiles into its rows' log-sum-exps and losses (classifier_tile_lse, _loss); the backward
// computes the tiles again and turns them into dlogits (classifier_tile_dlogits): dx (N, C) = d
// wte per block of rows (overwritten, summed in tile order) and dwte (Vp, C) += d^T x per tile
// (summed in block order). Columns >= V are never computed. Each block or tile is one thread's
// (the tile ops inside run on it): the same bits for any thread count.
constexpr int kFusedRows = 64;

template <class Real>
void classifier_fused(Real* losses, Real* lse, const int* targets, const Real* x, const Real* wte, Real* dx, Real* dwte,
                      int N, int C, int V, int /*Vp*/, Real dscale) {
    const int R = kFusedRows, W = kLossBlock, blocks = (N + R - 1) / R, tiles = (V + W - 1) / W;
    auto block = [&](int b, int& i0, int& n) { i0 = b * R, n = std::min(R, N - i0); };
    auto tile = [&](int t, int& v0, int& w) { v0 = t * W, w = std::min(W, V - v0); };
    // z (n, w): the logits of rows [i0, i0 + n) and classes [v0, v0 + w)
    auto logits = [&](Real* z, int i0, int n, int v0, int w) {
        gemm(false, true, n, w, C, Real(1), x + (size_t)i0 * C, C, wte + (size_t)v0 * C, C, Real(0), z, w);
    };
    // the same turned into dlogits
    auto dlogits = [&](Real* z, int i0, int n, int v0, int w) {
        logits(z, i0, n, v0, w);
        classifier_tile_dlogits(z, lse + i0, targets + i0, n, w, v0, V, dscale);
    };
#pragma omp parallel
    {
        std::vector<Real> z((size_t)R * W), sums(R);
#pragma omp for schedule(static)
        for (int b = 0; b < blocks; b++) {
            int i0, n;
            block(b, i0, n);
            for (int t = 0; t < tiles; t++) {
                int v0, w;
                tile(t, v0, w);
                logits(z.data(), i0, n, v0, w);
                classifier_tile_lse(z.data(), lse + i0, sums.data(), losses + i0, targets + i0, n, w, v0, V);
            }
            classifier_tile_loss(losses + i0, lse + i0, sums.data(), n);
        }
        if (dscale != Real(0)) {
#pragma omp for schedule(static)
            for (int b = 0; b < blocks; b++) {
                int i0, n;
                block(b, i0, n);
                for (int t = 0; t < tiles; t++) {
                    int v0, w;
                    tile(t, v0, w);
                    dlogits(z.data(), i0, n, v0, w);
                    gemm(false, false, n, C, w, Real(1), z.data(), w, wte + (size_t)v0 * C, C, Real(t > 0),
                         dx + (size_t)i0 * C, C);
                }
            }
#pragma omp for schedule(static)
            for (int t = 0; t < tiles; t++) {
                int v0, w;
                tile(t, v0, w);
                for (int b = 0; b < blocks; b++) {
                    int i0, n;
                    block(b, i0, n);
                    dlogits(z.data(), i0, n, v0, w);
                    gemm(true, false, w, C, n, Real(1), z.data(), w, x + (size_t)i0 * C, C, Real(1),
                         dwte + (size_t)v0 * C, C);
                }
            }
        }
    }
}

}  // namespace cpu
