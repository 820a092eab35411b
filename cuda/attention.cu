// Causal multi-head self-attention on the packed qkv (B, T, 3C), head size D = C/H,
// scores scaled by 1/sqrt(D).
//
// Forward: S = Q K^T * scale (cuBLAS, per batch b one strided-batched GEMM over the H heads,
// reading q/k/v straight from the packed layout: head h of row t starts at t*3C + h*D (+C
// for k, +2C for v), so consecutive heads are D floats apart and rows are 3C apart); then a
// causal softmax kernel writes the probabilities P into att (B,H,T,T) with exact zeros
// above the diagonal; then out = P V (GEMM), written straight into (B,T,C).
// Backward: dP = dO V^T ; dV = P^T dO ; dS = P * (dP - rowsum(P * dP)) ; dQ = scale dS K ;
// dK = scale dS^T Q. dP and dS live in `scratch` (B,H,T,T). Every backward here overwrites dqkv.
//
// The GEMMs compute the full T x T squares (the upper triangle is wasted work, its P and dS
// entries are exactly 0). A fused flash-style kernel would avoid that and the (B,H,T,T)
// buffers; it can replace this file behind the same signatures.
//
// In bf16 (--precision bf16) this cuBLAS path stores S, P, dP and dS in bf16 too (as PyTorch's
// math attention does under bf16 autocast): bf16 GEMMs with fp32 accumulation, the softmax and
// its backward in fp32 between them. The flash kernels below keep S and P in fp32 registers:
// tensor-core (WMMA) kernels at head sizes 16, 32, 64, the fp32 kernels reading and writing
// bf16 at the others; fp32 softmax, log-sum-exps and accumulators.
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <mma.h>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kWarps = 8;  // rows (one warp each) per block in the softmax kernels

// att (rows = B*H*T, T): in: scaled scores; out: causal softmax (row t1 keeps columns <= t1).
// X: float or __nv_bfloat16 (read into fp32, rounded once at the store).
template <class X>
__global__ void causal_softmax_forward_kernel(X* __restrict__ att, int T, size_t rows) {
    size_t row = (size_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warp leaves together
    int t1 = (int)(row % T);
    X* a = att + row * T;
    float m = -INFINITY, s = 0.0f;
    for (int t2 = lane; t2 <= t1; t2 += 32) lse_push(m, s, f32(a[t2]));
    warp_lse(m, s);
    float inv = 1.0f / s;  // s >= 1: the row max contributes exp(0)
    for (int t2 = lane; t2 < T; t2 += 32) a[t2] = from_f32<X>(t2 <= t1 ? expf(f32(a[t2]) - m) * inv : 0.0f);
}

// ds (rows, T): in: dP; out: dS = P * (dP - sum_t2 P dP), zero above the diagonal.
template <class X>
__global__ void causal_softmax_backward_kernel(X* __restrict__ ds, const X* __restrict__ att, int T, size_t rows) {
    size_t row = (size_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t1 = (int)(row % T);
    X* d = ds + row * T;
    const X* p = att + row * T;
    float dot = 0.0f;
    for (int t2 = lane; t2 <= t1; t2 += 32) dot += f32(p[t2]) * f32(d[t2]);
    dot = warp_sum(dot);
    for (int t2 = lane; t2 < T; t2 += 32) d[t2] = from_f32<X>(t2 <= t1 ? f32(p[t2]) * (f32(d[t2]) - dot) : 0.0f);
}

// The GEMMs below take A = float or bf16_t for every operand.
// S^T (column-major T x T) = K Q^T, i.e. att[b,h,t1,t2] = scale * q_t1 . k_t2
template <class A>
void scores_gemm(A* att, const A* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const A* q = qkv + (size_t)b * T * C3;
        A* att_b = att + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, sc, q + C, C3, D, q, C3, D, 0.0f, att_b, T, TT, H, stream);
    }
}

// out^T (column-major D x T per head, ld C) = V^T P^T, i.e. out[t1] = sum_t2 P[t1,t2] v_t2
template <class A>
void pv_gemm(A* out, const A* att, const A* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    const int D = C / H;
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const A* q = qkv + (size_t)b * T * C3;
        const A* att_b = att + (size_t)b * H * TT;
        A* out_b = out + (size_t)b * T * C;
        gemm_cm_strided_batched(false, false, D, T, T, 1.0f, q + 2 * C, C3, D, att_b, T, TT, 0.0f, out_b, C, D, H,
                                stream);
    }
}

