// cuBLAS of the CUDA emulation. A library stand-in, not a kernel of ours: the product runs
// on the CPU's sgemm (OpenBLAS; a plain loop without cblas.h) over fp32 copies of op(A) and
// op(B), so that the stand-in itself adds no error beyond fp32 accumulation. What it models:
// - cuBLAS's argument checks (negative sizes, lda/ldb/ldc below the stored rows, types),
//   reported as cuBLAS reports them, with CUBLAS_STATUS_INVALID_VALUE / _NOT_SUPPORTED;
// - every operand, every batch, inside its device allocation (else a report and abort);
// - input rounding: TF32 (10-bit mantissa) for fp32 inputs under CUBLAS_COMPUTE_32F_FAST_TF32 or
//   the TF32 math mode (NVIDIA_TF32_OVERRIDE=0 turns it off, as on a GPU), to nearest or
//   truncated (CUDA_EMU_TF32: cuBLAS does not document which, so the tests run under both); bf16
//   under CUBLAS_COMPUTE_32F_FAST_16BF; bf16 inputs are exact in fp32;
// - split-K with reduced-precision reduction: a bf16 output with K >= kSplitK is summed over
//   parts of kSplitPart, each part's sum rounded to bf16 and added in bf16, as cuBLAS may do
//   unless the math mode has CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (then one fp32 sum);
// - beta == 0: C is not read (it may hold NaN);
// - the handle's stream (cublasSetStream): a GEMM on a capturing stream is recorded into the
//   graph with alpha, beta and the math mode of the call, its operands read at each replay.
// A library of its own (libcublas.so.13, emu.mk), as cuBLAS is: its entry points have cuBLAS's
// signatures, so its reports name the call, not the caller's line (kSite).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#ifndef NO_CBLAS
#include <cblas.h>
#endif

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "emu_internal.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

namespace {

// where the reports say a call came from: a caller reaches the library through a pointer (the
// backend) or a link (the self-tests), with no file and line to pass
constexpr const char* kSite = "cuBLAS stand-in";
constexpr int kLine = 0;

std::set<cublasHandle_t>& handles() {
    static std::set<cublasHandle_t> s;
    return s;
}

bool tf32_override_off() {
    static const bool off = [] {
        const char* e = std::getenv("NVIDIA_TF32_OVERRIDE");
        return e && std::strcmp(e, "0") == 0;
    }();
    return off;
}

// CUDA_EMU_TF32: nearest (cvt.rna, the default) or truncate (the 13 low mantissa bits dropped)
bool tf32_truncates() {
    static const bool trunc = emu::env_switch("CUDA_EMU_TF32", "nearest", "truncate");
    return trunc;
}

float round_tf32(float x) {
    uint32_t u = emu::cvt_rna_tf32(x);
    if (tf32_truncates()) {
        std::memcpy(&u, &x, 4);
        if ((u & 0x7f800000u) != 0x7f800000u) u &= 0xffffe000u;
    }
    std::memcpy(&x, &u, 4);
    return x;
}

// split-K as cuBLAS may run a long K into a bf16 output (see the top of this file)
constexpr int kSplitK = 8192, kSplitPart = 4096;

size_t type_size(cudaDataType_t t) {
    return t == CUDA_R_16BF ? 2 : 4;
}

float load(const void* p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_16BF) return (float)static_cast<const __nv_bfloat16*>(p)[i];
    return static_cast<const float*>(p)[i];
}

// op(X) (rows x cols) of the stored X (ld), as a packed column-major fp32 matrix, rounded.
enum Rounding { kExact, kTf32, kBf16 };
void pack(std::vector<float>& out, const void* X, cudaDataType_t t, int ld, bool trans, int rows, int cols,
          Rounding r) {
    out.resize((size_t)rows * cols);
    for (int c = 0; c < cols; c++)
        for (int i = 0; i < rows; i++) {
            size_t at = trans ? (size_t)i * ld + c : (size_t)c * ld + i;
            float v = load(X, t, at);
            if (r == kTf32)
                v = round_tf32(v);
            else if (r == kBf16)
                v = (float)__nv_bfloat16(v);
            out[(size_t)c * rows + i] = v;
        }
}

