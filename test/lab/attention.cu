// Kernel lab: causal attention, forward and backward, every version side by side.
//   1 cublas           the reference: cuBLAS GEMMs + softmax kernels, (B,H,T,T) probabilities (TF32)
//   2 flash            fused fp32 flash kernels, log-sum-exp saved (cuda/attention.cu; the trainer's fp32
//                      kernels with TF32 off, and at the head sizes without a tensor-core kernel)
//   3 flash-bf16       --precision bf16: qkv, out and their gradients in bf16, mma.sync tensor-core
//                      flash kernels (head sizes 16, 32, 64; others run version 2's kernels on bf16)
//   4 rope+flash       forward with RoPE as the trainer runs it: the rope kernel over qkv, then version 2
//   5 flash-rope-load  forward of version 2 rotating q and k as they are loaded (no rotated copy of qkv);
//                      CRoPE rotates its projections' output the same way, so this serves both schemes
//   6 cublas-bf16      version 1 on bf16 activations: scores, probabilities and their gradients in bf16
//                      (against version 3, what flash saves in bf16)
//   7 flash-bf16-wmma  version 3's earlier kernels: WMMA tiles, the softmax and the accumulators
//                      through shared memory (against version 3, what keeping them in registers gains)
//   8 flash-tf32       fp32 activations with TF32 on (the trainer's fp32 default): version 3's kernels on
//                      tf32 operands, mma.sync m16n8k8 (head sizes 16, 32, 64; others run version 2)
//   9 flash-tf32-alibi version 8 with ALiBi's bias (--pos alibi; against version 8, what the bias costs)
//  10 flash-bf16-alibi version 3 with ALiBi's bias
// Versions 4 and 5 are forward only (the backward would rotate dq and dk back as they are stored).
// The trainer's versions (1, 2, 3, 6, 8, 9, 10) are checked with ALiBi's bias and without.
// TFLOP/s counts the causal half only: forward 2 GEMMs of B*H*T*T/2*D multiply-adds,
// backward 2.5 times that (FlashAttention's convention).
// Usage: attention [--B 16] [--T 1024] [--H 4] [--D 32] [--reps 20] [--version N]
#include <mma.h>

#include "lab.cuh"
#include "ops/attention.h"
#include "ops/rope.h"
#include "pos.h"

