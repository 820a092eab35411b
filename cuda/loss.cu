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
#include "mma.cuh"

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

// ---- the fused head (--classifier fused): logits on tensor cores, never in memory ----------
// The rows x (N, C) of the final LayerNorm against wte's rows w (Vp, C), C = D in 32, 64, 128,
// on mma.cuh's products (bf16, or tf32 for fp32 activations). Each kernel computes its 16 x
// 64 tiles of logits z = x w^T again, in fp32 registers: the forward per block of 64 rows over
// all classes (online max and sum of exp, base 2, as flash attention; the target's logit); the
// backward's two kernels from those log-sum-exps, each owning its output (no atomics): d x per
// block of rows, summing d w over the classes, and d w per block of classes, summing d^T x over
// the rows, where d = (softmax - onehot) * dscale. Columns >= V are not classes: their tiles are
// skipped, their columns in the last tile masked. Every tile of classes is computed: none is left
// out where its probabilities round to zero (as Cut Cross-Entropy may), so nothing but the order
// of the sums and the operands' rounding differs from the logits head. One tile of rows in shared
// memory at a time (68 KB for two at D = 128 in fp32, past the 48 KB of a static allocation).
template <int D, class X>
using FusedTile = X[kMmaRows][D + kPad<X>];

// The block's 64 rows of x (rows >= n zeros), loaded through tile: the warp's A operands xa, the
// lane's two rows (g, g + 8) and, with targets, theirs (-1 past n).
template <int D, class X>
struct FusedRows {
    uint32_t xa[D / kMmaK<X>][4];
    int row[2], tg[2];
    __device__ FusedRows(FusedTile<D, X>& tile, const X* x, const int* targets, int n) {
        constexpr int K = kMmaK<X>;
        const int row0 = blockIdx.x * kMmaRows, w = threadIdx.x / 32;
        load_rows<D>(tile, x, row0, n, D);
        __syncthreads();
        for (int k = 0; k < D / K; k++) load_a(xa[k], &tile[16 * w][K * k], D + kPad<X>);
        for (int r = 0; r < 2; r++) {
            row[r] = row0 + 16 * w + threadIdx.x % 32 / 4 + 8 * r;
            tg[r] = targets && row[r] < n ? targets[row[r]] : -1;
        }
    }
};

// grid ceil(N / 64): lse (N) each row's log-sum-exp, losses (N) it less the target's logit (NaN
// for a target outside [0, V)).
template <int D, class X>
__global__ void __launch_bounds__(kMmaThreads, 1)
    classifier_fused_forward_kernel(float* __restrict__ losses, float* __restrict__ lse,
                                    const int* __restrict__ targets, const X* __restrict__ x, const X* __restrict__ w,
                                    int N, int V) {
    __shared__ alignas(16) FusedTile<D, X> tile;
    const FusedRows<D, X> a(tile, x, targets, N);
    const int t = threadIdx.x % 4;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, zt[2] = {0.0f, 0.0f};  // m: base 2
    for (int v0 = 0; v0 < V; v0 += kMmaRows) {
        __syncthreads();  // the previous tile is read
        load_rows<D>(tile, w, v0, V, D);
        __syncthreads();
        float z[kTiles8][4] = {};
        mma_xyt<D>(z, a.xa, tile);  // the warp's rows' logits of the tile's classes
        float mt[2] = {-INFINITY, -INFINITY};
        for (int n = 0; n < kTiles8; n++)
            for (int i = 0; i < 4; i++) {
                const int v = v0 + 8 * n + 2 * t + (i & 1);
                if (v >= V) z[n][i] = -INFINITY;
                if (v == a.tg[i / 2]) zt[i / 2] = z[n][i];  // one lane of the quad holds it
                mt[i / 2] = fmaxf(mt[i / 2], z[n][i]);
            }
        for (int r = 0; r < 2; r++) {
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));  // finite: class v0 < V is here
            const float mn = fmaxf(m[r], mt[r] * kLog2e);
            l[r] *= exp2f(m[r] - mn);
            m[r] = mn;
        }
        for (int n = 0; n < kTiles8; n++)
            for (int i = 0; i < 4; i++) l[i / 2] += exp2f(fmaf(z[n][i], kLog2e, -m[i / 2]));
    }
    for (int r = 0; r < 2; r++) {
        l[r] = quad_sum(l[r]), zt[r] = quad_sum(zt[r]);
        if (a.row[r] >= N || t != 0) continue;
        const float e = (m[r] + log2f(l[r])) * kLn2;
        lse[a.row[r]] = e;
        losses[a.row[r]] = a.tg[r] >= 0 && a.tg[r] < V ? e - zt[r] : NAN;
    }
}

