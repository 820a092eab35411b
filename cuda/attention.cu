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
// entries are exactly 0). The flash kernels further down (attention_forward_lse and
// attention_backward_lse, --attention flash, the default) avoid that and the (B,H,T,T) buffers.
//
// ALiBi (--pos alibi, MODEL.md): with slopes (H,) given, head h's score of query i and key j <= i
// gets -slopes[h] (i - j) before the softmax, computed where each score is (never a T x T bias);
// the bias is constant, so the backward's formulas stay as they are, and only the probabilities
// the flash backward rebuilds from lse take it again. slopes null: no bias is computed, so the
// arithmetic, and every result, is bit for bit that without it; the flash kernels take the bias
// as a template flag (kAlibi), so that without it they are the same kernels, to the register.
//
// In bf16 (--precision bf16) this cuBLAS path stores S, P, dP and dS in bf16 too (as PyTorch's
// math attention does under bf16 autocast): bf16 GEMMs with fp32 accumulation, the softmax and
// its backward in fp32 between them. The flash kernels keep S and P in fp32 registers:
// tensor-core (mma.sync) kernels at head sizes 16, 32, 64 (bf16 operands, or tf32 ones for fp32
// activations with TF32 on), exact fp32 kernels at the others (reading and writing bf16 in
// bf16); fp32 softmax, log-sum-exps and accumulators.
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend_cuda.h"
#include "common.cuh"
#include "mma.cuh"