namespace {

struct Shape {
    int B, T, H, D;
    int C() const { return H * D; }
    size_t nqkv() const { return (size_t)B * T * 3 * C(); }
    size_t nout() const { return (size_t)B * T * C(); }
    size_t natt() const { return (size_t)B * H * T * T; }
};

// ---- version 5: flash forward with RoPE applied at load ----------------------------------
// The fp32 flash forward of cuda/attention.cu (same tiling: kQuad threads per query row,
// kRows rows per block, key/value tiles of kTile rows up to the diagonal), reading q and k
// from the unrotated qkv and rotating each element as it is loaded: element d of a pair
// (2j, 2j+1) needs its partner, both read from global memory (the partner is in the same
// 32-byte sector, so no extra traffic).
constexpr int kQuad = 4, kRows = 64, kTile = 32, kThreads = kRows * kQuad;

// Element d of x (one head's q or k at a position whose cos/sin rows are c, s), rotated.
__device__ inline float rotated(const float* x, int d, const float* c, const float* s) {
    const int j = d / 2;
    return d % 2 == 0 ? x[d] * c[j] - x[d + 1] * s[j] : x[d - 1] * s[j] + x[d] * c[j];
}

// grid (B*H, ceil(T/kRows)). out (B,T,C), lse (B,H,T), qkv (B,T,3C) unrotated, cos_t/sin_t (T, D/2).
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_rope_kernel(float* __restrict__ out, float* __restrict__ lse, const float* __restrict__ qkv,
                              const float* __restrict__ cos_t, const float* __restrict__ sin_t, int T, int C, int H,
                              float scale) {
    constexpr int E = D / kQuad;
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kRows, t = row0 + threadIdx.x / kQuad;
    const size_t C3 = 3 * (size_t)C;
    const float* base = qkv + (size_t)b * T * C3 + h * D;
    float q[E], o[E];
    for (int e = 0; e < E; e++) {
        q[e] = t < T ? rotated(base + t * C3, r + kQuad * e, cos_t + t * (D / 2), sin_t + t * (D / 2)) * scale : 0.0f;
        o[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int kend = min(T, row0 + kRows);
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
            const int j = i / D, d = i % D, tk = k0 + j;
            const float* row = base + (size_t)tk * C3;
            ks[j][d] = tk < T ? rotated(row + C, d, cos_t + tk * (D / 2), sin_t + tk * (D / 2)) : 0.0f;
            vs[j][d] = tk < T ? row[2 * C + d] : 0.0f;
        }
        __syncthreads();
        float s[kTile], mt = m;
#pragma unroll
        for (int j = 0; j < kTile; j++) {
            float p = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) p += q[e] * ks[j][r + kQuad * e];
            p += __shfl_xor_sync(0xffffffffu, p, 1);
            p += __shfl_xor_sync(0xffffffffu, p, 2);
            s[j] = k0 + j <= t ? p : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        float alpha = expf(m - mt);
        l *= alpha;
        for (int e = 0; e < E; e++) o[e] *= alpha;
#pragma unroll
        for (int j = 0; j < kTile; j++) {
            float p = expf(s[j] - mt);
            l += p;
#pragma unroll
            for (int e = 0; e < E; e++) o[e] += p * vs[j][r + kQuad * e];
        }
        m = mt;
    }
    if (t >= T) return;
    float* o_t = out + ((size_t)b * T + t) * C + h * D;
    for (int e = 0; e < E; e++) o_t[r + kQuad * e] = o[e] / l;
    if (r == 0) lse[(size_t)bh * T + t] = m + logf(l);
}

void flash_forward_rope(float* out, float* lse, const float* qkv, const float* cos_t, const float* sin_t,
                        const Shape& s) {
    const dim3 grid((unsigned)(s.B * s.H), (unsigned)gpu::ceil_div(s.T, kRows));
    const float scale = 1.0f / sqrtf((float)s.D);
    switch (s.D) {
        case 16:
            flash_forward_rope_kernel<16><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        case 32:
            flash_forward_rope_kernel<32><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        case 64:
            flash_forward_rope_kernel<64><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        default:
            throw std::runtime_error("flash-rope-load supports head sizes 16, 32 and 64, got " + std::to_string(s.D));
    }
    cudaCheckLaunch();
}

// ---- version 7: flash-bf16 on WMMA ----------------------------------------------------------
// The trainer's earlier tensor-core kernels (until version 3's mma.sync kernels replaced them),
// kept to time against them. bf16 activations with D = 16, 32 or 64. Each warp owns 16 rows; the products (S = Q K^T,
// P V, dP = dO V^T, P^T dO, dS^T Q, dS K) are 16x16x16 bf16 WMMA tiles with fp32 accumulation
// (fp32 softmax and accumulators; out and dqkv rounded to bf16 once, at the store; P and dS
// rounded to bf16 as WMMA operands). The fragment layout is
// opaque, so the softmax and the accumulators go through the warp's fp32 shared tiles:
// lane pair (2r, 2r+1) owns row r, each lane half of its columns.
namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;
constexpr int kWarpRows = 16, kWmmaWarps = 4, kWmmaRows = kWarpRows * kWmmaWarps, kWmmaThreads = 32 * kWmmaWarps;

// c (16 x N, ld ldc, fp32) = [c +] a (16 x K, row-major, ld lda) b, where b (K x N) is
// row-major at b (ld ldb) or, with bt, the transpose of a row-major (N x K) matrix at b.
template <int N, int K, bool bt>
__device__ inline void warp_mma(float* c, int ldc, bool accumulate, const bf16* a, int lda, const bf16* b, int ldb) {
    for (int n = 0; n < N; n += 16) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        if (accumulate)
            wmma::load_matrix_sync(acc, c + n, ldc, wmma::mem_row_major);
        else
            wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < K; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, a + k, lda);
            if constexpr (bt) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, b + (size_t)n * ldb + k, ldb);
                wmma::mma_sync(acc, fa, fb, acc);
            } else {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
                wmma::load_matrix_sync(fb, b + (size_t)k * ldb + n, ldb);
                wmma::mma_sync(acc, fa, fb, acc);
            }
        }
        wmma::store_matrix_sync(c + n, acc, ldc, wmma::mem_row_major);
    }
}

