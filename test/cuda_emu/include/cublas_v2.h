// cuBLAS of the CUDA emulation (cublas.cpp): the GEMMs the project calls, with cuBLAS's
// argument checks, operands checked against the device allocations, fp32 / bf16 inputs,
// TF32 rounding of fp32 inputs when a TF32 compute type or math mode asks for it (to nearest, or
// truncated: CUDA_EMU_TF32), a long K split with its partials summed in bf16 unless the math mode
// disallows reduced-precision reductions.
// Built as a library of its own, libcublas.so.13 (emu.mk), with cuBLAS's exported names (C linkage,
// the _v2 renames below) and signatures: the backend loads it on first use as it loads cuBLAS
// (cuda/matmul.cu), and a call that would not fit the real library does not fit it either.
#pragma once

#include "cuda_runtime.h"

// the cuBLAS of the CUDA 13 toolkit
#define CUBLAS_VER_MAJOR 13

#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasSgemm cublasSgemm_v2

typedef struct cublasContext* cublasHandle_t;

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasComputeType_t {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32I = 72,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };
enum cublasMath_t {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,  // a flag, or-ed with one of the above
};

extern "C" {
cublasStatus_t cublasCreate(cublasHandle_t* h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t* s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t* mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void* workspace, size_t bytes);
const char* cublasGetStatusString(cublasStatus_t st);
const char* cublasGetStatusName(cublasStatus_t st);

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda,
                                          long long strideA, const void* B, cudaDataType_t Btype, int ldb,
                                          long long strideB, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long strideA,
                                         const float* B, int ldb, long long strideB, const float* beta, float* C,
                                         int ldc, long long strideC, int batch);
}  // extern "C"
