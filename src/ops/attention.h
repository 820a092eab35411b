// Causal multi-head self-attention on a packed qkv (B, T, 3C), scores scaled
// by 1/sqrt(D). CPU reference, two ways to keep what backward needs:
//   attention_forward / attention_backward: the softmax probabilities (B,H,T,T);
//   attention_forward_lse / attention_backward_lse (the CPU twin of the flash kernels):
//   only each row's log-sum-exp (B,H,T); backward recomputes the probabilities.
// Incremental decoding (src/generate.h) keeps every layer's keys and values in a cache:
// kv_cache_write stores positions into it, attention_decode runs one query against it.
// Both run the same block code below, so they differ only where backward rebuilds a
// probability as exp(s - lse) instead of reading the stored exp(s - max) / sum.
//
// Each head (b,h) goes to one thread, which takes its query rows in blocks of kAttRows: the
// block's scores against the keys up to its last row are one small GEMM (cpu::gemm, one thread
// inside the parallel loop), as are the products with v, dO, k and q, straight out of qkv by
// their leading dimensions. Between them each row's softmax runs in vectors (vec.h), its scores
// (at most T) in L1 from their max to their exps (SLEEF's) and sum: in that order rather than
// online. A block's scratch is kAttRows x T, whatever T is.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "ops/matmul.h"
#include "pos.h"
#include "ops/vec.h"