// rows [t0, t0 + R) of one head's D columns (offset col of a (T, ld) matrix); zeros past T
template <int R, int D>
__device__ inline void load_tile_bf16(bf16 (*tile)[D], const bf16* base, int t0, int T, size_t ld, int col) {
    for (int i = threadIdx.x; i < R * D; i += blockDim.x) {
        int j = i / D, d = i % D;
        tile[j][d] = t0 + j < T ? base[(size_t)(t0 + j) * ld + col + d] : __float2bfloat16_rn(0.0f);
    }
}

// Shared memory of the kernels below: WMMA pointers must be 32-byte aligned (every array's
// size is a multiple of 32 bytes).
template <int D>
struct alignas(32) ForwardTiles {
    bf16 qs[kWmmaRows][D], ks[kTile][D], vs[kTile][D], ps[kWmmaWarps][kWarpRows][kTile];
    float ss[kWmmaWarps][kWarpRows][kTile], os[kWmmaWarps][kWarpRows][D];
};

// grid (B*H, ceil(T/kWmmaRows)); kTile keys per step.
template <int D>
__global__ void __launch_bounds__(kWmmaThreads)
    flash_forward_wmma_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ qkv, int T,
                              int C, int H, float scale) {
    __shared__ ForwardTiles<D> sm;
    auto& qs = sm.qs;
    auto& ks = sm.ks;
    auto& vs = sm.vs;
    auto& ps = sm.ps;
    auto& ss = sm.ss;
    auto& os = sm.os;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kWmmaRows;  // longest rows first
    const int r = lane / 2, half = lane % 2, t = row0 + w * kWarpRows + r;
    const size_t C3 = 3 * (size_t)C;
    const bf16* base = qkv + (size_t)b * T * C3 + h * D;
    load_tile_bf16<kWmmaRows, D>(qs, base, row0, T, C3, 0);
    for (int d = half * D / 2; d < (half + 1) * D / 2; d++) os[w][r][d] = 0.0f;
    float m = -INFINITY, l = 0.0f;  // row r's running max and sum (both lanes of the pair)
    const int kend = min(T, row0 + kWmmaRows);
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        load_tile_bf16<kTile, D>(ks, base, k0, T, C3, C);
        load_tile_bf16<kTile, D>(vs, base, k0, T, C3, 2 * C);
        __syncthreads();
        warp_mma<kTile, D, true>(&ss[w][0][0], kTile, false, &qs[w * kWarpRows][0], D, &ks[0][0], D);  // S = Q K^T
        __syncwarp();
        constexpr int kHalf = kTile / 2;
        float mt = m;
        for (int c = half * kHalf; c < (half + 1) * kHalf; c++) {
            float x = k0 + c <= t ? ss[w][r][c] * scale : -INFINITY;
            ss[w][r][c] = x;
            mt = fmaxf(mt, x);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));  // finite: key 0 is in the first tile
        float alpha = expf(m - mt), sum = 0.0f;
        for (int c = half * kHalf; c < (half + 1) * kHalf; c++) {
            float p = expf(ss[w][r][c] - mt);
            sum += p;
            ps[w][r][c] = __float2bfloat16(p);
        }
        l = l * alpha + sum + __shfl_xor_sync(0xffffffffu, sum, 1);
        m = mt;
        for (int d = half * D / 2; d < (half + 1) * D / 2; d++) os[w][r][d] *= alpha;
        __syncwarp();
        warp_mma<D, kTile, false>(&os[w][0][0], D, true, &ps[w][0][0], kTile, &vs[0][0], D);  // O += P V
        __syncwarp();
    }
    if (t >= T) return;
    bf16* o_t = out + ((size_t)b * T + t) * C + h * D;
    for (int d = half * D / 2; d < (half + 1) * D / 2; d++) o_t[d] = __float2bfloat16_rn(os[w][r][d] / l);
    if (half == 0) lse[(size_t)bh * T + t] = m + logf(l);
}