namespace gpu {

namespace {

constexpr int kWarps = 8;  // rows (one warp each) per block in the softmax kernels

// ALiBi's bias on the score s of query i and key j <= i: s - slope (i - j), slope in the units
// of s (the scaled scores' slopes[h], or slopes[h] / scale on raw products q . k).
__device__ inline float alibi(float s, float slope, int i, int j) {
    return s - slope * (float)(i - j);
}

// att (rows = B*H*T, T): in: scaled scores; out: causal softmax (row t1 keeps columns <= t1),
// with ALiBi's bias when slopes (H,) is given. X: float or __nv_bfloat16 (read into fp32,
// rounded once at the store).
template <class X>
__global__ void causal_softmax_forward_kernel(X* __restrict__ att, const float* __restrict__ slopes, int T, int H,
                                              size_t rows) {
    size_t row = (size_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warp leaves together
    int t1 = (int)(row % T);
    X* a = att + row * T;
    const float slope = slopes ? slopes[row / T % H] : 0.0f;
    auto score = [&](int t2) { return slopes ? alibi(f32(a[t2]), slope, t1, t2) : f32(a[t2]); };
    float m = -INFINITY, s = 0.0f;
    for (int t2 = lane; t2 <= t1; t2 += 32) lse_push(m, s, score(t2));
    warp_lse(m, s);
    float inv = 1.0f / s;  // s >= 1: the row max contributes exp(0)
    for (int t2 = lane; t2 < T; t2 += 32) a[t2] = from_f32<X>(t2 <= t1 ? expf(score(t2) - m) * inv : 0.0f);
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

// The GEMMs below take Act = float or bf16_t for every operand, each a stack of per-head
// matrices: batch b's start at p + b * batch, head h's `head` elements after head 0's, their
// columns (column-major) ld apart.
template <class X>
struct Heads {
    X* p;
    int ld;
    long long head;
    size_t batch;
};
// q, k or v (part 0, 1, 2) of the packed qkv (B,T,3C): head h of row t at t*3C + part*C + h*D
template <class X>
Heads<X> qkv_heads(X* qkv, int part, int T, int C, int H) {
    return {qkv + (size_t)part * C, 3 * C, C / H, (size_t)T * 3 * C};
}
// out or dout (B,T,C): head h of row t at t*C + h*D
template <class X>
Heads<X> row_heads(X* x, int T, int C, int H) {
    return {x, C, C / H, (size_t)T * C};
}
// att or its gradients (B,H,T,T)
template <class X>
Heads<X> square_heads(X* x, int T, int H) {
    return {x, T, (long long)T * T, (size_t)H * T * T};
}

// c = alpha op(a) op(b) for every head: per batch, one strided-batched GEMM over its H heads
// (column-major m x n, inner size k; ta, tb: transpose a, b).
template <class Act>
void heads_gemm(bool ta, bool tb, int m, int n, int k, float alpha, Heads<const Act> a, Heads<const Act> b, Heads<Act> c,
                int B, int H, cudaStream_t stream) {
    for (int i = 0; i < B; i++)
        gemm_cm_strided_batched(ta, tb, m, n, k, alpha, a.p + i * a.batch, a.ld, a.head, b.p + i * b.batch, b.ld,
                                b.head, 0.0f, c.p + i * c.batch, c.ld, c.head, H, stream);
}

// S^T (column-major T x T) = K Q^T, i.e. att[b,h,t1,t2] = scale * q_t1 . k_t2
template <class Act>
void scores_gemm(Act* att, const Act* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    const float sc = 1.0f / sqrtf((float)(C / H));
    heads_gemm<Act>(true, false, T, T, C / H, sc, qkv_heads(qkv, 1, T, C, H), qkv_heads(qkv, 0, T, C, H),
                  square_heads(att, T, H), B, H, stream);
}

// out^T (column-major D x T per head, ld C) = V^T P^T, i.e. out[t1] = sum_t2 P[t1,t2] v_t2
template <class Act>
void pv_gemm(Act* out, const Act* att, const Act* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    heads_gemm<Act>(false, false, C / H, T, T, 1.0f, qkv_heads(qkv, 2, T, C, H), square_heads(att, T, H),
                  row_heads(out, T, C, H), B, H, stream);
}

// dP[t1,t2] = dO_t1 . v_t2 : column-major dP^T (T x T) = V dO^T
template <class Act>
void dp_gemm(Act* scratch, const Act* dout, const Act* qkv, int B, int T, int C, int H, cudaStream_t stream) {
    heads_gemm<Act>(true, false, T, T, C / H, 1.0f, qkv_heads(qkv, 2, T, C, H), row_heads(dout, T, C, H),
                  square_heads(scratch, T, H), B, H, stream);
}

// dV, dQ, dK from dO, P and dS (ds = dS, zero above the diagonal)
template <class Act>
void dqkv_gemms(Act* dqkv, const Act* dout, const Act* qkv, const Act* att, const Act* ds, int B, int T, int C, int H,
                cudaStream_t stream) {
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    // dV[t2] = sum_t1 P[t1,t2] dO_t1 : column-major dV^T (D x T) = dO^T P
    heads_gemm<Act>(false, true, D, T, T, 1.0f, row_heads(dout, T, C, H), square_heads(att, T, H),
                  qkv_heads(dqkv, 2, T, C, H), B, H, stream);
    // dQ[t1] = scale sum_t2 dS[t1,t2] k_t2 : column-major dQ^T (D x T) = K^T dS^T
    heads_gemm<Act>(false, false, D, T, T, sc, qkv_heads(qkv, 1, T, C, H), square_heads(ds, T, H),
                  qkv_heads(dqkv, 0, T, C, H), B, H, stream);
    // dK[t2] = scale sum_t1 dS[t1,t2] q_t1 : column-major dK^T (D x T) = Q^T dS
    heads_gemm<Act>(false, true, D, T, T, sc, qkv_heads(qkv, 0, T, C, H), square_heads(ds, T, H),
                  qkv_heads(dqkv, 1, T, C, H), B, H, stream);
}

// ---- flash attention, fp32 ------------------------------------------------------------------
// FlashAttention-2 style: a block owns kRows rows (queries, or keys in dK/dV), kQuad threads
// per row, each holding the dims d = r, r + kQuad, ... (r = its index in the quad: the quad
// reads consecutive shared-memory words, no bank conflicts). A dot product over D is kQuad
// partial sums joined by two shuffles. The other operand streams through shared memory in
// tiles of kTile rows, only up to the diagonal. Exact fp32 arithmetic; the scores of a tile
// stay in registers, never in memory. X: the element type of qkv, out and their gradients,
// read into fp32: float (with TF32 off, or where the tensor-core kernels do not run: other head
// sizes, buffers not 16-byte aligned), or __nv_bfloat16 where they do not run.
constexpr int kQuad = 4, kRows = 64, kTile = 32, kFlashThreads = kRows * kQuad;

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

// grid (B*H, ceil(T/kRows)). out (B,T,C), lse (B,H,T), qkv (B,T,3C), slopes (H,) or null.
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(X* __restrict__ out, float* __restrict__ lse, const X* __restrict__ qkv,
                         const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int E = D / kQuad;  // dims per thread
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const float slope = kAlibi ? slopes[h] : 0.0f;  // q is scaled, and so are the scores
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
            if constexpr (kAlibi) p = alibi(p, slope, t, k0 + j);
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
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dkdv_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                               const float* __restrict__ lse, const float* __restrict__ delta,
                               const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int E = D / kQuad;
    __shared__ float qs[kTile][D], dos[kTile][D], lse_s[kTile], delta_s[kTile];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const float slope = kAlibi ? slopes[h] / scale : 0.0f;  // in the units of q . k
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
            if constexpr (kAlibi) s = alibi(s, slope, t, j);
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
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dq_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                             const float* __restrict__ lse, const float* __restrict__ delta,
                             const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int E = D / kQuad;
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const float slope = kAlibi ? slopes[h] / scale : 0.0f;  // in the units of q . k
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
            if constexpr (kAlibi) s = alibi(s, slope, t, k0 + j);
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

// ---- flash attention, tensor cores (mma.sync) ------------------------------------------------
// bf16 activations, or fp32 ones with TF32 on (set_tf32, the trainer's fp32 default, as for its
// GEMMs), at D = 16, 32 or 64: FlashAttention-2 style on tensor-core products with fp32
// accumulators, m16n8k16 on bf16 operands or m16n8k8 on tf32 ones (fp32 rounded to 10 mantissa
// bits), through mma.cuh's helpers (its comments give the layouts). The scores, the softmax and
// the accumulators stay in registers: a row's max and sum are joined over its quad of lanes by
// two shuffles, and the probabilities (rounded to the operand type) are already laid out as the
// A operand of the next product. Tiles of kMmaRows rows stream through shared memory; an operand
// whose rows are the sum's index (V in P V; Q and dO in dK, dV; K in dS K) comes out by
// ldmatrix's transposing form, so each tile is stored once. fp32 softmax, log-sum-exps and
// accumulators; P and dS rounded to the operand type; out and dqkv rounded once, at the store
// (bf16) or not at all (fp32).
// The softmax works in base 2 (scores times scale * log2(e), exp2f: one multiply-add and the
// hardware's exp2 per score); the log-sum-exps are stored in base e, as the fp32 kernels'.

// ALiBi on the lane's part of a warp's 16 x N tile of raw scores q . k: rows row[0] and row[1]
// (g, g + 8), columns col0 + 8n + 2t and + 1. slope: slopes[h] / scale; qrows: the rows are
// the queries (S = Q K^T), else the keys (S^T = K Q^T).
template <int N>
__device__ inline void alibi_tile(float (&s)[N / 8][4], float slope, const int (&row)[2], int col0, bool qrows) {
    const int c = col0 + 2 * (threadIdx.x % 4);
    for (int r = 0; r < 2; r++) {
        // query minus key at the lane's first column, then column by column: whole numbers, exact
        // in float, so each score is alibi()'s
        const float d = (float)(qrows ? row[r] - c : c - row[r]), step = qrows ? -1.0f : 1.0f;
        for (int n = 0; n < N / 8; n++)
            for (int e = 0; e < 2; e++) s[n][2 * r + e] -= slope * (d + step * (float)(8 * n + e));
    }
}

template <int D, class X>
struct alignas(16) MmaTiles {
    X a[kMmaRows][D + kPad<X>], b[kMmaRows][D + kPad<X>];
};

// grid (B*H, ceil(T/kMmaRows)); key tiles up to the diagonal. At least one block per SM: so
// ptxas's register budget is the hardware's 255; given the block size alone it picked a tighter
// one of its own, and spilled the fp32 kernels at D = 16 and 32 (scripts/check_spills.sh).
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kMmaThreads, 1)
    flash_forward_mma_kernel(X* __restrict__ out, float* __restrict__ lse, const X* __restrict__ qkv,
                             const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int K = kMmaK<X>;
    __shared__ MmaTiles<D, X> sm;  // K and V
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float slope = kAlibi ? slopes[h] / scale : 0.0f;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kMmaRows;  // longest rows first
    const int rows[2] = {row0 + 16 * w + lane / 4, row0 + 16 * w + lane / 4 + 8}, t = lane % 4;
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;
    load_rows<D>(sm.a, base, row0, T, C3);  // Q, through K's tile (the loop's first barrier frees it)
    __syncthreads();
    uint32_t qa[D / K][4];
    for (int k = 0; k < D / K; k++) load_a(qa[k], &sm.a[16 * w][K * k], D + kPad<X>);
    float o[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // m: base 2
    const float scale2 = scale * kLog2e;
    const int kend = min(T, row0 + kMmaRows);
    for (int k0 = 0; k0 < kend; k0 += kMmaRows) {
        __syncthreads();  // the previous tile is read
        load_rows<D>(sm.a, base + C, k0, T, C3);
        load_rows<D>(sm.b, base + 2 * C, k0, T, C3);
        __syncthreads();
        float s[kTiles8][4] = {};
        mma_xyt<D>(s, qa, sm.a);  // S = Q K^T
        if constexpr (kAlibi) alibi_tile<kMmaRows>(s, slope, rows, k0, true);
        // The row max on the raw scores (the scale is positive), so that each score then costs
        // one multiply-add before its exp2: p = 2^(s * scale2 - m), m in base 2.
        float mt[2] = {-INFINITY, -INFINITY};
        auto row_max = [&](auto causal) {  // the causal mask on the diagonal tile only
            for (int n = 0; n < kTiles8; n++)
                for (int i = 0; i < 4; i++) {
                    if (decltype(causal)::value && k0 + 8 * n + 2 * t + (i & 1) > rows[i / 2]) s[n][i] = -INFINITY;
                    mt[i / 2] = fmaxf(mt[i / 2], s[n][i]);
                }
        };
        if (k0 == row0)
            row_max(std::true_type{});
        else
            row_max(std::false_type{});
        for (int r = 0; r < 2; r++) {
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
            mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));  // finite: key 0 is in the first tile
            const float mn = fmaxf(m[r], mt[r] * scale2), alpha = exp2f(m[r] - mn);
            l[r] *= alpha;
            for (int n = 0; n < D / 8; n++) o[n][2 * r] *= alpha, o[n][2 * r + 1] *= alpha;
            m[r] = mn;
        }
        for (int n = 0; n < kTiles8; n++)
            for (int i = 0; i < 4; i++) {
                s[n][i] = exp2f(fmaf(s[n][i], scale2, -m[i / 2]));
                l[i / 2] += s[n][i];  // the lane's share of the row sum, joined over the quad at the end
            }
        mma_xy<D>(o, s, sm.b);  // O += P V
    }
    for (int r = 0; r < 2; r++) {
        l[r] = quad_sum(l[r]);
        if (rows[r] >= T) continue;
        store_row<D>(out + ((size_t)b * T + rows[r]) * C + h * D, o, r, 1.0f / l[r]);
        if (t == 0) lse[(size_t)bh * T + rows[r]] = (m[r] + log2f(l[r])) * kLn2;
    }
}

template <int D, class X>
struct alignas(16) MmaDkdvTiles {
    X q[kMmaRows][D + kPad<X>], dout[kMmaRows][D + kPad<X>];
    float lse[kMmaRows], delta[kMmaRows];
};

// dK, dV: a warp owns 16 keys (the rows of its products); query tiles from the block's first
// key to T, each in parts of kDkdvCols queries: P and dS, live beside K, V, dK and dV, take
// registers for one part only (at D = 64 in fp32 the whole tile took 252 of 255 registers, parts
// of 32 queries 236, of 16 216: scripts/check_spills.sh). The sums run in the same order.
// grid (B*H, ceil(T/kMmaRows)).
constexpr int kDkdvCols = 16;
// Blocks per SM asked of ptxas (0: its own choice). ALiBi's bias took bf16 at D = 32 from 96
// registers to 128, 5 blocks to 4; asked for 5 it fits 96 without spilling (scripts/results/registers.md).
template <int D, class X, bool kAlibi>
constexpr int kDkdvMinBlocks = (kAlibi && D == 32 && is_bf16<X>) ? 5 : 0;
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kMmaThreads, (kDkdvMinBlocks<D, X, kAlibi>))
    flash_backward_dkdv_mma_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int K = kMmaK<X>;
    __shared__ MmaDkdvTiles<D, X> sm;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float slope = kAlibi ? slopes[h] / scale : 0.0f;
    const int row0 = (int)blockIdx.y * kMmaRows;  // longest first: the first keys see every query
    const int keys[2] = {row0 + 16 * w + lane / 4, row0 + 16 * w + lane / 4 + 8}, t = lane % 4;
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;
    const X* dbase = dout + (size_t)b * T * C + h * D;
    load_rows<D>(sm.q, base + C, row0, T, C3);  // K and V, through the tiles the loop uses
    load_rows<D>(sm.dout, base + 2 * C, row0, T, C3);
    __syncthreads();
    uint32_t ka[D / K][4], va[D / K][4];
    for (int k = 0; k < D / K; k++) {
        load_a(ka[k], &sm.q[16 * w][K * k], D + kPad<X>);
        load_a(va[k], &sm.dout[16 * w][K * k], D + kPad<X>);
    }
    float dk[D / 8][4] = {}, dv[D / 8][4] = {};
    const float scale2 = scale * kLog2e;
    for (int q0 = row0; q0 < T; q0 += kMmaRows) {
        __syncthreads();
        load_rows<D>(sm.q, base, q0, T, C3);
        load_rows<D>(sm.dout, dbase, q0, T, C);
        for (int i = threadIdx.x; i < kMmaRows; i += kMmaThreads) {
            sm.lse[i] = q0 + i < T ? lse[(size_t)bh * T + q0 + i] * kLog2e : 0.0f;  // base 2
            sm.delta[i] = q0 + i < T ? delta[(size_t)bh * T + q0 + i] : 0.0f;
        }
        __syncthreads();
#pragma unroll 1  // one part's P and dS live at a time
        for (int c0 = 0; c0 < kMmaRows; c0 += kDkdvCols) {
            constexpr int N = kDkdvCols;
            float p[N / 8][4] = {}, ds[N / 8][4] = {};
            mma_xyt<D, N>(p, ka, sm.q + c0);      // S^T = K Q^T
            mma_xyt<D, N>(ds, va, sm.dout + c0);  // dP^T = V dO^T
            if constexpr (kAlibi) alibi_tile<N>(p, slope, keys, q0 + c0, false);
            for (int n = 0; n < N / 8; n++)
                for (int i = 0; i < 4; i++) {
                    const int c = c0 + 8 * n + 2 * t + (i & 1), q = q0 + c;  // query q is the tile's column c
                    p[n][i] = keys[i / 2] <= q && q < T ? exp2f(p[n][i] * scale2 - sm.lse[c]) : 0.0f;
                    ds[n][i] = p[n][i] * (ds[n][i] - sm.delta[c]);
                }
            mma_xy<D, N>(dv, p, sm.dout + c0);  // dV += P^T dO
            mma_xy<D, N>(dk, ds, sm.q + c0);    // dK += dS^T Q
        }
    }
    for (int r = 0; r < 2; r++) {
        if (keys[r] >= T) continue;
        X* g = dqkv + ((size_t)b * T + keys[r]) * C3 + h * D;
        store_row<D>(g + C, dk, r, scale);
        store_row<D>(g + 2 * C, dv, r, 1.0f);
    }
}

// dQ: a warp owns 16 queries; key tiles up to the diagonal. grid (B*H, ceil(T/kMmaRows)).
template <int D, class X, bool kAlibi>
__global__ void __launch_bounds__(kMmaThreads)
    flash_backward_dq_mma_kernel(X* __restrict__ dqkv, const X* __restrict__ dout, const X* __restrict__ qkv,
                                 const float* __restrict__ lse, const float* __restrict__ delta,
                                 const float* __restrict__ slopes, int T, int C, int H, float scale) {
    constexpr int K = kMmaK<X>;
    __shared__ MmaTiles<D, X> sm;  // K and V
    const int bh = blockIdx.x, b = bh / H, h = bh % H, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float slope = kAlibi ? slopes[h] / scale : 0.0f;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kMmaRows;
    const int rows[2] = {row0 + 16 * w + lane / 4, row0 + 16 * w + lane / 4 + 8}, t = lane % 4;
    const size_t C3 = 3 * (size_t)C;
    const X* base = qkv + (size_t)b * T * C3 + h * D;
    load_rows<D>(sm.a, base, row0, T, C3);  // Q and dO, through the tiles the loop uses
    load_rows<D>(sm.b, dout + (size_t)b * T * C + h * D, row0, T, C);
    __syncthreads();
    uint32_t qa[D / K][4], oa[D / K][4];
    for (int k = 0; k < D / K; k++) {
        load_a(qa[k], &sm.a[16 * w][K * k], D + kPad<X>);
        load_a(oa[k], &sm.b[16 * w][K * k], D + kPad<X>);
    }
    float lse_r[2], delta_r[2];
    for (int r = 0; r < 2; r++) {
        lse_r[r] = rows[r] < T ? lse[(size_t)bh * T + rows[r]] * kLog2e : 0.0f;  // base 2
        delta_r[r] = rows[r] < T ? delta[(size_t)bh * T + rows[r]] : 0.0f;
    }
    float dq[D / 8][4] = {};
    const float scale2 = scale * kLog2e;
    const int kend = min(T, row0 + kMmaRows);
    for (int k0 = 0; k0 < kend; k0 += kMmaRows) {
        __syncthreads();
        load_rows<D>(sm.a, base + C, k0, T, C3);
        load_rows<D>(sm.b, base + 2 * C, k0, T, C3);
        __syncthreads();
        float ds[kTiles8][4] = {}, dp[kTiles8][4] = {};
        mma_xyt<D>(ds, qa, sm.a);  // S = Q K^T
        mma_xyt<D>(dp, oa, sm.b);  // dP = dO V^T
        if constexpr (kAlibi) alibi_tile<kMmaRows>(ds, slope, rows, k0, true);
        for (int n = 0; n < kTiles8; n++)
            for (int i = 0; i < 4; i++) {
                const int r = i / 2;
                const float p = k0 + 8 * n + 2 * t + (i & 1) <= rows[r] ? exp2f(ds[n][i] * scale2 - lse_r[r]) : 0.0f;
                ds[n][i] = p * (dp[n][i] - delta_r[r]);
            }
        mma_xy<D>(dq, ds, sm.a);  // dQ += dS K
    }
    for (int r = 0; r < 2; r++)
        if (rows[r] < T) store_row<D>(dqkv + ((size_t)b * T + rows[r]) * C3 + h * D, dq, r, scale);
}

// Calls f(std::true_type()) with ALiBi's slopes, f(std::false_type()) without: the flash kernels
// take the bias as a template flag, so that those without it stay as they were (registers).
template <class F>
void with_alibi(const float* slopes, F f) {
    if (slopes)
        f(std::true_type());
    else
        f(std::false_type());
}

// with_size for the head sizes the kernels are instantiated for (the one list of them)
template <class F>
bool with_head_size(int D, F f) {
    return with_size<8, 16, 32, 64, 128>(D, f);
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
dim3 mma_grid(int B, int T, int H) {
    return dim3((unsigned)(B * H), (unsigned)ceil_div(T, kMmaRows));
}
// The tensor-core kernels' head sizes. bf16 activations always run them, fp32 ones with TF32
// on; either only when every buffer is 16-byte aligned and C is a whole number of 16-byte
// packs (their row loads). The fp32 kernels run the rest.
constexpr bool mma_head_size(int D) {
    return D == 16 || D == 32 || D == 64;
}
template <class X>
bool use_mma(int C, std::initializer_list<const void*> ptrs) {
    return (is_bf16<X> || tf32_enabled()) && packs_fit<X>(C, ptrs);
}

}  // namespace

// out (B,T,C), att (B,H,T,T) softmax probabilities (saved for backward), qkv (B,T,3C); ALiBi's
// bias when pos has slopes (H,)
template <class Act>
void attention_forward(Act* out, Act* att, const Act* qkv, int B, int T, int C, int H, const PosData<float>& pos) {
    const cudaStream_t stream = main_stream();
    if (B <= 0 || T <= 0 || C <= 0) return;
    const float* slopes = pos.slopes;
    scores_gemm(att, qkv, B, T, C, H, stream);
    size_t rows = (size_t)B * H * T;
    causal_softmax_forward_kernel<dev_t<Act>>
        <<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps, 0, stream>>>(dev(att), slopes, T, H, rows);
    cudaCheckLaunch();
    pv_gemm(out, att, qkv, B, T, C, H, stream);
}

// dqkv (B,T,3C) = gradient (overwritten); scratch (B,H,T,T) is overwritten (holds dP, then dS).
// ALiBi's bias is in att already.
template <class Act>
void attention_backward(Act* dqkv, Act* scratch, const Act* dout, const Act* qkv, const Act* att, int B, int T, int C, int H, const PosData<float>& /*pos*/) {
    const cudaStream_t stream = main_stream();
    if (B <= 0 || T <= 0 || C <= 0) return;
    dp_gemm(scratch, dout, qkv, B, T, C, H, stream);
    size_t rows = (size_t)B * H * T;
    causal_softmax_backward_kernel<dev_t<Act>>
        <<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps, 0, stream>>>(dev(scratch), dev(att), T, rows);
    cudaCheckLaunch();
    dqkv_gemms(dqkv, dout, qkv, att, scratch, B, T, C, H, stream);
}

// out (B,T,C), lse (B,H,T), qkv (B,T,3C); ALiBi's bias when pos has slopes (H,)
template <class Act>
void attention_forward_lse(Act* out, float* lse, const Act* qkv, int B, int T, int C, int H, const PosData<float>& pos) {
    const cudaStream_t stream = main_stream();
    if (B <= 0 || T <= 0 || C <= 0) return;
    const float* slopes = pos.slopes;
    const float scale = 1.0f / sqrtf((float)(C / H));
    check_flash_head_size(C / H);
    using X = dev_t<Act>;
    with_head_size(C / H, [&](auto d) {
        with_alibi(slopes, [&](auto alibi) {
            constexpr int D = d.value;
            constexpr bool A = alibi.value;
            if constexpr (mma_head_size(D))
                if (use_mma<X>(C, {out, qkv})) {
                    flash_forward_mma_kernel<D, X, A><<<mma_grid(B, T, H), kMmaThreads, 0, stream>>>(
                        dev(out), lse, dev(qkv), slopes, T, C, H, scale);
                    return;
                }
            flash_forward_kernel<D, X, A><<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(
                dev(out), lse, dev(qkv), slopes, T, C, H, scale);
        });
    });
    cudaCheckLaunch();
}

// dqkv (B,T,3C) = gradient (overwritten); out (B,T,C) and lse (B,H,T) from attention_forward_lse
// with the same position data
template <class Act>
void attention_backward_lse(Act* dqkv, const Act* dout, const Act* qkv, const Act* out, const float* lse, int B, int T, int C, int H, const PosData<float>& pos) {
    const cudaStream_t stream = main_stream();
    if (B <= 0 || T <= 0 || C <= 0) return;
    const float* slopes = pos.slopes;
    using X = dev_t<Act>;
    static Scratch<float> s_delta;
    const size_t rows = (size_t)B * H * T;
    float* delta = s_delta.get(rows);
    flash_delta_kernel<X><<<grid_for(rows, 256), 256, 0, stream>>>(delta, dev(dout), dev(out), T, C, H, rows);
    cudaCheckLaunch();
    const float scale = 1.0f / sqrtf((float)(C / H));
    check_flash_head_size(C / H);
    with_head_size(C / H, [&](auto d) {
        with_alibi(slopes, [&](auto alibi) {
            constexpr int D = d.value;
            constexpr bool A = alibi.value;
            if constexpr (mma_head_size(D))
                if (use_mma<X>(C, {dqkv, dout, qkv})) {
                    flash_backward_dkdv_mma_kernel<D, X, A><<<mma_grid(B, T, H), kMmaThreads, 0, stream>>>(
                        dev(dqkv), dev(dout), dev(qkv), lse, delta, slopes, T, C, H, scale);
                    cudaCheckLaunch();
                    flash_backward_dq_mma_kernel<D, X, A><<<mma_grid(B, T, H), kMmaThreads, 0, stream>>>(
                        dev(dqkv), dev(dout), dev(qkv), lse, delta, slopes, T, C, H, scale);
                    return;
                }
            flash_backward_dkdv_kernel<D, X, A><<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, slopes, T, C, H, scale);
            cudaCheckLaunch();
            flash_backward_dq_kernel<D, X, A><<<flash_grid(B, T, H), kFlashThreads, 0, stream>>>(
                dev(dqkv), dev(dout), dev(qkv), lse, delta, slopes, T, C, H, scale);
        });
    });
    cudaCheckLaunch();
}

