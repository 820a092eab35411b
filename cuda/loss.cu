// Fused softmax + cross-entropy over the vocabulary, the classifier's loss step (model.h runs
// it on one chunk of rows at a time, between the LM head GEMM and its backward GEMMs).
// One block per row of ld >= V logits (the padded vocabulary): an online (running max,
// rescaled sum) pass gives log-sum-exp in a single read of the V real columns; the loss is
// logsumexp - z[target]; when dscale != 0 a second pass overwrites the row with
// dlogits = (softmax - onehot) * dscale, and 0 in the padded columns. Probabilities are never
// stored separately. The classifier_tile_* kernels do the same over tiles of the vocabulary
// (src/classifier.h: classifier_tiles), in two passes: per-row running (max, sum of exp) folded tile
// by tile, then dlogits tile by tile from the log-sum-exps.
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
    using Vec = Pack<E, W>;
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

// One warp per row of a tile z (N, w) of logit columns [v0, v0 + w): the row's (max, sum of exp)
// over the tile's columns < V, merged into m, s (set by the first tile, v0 == 0); losses keeps
// the target's logit (NaN for a target outside [0, V)). W columns per load (w % W == 0).
constexpr int kTileWarps = 8;
template <class E, int W>
__global__ void __launch_bounds__(32 * kTileWarps)
    classifier_tile_lse_kernel(const E* __restrict__ z, float* __restrict__ m, float* __restrict__ s,
                               float* __restrict__ losses, const int* __restrict__ targets, int N, int w, int v0,
                               int V) {
    const int row = blockIdx.x * kTileWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const E* zr = z + (size_t)row * w;
    const Pack<E, W>* zv = reinterpret_cast<const Pack<E, W>*>(zr);
    const int real = min(w, V - v0);  // the tile's columns that are classes
    float tm = -INFINITY, ts = 0.0f;
    for (int i = lane; i < w / W; i += 32) {
        const Pack<E, W> x = zv[i];
        for (int k = 0; k < W; k++)
            if (i * W + k < real) lse_push(tm, ts, f32(x.e[k]));
    }
    warp_lse(tm, ts);
    if (lane != 0) return;
    if (v0 == 0) {
        m[row] = tm, s[row] = ts, losses[row] = NAN;
    } else {
        float mm = m[row], ss = s[row];
        lse_merge(mm, ss, tm, ts);
        m[row] = mm, s[row] = ss;
    }
    const int t = targets[row];
    if (t >= v0 && t < v0 + real) losses[row] = f32(zr[t - v0]);
}

// m <- log-sum-exp = m + log s; losses <- log-sum-exp - the target's logit (in losses).
__global__ void classifier_tile_loss_kernel(float* __restrict__ losses, float* __restrict__ m,
                                            const float* __restrict__ s, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const float lse = m[i] + logf(s[i]);
    m[i] = lse;
    losses[i] = lse - losses[i];
}

// z (N, w) <- (softmax - onehot) * dscale from each row's log-sum-exp; 0 in columns >= V. W
// columns per access, w % W == 0 (an access never crosses a row).
template <class E, int W>
__global__ void classifier_tile_dlogits_kernel(E* __restrict__ z, const float* __restrict__ lse,
                                               const int* __restrict__ targets, int w, int v0, int V, float dscale,
                                               size_t packs) {
    Pack<E, W>* zv = reinterpret_cast<Pack<E, W>*>(z);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i * W / w;
        const int col = (int)(i * W % w);
        const float l = lse[row];
        const int t = targets[row];
        Pack<E, W> x = zv[i];
        for (int k = 0; k < W; k++) {
            const int v = v0 + col + k;
            float d = 0.0f;
            if (v < V) {
                d = expf(f32(x.e[k]) - l) * dscale;
                if (v == t) d -= dscale;
            }
            x.e[k] = from_f32<E>(d);
        }
        zv[i] = x;
    }
}

}  // namespace

template <class Act>
void classifier_tile_lse(const Act* z, float* m, float* s, float* losses, const int* targets, int N, int w, int v0, int V) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || w <= 0) return;
    using E = dev_t<Act>;
    const int blocks = ceil_div(N, kTileWarps), threads = 32 * kTileWarps;
    with_pack<E>(w, {z}, [&](auto pw) {
        classifier_tile_lse_kernel<E, decltype(pw)::value>
            <<<blocks, threads, 0, stream>>>(dev(z), m, s, losses, targets, N, w, v0, V);
    });
    cudaCheckLaunch();
}

void classifier_tile_loss(float* losses, float* m, const float* s, int N) {
    const cudaStream_t stream = main_stream();
    if (N <= 0) return;
    classifier_tile_loss_kernel<<<ceil_div(N, 256), 256, 0, stream>>>(losses, m, s, N);
    cudaCheckLaunch();
}

template <class Act>
void classifier_tile_dlogits(Act* z, const float* lse, const int* targets, int N, int w, int v0, int V, float dscale) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || w <= 0) return;
    using E = dev_t<Act>;
    const size_t n = (size_t)N * w;
    with_pack<E>(w, {z}, [&](auto pw) {
        constexpr int W = decltype(pw)::value;
        classifier_tile_dlogits_kernel<E, W>
            <<<grid_for(n / W, 256), 256, 0, stream>>>(dev(z), lse, targets, w, v0, V, dscale, n / W);
    });
    cudaCheckLaunch();
}

template <class Act>
void classifier_loss(Act* logits, float* losses, const int* targets, int N, int V, int ld, float dscale) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || V <= 0) return;
    if (ld < V) throw std::logic_error("classifier_loss: row stride ld < V");
    using E = dev_t<Act>;
    with_pack<E>(ld, {logits}, [&](auto pw) {
        classifier_loss_kernel<E, decltype(pw)::value>
            <<<N, kLossThreads, 0, stream>>>(dev(logits), losses, targets, V, ld, dscale);
    });
    cudaCheckLaunch();
}

template <class Act>
void classifier_head(Act* logits, float* losses, const int* targets, const Act* x, const Act* w, Act* dx, float* dw,
                     float* /*scratch*/, int N, int C, int V, int Vp, float dscale) {
    matmul_forward(logits, x, w, nullptr, N, C, Vp);  // (N, Vp)
    classifier_loss(logits, losses, targets, N, V, Vp, dscale);
    if (dscale != 0.0f) matmul_backward(dx, dw, nullptr, logits, x, w, N, C, Vp);
}

size_t classifier_head_scratch(int, int, int) {
    return 0;
}

GPU_INSTANTIATE(classifier_loss)
GPU_INSTANTIATE(classifier_tile_lse)
GPU_INSTANTIATE(classifier_tile_dlogits)
GPU_INSTANTIATE(classifier_head)

}  // namespace gpu