// Backward tiles: a warp's 16 x 16 scores and dP share its fp32 scratch with the 16 x D
// products that are added into the lanes' register accumulators.
template <int D>
constexpr int kScratchFloats = 16 * D > 2 * 256 ? 16 * D : 2 * 256;

template <int D>
struct alignas(32) DkdvTiles {
    bf16 ks[kWmmaRows][D], vs[kWmmaRows][D], qs[16][D], dos[16][D], ps[kWmmaWarps][16][16], dss[kWmmaWarps][16][16];
    float scratch[kWmmaWarps][kScratchFloats<D>], lse[16], delta[16];
};

template <int D>
struct alignas(32) DqTiles {
    bf16 qs[kWmmaRows][D], dos[kWmmaRows][D], ks[16][D], vs[16][D], dss[kWmmaWarps][16][16];
    float scratch[kWmmaWarps][kScratchFloats<D>];
};

// Adds the warp's 16 x D fp32 tile into the lane pair's accumulators acc (D/2: its half of row r).
template <int D>
__device__ inline void accumulate_rows(float* acc, const float* tile, int r, int half) {
    for (int i = 0; i < D / 2; i++) acc[i] += tile[r * D + half * D / 2 + i];
}

// dK, dV: a warp owns 16 keys; query tiles of 16 from the diagonal to T. grid (B*H, ceil(T/kWmmaRows)).
template <int D>
__global__ void __launch_bounds__(kWmmaThreads)
    flash_backward_dkdv_wmma_kernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                                    const bf16* __restrict__ qkv, const float* __restrict__ lse,
                                    const float* __restrict__ delta, int T, int C, int H, float scale) {
    __shared__ DkdvTiles<D> sm;
    auto& ks = sm.ks;
    auto& vs = sm.vs;
    auto& qs = sm.qs;
    auto& dos = sm.dos;
    auto& ps = sm.ps;
    auto& dss = sm.dss;
    auto& scratch = sm.scratch;
    auto& lse_s = sm.lse;
    auto& delta_s = sm.delta;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (int)blockIdx.y * kWmmaRows;                    // longest first: the first keys see every query
    const int r = lane / 2, half = lane % 2, j = row0 + w * 16 + r;  // this lane pair's key
    const size_t C3 = 3 * (size_t)C;
    const bf16* base = qkv + (size_t)b * T * C3 + h * D;
    const bf16* dbase = dout + (size_t)b * T * C + h * D;
    load_tile_bf16<kWmmaRows, D>(ks, base, row0, T, C3, C);
    load_tile_bf16<kWmmaRows, D>(vs, base, row0, T, C3, 2 * C);
    float dk[D / 2] = {}, dv[D / 2] = {};
    float* sc = scratch[w];
    for (int q0 = row0; q0 < T; q0 += 16) {
        __syncthreads();
        load_tile_bf16<16, D>(qs, base, q0, T, C3, 0);
        load_tile_bf16<16, D>(dos, dbase, q0, T, C, 0);
        if (threadIdx.x < 16) {
            lse_s[threadIdx.x] = q0 + (int)threadIdx.x < T ? lse[(size_t)bh * T + q0 + threadIdx.x] : 0.0f;
            delta_s[threadIdx.x] = q0 + (int)threadIdx.x < T ? delta[(size_t)bh * T + q0 + threadIdx.x] : 0.0f;
        }
        __syncthreads();
        warp_mma<16, D, true>(sc, 16, false, &ks[w * 16][0], D, &qs[0][0], D);         // S^T = K Q^T
        warp_mma<16, D, true>(sc + 256, 16, false, &vs[w * 16][0], D, &dos[0][0], D);  // dP^T = V dO^T
        __syncwarp();
        for (int c = half * 8; c < half * 8 + 8; c++) {
            const int t = q0 + c;
            float p = j <= t && t < T ? expf(sc[r * 16 + c] * scale - lse_s[c]) : 0.0f;
            ps[w][r][c] = __float2bfloat16(p);
            dss[w][r][c] = __float2bfloat16(p * (sc[256 + r * 16 + c] - delta_s[c]));
        }
        __syncwarp();
        warp_mma<D, 16, false>(sc, D, false, &ps[w][0][0], 16, &dos[0][0], D);  // P^T dO
        __syncwarp();
        accumulate_rows<D>(dv, sc, r, half);
        __syncwarp();
        warp_mma<D, 16, false>(sc, D, false, &dss[w][0][0], 16, &qs[0][0], D);  // dS^T Q
        __syncwarp();
        accumulate_rows<D>(dk, sc, r, half);
        __syncwarp();
    }
    if (j >= T) return;
    bf16* g = dqkv + ((size_t)b * T + j) * C3 + h * D + half * D / 2;
    for (int i = 0; i < D / 2; i++) {
        g[C + i] = __float2bfloat16_rn(scale * dk[i]);
        g[2 * C + i] = __float2bfloat16_rn(dv[i]);
    }
}

