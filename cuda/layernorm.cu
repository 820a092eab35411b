// LayerNorm over the last dimension (eps 1e-5, biased variance), forward (alone, or with the
// residual add before it) and backward. Forward and the dinp part of backward: one warp per row.
// dw, db (sums over rows) in a second kernel: blocks of fixed rows, 16-byte loads where the rows
// allow, whose partial sums the last block adds in a fixed order (column_sums, common.cuh).
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kWarpsPerBlock = 8;

// out (N,C) = (x - mean) * rstd * w + b, with x = inp, or (y given) x = inp + (y + ybias): the
// residual add before the LayerNorm, fused with it and stored in res (as rounded to E, which
// the statistics read: the mean's sum as the row is written, the other passes from cache).
// mean, rstd (N) saved (either may be nullptr). E: the element type of the activations;
// statistics and arithmetic in fp32. (No __restrict__ on res and inp: the add may run in place.)
template <class E>
__global__ void layernorm_forward_kernel(E* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         E* res, const E* inp, const E* __restrict__ y, const float* __restrict__ ybias,
                                         const float* __restrict__ w, const float* __restrict__ b, int N, int C) {
    int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;  // whole warp leaves together
    const E* x = inp + (size_t)row * C;
    float s = 0.0f;
    if (y) {  // each lane reads back below only the elements it writes here
        E* rr = res + (size_t)row * C;
        const E* yr = y + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            float yb[1];
            biased_pack(yb, yr, ybias, c, c);
            const E e = from_f32<E>(f32(x[c]) + yb[0]);
            rr[c] = e;
            s += f32(e);
        }
        x = rr;
    } else {
        for (int c = lane; c < C; c += 32) s += f32(x[c]);
    }
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = f32(x[c]) - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    E* o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f32<E>((f32(x[c]) - m) * r * w[c] + b[c]);
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

// dinp (N,C) += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w;
// one warp per row, every row in flight at once.
template <class E>
__global__ void layernorm_backward_dinp_kernel(E* __restrict__ dinp, const E* __restrict__ dout,
                                               const E* __restrict__ inp, const float* __restrict__ w,
                                               const float* __restrict__ mean, const float* __restrict__ rstd, int N,
                                               int C) {
    int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const E* x = inp + (size_t)row * C;
    const E* d = dout + (size_t)row * C;
    E* dx = dinp + (size_t)row * C;
    float m = mean[row], r = rstd[row];
    float sd = 0.0f, sdx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float xhat = (f32(x[c]) - m) * r;
        float dxhat = f32(d[c]) * w[c];
        sd += dxhat;
        sdx += dxhat * xhat;
    }
    sd = warp_sum(sd) / C;
    sdx = warp_sum(sdx) / C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (f32(x[c]) - m) * r;
        dx[c] = from_f32<E>(f32(dx[c]) + r * (f32(d[c]) * w[c] - sd - xhat * sdx));
    }
}

// The sums over rows, after dinp (column_sums, common.cuh): dw (C) += sum dout * xhat,
// db += sum dout and (NQ = 3) dsum += sum dinp; W columns at a time.
template <class E, int NQ, int W>
struct BackwardTerms {
    const E *dinp, *dout, *inp;
    const float *mean, *rstd;
    __device__ void operator()(size_t i, int r, int, float (&v)[NQ][W]) const {
        const Pack<E, W> d = load_pack<E, W>(dout, i), x = load_pack<E, W>(inp, i);
        const float m = mean[r], s = rstd[r];
        for (int k = 0; k < W; k++) {
            v[0][k] = f32(d.e[k]) * (f32(x.e[k]) - m) * s;
            v[1][k] = f32(d.e[k]);
        }
        if constexpr (NQ == 3) {
            const Pack<E, W> g = load_pack<E, W>(dinp, i);
            for (int k = 0; k < W; k++) v[2][k] = f32(g.e[k]);
        }
    }
};
struct BackwardSums {
    float *dw, *db, *dsum;
    __device__ float& operator()(int q, int c) const { return q == 0 ? dw[c] : q == 1 ? db[c] : dsum[c]; }
};

}  // namespace

template <class Act>
void residual_layernorm_forward(Act* res, Act* out, float* mean, float* rstd, const Act* x, const Act* y, const float* ybias, const float* w, const float* b, int N, int C) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || C <= 0) return;
    layernorm_forward_kernel<dev_t<Act>><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        dev(out), mean, rstd, dev(res), dev(x), dev(y), ybias, w, b, N, C);
    cudaCheckLaunch();
}

template <class Act>
void layernorm_forward(Act* out, float* mean, float* rstd, const Act* inp, const float* w, const float* b, int N, int C) {
    residual_layernorm_forward<Act>(nullptr, out, mean, rstd, inp, nullptr, nullptr, w, b, N, C);
}

template <class Act>
void layernorm_backward(Act* dinp, float* dw, float* db, float* dsum, const Act* dout, const Act* inp, const float* w, const float* mean, const float* rstd, int N, int C) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || C <= 0) return;
    layernorm_backward_dinp_kernel<dev_t<Act>><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        dev(dinp), dev(dout), dev(inp), w, mean, rstd, N, C);
    cudaCheckLaunch();

    using E = dev_t<Act>;
    with_pack<E>(C, {dinp, dout, inp}, [&](auto pw) {
        constexpr int W = decltype(pw)::value;
        const BackwardSums sums{dw, db, dsum};
        if (dsum)
            column_sums<3, W>(sums, N, C, BackwardTerms<E, 3, W>{dev(dinp), dev(dout), dev(inp), mean, rstd}, stream);
        else
            column_sums<2, W>(sums, N, C, BackwardTerms<E, 2, W>{dev(dinp), dev(dout), dev(inp), mean, rstd}, stream);
    });
}

GPU_INSTANTIATE(layernorm_forward)
GPU_INSTANTIATE(residual_layernorm_forward)
GPU_INSTANTIATE(layernorm_backward)

}  // namespace gpu
