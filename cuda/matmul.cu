// Linear layer y = x W^T + b on cuBLAS, backward, and the shared GEMM helpers.
//
// cuBLAS is column-major. A row-major (R, K) matrix with row stride ld is, to cuBLAS, a
// column-major (K, R) matrix with leading dimension ld, i.e. its transpose. So every
// row-major product Y = X W^T is computed as the column-major product Y^T = W X^T.
//
// bf16 mode (set_precision_bf16): the GEMMs read bf16 copies of inp, w and dout (to_bf16,
// into grow-only scratch; the weight is converted at every call, as autocast does) and
// accumulate and write in fp32; the bias add and dbias column sums stay fp32.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {
bool g_tf32 = true;
bool g_bf16 = false;
}  // namespace

void set_tf32(bool on) {
    g_tf32 = on;
}
bool tf32_enabled() {
    return g_tf32;
}
void set_precision_bf16(bool on) {
    g_bf16 = on;
}
bool precision_bf16() {
    return g_bf16;
}

// Column-major C (m,n) = alpha op(A) op(B) + beta C, fp32 storage, TF32 tensor cores if enabled.
void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
             float beta, float* C, int ldc, cudaStream_t stream) {
    cublasCheck(cublasGemmEx(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                             &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc,
                             gemm_compute_type(), CUBLAS_GEMM_DEFAULT));
}

void gemm_cm_strided_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                             long long strideA, const float* B, int ldb, long long strideB, float beta, float* C,
                             int ldc, long long strideC, int batch, cudaStream_t stream) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_32F, lda, strideA,
                                           B, CUDA_R_32F, ldb, strideB, &beta, C, CUDA_R_32F, ldc, strideC, batch,
                                           gemm_compute_type(), CUBLAS_GEMM_DEFAULT));
}

// bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F), fp32 C.
void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const __nv_bfloat16* A, int lda,
             const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc, cudaStream_t stream) {
    cublasCheck(cublasGemmEx(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                             &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_cm_strided_batched(bool ta, bool tb, int m, int n, int k, float alpha, const __nv_bfloat16* A, int lda,
                             long long strideA, const __nv_bfloat16* B, int ldb, long long strideB, float beta,
                             float* C, int ldc, long long strideC, int batch, cudaStream_t stream) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16BF, lda,
                                           strideA, B, CUDA_R_16BF, ldb, strideB, &beta, C, CUDA_R_32F, ldc, strideC,
                                           batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {

__global__ void to_bf16_kernel(__nv_bfloat16* __restrict__ out, const float* __restrict__ in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

}  // namespace

const __nv_bfloat16* to_bf16(int slot, const float* x, size_t n, cudaStream_t stream) {
    // Scratch allocates through device_malloc, so these buffers count in peak_memory().
    static Scratch<__nv_bfloat16> s_slots[kBf16Slots];
    if (slot < 0 || slot >= kBf16Slots) throw std::logic_error("to_bf16: bad scratch slot");
    __nv_bfloat16* y = s_slots[slot].get(n);
    if (n) {
        to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(y, x, n);
        cudaCheckLaunch();
    }
    return y;
}

namespace {

// The linear layer's GEMMs for either operand type E (float, or bf16 copies): the fp32 and
// bf16 paths share these argument lists.
// column-major: out^T (OC,N) = W (OC,IC) [stored as W^T (IC,OC), so op = T] . inp^T (IC,N)
template <class E>
void linear_forward_gemm(float* out, const E* inp, const E* w, int N, int IC, int OC, cudaStream_t stream) {
    gemm_cm(true, false, OC, N, IC, 1.0f, w, IC, inp, IC, 0.0f, out, OC, stream);
}

// column-major: dinp^T (IC,N) += W^T (IC,OC) [stored as is] . dout^T (OC,N) [stored as is]
template <class E>
void linear_backward_dinp_gemm(float* dinp, const E* dout, const E* w, int N, int IC, int OC, cudaStream_t stream) {
    gemm_cm(false, false, IC, N, OC, 1.0f, w, IC, dout, OC, 1.0f, dinp, IC, stream);
}

// column-major: dw^T (IC,OC) += inp^T (IC,N) [stored as is] . dout (N,OC) [stored as dout^T, op = T]
template <class E>
void linear_backward_dw_gemm(float* dw, const E* dout, const E* inp, int N, int IC, int OC, cudaStream_t stream) {
    gemm_cm(false, true, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, IC, stream);
}

// bf16 slots of the linear layer's operands
constexpr int kSlotInp = 0, kSlotDout = 1, kSlotW = 2;

// out (N,OC) += bias (OC) broadcast over rows
__global__ void add_bias_kernel(float* __restrict__ out, const float* __restrict__ bias, int OC, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] += bias[i % OC];
}

// Same with float4 (OC % 4 == 0 and 16-byte aligned pointers); total4 = N*OC/4.
__global__ void add_bias4_kernel(float4* __restrict__ out, const float4* __restrict__ bias, int OC4, size_t total4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total4; i += (size_t)gridDim.x * blockDim.x) {
        float4 o = out[i];
        float4 b = bias[i % OC4];
        o.x += b.x;
        o.y += b.y;
        o.z += b.z;
        o.w += b.w;
        out[i] = o;
    }
}

// Deterministic column sums, stage 1: block (cx, chunk) sums rows of one chunk for 32 columns.
constexpr int kColY = 8;
__global__ void column_sum_partial_kernel(float* __restrict__ partial, const float* __restrict__ x, int N, int C,
                                          int rows_per_chunk) {
    __shared__ float s[kColY][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * rows_per_chunk;
    int r1 = min(N, r0 + rows_per_chunk);
    float a = 0.0f;
    if (c < C)
        for (int r = r0 + threadIdx.y; r < r1; r += kColY) a += x[(size_t)r * C + c];
    s[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.0f;
        for (int y = 0; y < kColY; y++) t += s[y][threadIdx.x];
        partial[(size_t)blockIdx.y * C + c] = t;
    }
}

// stage 2: dst[c] += sum over chunks in order
__global__ void column_sum_final_kernel(float* __restrict__ dst, const float* __restrict__ partial, int nchunks,
                                        int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float t = 0.0f;
    for (int k = 0; k < nchunks; k++) t += partial[(size_t)k * C + c];
    dst[c] += t;
}

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

// dst (C) += column sums of x (N, C); fixed chunking -> bitwise reproducible.
void column_sum_accumulate(float* dst, const float* x, int N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    const int rows_per_chunk = 512;
    const int nchunks = ceil_div(N, rows_per_chunk);
    static Scratch<float> s_partial;
    float* partial = s_partial.get((size_t)nchunks * C);
    column_sum_partial_kernel<<<dim3(ceil_div(C, 32), nchunks), dim3(32, kColY), 0, stream>>>(partial, x, N, C,
                                                                                              rows_per_chunk);
    cudaCheckLaunch();
    column_sum_final_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dst, partial, nchunks, C);
    cudaCheckLaunch();
}

// out (N,OC) = inp (N,IC) . w (OC,IC)^T + bias (OC)
void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int IC, int OC,
                    cudaStream_t stream) {
    if (N <= 0 || OC <= 0) return;
    if (precision_bf16())
        linear_forward_gemm(out, to_bf16(kSlotInp, inp, (size_t)N * IC, stream),
                            to_bf16(kSlotW, w, (size_t)OC * IC, stream), N, IC, OC, stream);
    else
        linear_forward_gemm(out, inp, w, N, IC, OC, stream);
    if (bias) {
        size_t total = (size_t)N * OC;
        if (OC % 4 == 0 && aligned16(out) && aligned16(bias)) {
            size_t total4 = total / 4;
            add_bias4_kernel<<<grid_for(total4, 256), 256, 0, stream>>>(
                reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(bias), OC / 4, total4);
        } else {
            add_bias_kernel<<<grid_for(total, 256), 256, 0, stream>>>(out, bias, OC, total);
        }
        cudaCheckLaunch();
    }
}

// dinp (N,IC) += dout (N,OC) . w (OC,IC) ; dw (OC,IC) += dout^T . inp ; dbias (OC) += column sums of dout
void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w, int N,
                     int IC, int OC, cudaStream_t stream) {
    if (N <= 0 || IC <= 0 || OC <= 0) return;
    if (precision_bf16()) {
        // dout is converted once for both GEMMs; dbias sums the fp32 dout
        const __nv_bfloat16* dout16 = (dinp || dw) ? to_bf16(kSlotDout, dout, (size_t)N * OC, stream) : nullptr;
        if (dinp)
            linear_backward_dinp_gemm(dinp, dout16, to_bf16(kSlotW, w, (size_t)OC * IC, stream), N, IC, OC, stream);
        if (dw) linear_backward_dw_gemm(dw, dout16, to_bf16(kSlotInp, inp, (size_t)N * IC, stream), N, IC, OC, stream);
    } else {
        if (dinp) linear_backward_dinp_gemm(dinp, dout, w, N, IC, OC, stream);
        if (dw) linear_backward_dw_gemm(dw, dout, inp, N, IC, OC, stream);
    }
    if (dbias) column_sum_accumulate(dbias, dout, N, OC, stream);
}

}  // namespace gpu