// T (m x n, column-major, packed) = A (m x k, ld lda) B (k x n, ld ldb)
void product(float* T, const float* A, int lda, const float* B, int ldb, int m, int n, int k) {
#ifndef NO_CBLAS
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, T, m);
#else
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s += A[(size_t)p * lda + i] * B[(size_t)j * ldb + p];
            T[(size_t)j * m + i] = s;
        }
#endif
}

cublasStatus_t bad_param(const char* api, int number, const char* what,
                         cublasStatus_t st = CUBLAS_STATUS_INVALID_VALUE) {
    std::fflush(stdout);
    std::fprintf(stderr, "cuda-emu: cuBLAS error: %s: parameter number %d had an illegal value: %s (%s)\n", api, number,
                 what, cublasGetStatusName(st));
    return st;
}

struct Gemm {
    cublasHandle_t h;
    cublasOperation_t ta, tb;
    int m, n, k;
    const void *alpha, *A;
    cudaDataType_t At;
    int lda;
    long long sA;
    const void* B;
    cudaDataType_t Bt;
    int ldb;
    long long sB;
    const void* beta;
    void* C;
    cudaDataType_t Ct;
    int ldc;
    long long sC;
    int batch;
    cublasComputeType_t compute;
};

// Bytes spanned by `batch` stored matrices of rows x cols (ld) strided by `stride` elements.
size_t span_bytes(int rows, int cols, int ld, long long stride, int batch, size_t es) {
    size_t one = ((size_t)(cols - 1) * ld + rows) * es;
    return one + (size_t)(batch - 1) * (size_t)stride * es;
}

// The GEMM as it runs: at the call, or at each replay of a captured one (operands checked then).
// split: the partials of a long K summed in bf16 (reduced-precision reduction allowed).
void run(const Gemm& g, Rounding r, bool split, float alpha, float beta, const char* api) {
    const bool ta = g.ta != CUBLAS_OP_N, tb = g.tb != CUBLAS_OP_N;
    const int arows = ta ? g.k : g.m, acols = ta ? g.m : g.k;
    const int brows = tb ? g.n : g.k, bcols = tb ? g.k : g.n;
    const size_t ea = type_size(g.At), ec = type_size(g.Ct);
    std::string w = std::string(api) + " operand ";
    if (g.k > 0) {
        emu::check_device_range(kSite, kLine, (w + "A").c_str(), g.A, span_bytes(arows, acols, g.lda, g.sA, g.batch, ea));
        emu::check_device_range(kSite, kLine, (w + "B").c_str(), g.B, span_bytes(brows, bcols, g.ldb, g.sB, g.batch, ea));
    }
    emu::check_device_range(kSite, kLine, (w + "C").c_str(), g.C, span_bytes(g.m, g.n, g.ldc, g.sC, g.batch, ec));

    std::vector<float> a, b, t((size_t)g.m * g.n), part((size_t)g.m * g.n);
    for (int i = 0; i < g.batch; i++) {
        std::fill(t.begin(), t.end(), 0.0f);
        if (g.k > 0) {
            pack(a, static_cast<const char*>(g.A) + (size_t)i * g.sA * ea, g.At, g.lda, ta, g.m, g.k, r);
            pack(b, static_cast<const char*>(g.B) + (size_t)i * g.sB * ea, g.Bt, g.ldb, tb, g.k, g.n, r);
            if (!split) product(t.data(), a.data(), g.m, b.data(), g.k, g.m, g.n, g.k);
            for (int k0 = 0; split && k0 < g.k; k0 += kSplitPart) {  // alpha folded into each bf16 part
                product(part.data(), a.data() + (size_t)k0 * g.m, g.m, b.data() + k0, g.k, g.m, g.n,
                        std::min(kSplitPart, g.k - k0));
                for (size_t e = 0; e < t.size(); e++)
                    t[e] = (float)__nv_bfloat16(t[e] + (float)__nv_bfloat16(alpha * part[e]));
            }
        }
        char* c = static_cast<char*>(g.C) + (size_t)i * g.sC * ec;
        for (int col = 0; col < g.n; col++)
            for (int row = 0; row < g.m; row++) {
                size_t at = (size_t)col * g.ldc + row;
                float v = (split ? 1.0f : alpha) * t[(size_t)col * g.m + row];
                if (beta != 0.0f) v += beta * load(c, g.Ct, at);
                if (g.Ct == CUDA_R_16BF)
                    reinterpret_cast<__nv_bfloat16*>(c)[at] = __float2bfloat16_rn(v);
                else
                    reinterpret_cast<float*>(c)[at] = v;
            }
    }
}