namespace cpu {

constexpr int kAttRows = 64;  // query rows per block

// Where the rows of head h of batch b start in qkv (B,T,3C) (q; k at + C, v at + 2C) and in a
// (B,T,C) tensor.
inline size_t qkv_at(int b, int h, int t, int T, int C, int H) {
    return ((size_t)b * T + t) * 3 * C + h * (C / H);
}
inline size_t out_at(int b, int h, int t, int T, int C, int H) {
    return ((size_t)b * T + t) * C + h * (C / H);
}

// s (t1 - t0, ld) <- the scaled scores of query rows [t0, t1) of head (b,h) against keys [0, t1),
// with ALiBi's bias -slopes[h] (t - j) on keys j <= t when slopes (H,) is given.
template <class Real>
void block_scores(Real* s, int ld, const Real* qkv, int b, int h, int t0, int t1, int T, int C, int H,
                  const Real* slopes) {
    const int D = C / H;
    gemm(false, true, t1 - t0, t1, D, Real(1) / std::sqrt(Real(D)), qkv + qkv_at(b, h, t0, T, C, H), 3 * C,
               qkv + qkv_at(b, h, 0, T, C, H) + C, 3 * C, Real(0), s, ld);
    if (!slopes) return;
    for (int t = t0; t < t1; t++)
        for (int j = 0; j <= t; j++) s[(size_t)(t - t0) * ld + j] -= slopes[h] * Real(t - j);
}

// Row t of a block, its scores p[0..t] over the block's n keys: p <- the softmax (0 past t).
// Returns the row's log-sum-exp of the scores.
template <class Real>
Real softmax_row(Real* p, int t, int n) {
    const Real mx = max_n(p, t + 1);
    const Real sum = exp_sum_n(p, p, mx, t + 1);
    for (int j = 0; j <= t; j++) p[j] /= sum;
    std::fill(p + t + 1, p + n, Real(0));
    return mx + std::log(sum);
}

// Forward of query rows [t0, t1) of head (b,h): p (t1 - t0, ld) <- the probabilities over keys
// [0, t1), lse (the head's, T) <- the rows' log-sum-exps, out <- p v.
template <class Real>
void block_forward(Real* out, Real* p, int ld, Real* lse, const Real* qkv, int b, int h, int t0, int t1, int T, int C,
                   int H, const Real* slopes) {
    block_scores<Real>(p, ld, qkv, b, h, t0, t1, T, C, H, slopes);
    for (int t = t0; t < t1; t++) lse[t] = softmax_row(p + (size_t)(t - t0) * ld, t, t1);
    gemm(false, false, t1 - t0, C / H, t1, Real(1), p, ld, qkv + qkv_at(b, h, 0, T, C, H) + 2 * C, 3 * C, Real(0),
               out + out_at(b, h, t0, T, C, H), C);
}

// Backward of query rows [t0, t1) of head (b,h), given their probabilities p (t1 - t0, ld) over
// keys [0, t1): dq of the rows <- its gradient, dk and dv of keys [0, t1) += the rows' share of
// theirs (in dqkv (B,T,3C)). dsc (t1 - t0, t1) is scratch.
template <class Real>
void block_backward(Real* dqkv, Real* dsc, const Real* p, int ld, const Real* dout, const Real* qkv, int b, int h,
                    int t0, int t1, int T, int C, int H) {
    const int D = C / H, R = t1 - t0;
    const Real scale = Real(1) / std::sqrt(Real(D));
    const Real *q = qkv + qkv_at(b, h, t0, T, C, H), *k0 = qkv + qkv_at(b, h, 0, T, C, H) + C, *v0 = k0 + C;
    const Real* dO = dout + out_at(b, h, t0, T, C, H);
    Real *dk0 = dqkv + qkv_at(b, h, 0, T, C, H) + C, *dv0 = dk0 + C;
    // d(att) = dO v^T ; dv += att^T dO
    gemm(false, true, R, t1, D, Real(1), dO, C, v0, 3 * C, Real(0), dsc, t1);
    gemm(true, false, t1, D, R, Real(1), p, ld, dO, C, Real(1), dv0, 3 * C);
    // the softmax backward, d(scores) = att * (d(att) - sum att d(att)), scaled
    for (int r = 0; r < R; r++) {
        const Real* pr = p + (size_t)r * ld;
        Real* g = dsc + (size_t)r * t1;
        const Real dot = dot_n(pr, g, t1);
        for (int j = 0; j < t1; j++) g[j] = pr[j] * (g[j] - dot) * scale;
    }
    // dq = d(scores) k ; dk += d(scores)^T q
    gemm(false, false, R, D, t1, Real(1), dsc, t1, k0, 3 * C, Real(0), dqkv + qkv_at(b, h, t0, T, C, H), 3 * C);
    gemm(true, false, t1, D, R, Real(1), dsc, t1, q, 3 * C, Real(1), dk0, 3 * C);
}

// A thread's scratch for one block (kAttRows x T), the first or the second (which), kept from call
// to call: no allocation per call, and test/bench_gemms can run a step's products again on them.
template <class Real>
Real* block_scratch(int which, size_t n) {
    thread_local std::vector<Real> scratch[2];
    if (scratch[which].size() < n) scratch[which].resize(n);
    return scratch[which].data();
}

// Zeroes the k and v channels of head h in every row of batch b of dqkv (B,T,3C): the blocks add
// into them (the q channels each block writes).
template <class Real>
void zero_head_kv(Real* dqkv, int b, int h, int T, int C, int H) {
    for (int t = 0; t < T; t++)
        for (int part = 1; part < 3; part++) std::fill_n(dqkv + qkv_at(b, h, t, T, C, H) + part * C, C / H, Real(0));
}

// out (B,T,C), att (B,H,T,T): att[b,h,t,t2] = softmax_t2<=t(q_t . k_t2 / sqrt(D) - m_h (t - t2)),
// m_h = pos.slopes[h] (ALiBi) or 0 when pos has no slopes. The same position data in every op below.
template <class Real>
void attention_forward(Real* out, Real* att, const Real* qkv, int B, int T, int C, int H,
                       const PosData<Real>& pos = {}) {
#pragma omp parallel
    {
        std::vector<Real> lse(T);  // not kept here
#pragma omp for
        for (int bh = 0; bh < B * H; bh++)
            for (int t0 = 0; t0 < T; t0 += kAttRows) {
                const int t1 = std::min(T, t0 + kAttRows);
                Real* p = att + ((size_t)bh * T + t0) * T;
                block_forward<Real>(out, p, T, lse.data(), qkv, bh / H, bh % H, t0, t1, T, C, H, pos.slopes);
                for (int t = t0; t < t1; t++)
                    std::fill(p + (size_t)(t - t0) * T + t1, p + (size_t)(t - t0 + 1) * T, Real(0));
            }
    }
}

// dqkv (B,T,3C) = gradient (overwritten). scratch (B,H,T,T) holds the GPU kernels' d(scores);
// these loops need one block of it at a time, their own.
template <class Real>
void attention_backward(Real* dqkv, Real* /*scratch*/, const Real* dout, const Real* qkv, const Real* att, int B, int T,
                        int C, int H, const PosData<Real>& /*in att already*/ = {}) {
#pragma omp parallel
    {
        Real* dsc = block_scratch<Real>(0, (size_t)kAttRows * T);
#pragma omp for
        for (int bh = 0; bh < B * H; bh++) {
            zero_head_kv(dqkv, bh / H, bh % H, T, C, H);
            for (int t0 = 0; t0 < T; t0 += kAttRows)
                block_backward<Real>(dqkv, dsc, att + ((size_t)bh * T + t0) * T, T, dout, qkv, bh / H, bh % H, t0,
                                           std::min(T, t0 + kAttRows), T, C, H);
        }
    }
}

// out (B,T,C), lse (B,H,T): the same output as attention_forward, keeping only each row's
// log-sum-exp of the scaled scores.
template <class Real>
void attention_forward_lse(Real* out, Real* lse, const Real* qkv, int B, int T, int C, int H,
                           const PosData<Real>& pos = {}) {
#pragma omp parallel
    {
        Real* p = block_scratch<Real>(0, (size_t)kAttRows * T);  // one block of probabilities, rows as att's
#pragma omp for
        for (int bh = 0; bh < B * H; bh++)
            for (int t0 = 0; t0 < T; t0 += kAttRows) {
                const int t1 = std::min(T, t0 + kAttRows);
                block_forward<Real>(out, p, T, lse + (size_t)bh * T, qkv, bh / H, bh % H, t0, t1, T, C, H,
                                          pos.slopes);
            }
    }
}

// dqkv (B,T,3C) = gradient (overwritten), from the row log-sum-exps of attention_forward_lse: each
// row's probabilities are rebuilt as exp(score - lse), the score biased as in forward. The forward output (B,T,C) is
// part of the signature for the GPU kernels (they take rowsum(dO * out)); these loops do not need it.
template <class Real>
void attention_backward_lse(Real* dqkv, const Real* dout, const Real* qkv, const Real* /*out*/, const Real* lse, int B,
                            int T, int C, int H, const PosData<Real>& pos = {}) {
#pragma omp parallel
    {
        Real *p = block_scratch<Real>(0, (size_t)kAttRows * T), *dsc = block_scratch<Real>(1, (size_t)kAttRows * T);
#pragma omp for
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            zero_head_kv(dqkv, b, h, T, C, H);
            for (int t0 = 0; t0 < T; t0 += kAttRows) {
                const int t1 = std::min(T, t0 + kAttRows);
                block_scores<Real>(p, T, qkv, b, h, t0, t1, T, C, H, pos.slopes);
                for (int t = t0; t < t1; t++) {
                    Real* pr = p + (size_t)(t - t0) * T;
                    exp_sum_n(pr, pr, lse[(size_t)bh * T + t], t + 1);
                    std::fill(pr + t + 1, pr + t1, Real(0));
                }
                block_backward<Real>(dqkv, dsc, p, T, dout, qkv, b, h, t0, t1, T, C, H);
            }
        }
    }
}