// dP[t1,t2] = dO_t1 . v_t2 : column-major dP^T (T x T) = V dO^T
template <class A>
void dp_gemm(A* scratch, const A* dout, const A* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    const int D = C / H;
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const A* q = qkv + (size_t)b * T * C3;
        const A* dout_b = dout + (size_t)b * T * C;
        A* s_b = scratch + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, 1.0f, q + 2 * C, C3, D, dout_b, C, D, 0.0f, s_b, T, TT, H,
                                stream);
    }
}

// dV, dQ, dK from dO, P and dS (ds = dS, zero above the diagonal)
template <class A>
void dqkv_gemms(A* dqkv, const A* dout, const A* qkv, const A* att, const A* ds, int B, int T, int C, int H,
                cudaStream_t stream) {
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const A* q = qkv + (size_t)b * T * C3;
        const A* dout_b = dout + (size_t)b * T * C;
        const A* att_b = att + (size_t)b * H * TT;
        const A* s_b = ds + (size_t)b * H * TT;
        A* dq = dqkv + (size_t)b * T * C3;
        // dV[t2] = sum_t1 P[t1,t2] dO_t1 : column-major dV^T (D x T) = dO^T P
        gemm_cm_strided_batched(false, true, D, T, T, 1.0f, dout_b, C, D, att_b, T, TT, 0.0f, dq + 2 * C, C3, D, H,
                                stream);
        // dQ[t1] = scale sum_t2 dS[t1,t2] k_t2 : column-major dQ^T (D x T) = K^T dS^T
        gemm_cm_strided_batched(false, false, D, T, T, sc, q + C, C3, D, s_b, T, TT, 0.0f, dq, C3, D, H, stream);
        // dK[t2] = scale sum_t1 dS[t1,t2] q_t1 : column-major dK^T (D x T) = Q^T dS
        gemm_cm_strided_batched(false, true, D, T, T, sc, q, C3, D, s_b, T, TT, 0.0f, dq + C, C3, D, H, stream);
    }
}

// ---- flash attention, fp32 ------------------------------------------------------------------
// FlashAttention-2 style: a block owns kRows rows (queries, or keys in dK/dV), kQuad threads
// per row, each holding the dims d = r, r + kQuad, ... (r = its index in the quad: the quad
// reads consecutive shared-memory words, no bank conflicts). A dot product over D is kQuad
// partial sums joined by two shuffles. The other operand streams through shared memory in
// tiles of kTile rows, only up to the diagonal. Exact fp32 arithmetic; the scores of a tile
// stay in registers, never in memory. X: the element type of qkv, out and their gradients
// (float, or __nv_bfloat16 at the head sizes without a tensor-core kernel), read into fp32.
constexpr int kQuad = 4, kRows = 64, kTile = 32, kFlashThreads = kRows * kQuad;

// sum of x over the quad (lanes 4i .. 4i+3); every lane of the quad gets it
__device__ inline float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Copies rows [t0, t0 + kTile) of one head's D columns at offset `col` of a (T, ld) matrix
// into tile (kTile, D); rows past T are zeros.
template <int D, class X>
__device__ inline void load_tile(float (*tile)[D], const X* base, int t0, int T, size_t ld, int col) {
    for (int i = threadIdx.x; i < kTile * D; i += kFlashThreads) {
        int j = i / D, d = i % D;
        tile[j][d] = t0 + j < T ? f32(base[(size_t)(t0 + j) * ld + col + d]) : 0.0f;
    }
}

// Query tiles run from the last to the first, so the longest rows start first.
__device__ inline int flash_row0() {
    return (int)(gridDim.y - 1 - blockIdx.y) * kRows;
}