// dQ: a warp owns 16 queries; key tiles of 16 up to the diagonal. grid (B*H, ceil(T/kWmmaRows)).
template <int D>
__global__ void __launch_bounds__(kWmmaThreads)
    flash_backward_dq_wmma_kernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout, const bf16* __restrict__ qkv,
                                  const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int H,
                                  float scale) {
    __shared__ DqTiles<D> sm;
    auto& qs = sm.qs;
    auto& dos = sm.dos;
    auto& ks = sm.ks;
    auto& vs = sm.vs;
    auto& dss = sm.dss;
    auto& scratch = sm.scratch;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kWmmaRows;
    const int r = lane / 2, half = lane % 2, t = row0 + w * 16 + r;  // this lane pair's query
    const size_t C3 = 3 * (size_t)C;
    const bf16* base = qkv + (size_t)b * T * C3 + h * D;
    load_tile_bf16<kWmmaRows, D>(qs, base, row0, T, C3, 0);
    load_tile_bf16<kWmmaRows, D>(dos, dout + (size_t)b * T * C + h * D, row0, T, C, 0);
    const float lse_t = t < T ? lse[(size_t)bh * T + t] : 0.0f, delta_t = t < T ? delta[(size_t)bh * T + t] : 0.0f;
    float dq[D / 2] = {};
    float* sc = scratch[w];
    const int kend = min(T, row0 + kWmmaRows);
    for (int k0 = 0; k0 < kend; k0 += 16) {
        __syncthreads();
        load_tile_bf16<16, D>(ks, base, k0, T, C3, C);
        load_tile_bf16<16, D>(vs, base, k0, T, C3, 2 * C);
        __syncthreads();
        warp_mma<16, D, true>(sc, 16, false, &qs[w * 16][0], D, &ks[0][0], D);         // S = Q K^T
        warp_mma<16, D, true>(sc + 256, 16, false, &dos[w * 16][0], D, &vs[0][0], D);  // dP = dO V^T
        __syncwarp();
        for (int c = half * 8; c < half * 8 + 8; c++) {
            float p = k0 + c <= t ? expf(sc[r * 16 + c] * scale - lse_t) : 0.0f;
            dss[w][r][c] = __float2bfloat16(p * (sc[256 + r * 16 + c] - delta_t));
        }
        __syncwarp();
        warp_mma<D, 16, false>(sc, D, false, &dss[w][0][0], 16, &ks[0][0], D);  // dS K
        __syncwarp();
        accumulate_rows<D>(dq, sc, r, half);
        __syncwarp();
    }
    if (t >= T) return;
    bf16* g = dqkv + ((size_t)b * T + t) * C3 + h * D + half * D / 2;
    for (int i = 0; i < D / 2; i++) g[i] = __float2bfloat16_rn(scale * dq[i]);
}