// ---- incremental decoding (src/generate.h): the KV cache and one query against it ----

namespace {

constexpr int kDecodeThreads = 256;  // per block; also the largest head size taken
constexpr int kDecodeKeys = 512;     // keys per block: a split of the cached positions

// Grid-stride over B*T*C: position pos + t of row b of kc and vc (B, cap, C) <- the k and v of
// row (b,t) of qkv (B,T,3C).
template <class X>
__global__ void kv_cache_write_kernel(X* __restrict__ kc, X* __restrict__ vc, const X* __restrict__ qkv, int T, int C,
                                      int pos, int cap, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t bt = i / C, c = i % C, at = ((bt / T) * cap + pos + bt % T) * C + c;
        kc[at] = qkv[bt * 3 * C + C + c];
        vc[at] = qkv[bt * 3 * C + 2 * C + c];
    }
}

// The max over the block, as block_sum (common.cuh): every thread gets it; shared holds 32.
__device__ inline float block_max(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? shared[lane] : -INFINITY;
    r = warp_max(r);
    __syncthreads();
    return r;
}

// Flash-decoding, the splits. Block (bh, k) of the grid (B*H, splits): the query of head h of row
// b of qkv (B,1,3C), at position n - 1, against the cached keys [k kDecodeKeys, ...) below n of
// kc, vc (B, cap, C): their scores' max m, the sum s of exp(score - m) and sum_j exp(score_j - m)
// v_j, into part (B*H, splits, D + 2) as (that sum (D), m, s). A key's or value's row of D is read
// by P lanes (P a power of two up to 32), W elements at once (16 bytes when they fit), lane l the
// packs l, l + P, ...: a warp reads 32 / P whole rows per load, where one thread per key would
// touch 32 rows for 2 bytes each. The lanes' dot products meet by shuffles; for p v each group of
// P lanes sums every (blockDim / P)-th key, the groups of a warp folded by shuffles, the warps in
// order (a fixed order: the same bits at every launch).
template <class X, int W>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_split_kernel(float* __restrict__ part, const X* __restrict__ qkv, const X* __restrict__ kc,
                                  const X* __restrict__ vc, const float* __restrict__ slopes, int n, int cap, int C,
                                  int H, float scale) {
    constexpr int kLanePacks = W == 1 ? 8 : 2;  // packs per lane at most, for D <= kDecodeThreads
    constexpr int kWarps = kDecodeThreads / 32;
    __shared__ float q[kDecodeThreads], p[kDecodeKeys], warp_pv[kWarps][kDecodeThreads], red[32];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, D = C / H, tid = threadIdx.x, lane = tid & 31;
    const int packs = D / W, P = min(32, 1 << (31 - __clz(packs))), l = tid % P, key = tid / P;
    const int groups = blockDim.x / P, j0 = blockIdx.y * kDecodeKeys, nk = min(kDecodeKeys, n - j0);
    const X *k0 = kc + ((size_t)b * cap + j0) * C + h * D, *v0 = vc + ((size_t)b * cap + j0) * C + h * D;
    for (int e = tid; e < D; e += blockDim.x) q[e] = f32(qkv[(size_t)b * 3 * C + h * D + e]);
    __syncthreads();
    float cmax = -INFINITY;
    for (int jb = 0; jb < nk; jb += groups) {  // every lane of the warp in each pass: the shuffles
        const int j = jb + key;
        float dot = 0.0f;
        for (int i = 0; i < kLanePacks && j < nk; i++)
            if (const int pk = l + i * P; pk < packs) {
                const Pack<X, W> k = load_pack<X, W>(k0 + (size_t)j * C, (size_t)pk * W);
                for (int e = 0; e < W; e++) dot += q[pk * W + e] * f32(k.e[e]);
            }
        for (int o = P / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (j < nk && l == 0) {
            float x = dot * scale;
            if (slopes) x = alibi(x, slopes[h], n - 1, j0 + j);
            p[j] = x;
            cmax = fmaxf(cmax, x);
        }
    }
    const float m = block_max(cmax, red);  // its barrier makes every score visible
    float csum = 0.0f;
    for (int j = tid; j < nk; j += blockDim.x) csum += p[j] = expf(p[j] - m);
    const float s = block_sum(csum, red);  // and every p
    float acc[kLanePacks][W] = {};
    for (int j = key; j < nk; j += groups)
        for (int i = 0; i < kLanePacks; i++)
            if (const int pk = l + i * P; pk < packs) {
                const Pack<X, W> v = load_pack<X, W>(v0 + (size_t)j * C, (size_t)pk * W);
                for (int e = 0; e < W; e++) acc[i][e] += p[j] * f32(v.e[e]);
            }
    for (int o = P; o < 32; o *= 2)
        for (int i = 0; i < kLanePacks; i++)
            for (int e = 0; e < W; e++) acc[i][e] += __shfl_xor_sync(0xffffffffu, acc[i][e], o);
    if (lane < P)
        for (int i = 0; i < kLanePacks; i++)
            if (const int pk = lane + i * P; pk < packs)
                for (int e = 0; e < W; e++) warp_pv[tid / 32][pk * W + e] = acc[i][e];
    __syncthreads();
    float* out = part + ((size_t)bh * gridDim.y + blockIdx.y) * (D + 2);
    for (int d = tid; d < D; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < kWarps; w++) o += warp_pv[w][d];
        out[d] = o;
    }
    if (tid == 0) out[D] = m, out[D + 1] = s;
}

