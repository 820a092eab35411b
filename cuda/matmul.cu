// Linear layer y = x W^T + b on cuBLAS, backward, and the shared GEMM helpers.
//
// cuBLAS is column-major. A row-major (R, K) matrix with row stride ld is, to cuBLAS, a
// column-major (K, R) matrix with leading dimension ld, i.e. its transpose. So every
// row-major product Y = X W^T is computed as the column-major product Y^T = W X^T.
//
// bf16 activations: x, W (the model's bf16 copy of the weights), y, dy and dx are bf16; the
// GEMMs accumulate in fp32 and round once at the store (a split K's partials are summed in fp32
// too: cublas_on's math mode, common.cuh); dW and the bias stay fp32, and the bias add and the
// dbias column sums compute in fp32.
#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// ---- cuBLAS, loaded on first use ----
// The library is not linked: loading it runs cuBLASLt's static constructors, about 0.4 s of CPU
// and 200 MiB resident (scripts/results/times.md, Start-up), which every start would pay, --help
// and --device cpu included. The first GEMM loads it: dlopen of the soname of the cuBLAS the backend
// was compiled against (found as the CUDA runtime is: LD_LIBRARY_PATH, the program's runpath, the
// loader's cache), then the entry points it calls, once (a function-local static: thread-safe),
// before any capture (the first step runs eagerly). A missing or broken library is an exception
// that names it and what to install. The GEMMs reach cuBLAS only through this table: a direct
// call would not link.
// The two GEMMs have C++ overloads in cublas_api.h (taking an old cudaDataType compute type): these
// are the library's own, which the static_casts below pick (in decltype: checked, never called).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType_t, int, const void*, cudaDataType_t, int, const void*,
                                  void*, cudaDataType_t, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType_t, int, long long,
                                                const void*, cudaDataType_t, int, long long, const void*, void*,
                                                cudaDataType_t, int, long long, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);
struct CublasApi {
    decltype(&cublasCreate) create;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetStream) set_stream;
    decltype(&cublasSetWorkspace) set_workspace;
    decltype(static_cast<GemmEx>(&cublasGemmEx)) gemm_ex;
    decltype(static_cast<GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)) gemm_strided_batched_ex;
    decltype(&cublasGetStatusString) status_string;
};

// An entry point's exported name, after cublas_v2.h's renames (cublasCreate is cublasCreate_v2).
#define CUBLAS_NAME_(f) #f
#define CUBLAS_NAME(f) CUBLAS_NAME_(f)

const CublasApi& cublas() {
    static const CublasApi api = [] {
        const std::string major = std::to_string(CUBLAS_VER_MAJOR), soname = "libcublas.so." + major;
        const std::string install = "the CUDA backend needs cuBLAS " + major + " (" + soname + ", part of the CUDA " +
                                    major + " toolkit: NVIDIA's package libcublas-" + major +
                                    "-*); install it or add its folder to LD_LIBRARY_PATH";
        void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw std::runtime_error(std::string("cannot load cuBLAS: ") + dlerror() + "; " + install);
        CublasApi a;
        auto entry = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            if (!fn)
                throw std::runtime_error("cannot load cuBLAS: " + soname + " has no " + name +
                                         " (a broken or other installation); " + install);
        };
        entry(a.create, CUBLAS_NAME(cublasCreate));
        entry(a.set_math_mode, CUBLAS_NAME(cublasSetMathMode));
        entry(a.set_stream, CUBLAS_NAME(cublasSetStream));
        entry(a.set_workspace, CUBLAS_NAME(cublasSetWorkspace));
        entry(a.gemm_ex, CUBLAS_NAME(cublasGemmEx));
        entry(a.gemm_strided_batched_ex, CUBLAS_NAME(cublasGemmStridedBatchedEx));
        entry(a.status_string, CUBLAS_NAME(cublasGetStatusString));
        return a;
    }();
    return api;
}