// Parameter numbers are cublasGemmEx's (the strided-batched call reports its own).
cublasStatus_t gemm(const Gemm& g, const char* api, bool strided) {
    char why[256];
    auto P = [&](int ex, int sb) { return strided ? sb : ex; };
    if (!handles().count(g.h))
        return bad_param(api, 1, "not a live cublasHandle_t", CUBLAS_STATUS_NOT_INITIALIZED);
    if (g.ta > CUBLAS_OP_C) return bad_param(api, 2, "transa");
    if (g.tb > CUBLAS_OP_C) return bad_param(api, 3, "transb");
    if (g.m < 0) return bad_param(api, 4, "m < 0");
    if (g.n < 0) return bad_param(api, 5, "n < 0");
    if (g.k < 0) return bad_param(api, 6, "k < 0");
    if (!g.alpha) return bad_param(api, 7, "alpha is null");
    const bool ta = g.ta != CUBLAS_OP_N, tb = g.tb != CUBLAS_OP_N;
    const int arows = ta ? g.k : g.m, brows = tb ? g.n : g.k;
    if (g.lda < std::max(1, arows)) {
        std::snprintf(why, sizeof why, "lda = %d < max(1, %s) = %d", g.lda, ta ? "k" : "m", std::max(1, arows));
        return bad_param(api, 10, why);
    }
    if (g.ldb < std::max(1, brows)) {
        std::snprintf(why, sizeof why, "ldb = %d < max(1, %s) = %d", g.ldb, tb ? "n" : "k", std::max(1, brows));
        return bad_param(api, P(13, 14), why);
    }
    if (!g.beta) return bad_param(api, P(14, 16), "beta is null");
    if (g.ldc < std::max(1, g.m)) {
        std::snprintf(why, sizeof why, "ldc = %d < max(1, m) = %d", g.ldc, std::max(1, g.m));
        return bad_param(api, P(17, 19), why);
    }
    if (g.batch < 0) return bad_param(api, 21, "batchCount < 0");
    const bool in_ok = (g.At == CUDA_R_32F || g.At == CUDA_R_16BF) && g.Bt == g.At;
    const bool out_ok = g.Ct == CUDA_R_32F || g.Ct == CUDA_R_16BF;
    const bool compute_ok = g.compute == CUBLAS_COMPUTE_32F || g.compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                            g.compute == CUBLAS_COMPUTE_32F_FAST_TF32 || g.compute == CUBLAS_COMPUTE_32F_FAST_16BF;
    if (!in_ok || !out_ok || !compute_ok || (g.At == CUDA_R_16BF && g.compute == CUBLAS_COMPUTE_32F_FAST_TF32))
        return bad_param(api, P(18, 22), "unsupported combination of data and compute types",
                         CUBLAS_STATUS_NOT_SUPPORTED);
    if (!emu::stream_valid(g.h->stream)) return bad_param(api, 1, "its stream was destroyed");
    if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;

    // what the GEMM kernel is given at the call: the scalars' values (host pointer mode) and
    // the math mode; a captured GEMM keeps them and reads the operands at each replay
    Rounding r = kExact;
    const int mode = g.h->mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (g.At == CUDA_R_32F && !tf32_override_off() &&
        (g.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
         (g.compute == CUBLAS_COMPUTE_32F && mode == CUBLAS_TF32_TENSOR_OP_MATH)))
        r = kTf32;
    if (g.At == CUDA_R_32F && g.compute == CUBLAS_COMPUTE_32F_FAST_16BF) r = kBf16;
    const bool split = g.Ct == CUDA_R_16BF && g.k >= kSplitK && g.compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
                       !(g.h->mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    const float alpha = *static_cast<const float*>(g.alpha), beta = *static_cast<const float*>(g.beta);
    cudaError_t e = emu::enqueue(g.h->stream, kSite, kLine, api,
                                 [g, r, split, alpha, beta, api] { run(g, r, split, alpha, beta, api); });
    return e ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t st) {
    switch (st) {
#define S(x) \
    case x:  \
        return #x;
        S(CUBLAS_STATUS_SUCCESS)
        S(CUBLAS_STATUS_NOT_INITIALIZED) S(CUBLAS_STATUS_ALLOC_FAILED) S(CUBLAS_STATUS_INVALID_VALUE)
            S(CUBLAS_STATUS_ARCH_MISMATCH) S(CUBLAS_STATUS_MAPPING_ERROR) S(CUBLAS_STATUS_EXECUTION_FAILED)
                S(CUBLAS_STATUS_INTERNAL_ERROR) S(CUBLAS_STATUS_NOT_SUPPORTED)
#undef S
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t st) {
    switch (st) {
        case CUBLAS_STATUS_SUCCESS:
            return "the operation completed successfully";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "the functionality requested is not supported";
        default:
            return cublasGetStatusName(st);
    }
}

cublasStatus_t cublasCreate(cublasHandle_t* h) {
    tf32_truncates();  // a bad CUDA_EMU_TF32 is an error at once, whether or not a TF32 GEMM runs
    *h = new cublasContext;
    handles().insert(*h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!handles().erase(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!handles().count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t* s) {
    if (!handles().count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!handles().count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t* mode) {
    if (!handles().count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    *mode = h->mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void*, size_t) {
    return handles().count(h) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t At, int lda, const void* B,
                            cudaDataType_t Bt, int ldb, const void* beta, void* C, cudaDataType_t Ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
    return gemm({h, ta, tb, m, n, k, alpha, A, At, lda, 0, B, Bt, ldb, 0, beta, C, Ct, ldc, 0, 1, compute},
                "cublasGemmEx", false);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* A, cudaDataType_t At, int lda,
                                          long long sA, const void* B, cudaDataType_t Bt, int ldb, long long sB,
                                          const void* beta, void* C, cudaDataType_t Ct, int ldc, long long sC,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
    return gemm({h, ta, tb, m, n, k, alpha, A, At, lda, sA, B, Bt, ldb, sB, beta, C, Ct, ldc, sC, batch, compute},
                "cublasGemmStridedBatchedEx", true);
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
    return gemm({h, ta,         tb,  m, n,    k, alpha,      A,   CUDA_R_32F, lda, 0,
                 B, CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0,          1,   CUBLAS_COMPUTE_32F},
                "cublasSgemm", false);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long sA,
                                         const float* B, int ldb, long long sB, const float* beta, float* C, int ldc,
                                         long long sC, int batch) {
    return gemm({h, ta,         tb,  m,  n,    k, alpha,      A,   CUDA_R_32F, lda,   sA,
                 B, CUDA_R_32F, ldb, sB, beta, C, CUDA_R_32F, ldc, sC,         batch, CUBLAS_COMPUTE_32F},
                "cublasSgemmStridedBatched", true);
}
