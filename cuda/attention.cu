// Causal multi-head self-attention on the packed qkv (B, T, 3C), head size D = C/H,
// scores scaled by 1/sqrt(D).
//
// Forward: S = Q K^T * scale (cuBLAS, per batch b one strided-batched GEMM over the H heads,
// reading q/k/v straight from the packed layout: head h of row t starts at t*3C + h*D (+C
// for k, +2C for v), so consecutive heads are D floats apart and rows are 3C apart); then a
// causal softmax kernel writes the probabilities P into att (B,H,T,T) with exact zeros
// above the diagonal; then out = P V (GEMM), written straight into (B,T,C).
// Backward: dP = dO V^T ; dV += P^T dO ; dS = P * (dP - rowsum(P * dP)) ; dQ += scale dS K ;
// dK += scale dS^T Q. dP and dS live in `scratch` (B,H,T,T).
//
// The GEMMs compute the full T x T squares (the upper triangle is wasted work, its P and dS
// entries are exactly 0). A fused flash-style kernel would avoid that and the (B,H,T,T)
// buffers; it can replace this file behind the same signatures.
#include <cmath>

#include "backend_cuda.h"
#include "common.cuh"

namespace cuda {

namespace {

constexpr int kWarps = 8;  // rows (one warp each) per block in the softmax kernels

// att (rows = B*H*T, T): in: scaled scores; out: causal softmax (row t1 keeps columns <= t1).
__global__ void causal_softmax_forward_kernel(float* __restrict__ att, int T, size_t rows) {
    size_t row = (size_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warp leaves together
    int t1 = (int)(row % T);
    float* a = att + row * T;
    float m = -INFINITY, s = 0.0f;
    for (int t2 = lane; t2 <= t1; t2 += 32) lse_push(m, s, a[t2]);
    warp_lse(m, s);
    float inv = 1.0f / s;  // s >= 1: the row max contributes exp(0)
    for (int t2 = lane; t2 < T; t2 += 32) a[t2] = t2 <= t1 ? expf(a[t2] - m) * inv : 0.0f;
}

// ds (rows, T): in: dP; out: dS = P * (dP - sum_t2 P dP), zero above the diagonal.
__global__ void causal_softmax_backward_kernel(float* __restrict__ ds, const float* __restrict__ att, int T,
                                               size_t rows) {
    size_t row = (size_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t1 = (int)(row % T);
    float* d = ds + row * T;
    const float* p = att + row * T;
    float dot = 0.0f;
    for (int t2 = lane; t2 <= t1; t2 += 32) dot += p[t2] * d[t2];
    dot = warp_sum(dot);
    for (int t2 = lane; t2 < T; t2 += 32) d[t2] = t2 <= t1 ? p[t2] * (d[t2] - dot) : 0.0f;
}

}  // namespace

// out (B,T,C), att (B,H,T,T) softmax probabilities (saved for backward), qkv (B,T,3C)
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    // S^T (column-major T x T) = K Q^T, i.e. att[b,h,t1,t2] = scale * q_t1 . k_t2
    for (int b = 0; b < B; b++) {
        const float* q = qkv + (size_t)b * T * C3;
        float* att_b = att + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, sc, q + C, C3, D, q, C3, D, 0.0f, att_b, T, TT, H);
    }
    size_t rows = (size_t)B * H * T;
    causal_softmax_forward_kernel<<<(unsigned)div_up(rows, (size_t)kWarps), 32 * kWarps>>>(att, T, rows);
    cudaCheckLaunch();
    // out^T (column-major D x T per head, ld C) = V^T P^T, i.e. out[t1] = sum_t2 P[t1,t2] v_t2
    for (int b = 0; b < B; b++) {
        const float* q = qkv + (size_t)b * T * C3;
        const float* att_b = att + (size_t)b * H * TT;
        float* out_b = out + (size_t)b * T * C;
        gemm_cm_strided_batched(false, false, D, T, T, 1.0f, q + 2 * C, C3, D, att_b, T, TT, 0.0f, out_b, C, D, H);
    }
}

// dqkv (B,T,3C) += gradient; scratch (B,H,T,T) is overwritten (holds dP, then dS)
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int H) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    // dP[t1,t2] = dO_t1 . v_t2 : column-major dP^T (T x T) = V dO^T
    for (int b = 0; b < B; b++) {
        const float* q = qkv + (size_t)b * T * C3;
        const float* dout_b = dout + (size_t)b * T * C;
        float* s_b = scratch + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, 1.0f, q + 2 * C, C3, D, dout_b, C, D, 0.0f, s_b, T, TT, H);
    }
    size_t rows = (size_t)B * H * T;
    causal_softmax_backward_kernel<<<(unsigned)div_up(rows, (size_t)kWarps), 32 * kWarps>>>(scratch, att, T, rows);
    cudaCheckLaunch();
    for (int b = 0; b < B; b++) {
        const float* q = qkv + (size_t)b * T * C3;
        const float* dout_b = dout + (size_t)b * T * C;
        const float* att_b = att + (size_t)b * H * TT;
        const float* s_b = scratch + (size_t)b * H * TT;
        float* dq = dqkv + (size_t)b * T * C3;
        // dV[t2] += sum_t1 P[t1,t2] dO_t1 : column-major dV^T (D x T) += dO^T P
        gemm_cm_strided_batched(false, true, D, T, T, 1.0f, dout_b, C, D, att_b, T, TT, 1.0f, dq + 2 * C, C3, D, H);
        // dQ[t1] += scale sum_t2 dS[t1,t2] k_t2 : column-major dQ^T (D x T) += K^T dS^T
        gemm_cm_strided_batched(false, false, D, T, T, sc, q + C, C3, D, s_b, T, TT, 1.0f, dq, C3, D, H);
        // dK[t2] += scale sum_t1 dS[t1,t2] q_t1 : column-major dK^T (D x T) += Q^T dS
        gemm_cm_strided_batched(false, true, D, T, T, sc, q, C3, D, s_b, T, TT, 1.0f, dq + C, C3, D, H);
    }
}

}  // namespace cuda