// cuBLAS's workspace, given to it from device_malloc so that peak_memory() counts it (cuBLAS
// would otherwise allocate its own, unseen): 32 MiB, what it takes by default on Hopper.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// One handle for the process, bound to the stream of the op that calls it, so its GEMMs run in
// order with that op's kernels (and are captured with them in a CUDA graph). cublasSetStream
// also puts cuBLAS back on its own workspace pool, so the workspace is given again each time: its
// memory stays counted, and a captured GEMM allocates nothing.
// Its math mode disallows reduced-precision reductions: a GEMM with bf16 output that splits K
// (the classifier's input gradient: K = 50304 into a rows x C output) then sums its partials in
// fp32, the compute type, not in bf16.
cublasHandle_t cublas_on(cudaStream_t stream) {
    static cublasHandle_t h = [] {
        cublasHandle_t hh;
        cublasCheck(cublas().create(&hh));
        cublasCheck(cublas().set_math_mode(hh, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
        return hh;
    }();
    static void* workspace = device_malloc(kCublasWorkspaceBytes);
    cublasCheck(cublas().set_stream(h, stream));
    cublasCheck(cublas().set_workspace(h, workspace, kCublasWorkspaceBytes));
    return h;
}

bool g_tf32 = true;

template <class X>
constexpr cudaDataType_t cuda_type() {
    return is_bf16<X> ? CUDA_R_16BF : CUDA_R_32F;
}

// bf16 inputs multiply on bf16 tensor cores; fp32 ones on TF32 tensor cores when enabled.
// Accumulation is fp32 either way.
template <class In>
cublasComputeType_t compute_type() {
    return !is_bf16<In> && tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}
}  // namespace

void throw_cublas_error(cublasStatus_t st, const char* file, int line) {
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
                             cublas().status_string(st));
}

void set_tf32(bool on) {
    g_tf32 = on;
}
// NVIDIA_TF32_OVERRIDE=0, which turns TF32 off in cuBLAS, turns it off in the flash kernels too,
// so that it gives plain fp32 throughout; the GEMMs ask this too, so one switch decides for all
bool tf32_enabled() {
    static const bool override_off = [] {
        const char* e = std::getenv("NVIDIA_TF32_OVERRIDE");
        return e && std::string(e) == "0";
    }();
    return g_tf32 && !override_off;
}

// Column-major C (m,n) = alpha op(A) op(B) + beta C: fp32 inputs on TF32 tensor cores if
// enabled, bf16 inputs on bf16 ones; fp32 accumulation, bf16 output rounded once.
template <class In, class Out>
void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const In* A, int lda, const In* B, int ldb, float beta,
             Out* C, int ldc, cudaStream_t stream) {
    cublasCheck(cublas().gemm_ex(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                             &alpha, A, cuda_type<In>(), lda, B, cuda_type<In>(), ldb, &beta, C, cuda_type<Out>(), ldc,
                             compute_type<In>(), CUBLAS_GEMM_DEFAULT));
}
template void gemm_cm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int,
                      cudaStream_t);
template void gemm_cm(bool, bool, int, int, int, float, const bf16_t*, int, const bf16_t*, int, float, bf16_t*, int,
                      cudaStream_t);
template void gemm_cm(bool, bool, int, int, int, float, const bf16_t*, int, const bf16_t*, int, float, float*, int,
                      cudaStream_t);

template <class X>
void gemm_cm_strided_batched(bool ta, bool tb, int m, int n, int k, float alpha, const X* A, int lda, long long strideA,
                             const X* B, int ldb, long long strideB, float beta, X* C, int ldc, long long strideC,
                             int batch, cudaStream_t stream) {
    cublasCheck(cublas().gemm_strided_batched_ex(cublas_on(stream), ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, cuda_type<X>(), lda,
                                           strideA, B, cuda_type<X>(), ldb, strideB, &beta, C, cuda_type<X>(), ldc,
                                           strideC, batch, compute_type<X>(), CUBLAS_GEMM_DEFAULT));
}
template void gemm_cm_strided_batched(bool, bool, int, int, int, float, const float*, int, long long, const float*, int,
                                      long long, float, float*, int, long long, int, cudaStream_t);