// The KV cache of one layer: kc, vc (B, cap, C), position t of row b at (b, t). Stores the keys
// and values of qkv (B,T,3C) (after RoPE: as attention reads them) at positions [pos, pos + T).
template <class Real>
void kv_cache_write(Real* kc, Real* vc, const Real* qkv, int B, int T, int C, int pos, int cap) {
#pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const Real* k = qkv + (size_t)bt * 3 * C + C;
        const size_t at = ((size_t)(bt / T) * cap + pos + bt % T) * C;
        std::copy_n(k, C, kc + at);
        std::copy_n(k + C, C, vc + at);
    }
}

// out (B,C) <- attention of one query per row, the q of qkv (B,1,3C) at position n - 1, over the
// n cached keys and values [0, n) of kc, vc (B, cap, C): the last row of attention_forward over
// those n positions, ALiBi's bias -pos.slopes[h] (n - 1 - j) included.
template <class Real>
void attention_decode(Real* out, const Real* qkv, const Real* kc, const Real* vc, int B, int n, int cap, int C, int H,
                      const PosData<Real>& pos = {}) {
    const int D = C / H;
#pragma omp parallel
    {
        Real* p = block_scratch<Real>(0, (size_t)n);
#pragma omp for
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const size_t kv0 = (size_t)b * cap * C + h * D;  // key 0 of head h
            gemm(false, true, 1, n, D, Real(1) / std::sqrt(Real(D)), qkv + (size_t)b * 3 * C + h * D, 3 * C, kc + kv0,
                 C, Real(0), p, n);
            if (pos.slopes)
                for (int j = 0; j < n; j++) p[j] -= pos.slopes[h] * Real(n - 1 - j);
            softmax_row(p, n - 1, n);
            gemm(false, false, 1, D, n, Real(1), p, n, vc + kv0, C, Real(0), out + (size_t)b * C + h * D, C);
        }
    }
}

}  // namespace cpu