// Flash-decoding, the combination: block bh, a thread per channel, folds the splits of part
// (B*H, splits, D + 2) in order, each rescaled to their common max, into out (B,C).
template <class X>
__global__ void attention_decode_combine_kernel(X* __restrict__ out, const float* __restrict__ part, int splits, int C,
                                                int H) {
    const int bh = blockIdx.x, D = C / H, d = threadIdx.x;
    const float* p = part + (size_t)bh * splits * (D + 2);
    float m = -INFINITY, s = 0.0f, o = 0.0f;
    for (int k = 0; k < splits; k++) m = fmaxf(m, p[(size_t)k * (D + 2) + D]);
    for (int k = 0; k < splits; k++) {
        const float* pk = p + (size_t)k * (D + 2), f = expf(pk[D] - m);
        s += pk[D + 1] * f;
        o += pk[d] * f;
    }
    out[(size_t)(bh / H) * C + (bh % H) * D + d] = from_f32<X>(o / s);
}

}  // namespace

// kc, vc (B, cap, C): positions [pos, pos + T) of each row <- the keys and values of qkv (B,T,3C)
template <class Act>
void kv_cache_write(Act* kc, Act* vc, const Act* qkv, int B, int T, int C, int pos, int cap) {
    const cudaStream_t stream = main_stream();
    const size_t n = (size_t)B * T * C;
    if (n == 0) return;
    kv_cache_write_kernel<dev_t<Act>><<<grid_for(n, 256), 256, 0, stream>>>(dev(kc), dev(vc), dev(qkv), T, C, pos, cap, n);
    cudaCheckLaunch();
}