template void gemm_cm_strided_batched(bool, bool, int, int, int, float, const bf16_t*, int, long long, const bf16_t*,
                                      int, long long, float, bf16_t*, int, long long, int, cudaStream_t);

namespace {

// out (N,OC) += bias (OC) broadcast over rows, in fp32, W elements at a time (for_each_element)
template <class E, int W>
struct AddBias {
    E* out;
    const float* bias;
    __device__ void operator()(size_t i, int, int c) const {
        float y[W];
        biased_pack(y, out, bias, i, c);
        store_pack(out, i, y);
    }
};

// the stored elements, for column_sums (common.cuh)
template <class E, int W>
struct Load {
    const E* x;
    __device__ void operator()(size_t i, int, int c, float (&v)[1][W]) const { biased_pack(v[0], x, nullptr, i, c); }
};

}  // namespace

// out (N,OC) = inp (N,IC) . w (OC,IC)^T + bias (OC)
template <class Act>
void matmul_forward(Act* out, const Act* inp, const Act* w, const float* bias, int N, int IC, int OC) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || OC <= 0) return;
    // column-major: out^T (OC,N) = W (OC,IC) [stored as W^T (IC,OC), so op = T] . inp^T (IC,N)
    gemm_cm(true, false, OC, N, IC, 1.0f, w, IC, inp, IC, 0.0f, out, OC, stream);
    if (bias) {
        using E = dev_t<Act>;
        with_pack<E>(OC, {out, bias}, [&](auto pw) {
            constexpr int W = decltype(pw)::value;
            for_each_element<W>(AddBias<E, W>{dev(out), bias}, N, OC, stream);
        });
    }
}

namespace {
// dinp (N,IC) = dout (N,OC) . w (OC,IC) + beta dinp. Column-major: dinp^T (IC,N) = W^T (IC,OC)
// [stored as is] . dout^T (OC,N) [stored as is] + beta dinp^T.
template <class Act, class D>
void dinp_gemm(D* dinp, const Act* dout, const Act* w, int N, int IC, int OC, float beta, cudaStream_t stream) {
    gemm_cm(false, false, IC, N, OC, 1.0f, w, IC, dout, OC, beta, dinp, IC, stream);
}
}  // namespace

// dinp (N,IC) = dout (N,OC) . w (OC,IC) (overwritten) ; dw (OC,IC) += dout^T . inp ; dbias (OC) +=
// column sums of dout
template <class Act>
void matmul_backward(Act* dinp, float* dw, float* dbias, const Act* dout, const Act* inp, const Act* w, int N, int IC, int OC) {
    const cudaStream_t stream = main_stream();
    if (N <= 0 || IC <= 0 || OC <= 0) return;
    if (dinp) dinp_gemm(dinp, dout, w, N, IC, OC, 0.0f, stream);
    // column-major: dw^T (IC,OC) += inp^T (IC,N) [stored as is] . dout (N,OC) [stored as dout^T, op = T]
    if (dw) gemm_cm(false, true, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, IC, stream);
    if (dbias)
        with_pack<dev_t<Act>>(OC, {dout}, [&](auto pw) {
            constexpr int W = decltype(pw)::value;
            column_sums<1, W>(SumInto{dbias}, N, OC, Load<dev_t<Act>, W>{dev(dout)}, stream);
        });
}

// dinp (N,IC) += dout (N,OC) . w (OC,IC)
template <class Act>
void matmul_dinp_add(float* dinp, const Act* dout, const Act* w, int N, int IC, int OC) {
    const cudaStream_t stream = main_stream();
    if (N > 0 && IC > 0 && OC > 0) dinp_gemm(dinp, dout, w, N, IC, OC, 1.0f, stream);
}

GPU_INSTANTIATE(matmul_forward)
GPU_INSTANTIATE(matmul_backward)
GPU_INSTANTIATE(matmul_dinp_add)

}  // namespace gpu