// delta (B,H,T) = rowsum(dO * O) per head, as cuda/attention.cu computes it
__global__ void wmma_delta_kernel(float* delta, const bf16* dout, const bf16* out, int T, int C, int H, size_t rows) {
    const int D = C / H;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const size_t bh = i / T, t = i % T, at = (bh / H * T + t) * C + bh % H * D;
    float s = 0.0f;
    for (int d = 0; d < D; d++) s += __bfloat162float(dout[at + d]) * __bfloat162float(out[at + d]);
    delta[i] = s;
}

template <class F>
void with_wmma_head_size(int D, F f) {
    switch (D) {
        case 16:
            return f(std::integral_constant<int, 16>());
        case 32:
            return f(std::integral_constant<int, 32>());
        case 64:
            return f(std::integral_constant<int, 64>());
    }
    throw std::runtime_error("flash-bf16-wmma supports head sizes 16, 32 and 64, got " + std::to_string(D));
}

dim3 wmma_grid(const Shape& s) {
    return dim3((unsigned)(s.B * s.H), (unsigned)gpu::ceil_div(s.T, kWmmaRows));
}

void wmma_forward(bf16_t* out, float* lse, const bf16_t* qkv, const Shape& s) {
    const float scale = 1.0f / sqrtf((float)s.D);
    with_wmma_head_size(s.D, [&](auto d) {
        flash_forward_wmma_kernel<d.value>
            <<<wmma_grid(s), kWmmaThreads>>>(gpu::dev(out), lse, gpu::dev(qkv), s.T, s.C(), s.H, scale);
    });
    cudaCheckLaunch();
}

void wmma_backward(bf16_t* dqkv, float* delta, const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                   const float* lse, const Shape& s) {
    const float scale = 1.0f / sqrtf((float)s.D);
    const size_t rows = (size_t)s.B * s.H * s.T;
    wmma_delta_kernel<<<(unsigned)gpu::ceil_div(rows, (size_t)256), 256>>>(delta, gpu::dev(dout), gpu::dev(out), s.T,
                                                                           s.C(), s.H, rows);
    cudaCheckLaunch();
    with_wmma_head_size(s.D, [&](auto d) {
        flash_backward_dkdv_wmma_kernel<d.value><<<wmma_grid(s), kWmmaThreads>>>(
            gpu::dev(dqkv), gpu::dev(dout), gpu::dev(qkv), lse, delta, s.T, s.C(), s.H, scale);
        cudaCheckLaunch();
        flash_backward_dq_wmma_kernel<d.value><<<wmma_grid(s), kWmmaThreads>>>(
            gpu::dev(dqkv), gpu::dev(dout), gpu::dev(qkv), lse, delta, s.T, s.C(), s.H, scale);
    });
    cudaCheckLaunch();
}

// ---- the versions ------------------------------------------------------------------------
enum Kind { kCublas, kFlash, kRopeThenFlash, kFlashRopeLoad, kFlashWmma };

struct Case {
    const char* name;
    Kind kind;
    bool bf16, tf32;  // tf32: TF32 on (fp32 GEMMs and flash kernels on tf32 tensor cores)
    bool alibi;       // timed with ALiBi's bias
};
const Case kCases[] = {{"cublas", kCublas, false, true, false},
                       {"flash", kFlash, false, false, false},
                       {"flash-bf16", kFlash, true, false, false},
                       {"rope+flash", kRopeThenFlash, false, false, false},
                       {"flash-rope-load", kFlashRopeLoad, false, false, false},
                       {"cublas-bf16", kCublas, true, false, false},
                       {"flash-bf16-wmma", kFlashWmma, true, false, false},
                       {"flash-tf32", kFlash, false, true, false},
                       {"flash-tf32-alibi", kFlash, false, true, true},
                       {"flash-bf16-alibi", kFlash, true, false, true}};