// out (B,C): the query of qkv (B,1,3C) at position n - 1 against the n cached positions of kc, vc
// (B, cap, C); ALiBi's slopes from pos (null: none). Head sizes up to kDecodeThreads. The keys
// go in splits of kDecodeKeys, a block each (B*H blocks alone would leave most of the GPU idle at
// one token), then one block per head folds the splits.
template <class Act>
void attention_decode(Act* out, const Act* qkv, const Act* kc, const Act* vc, int B, int n, int cap, int C, int H,
                      const PosData<float>& pos) {
    const cudaStream_t stream = main_stream();
    if (B <= 0 || n <= 0 || C <= 0) return;
    const int D = C / H, splits = (int)ceil_div((size_t)n, (size_t)kDecodeKeys);
    if (D > kDecodeThreads)
        throw std::runtime_error("attention_decode: head size " + std::to_string(D) + " is over " +
                                 std::to_string(kDecodeThreads));
    static Scratch<float> s_part;
    float* part = s_part.get((size_t)B * H * splits * (D + 2));
    with_pack<dev_t<Act>>(D, {kc, vc}, [&](auto w) {
        attention_decode_split_kernel<dev_t<Act>, decltype(w)::value>
            <<<dim3((unsigned)(B * H), (unsigned)splits), kDecodeThreads, 0, stream>>>(
                part, dev(qkv), dev(kc), dev(vc), pos.slopes, n, cap, C, H, 1.0f / sqrtf((float)D));
    });
    cudaCheckLaunch();
    attention_decode_combine_kernel<dev_t<Act>><<<(unsigned)(B * H), D, 0, stream>>>(dev(out), part, splits, C, H);
    cudaCheckLaunch();
}

GPU_INSTANTIATE(attention_forward)
GPU_INSTANTIATE(attention_backward)
GPU_INSTANTIATE(attention_forward_lse)
GPU_INSTANTIATE(attention_backward_lse)
GPU_INSTANTIATE(kv_cache_write)
GPU_INSTANTIATE(attention_decode)

}  // namespace gpu
