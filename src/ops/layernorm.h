// LayerNorm over the last dimension, eps 1e-5, biased variance. CPU reference.
#pragma once
#include <cmath>

namespace cpu {

// out (N,C) = (inp - mean) * rstd * w + b; saves mean (N) and rstd (N) for backward
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        T m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        T var = 0;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        var /= C;
        T s = T(1) / std::sqrt(var + T(1e-5));
        T* o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

// res (N,C) = x + (y + ybias), ybias (C) broadcast over rows (may be null; res may be x), then
// out = the LayerNorm of res: the residual add of the branch before each LayerNorm, with the bias
// of that branch's last linear layer (whose GEMM then adds none), fused with it so that a GPU
// writes the sum and normalises it in one kernel, the row still in its cache.
template <class T>
void residual_layernorm_forward(T* res, T* out, T* mean, T* rstd, const T* x, const T* y, const T* ybias, const T* w,
                                const T* b, int N, int C) {
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            res[i] = x[i] + (y[i] + (ybias ? ybias[c] : T(0)));
        }
    layernorm_forward(out, mean, rstd, res, w, b, N, C);
}

// dinp (N,C) += d inp; dw, db (C) += their gradients. dsum (C), when given, += the column sums
// of dinp as updated: where dinp is the residual stream's gradient, the gradient of the bias of
// the residual branch whose sum with the stream this LayerNorm reads (model.h), fused here to
// save a pass over dinp.
template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, T* dsum, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int N, int C) {
    // dinp rows are independent; dw and db sum over rows, kept serial for a fixed order.
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        const T* d = dout + (size_t)i * C;
        T* dx = dinp + (size_t)i * C;
        T m = mean[i], s = rstd[i];
        // dxhat = d * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
        T sum_d = 0, sum_dx = 0;
        for (int c = 0; c < C; c++) {
            T xhat = (x[c] - m) * s;
            T dxhat = d[c] * w[c];
            sum_d += dxhat;
            sum_dx += dxhat * xhat;
        }
        sum_d /= C;
        sum_dx /= C;
        for (int c = 0; c < C; c++) {
            T xhat = (x[c] - m) * s;
            dx[c] += s * (d[c] * w[c] - sum_d - xhat * sum_dx);
        }
    }
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        const T* d = dout + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            dw[c] += d[c] * (x[c] - mean[i]) * rstd[i];
            db[c] += d[c];
        }
    }
    if (dsum)
        for (int i = 0; i < N; i++)
            for (int c = 0; c < C; c++) dsum[c] += dinp[(size_t)i * C + c];
}

}  // namespace cpu