// d (softmax - onehot) * dscale of logit z of a row with log-sum-exp lse2 (base 2) and target
// tg, at class v (0 for v >= V)
__device__ inline float fused_dlogit(float z, float lse2, int v, int tg, int V, float dscale) {
    if (v >= V) return 0.0f;
    return (exp2f(fmaf(z, kLog2e, -lse2)) - (v == tg ? 1.0f : 0.0f)) * dscale;
}

// grid ceil(N / 64): dx (N, C) = d w, overwritten.
template <int D, class X>
__global__ void __launch_bounds__(kMmaThreads, 1)
    classifier_fused_dx_kernel(X* __restrict__ dx, const float* __restrict__ lse, const int* __restrict__ targets,
                               const X* __restrict__ x, const X* __restrict__ w, int N, int V, float dscale) {
    __shared__ alignas(16) FusedTile<D, X> tile;
    const FusedRows<D, X> a(tile, x, targets, N);
    const int t = threadIdx.x % 4;
    float lse2[2], acc[D / 8][4] = {};
    for (int r = 0; r < 2; r++) lse2[r] = a.row[r] < N ? lse[a.row[r]] * kLog2e : 0.0f;
    for (int v0 = 0; v0 < V; v0 += kMmaRows) {
        __syncthreads();
        load_rows<D>(tile, w, v0, V, D);
        __syncthreads();
        float z[kTiles8][4] = {};
        mma_xyt<D>(z, a.xa, tile);
        for (int n = 0; n < kTiles8; n++)
            for (int i = 0; i < 4; i++)
                z[n][i] = fused_dlogit(z[n][i], lse2[i / 2], v0 + 8 * n + 2 * t + (i & 1), a.tg[i / 2], V, dscale);
        mma_xy<D>(acc, z, tile);  // dx += d w
    }
    for (int r = 0; r < 2; r++)
        if (a.row[r] < N) store_row<D>(dx + (size_t)a.row[r] * D, acc, r, 1.0f);
}

// d w of a block: rows of x in parts of kFusedCols, so that d's part lives beside the
// accumulators (as flash attention's dK, dV).
constexpr int kFusedCols = 16;
template <int D, class X>
struct alignas(16) FusedDwTiles {
    FusedTile<D, X> x;
    float lse2[kMmaRows];
    int tg[kMmaRows];
};