// grid (B*H, ceil(T/kRows)). out (B,T,C), lse (B,H,T), qkv (B,T,3C).
template <int D, class X>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(X* __restrict__ out, float* __restrict__ lse, const X* __restrict__ qkv, int T, int C, int H,
                         float scale) {
    constexpr int E = D / kQuad;  // dims per thread
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const int row0 = flash_row0(), t = row0 + threadIdx.x / kQuad;
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;  // row t2's q of this head: base + t2 * C3
    float q[E], o[E];
    for (int e = 0; e < E; e++) {
        q[e] = t < T ? f32(base[t * C3 + r + kQuad * e]) * scale : 0.0f;
        o[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;  // running max and sum of exp(s - m)
    const int kend = min(T, row0 + kRows);
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // the previous tile is used up
        load_tile<D>(ks, base, k0, T, C3, C);
        load_tile<D>(vs, base, k0, T, C3, 2 * C);
        __syncthreads();
        float s[kTile], mt = m;
#pragma unroll
        for (int j = 0; j < kTile; j++) {
            float p = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) p += q[e] * ks[j][r + kQuad * e];
            p = quad_sum(p);
            s[j] = k0 + j <= t ? p : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        // mt is finite: key 0 is in every row's first tile
        float alpha = expf(m - mt);  // first tile: expf(-inf) = 0
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
    X* o_t = out + ((size_t)b * T + t) * C + h * D;
    for (int e = 0; e < E; e++) o_t[r + kQuad * e] = from_f32<X>(o[e] / l);
    if (r == 0) lse[(size_t)bh * T + t] = m + logf(l);
}

// delta (B,H,T) = rowsum(dO * O) per head: softmax backward's sum_t2 P dP, from O instead of P.
template <class X>
__global__ void flash_delta_kernel(float* __restrict__ delta, const X* __restrict__ dout, const X* __restrict__ out,
                                   int T, int C, int H, size_t rows) {
    const int D = C / H;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += (size_t)gridDim.x * blockDim.x) {
        size_t bh = i / T, t = i % T, b = bh / H, h = bh % H;
        size_t at = (b * T + t) * C + h * D;
        float s = 0.0f;
        for (int d = 0; d < D; d++) s += f32(dout[at + d]) * f32(out[at + d]);
        delta[i] = s;
    }
}

// dK and dV: a block owns kRows keys and walks the query tiles from its diagonal to T.
// Per (query i, key j): p = exp(s - lse_i), dv_j += p dO_i, ds = p (dO_i . v_j - delta_i),
// dk_j += scale ds q_i; the sums written over dqkv's k and v. grid (B*H, ceil(T/kRows)).
template <int D, class X>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dkdv_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                               const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int H,
                               float scale) {
    constexpr int E = D / kQuad;
    __shared__ float qs[kTile][D], dos[kTile][D], lse_s[kTile], delta_s[kTile];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const int row0 = (int)blockIdx.y * kRows, j = row0 + threadIdx.x / kQuad;  // this thread's key (longest first)
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;
    const X* dbase = dout + (size_t)b * T * C + h * D;
    float k[E], v[E], dk[E], dv[E];
    for (int e = 0; e < E; e++) {
        k[e] = j < T ? f32(base[j * C3 + C + r + kQuad * e]) : 0.0f;
        v[e] = j < T ? f32(base[j * C3 + 2 * C + r + kQuad * e]) : 0.0f;
        dk[e] = dv[e] = 0.0f;
    }
    for (int q0 = row0 / kTile * kTile; q0 < T; q0 += kTile) {
        __syncthreads();
        load_tile<D>(qs, base, q0, T, C3, 0);
        load_tile<D>(dos, dbase, q0, T, C, 0);
        for (int i = threadIdx.x; i < kTile; i += kFlashThreads) {
            lse_s[i] = q0 + i < T ? lse[(size_t)bh * T + q0 + i] : 0.0f;
            delta_s[i] = q0 + i < T ? delta[(size_t)bh * T + q0 + i] : 0.0f;
        }
        __syncthreads();
        for (int i = 0; i < kTile; i++) {
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) {
                s += k[e] * qs[i][r + kQuad * e];
                dp += v[e] * dos[i][r + kQuad * e];
            }
            s = quad_sum(s);
            dp = quad_sum(dp);
            const int t = q0 + i;
            float p = j <= t && t < T ? expf(s * scale - lse_s[i]) : 0.0f;
            float ds = p * (dp - delta_s[i]);
#pragma unroll
            for (int e = 0; e < E; e++) {
                dv[e] += p * dos[i][r + kQuad * e];
                dk[e] += ds * qs[i][r + kQuad * e];
            }
        }
    }
    if (j >= T) return;
    X* g = dqkv + ((size_t)b * T + j) * C3 + h * D;
    for (int e = 0; e < E; e++) {
        g[C + r + kQuad * e] = from_f32<X>(scale * dk[e]);
        g[2 * C + r + kQuad * e] = from_f32<X>(dv[e]);
    }
}