bool uses_rope(const Case& v) {
    return v.kind == kRopeThenFlash || v.kind == kFlashRopeLoad;
}
// the trainer's attention ops, which take ALiBi's slopes from the position data
bool takes_alibi(const Case& v) {
    return v.kind == kCublas || v.kind == kFlash;
}

// A scheme's position data (src/pos.h) on the host in float, as the trainer builds it (base 10000).
struct HostPos {
    PosBuffer buf;
    std::vector<float> data;
    HostPos(Pos p, const Shape& s)
        : buf(pos_buffer(pos_traits(p), s.T, s.C(), s.H, 10000.0, kSinScale)), data(buf.data.begin(), buf.data.end()) {}
    PosData<float> view(const float* base) const { return buf.view(base); }
};

// Device buffers of one run: the probabilities and their gradient (cublas) or the log-sum-exps
// (flash). A: the activations' element type (float; bf16_t for the bf16 versions). rope: RoPE's
// position data; att_pos: what the attention ops get (ALiBi's slopes, or none).
template <class Act>
struct Buffers {
    lab::Buf<Act> qkv, qkvr, out, dout, dqkv, att, scratch;
    lab::Buf<float> lse, delta, rope_buf, att_buf;
    PosData<float> rope, att_pos;
    Buffers(const Shape& s, const Case& v, const std::vector<float>& qkv_h, const std::vector<float>& dout_h,
            const HostPos& rope_h, const HostPos& att_h)
        : qkv(lab::to_act<Act>(qkv_h)),
          qkvr(v.kind == kRopeThenFlash ? s.nqkv() : 0),
          out(s.nout()),
          dout(lab::to_act<Act>(dout_h)),
          dqkv(s.nqkv()),
          att(v.kind == kCublas ? s.natt() : 0),
          scratch(v.kind == kCublas ? s.natt() : 0),
          lse(v.kind == kCublas ? 0 : (size_t)s.B * s.H * s.T),
          delta(v.kind == kFlashWmma ? (size_t)s.B * s.H * s.T : 0),
          rope_buf(rope_h.data),
          att_buf(att_h.data),
          rope(rope_h.view(rope_buf.p)),
          att_pos(att_h.view(att_buf.p)) {}
};

template <class Act>
void forward(const Case& v, Buffers<Act>& b, const Shape& s) {
    switch (v.kind) {
        case kCublas:
            gpu::attention_forward(b.out.p, b.att.p, b.qkv.p, s.B, s.T, s.C(), s.H, b.att_pos);
            break;
        case kFlash:
            gpu::attention_forward_lse(b.out.p, b.lse.p, b.qkv.p, s.B, s.T, s.C(), s.H, b.att_pos);
            break;
        case kRopeThenFlash:
            gpu::rope_forward(b.qkvr.p, b.qkv.p, nullptr, b.rope, s.B, s.T, s.C(), s.H);
            gpu::attention_forward_lse(b.out.p, b.lse.p, b.qkvr.p, s.B, s.T, s.C(), s.H, {});
            break;
        case kFlashRopeLoad:  // fp32 only (kCases)
            if constexpr (std::is_same<Act, float>::value)
                flash_forward_rope(b.out, b.lse, b.qkv, b.rope.cos, b.rope.sin, s);
            break;
        case kFlashWmma:  // bf16 only
            if constexpr (std::is_same<Act, bf16_t>::value) wmma_forward(b.out, b.lse, b.qkv, s);
            break;
    }
}