// grid ceil(V / 64): dw (Vp, C) += d^T x on the rows of classes < V.
template <int D, class X>
__global__ void __launch_bounds__(kMmaThreads, 1)
    classifier_fused_dw_kernel(float* __restrict__ dw, const float* __restrict__ lse, const int* __restrict__ targets,
                               const X* __restrict__ x, const X* __restrict__ w, int N, int V, float dscale) {
    __shared__ FusedDwTiles<D, X> sm;
    const FusedRows<D, X> cls(sm.x, w, nullptr, V);  // the block's classes: rows of w
    const int t = threadIdx.x % 4;
    float acc[D / 8][4] = {};
    for (int i0 = 0; i0 < N; i0 += kMmaRows) {
        __syncthreads();
        load_rows<D>(sm.x, x, i0, N, D);
        for (int i = threadIdx.x; i < kMmaRows; i += kMmaThreads) {
            sm.lse2[i] = i0 + i < N ? lse[i0 + i] * kLog2e : 0.0f;
            sm.tg[i] = i0 + i < N ? targets[i0 + i] : -1;
        }
        __syncthreads();
#pragma unroll 1  // one part's d lives at a time
        for (int c0 = 0; c0 < kMmaRows; c0 += kFusedCols) {
            constexpr int P = kFusedCols;
            float d[P / 8][4] = {};
            mma_xyt<D, P>(d, cls.xa, sm.x + c0);  // z^T = w x^T
            for (int n = 0; n < P / 8; n++)
                for (int i = 0; i < 4; i++) {
                    const int c = c0 + 8 * n + 2 * t + (i & 1);  // row i0 + c of x
                    d[n][i] =
                        i0 + c < N ? fused_dlogit(d[n][i], sm.lse2[c], cls.row[i / 2], sm.tg[c], V, dscale) : 0.0f;
                }
            mma_xy<D, P>(acc, d, sm.x + c0);  // dw += d^T x
        }
    }
    for (int r = 0; r < 2; r++)
        if (cls.row[r] < V) add_row<D>(dw + (size_t)cls.row[r] * D, acc, r);
}

// with_size for the widths the fused kernels are instantiated for
template <class F>
bool with_fused_width(int C, F f) {
    return with_size<32, 64, 128>(C, f);
}

}  // namespace

template <class Act>
void classifier_tile_lse(const Act* z, float* m, float* s, float* losses, const int* targets, int N, int w, int v0,
                         int V) {
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

std::string classifier_fused_unsupported(int C, bool bf16) {
    if (!with_fused_width(C, [](auto) {}))
        return "the fused LM head (--classifier fused) takes n_embd 32, 64 or 128 on the GPU, got " +
               std::to_string(C) + " (use --classifier logits)";
    if (!bf16 && !tf32_enabled())
        return "the fused LM head (--classifier fused) multiplies on tensor cores: it needs --precision bf16 or "
               "--tf32 1 (use --classifier logits for plain fp32)";
    return "";
}

template <class Act>
void classifier_fused(float* losses, float* lse, const int* targets, const Act* x, const Act* w, Act* dx, float* dw,
                      int N, int C, int V, int /*Vp*/, float dscale) {
    const cudaStream_t stream = main_stream();
    if (N <= 0) return;
    using X = dev_t<Act>;
    const std::string why = classifier_fused_unsupported(C, is_bf16<X>);
    if (!why.empty()) throw std::runtime_error(why);
    if (!packs_fit<X>(C, {x, w, dx})) throw std::logic_error("classifier_fused: buffers not 16-byte aligned");
    const unsigned rows = (unsigned)ceil_div(N, kMmaRows), classes = (unsigned)ceil_div(V, kMmaRows);
    with_fused_width(C, [&](auto width) {
        constexpr int D = decltype(width)::value;
        classifier_fused_forward_kernel<D, X>
            <<<rows, kMmaThreads, 0, stream>>>(losses, lse, targets, dev(x), dev(w), N, V);
        cudaCheckLaunch();
        if (dscale == 0.0f) return;
        classifier_fused_dx_kernel<D, X>
            <<<rows, kMmaThreads, 0, stream>>>(dev(dx), lse, targets, dev(x), dev(w), N, V, dscale);
        cudaCheckLaunch();
        classifier_fused_dw_kernel<D, X>
            <<<classes, kMmaThreads, 0, stream>>>(dw, lse, targets, dev(x), dev(w), N, V, dscale);
        cudaCheckLaunch();
    });
}

GPU_INSTANTIATE(classifier_loss)
GPU_INSTANTIATE(classifier_tile_lse)
GPU_INSTANTIATE(classifier_tile_dlogits)
GPU_INSTANTIATE(classifier_head)
GPU_INSTANTIATE(classifier_fused)

}  // namespace gpu