// dQ: a block owns kRows queries and walks the key tiles up to its diagonal:
// dq_i = scale sum_j p (dO_i . v_j - delta_i) k_j, written over dqkv's q. grid (B*H, ceil(T/kRows)).
template <int D, class X>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dq_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                             const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int H,
                             float scale) {
    constexpr int E = D / kQuad;
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const int row0 = flash_row0(), t = row0 + threadIdx.x / kQuad;
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;
    const X* dO = dout + ((size_t)b * T + t) * C + h * D;
    float q[E], d_o[E], dq[E];
    for (int e = 0; e < E; e++) {
        q[e] = t < T ? f32(base[t * C3 + r + kQuad * e]) : 0.0f;
        d_o[e] = t < T ? f32(dO[r + kQuad * e]) : 0.0f;
        dq[e] = 0.0f;
    }
    const float lse_t = t < T ? lse[(size_t)bh * T + t] : 0.0f, delta_t = t < T ? delta[(size_t)bh * T + t] : 0.0f;
    const int kend = min(T, row0 + kRows);
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        load_tile<D>(ks, base, k0, T, C3, C);
        load_tile<D>(vs, base, k0, T, C3, 2 * C);
        __syncthreads();
        for (int j = 0; j < kTile; j++) {
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) {
                s += q[e] * ks[j][r + kQuad * e];
                dp += d_o[e] * vs[j][r + kQuad * e];
            }
            s = quad_sum(s);
            dp = quad_sum(dp);
            float p = k0 + j <= t ? expf(s * scale - lse_t) : 0.0f;
            float ds = p * (dp - delta_t);
#pragma unroll
            for (int e = 0; e < E; e++) dq[e] += ds * ks[j][r + kQuad * e];
        }
    }
    if (t >= T) return;
    X* g = dqkv + ((size_t)b * T + t) * C3 + h * D;
    for (int e = 0; e < E; e++) g[r + kQuad * e] = from_f32<X>(scale * dq[e]);
}

// ---- flash attention, bf16 tensor cores (WMMA) ------------------------------------------------
// bf16 activations with D = 16, 32 or 64. Each warp owns 16 rows; the products (S = Q K^T,
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

// Calls f(std::integral_constant<int, D>) when the kernels are instantiated for head size D
// (the one list of supported sizes); false, without calling f, for the others.
template <class F>
bool with_head_size(int D, F f) {
    switch (D) {
        case 8:
            return f(std::integral_constant<int, 8>()), true;
        case 16:
            return f(std::integral_constant<int, 16>()), true;
        case 32:
            return f(std::integral_constant<int, 32>()), true;
        case 64:
            return f(std::integral_constant<int, 64>()), true;
        case 128:
            return f(std::integral_constant<int, 128>()), true;
    }
    return false;
}

}  // namespace

bool flash_supports_head_size(int D) {
    return with_head_size(D, [](auto) {});
}

void check_flash_head_size(int D) {
    if (flash_supports_head_size(D)) return;
    std::string sizes;
    for (int d = 1; d <= 1024; d++)
        if (flash_supports_head_size(d)) sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
    throw std::runtime_error("flash attention on the GPU supports head sizes " + sizes +
                             ", got n_embd/n_head = " + std::to_string(D) + " (use --attention cublas)");
}

namespace {

dim3 flash_grid(int B, int T, int H) {
    return dim3((unsigned)(B * H), (unsigned)ceil_div(T, kRows));
}
dim3 wmma_grid(int B, int T, int H) {
    return dim3((unsigned)(B * H), (unsigned)ceil_div(T, kWmmaRows));
}
// bf16 activations run the tensor-core kernels at these head sizes, the fp32 kernels at the others
constexpr bool has_wmma_kernel(int D) {
    return D == 16 || D == 32 || D == 64;
}

}  // namespace