template <class Act>
void backward(const Case& v, Buffers<Act>& b, const Shape& s) {
    if constexpr (std::is_same<Act, bf16_t>::value)
        if (v.kind == kFlashWmma) return wmma_backward(b.dqkv, b.delta, b.dout, b.qkv, b.out, b.lse, s);
    if (v.kind == kFlash)
        gpu::attention_backward_lse(b.dqkv.p, b.dout.p, b.qkv.p, b.out.p, b.lse.p, s.B, s.T, s.C(), s.H, b.att_pos);
    else
        gpu::attention_backward(b.dqkv.p, b.scratch.p, b.dout.p, b.qkv.p, b.att.p, s.B, s.T, s.C(), s.H, b.att_pos);
}

// Output (and, for the versions with a backward, the gradient) against the CPU reference, on
// the same inputs (bf16 values for flash-bf16): without ALiBi's bias, and with it for the
// versions that take it.
template <class Act>
bool check(const Case& v, const Shape& s) {
    auto qkv = lab::to_float(lab::to_act<Act>(lab::randn(s.nqkv(), 1)));
    auto dout = lab::to_float(lab::to_act<Act>(lab::randn(s.nout(), 2)));
    const HostPos rope(Pos::rope, s);
    std::vector<float> qkvr = qkv;
    if (uses_rope(v))
        cpu::rope_forward(qkvr.data(), qkv.data(), (const float*)nullptr, rope.view(rope.data.data()), s.B, s.T, s.C(),
                          s.H);
    const double tol = v.bf16 ? 2e-2 : v.tf32 ? 2e-3 : 1e-3;
    std::vector<std::pair<const char*, double>> errs;
    for (bool alibi : {false, true}) {
        if (alibi && !takes_alibi(v)) break;
        const HostPos m(alibi ? Pos::alibi : Pos::nope, s);
        std::vector<float> out(s.nout()), att(s.natt()), scratch(s.natt()), dqkv(s.nqkv(), 0.0f);
        cpu::attention_forward(out.data(), att.data(), qkvr.data(), s.B, s.T, s.C(), s.H, m.view(m.data.data()));
        Buffers<Act> b(s, v, qkv, dout, rope, m);
        forward(v, b, s);
        errs.push_back({alibi ? "out alibi" : "out", lab::rel_max_err(lab::to_float(b.out.host()), out)});
        if (uses_rope(v)) continue;
        cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C(), s.H);
        backward(v, b, s);
        errs.push_back({alibi ? "dqkv alibi" : "dqkv", lab::rel_max_err(lab::to_float(b.dqkv.host()), dqkv)});
    }
    return lab::report(v.name, errs, tol);
}

template <class Act>
void time_case(const Case& v, const Shape& s, int reps) {
    Buffers<Act> b(s, v, lab::randn(s.nqkv(), 3), lab::randn(s.nout(), 4), HostPos(Pos::rope, s),
                   HostPos(v.alibi ? Pos::alibi : Pos::nope, s));
    const double fwd_flop = 4.0 * s.B * s.H * (double)s.T * s.T / 2 * s.D;
    std::vector<lab::Stage> stages = {{"forward", [&] { forward(v, b, s); }, fwd_flop, true}};
    if (!uses_rope(v)) stages.push_back({"backward", [&] { backward(v, b, s); }, 2.5 * fwd_flop, true});
    lab::print_times(stages, reps);
}

}  // namespace

int main(int argc, char** argv) {
    return lab::run(argc, argv, "attention", {{"B", 16}, {"T", 1024}, {"H", 4}, {"D", 32}}, [](const lab::Args& a) {
        const Shape s{a["B"], a["T"], a["H"], a["D"]}, small{2, 67, 2, a["D"]};
        const int reps = a["reps"];
        std::vector<lab::Version> vs;
        for (const Case& c : kCases)
            vs.push_back({c.name,
                          [&c, small] {
                              gpu::set_tf32(c.tf32);
                              return c.bf16 ? check<bf16_t>(c, small) : check<float>(c, small);
                          },
                          [&c, s, reps] {
                              gpu::set_tf32(c.tf32);
                              c.bf16 ? time_case<bf16_t>(c, s, reps) : time_case<float>(c, s, reps);
                          }});
        return vs;
    });
}
