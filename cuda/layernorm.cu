// LayerNorm over the last dimension (eps 1e-5, biased variance), forward and backward.
// Forward: one warp per row. Backward: one kernel, a warp per row for dinp, and dw, db (sums
// over rows) by blocks of fixed rows whose partials the last block adds in order (common.cuh).
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kWarpsPerBlock = 8;

// out (N,C) = (inp - mean) * rstd * w + b ; mean, rstd (N) saved (either may be nullptr).
// E: the element type of out and inp; statistics and arithmetic in fp32.
template <class E>
__global__ void layernorm_forward_kernel(E* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const E* __restrict__ inp, const float* __restrict__ w,
                                         const float* __restrict__ b, int N, int C) {
    int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;  // whole warp leaves together
    const E* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += f32(x[c]);
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

// One kernel for the whole backward. Block k takes rows [k * kBackRows, ...): its warps add
//   dinp (N,C) += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w
// one row each at a time, then its threads sum the rows' dw and db terms (and dinp, for dsum)
// channel by channel into its partial (nq, C); the last block to finish adds the partials in
// block order into dw, db (and dsum): deterministic, one pass over dout and inp from DRAM.
constexpr int kBackRows = 128;
__device__ unsigned g_backward_count;  // last_block's ticket counter

template <class E>
__global__ void layernorm_backward_kernel(E* __restrict__ dinp, float* __restrict__ dw, float* __restrict__ db,
                                          float* __restrict__ dsum, float* __restrict__ partial,
                                          const E* __restrict__ dout, const E* __restrict__ inp,
                                          const float* __restrict__ w, const float* __restrict__ mean,
                                          const float* __restrict__ rstd, int N, int C) {
    const int r0 = blockIdx.x * kBackRows, r1 = min(N, r0 + kBackRows);
    const int lane = threadIdx.x & 31;
    for (int row = r0 + (threadIdx.x >> 5); row < r1; row += kWarpsPerBlock) {  // whole warps
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
    __syncthreads();  // dsum reads the block's dinp rows, written by other warps
    const int nq = dsum ? 3 : 2;
    float* part = partial + (size_t)blockIdx.x * nq * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float aw = 0.0f, ab = 0.0f, as = 0.0f;
        for (int row = r0; row < r1; row++) {
            const size_t i = (size_t)row * C + c;
            float d = f32(dout[i]);
            aw += d * (f32(inp[i]) - mean[row]) * rstd[row];
            ab += d;
            if (dsum) as += f32(dinp[i]);
        }
        part[c] = aw;
        part[C + c] = ab;
        if (dsum) part[2 * C + c] = as;
    }
    if (!last_block(&g_backward_count)) return;
    auto dst = [&](int k) -> float& {  // the partials' rows are dw, db, dsum
        if (k < C) return dw[k];
        return k < 2 * C ? db[k - C] : dsum[k - 2 * C];
    };
    add_partials(dst, partial, gridDim.x, nq * C);
}

}  // namespace

template <class A>
void layernorm_forward(A* out, float* mean, float* rstd, const A* inp, const float* w, const float* b, int N, int C,
                       cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    layernorm_forward_kernel<dev_t<A>><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(dev(out), mean, rstd, dev(inp), w,
                                                                                              b, N, C);
    cudaCheckLaunch();
}

template <class A>
void layernorm_backward(A* dinp, float* dw, float* db, float* dsum, const A* dout, const A* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    // The row blocks depend only on N (never on the device): the bits are the same on any GPU.
    const int blocks = ceil_div(N, kBackRows);
    static Scratch<float> s_partial;
    float* partial = s_partial.get((size_t)blocks * (dsum ? 3 : 2) * C);
    layernorm_backward_kernel<dev_t<A>><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        dev(dinp), dw, db, dsum, partial, dev(dout), dev(inp), w, mean, rstd, N, C);
    cudaCheckLaunch();
}

#define INSTANTIATE(A)                                                                                                 \
    template void layernorm_forward(A*, float*, float*, const A*, const float*, const float*, int, int, cudaStream_t); \
    template void layernorm_backward(A*, float*, float*, float*, const A*, const A*, const float*, const float*,       \
                                     const float*, int, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
