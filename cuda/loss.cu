// Fused softmax + cross-entropy over the vocabulary. One block per row (N rows of V logits):
// an online (running max, rescaled sum) pass gives log-sum-exp in a single read; the loss
// is logsumexp - z[target]; when dscale != 0 a second pass overwrites the logits with
// dlogits = (softmax - onehot) * dscale. Probabilities are never stored separately.
#include <cmath>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kLossThreads = 512;

__global__ void __launch_bounds__(kLossThreads)
    softmax_crossentropy_kernel(float* __restrict__ logits, float* __restrict__ losses,
                                const int* __restrict__ targets, int V, float dscale) {
    __shared__ float sh_m[32], sh_s[32];
    __shared__ float sh_target_logit, sh_logsum;
    const int row = blockIdx.x;
    float* z = logits + (size_t)row * V;
    const int target = targets[row];
    const bool target_ok = target >= 0 && target < V;
    if (threadIdx.x == 0) sh_target_logit = target_ok ? z[target] : NAN;  // read before anything is overwritten

    // each thread: online max / sum over its strided columns
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        lse_push(m, s, z[v]);
    }
    // warp, then block, in a fixed tree order
    warp_lse(m, s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) {
        sh_m[warp] = m;
        sh_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sh_m[lane] : -INFINITY;
        s = lane < nwarps ? sh_s[lane] : 0.0f;
        warp_lse(m, s);
        if (lane == 0) {
            float logsum = logf(s) + m;
            sh_logsum = logsum;
            losses[row] = logsum - sh_target_logit;
        }
    }
    __syncthreads();  // also orders the target read before the overwrites below
    if (dscale != 0.0f) {
        const float logsum = sh_logsum;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            float d = expf(z[v] - logsum) * dscale;
            if (v == target) d -= dscale;
            z[v] = d;
        }
    }
}

}  // namespace

void softmax_crossentropy(float* logits, float* losses, const int* targets, int N, int V, float dscale) {
    if (N <= 0 || V <= 0) return;
    softmax_crossentropy_kernel<<<N, kLossThreads>>>(logits, losses, targets, V, dscale);
    cudaCheckLaunch();
}

}  // namespace gpu