// out (B,T,C), att (B,H,T,T) softmax probabilities (saved for backward), qkv (B,T,3C)
template <class A>
void attention_forward(A* out, A* att, const A* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    scores_gemm(att, qkv, B, T, C, H, stream);
    size_t rows = (size_t)B * H * T;
    causal_softmax_forward_kernel<dev_t<A>>
        <<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps, 0, stream>>>(dev(att), T, rows);
    cudaCheckLaunch();
    pv_gemm(out, att, qkv, B, T, C, H, stream);
}

// dqkv (B,T,3C) = gradient (overwritten); scratch (B,H,T,T) is overwritten (holds dP, then dS)
template <class A>
void attention_backward(A* dqkv, A* scratch, const A* dout, const A* qkv, const A* att, int B, int T, int C, int H,
                        cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    dp_gemm(scratch, dout, qkv, B, T, C, H, stream);
    size_t rows = (size_t)B * H * T;
    causal_softmax_backward_kernel<dev_t<A>>
        <<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps, 0, stream>>>(dev(scratch), dev(att), T, rows);
    cudaCheckLaunch();
    dqkv_gemms(dqkv, dout, qkv, att, scratch, B, T, C, H, stream);
}

// out (B,T,C), lse (B,H,T), qkv (B,T,3C)
template <class A>
void attention_forward_lse(A* out, float* lse, const A* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    const float scale = 1.0f / sqrtf((float)(C / H));
    check_flash_head_size(C / H);
    using X = dev_t<A>;
    with_head_size(C / H, [&](auto d) {
        constexpr int D = d.value;
        if constexpr (is_bf16<A> && has_wmma_kernel(D))
            flash_forward_wmma_kernel<D>
                <<<wmma_grid(B, T, H), kWmmaThreads, 0, stream>>>(dev(out), lse, dev(qkv), T, C, H, scale);
        else
            flash_forward_kernel<D, X>
                <<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(dev(out), lse, dev(qkv), T, C, H, scale);
    });
    cudaCheckLaunch();
}

// dqkv (B,T,3C) = gradient (overwritten); out (B,T,C) and lse (B,H,T) from attention_forward_lse
template <class A>
void attention_backward_lse(A* dqkv, const A* dout, const A* qkv, const A* out, const float* lse, int B, int T, int C,
                            int H, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    using X = dev_t<A>;
    static Scratch<float> s_delta;
    const size_t rows = (size_t)B * H * T;
    float* delta = s_delta.get(rows);
    flash_delta_kernel<X><<<grid_for(rows, 256), 256, 0, stream>>>(delta, dev(dout), dev(out), T, C, H, rows);
    cudaCheckLaunch();
    const float scale = 1.0f / sqrtf((float)(C / H));
    check_flash_head_size(C / H);
    with_head_size(C / H, [&](auto d) {
        constexpr int D = d.value;
        if constexpr (is_bf16<A> && has_wmma_kernel(D)) {
            flash_backward_dkdv_wmma_kernel<D><<<wmma_grid(B, T, H), kWmmaThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, T, C, H, scale);
            cudaCheckLaunch();
            flash_backward_dq_wmma_kernel<D><<<wmma_grid(B, T, H), kWmmaThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, T, C, H, scale);
        } else {
            flash_backward_dkdv_kernel<D, X><<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, T, C, H, scale);
            cudaCheckLaunch();
            flash_backward_dq_kernel<D, X><<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, T, C, H, scale);
        }
    });
    cudaCheckLaunch();
}

#define INSTANTIATE(A)                                                                                        \
    template void attention_forward(A*, A*, const A*, int, int, int, int, cudaStream_t);                      \
    template void attention_backward(A*, A*, const A*, const A*, const A*, int, int, int, int, cudaStream_t); \
    template void attention_forward_lse(A*, float*, const A*, int, int, int, int, cudaStream_t);              \
    template void attention_backward_lse(A*, const A*, const A*, const A*, const float*, int, int, int, int,  \
                                         cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
