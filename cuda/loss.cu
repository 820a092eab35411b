// Fused softmax + cross-entropy over the vocabulary, the classifier's loss step (model.h runs
// it on one chunk of rows at a time, between the LM head GEMM and its backward GEMMs).
// One block per row of ld >= V logits (the padded vocabulary): an online (running max,
// rescaled sum) pass gives log-sum-exp in a single read of the V real columns; the loss is
// logsumexp - z[target]; when dscale != 0 a second pass overwrites the row with
// dlogits = (softmax - onehot) * dscale, and 0 in the padded columns. Probabilities are never
// stored separately.
#include <cmath>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kLossThreads = 512;

// E: the logits' element type; W columns per load: 16 bytes (ld % W == 0 and 16-byte aligned
// rows) or 1. Columns at or past V (the padding) are skipped by the reduction and written as
// 0. The max, the sums and the loss are fp32.
template <class E, int W>
__global__ void __launch_bounds__(kLossThreads)
    classifier_loss_kernel(E* __restrict__ logits, float* __restrict__ losses, const int* __restrict__ targets, int V,
                           int ld, float dscale) {
    struct alignas(sizeof(E) * W) Vec {
        E e[W];
    };
    __shared__ float sh_m[32], sh_s[32];
    __shared__ float sh_target_logit, sh_logsum;
    const int row = blockIdx.x;
    E* z = logits + (size_t)row * ld;
    Vec* zv = reinterpret_cast<Vec*>(z);
    const int nvec = ld / W;
    const int target = targets[row];
    const bool target_ok = target >= 0 && target < V;
    if (threadIdx.x == 0) sh_target_logit = target_ok ? f32(z[target]) : NAN;  // read before anything is overwritten

    // each thread: online max / sum over its strided columns
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        Vec x = zv[i];
        for (int k = 0; k < W; k++)
            if (i * W + k < V) lse_push(m, s, f32(x.e[k]));
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
        for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
            Vec x = zv[i];
            for (int k = 0; k < W; k++) {
                const int v = i * W + k;
                float d = v < V ? expf(f32(x.e[k]) - logsum) * dscale : 0.0f;
                if (v == target) d -= dscale;
                x.e[k] = from_f32<E>(d);
            }
            zv[i] = x;
        }
    }
}

}  // namespace

template <class A>
void classifier_loss(A* logits, float* losses, const int* targets, int N, int V, int ld, float dscale,
                     cudaStream_t stream) {
    if (N <= 0 || V <= 0) return;
    if (ld < V) throw std::logic_error("classifier_loss: row stride ld < V");
    using E = dev_t<A>;
    constexpr int W = 16 / sizeof(E);
    if (ld % W == 0 && (reinterpret_cast<uintptr_t>(logits) & 15u) == 0)
        classifier_loss_kernel<E, W><<<N, kLossThreads, 0, stream>>>(dev(logits), losses, targets, V, ld, dscale);
    else
        classifier_loss_kernel<E, 1><<<N, kLossThreads, 0, stream>>>(dev(logits), losses, targets, V, ld, dscale);
    cudaCheckLaunch();
}

template <class A>
void softmax_crossentropy(A* logits, float* losses, const int* targets, int N, int V, float dscale,
                          cudaStream_t stream) {
    classifier_loss(logits, losses, targets, N, V, V, dscale, stream);
}

#define INSTANTIATE(A)                                                                                   \
    template void classifier_loss(A*, float*, const int*, int, int, int, float, cudaStream_t);          \
    template void softmax_crossentropy(A*, float*, const int*, int, int, float, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
