// RoPE on the packed qkv (B, T, 3C): q and k (the first 2C channels) have each adjacent
// pair (2j, 2j+1) of every head rotated by the angle of position t (row t of the
// precomputed cos/sin tables (maxT, D/2)); v (the last C channels) passes through.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// One thread per channel pair of a row: pairs 0..C-1 are q,k; pairs C..3C/2-1 are v.
// FORWARD: out = R x (overwrite). !FORWARD: out += R^T x (the backward, accumulating).
template <bool FORWARD>
__global__ void rope_kernel(float* __restrict__ out, const float* __restrict__ inp, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, int T, int C, int D, size_t total_pairs) {
    const size_t pairs_per_row = (size_t)3 * C / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total_pairs;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / pairs_per_row;
        int e = 2 * (int)(i % pairs_per_row);  // channel of the pair's first element, in [0, 3C)
        size_t idx = bt * 3 * C + e;
        float2 x = *reinterpret_cast<const float2*>(inp + idx);  // e even, 3C even -> 8-byte aligned
        float2 y;
        if (e < 2 * C) {
            int t = (int)(bt % T);
            int j = (e % D) / 2;
            float c = cos_t[(size_t)t * (D / 2) + j];
            float s = sin_t[(size_t)t * (D / 2) + j];
            if (FORWARD) {
                y.x = x.x * c - x.y * s;
                y.y = x.x * s + x.y * c;
            } else {  // transpose: rotate by -angle
                y.x = x.x * c + x.y * s;
                y.y = -x.x * s + x.y * c;
            }
        } else {
            y = x;
        }
        float2* o = reinterpret_cast<float2*>(out + idx);
        if (FORWARD) {
            *o = y;
        } else {
            float2 a = *o;
            a.x += y.x;
            a.y += y.y;
            *o = a;
        }
    }
}

}  // namespace

// The float2 accesses need 8-byte aligned base pointers (always true for cudaMalloc'd
// buffers at even float offsets, which is how the model slices them).
void rope_forward(float* out, const float* inp, const float* cos_t, const float* sin_t, int B, int T, int C, int H,
                  cudaStream_t stream) {
    size_t total = (size_t)B * T * 3 * C / 2;
    if (total == 0) return;
    rope_kernel<true><<<grid_for(total, 256), 256, 0, stream>>>(out, inp, cos_t, sin_t, T, C, C / H, total);
    cudaCheckLaunch();
}

void rope_backward(float* dinp, const float* dout, const float* cos_t, const float* sin_t, int B, int T, int C, int H,
                   cudaStream_t stream) {
    size_t total = (size_t)B * T * 3 * C / 2;
    if (total == 0) return;
    rope_kernel<false><<<grid_for(total, 256), 256, 0, stream>>>(dinp, dout, cos_t, sin_t, T, C, C / H, total);
    cudaCheckLaunch();
}

}  // namespace gpu
