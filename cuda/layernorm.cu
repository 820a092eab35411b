// LayerNorm over the last dimension (eps 1e-5, biased variance), forward and backward.
// Forward and the dinp part of backward: one warp per row. dw, db (sums over rows) use a
// deterministic two-stage column reduction: fixed row chunks -> partials -> fixed-order sum.
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

// dinp (N,C) += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w
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

// Stage 1 of dw/db: block (cx, chunk) sums rows [chunk*rows_per_chunk, ...) for 32 channels.
// threadIdx.x = channel within the 32, threadIdx.y = row phase. partial: (nchunks, 2, C).
constexpr int kColY = 8;
template <class E>
__global__ void layernorm_backward_dwdb_partial_kernel(float* __restrict__ partial, const E* __restrict__ dout,
                                                       const E* __restrict__ inp, const float* __restrict__ mean,
                                                       const float* __restrict__ rstd, int N, int C,
                                                       int rows_per_chunk) {
    __shared__ float sw[kColY][32], sb[kColY][32];
    int c = blockIdx.x * 32 + threadIdx.x;
    int chunk = blockIdx.y;
    int r0 = chunk * rows_per_chunk;
    int r1 = min(N, r0 + rows_per_chunk);
    float aw = 0.0f, ab = 0.0f;
    if (c < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += kColY) {
            float d = f32(dout[(size_t)r * C + c]);
            aw += d * (f32(inp[(size_t)r * C + c]) - mean[r]) * rstd[r];
            ab += d;
        }
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int y = 0; y < kColY; y++) {
            tw += sw[y][threadIdx.x];
            tb += sb[y][threadIdx.x];
        }
        partial[((size_t)chunk * 2 + 0) * C + c] = tw;
        partial[((size_t)chunk * 2 + 1) * C + c] = tb;
    }
}

// Stage 2: dw[c] += sum over chunks (in order) ; db likewise.
__global__ void layernorm_backward_dwdb_final_kernel(float* __restrict__ dw, float* __restrict__ db,
                                                     const float* __restrict__ partial, int nchunks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float tw = 0.0f, tb = 0.0f;
    for (int k = 0; k < nchunks; k++) {
        tw += partial[((size_t)k * 2 + 0) * C + c];
        tb += partial[((size_t)k * 2 + 1) * C + c];
    }
    dw[c] += tw;
    db[c] += tb;
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
void layernorm_backward(A* dinp, float* dw, float* db, const A* dout, const A* inp, const float* w, const float* mean,
                        const float* rstd, int N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    layernorm_backward_dinp_kernel<dev_t<A>><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(dev(dinp), dev(dout), dev(inp), w,
                                                                                                    mean, rstd, N, C);
    cudaCheckLaunch();

    // Chunk count depends only on N (never on the device), so the bits are reproducible
    // across GPUs too. ~64 rows per thread-row keeps enough blocks in flight.
    const int rows_per_chunk = 512;
    const int nchunks = ceil_div(N, rows_per_chunk);
    static Scratch<float> s_partial;
    float* partial = s_partial.get((size_t)nchunks * 2 * C);
    dim3 grid(ceil_div(C, 32), nchunks);
    dim3 block(32, kColY);
    layernorm_backward_dwdb_partial_kernel<dev_t<A>><<<grid, block, 0, stream>>>(partial, dev(dout), dev(inp), mean, rstd, N, C,
                                                                       rows_per_chunk);
    cudaCheckLaunch();
    layernorm_backward_dwdb_final_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dw, db, partial, nchunks, C);
    cudaCheckLaunch();
}

#define INSTANTIATE(A)                                                                                             \
    template void layernorm_forward(A*, float*, float*, const A*, const float*, const float*, int, int, cudaStream_t); \
    template void layernorm_backward(A*, float*, float*, const A*, const A*, const float*, const float*, const float*, \
                                     int, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
