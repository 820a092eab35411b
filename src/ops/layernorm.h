// LayerNorm over the last dimension, eps 1e-5, biased variance. CPU reference, a vector of
// channels at a time (vec.h).
#pragma once
#include <cmath>
#include <cstddef>

#include "ops/vec.h"

namespace cpu {

// One row: o (C) = (x - mean) * rstd * w + b; returns mean and rstd through m, s.
template <class Real>
void layernorm_row(Real* o, Real& m, Real& s, const Real* x, const Real* w, const Real* b, int C) {
    constexpr int W = kLanes<Real>;
    vec<Real> sum{}, var{};
    for (int c = 0; c < C; c += W) sum += load_first(x + c, C - c);
    m = hsum<Real>(sum) / C;
    for (int c = 0; c < C; c += W) {
        const vec<Real> d = load_first(x + c, C - c, m) - m;  // 0 in the lanes past C
        var += d * d;
    }
    s = Real(1) / std::sqrt(hsum<Real>(var) / C + Real(1e-5));
    for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
}

// out (N,C) = (inp - mean) * rstd * w + b; saves mean (N) and rstd (N) for backward
template <class Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* w, const Real* b, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) layernorm_row(out + (size_t)i * C, mean[i], rstd[i], inp + (size_t)i * C, w, b, C);
}

// res (N,C) = x + (y + ybias), ybias (C) broadcast over rows (may be null; res may be x), then
// out = the LayerNorm of res: the residual add of the branch before each LayerNorm, with the bias
// of that branch's last linear layer (whose GEMM then adds none), fused with it so that a GPU
// writes the sum and normalises it in one kernel, the row still in its cache (and so does this
// loop, row by row).
template <class Real>
void residual_layernorm_forward(Real* res, Real* out, Real* mean, Real* rstd, const Real* x, const Real* y,
                                const Real* ybias, const Real* w, const Real* b, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++) {
        const size_t i = (size_t)r * C;
        for (int c = 0; c < C; c++) res[i + c] = x[i + c] + (y[i + c] + (ybias ? ybias[c] : Real(0)));
        layernorm_row(out + i, mean[r], rstd[r], res + i, w, b, C);
    }
}

// dinp (N,C) += d inp; dw, db (C) += their gradients. dsum (C), when given, += the column sums
// of dinp as updated: where dinp is the residual stream's gradient, the gradient of the bias of
// the residual branch whose sum with the stream this LayerNorm reads (model.h), fused here to
// save a pass over dinp.
template <class Real>
void layernorm_backward(Real* dinp, Real* dw, Real* db, Real* dsum, const Real* dout, const Real* inp, const Real* w,
                        const Real* mean, const Real* rstd, int N, int C) {
    constexpr int W = kLanes<Real>;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const Real* x = inp + (size_t)i * C;
        const Real* d = dout + (size_t)i * C;
        Real* dx = dinp + (size_t)i * C;
        const Real m = mean[i], s = rstd[i];
        // dxhat = d * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
        vec<Real> sd{}, sdx{};
        for (int c = 0; c < C; c += W) {
            const vec<Real> dxhat = load_first(d + c, C - c) * load_first(w + c, C - c);  // 0 past C
            sd += dxhat;
            sdx += dxhat * ((load_first(x + c, C - c) - m) * s);
        }
        const Real sum_d = hsum<Real>(sd) / C, sum_dx = hsum<Real>(sdx) / C;
        for (int c = 0; c < C; c++) {
            Real xhat = (x[c] - m) * s;
            dx[c] += s * (d[c] * w[c] - sum_d - xhat * sum_dx);
        }
    }
    // dw, db and dsum sum over the rows: a vector of channels per task, its rows in order (the
    // same sums whatever the thread count)
#pragma omp parallel for
    for (int c = 0; c < C; c += W) {
        const int n = C - c;
        vec<Real> sw = load_first(dw + c, n), sb = load_first(db + c, n),
                  ss = dsum ? load_first(dsum + c, n) : vec<Real>{};
        for (int i = 0; i < N; i++) {
            const size_t r = (size_t)i * C + c;
            const vec<Real> d = load_first(dout + r, n);
            sw += d * ((load_first(inp + r, n) - mean[i]) * rstd[i]);
            sb += d;
            if (dsum) ss += load_first(dinp + r, n);
        }
        store_first(dw + c, sw, n), store_first(db + c, sb, n);
        if (dsum) store_first(dsum + c, ss, n);
    }
}

}  // namespace cpu
