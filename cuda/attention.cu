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
//
// bf16 mode (set_precision_bf16): the four GEMM stages read bf16 copies of qkv, dout, P and
// dS (converted into to_bf16 scratch slots) and accumulate and write fp32; the softmax and
// its backward run on the fp32 scores and probabilities as always.
#include <cmath>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

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

// The GEMM stages, for either operand type E (float, or bf16 copies with the same layout):
// the fp32 and bf16 paths share these argument lists. Outputs are always fp32.

// S^T (column-major T x T) = K Q^T, i.e. att[b,h,t1,t2] = scale * q_t1 . k_t2
template <class E>
void scores_gemm(float* att, const E* qkv, int B, int T, int C, int H) {
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const E* q = qkv + (size_t)b * T * C3;
        float* att_b = att + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, sc, q + C, C3, D, q, C3, D, 0.0f, att_b, T, TT, H);
    }
}

// out^T (column-major D x T per head, ld C) = V^T P^T, i.e. out[t1] = sum_t2 P[t1,t2] v_t2
template <class E>
void pv_gemm(float* out, const E* att, const E* qkv, int B, int T, int C, int H) {
    const int D = C / H;
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const E* q = qkv + (size_t)b * T * C3;
        const E* att_b = att + (size_t)b * H * TT;
        float* out_b = out + (size_t)b * T * C;
        gemm_cm_strided_batched(false, false, D, T, T, 1.0f, q + 2 * C, C3, D, att_b, T, TT, 0.0f, out_b, C, D, H);
    }
}

// dP[t1,t2] = dO_t1 . v_t2 : column-major dP^T (T x T) = V dO^T
template <class E>
void dp_gemm(float* scratch, const E* dout, const E* qkv, int B, int T, int C, int H) {
    const int D = C / H;
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const E* q = qkv + (size_t)b * T * C3;
        const E* dout_b = dout + (size_t)b * T * C;
        float* s_b = scratch + (size_t)b * H * TT;
        gemm_cm_strided_batched(true, false, T, T, D, 1.0f, q + 2 * C, C3, D, dout_b, C, D, 0.0f, s_b, T, TT, H);
    }
}

// dV, dQ, dK from dO, P and dS (ds = dS, zero above the diagonal)
template <class E>
void dqkv_gemms(float* dqkv, const E* dout, const E* qkv, const E* att, const E* ds, int B, int T, int C, int H) {
    const int D = C / H;
    const float sc = 1.0f / sqrtf((float)D);
    const long long TT = (long long)T * T;
    const int C3 = 3 * C;
    for (int b = 0; b < B; b++) {
        const E* q = qkv + (size_t)b * T * C3;
        const E* dout_b = dout + (size_t)b * T * C;
        const E* att_b = att + (size_t)b * H * TT;
        const E* s_b = ds + (size_t)b * H * TT;
        float* dq = dqkv + (size_t)b * T * C3;
        // dV[t2] += sum_t1 P[t1,t2] dO_t1 : column-major dV^T (D x T) += dO^T P
        gemm_cm_strided_batched(false, true, D, T, T, 1.0f, dout_b, C, D, att_b, T, TT, 1.0f, dq + 2 * C, C3, D, H);
        // dQ[t1] += scale sum_t2 dS[t1,t2] k_t2 : column-major dQ^T (D x T) += K^T dS^T
        gemm_cm_strided_batched(false, false, D, T, T, sc, q + C, C3, D, s_b, T, TT, 1.0f, dq, C3, D, H);
        // dK[t2] += scale sum_t1 dS[t1,t2] q_t1 : column-major dK^T (D x T) += Q^T dS
        gemm_cm_strided_batched(false, true, D, T, T, sc, q, C3, D, s_b, T, TT, 1.0f, dq + C, C3, D, H);
    }
}

// bf16 slots of the attention operands (see to_bf16 in common.cuh)
constexpr int kSlotQkv = 0, kSlotDout = 1, kSlotAtt = 2, kSlotDs = 3;

}  // namespace

// out (B,T,C), att (B,H,T,T) softmax probabilities (saved for backward), qkv (B,T,3C)
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    const size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * H * T * T;
    const bool bf = precision_bf16();
    const __nv_bfloat16* qkv16 = bf ? to_bf16(kSlotQkv, qkv, nqkv) : nullptr;
    if (bf) scores_gemm(att, qkv16, B, T, C, H);
    else scores_gemm(att, qkv, B, T, C, H);
    size_t rows = (size_t)B * H * T;
    causal_softmax_forward_kernel<<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps>>>(att, T, rows);
    cudaCheckLaunch();
    if (bf) pv_gemm(out, to_bf16(kSlotAtt, att, natt), qkv16, B, T, C, H);
    else pv_gemm(out, att, qkv, B, T, C, H);
}

// dqkv (B,T,3C) += gradient; scratch (B,H,T,T) is overwritten (holds dP, then dS)
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int H) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    const size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * H * T * T, nout = (size_t)B * T * C;
    const bool bf = precision_bf16();
    const __nv_bfloat16* qkv16 = bf ? to_bf16(kSlotQkv, qkv, nqkv) : nullptr;
    const __nv_bfloat16* dout16 = bf ? to_bf16(kSlotDout, dout, nout) : nullptr;
    if (bf) dp_gemm(scratch, dout16, qkv16, B, T, C, H);
    else dp_gemm(scratch, dout, qkv, B, T, C, H);
    size_t rows = (size_t)B * H * T;
    causal_softmax_backward_kernel<<<(unsigned)ceil_div(rows, (size_t)kWarps), 32 * kWarps>>>(scratch, att, T, rows);
    cudaCheckLaunch();
    if (bf)
        dqkv_gemms(dqkv, dout16, qkv16, to_bf16(kSlotAtt, att, natt), to_bf16(kSlotDs, scratch, natt), B, T, C, H);
    else
        dqkv_gemms(dqkv, dout, qkv, att, scratch, B, T, C, H);
}

}  // namespace gpu
