// LayerNorm over the last dimension (eps 1e-5, biased variance), forward and backward.
// Forward and the dinp part of backward: one warp per row. dw, db (sums over rows) use a
// deterministic two-stage column reduction: fixed row chunks -> partials -> fixed-order sum.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kWarpsPerBlock = 8;

// out (N,C) = (inp - mean) * rstd * w + b ; mean, rstd (N) saved (either may be nullptr)
__global__ void layernorm_forward_kernel(float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const float* __restrict__ inp, const float* __restrict__ w,
                                         const float* __restrict__ b, int N, int C) {
    int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;  // whole warp leaves together
    const float* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    float* o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * r * w[c] + b[c];
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

// dinp (N,C) += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w
__global__ void layernorm_backward_dinp_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                               const float* __restrict__ inp, const float* __restrict__ w,
                                               const float* __restrict__ mean, const float* __restrict__ rstd, int N,
                                               int C) {
    int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float* x = inp + (size_t)row * C;
    const float* d = dout + (size_t)row * C;
    float* dx = dinp + (size_t)row * C;
    float m = mean[row], r = rstd[row];
    float sd = 0.0f, sdx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float xhat = (x[c] - m) * r;
        float dxhat = d[c] * w[c];
        sd += dxhat;
        sdx += dxhat * xhat;
    }
    sd = warp_sum(sd) / C;
    sdx = warp_sum(sdx) / C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (x[c] - m) * r;
        dx[c] += r * (d[c] * w[c] - sd - xhat * sdx);
    }
}

// Stage 1 of dw/db: block (cx, chunk) sums rows [chunk*rows_per_chunk, ...) for 32 channels.
// threadIdx.x = channel within the 32, threadIdx.y = row phase. partial: (nchunks, 2, C).
constexpr int kColY = 8;
__global__ void layernorm_backward_dwdb_partial_kernel(float* __restrict__ partial, const float* __restrict__ dout,
                                                       const float* __restrict__ inp, const float* __restrict__ mean,
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
            float d = dout[(size_t)r * C + c];
            aw += d * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
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

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                       int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    layernorm_forward_kernel<<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(out, mean, rstd, inp, w,
                                                                                              b, N, C);
    cudaCheckLaunch();
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    layernorm_backward_dinp_kernel<<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(dinp, dout, inp, w,
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
    layernorm_backward_dwdb_partial_kernel<<<grid, block, 0, stream>>>(partial, dout, inp, mean, rstd, N, C,
                                                                       rows_per_chunk);
    cudaCheckLaunch();
    layernorm_backward_dwdb_final_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dw, db, partial, nchunks, C);
    cudaCheckLaunch();
}

}  // namespace gpu
