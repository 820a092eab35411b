// Self-tests of the CUDA emulation: kernels and calls with a known defect must each produce
// the emulator's report (naming this file and the defect's line where it is in a kernel), and
// a correct kernel must pass in every thread order. Every case runs in a child process (a
// report aborts it), with CUDA_EMU_ORDER / CUDA_EMU_MEM_BYTES set in the child before its
// first CUDA call; the parent never calls CUDA. Reported through the C++ tests' harness
// (test/testlib.h): test_emu_selftest [--list] [NAME...].
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../testlib.h"

namespace {

// ---- kernels ------------------------------------------------------------------------------
// out[i] = in[i] + in[(i+1) % n], staged through shared memory; `sync` false drops the barrier.
__global__ void neighbour_kernel(float* out, const float* in, bool sync) {
    __shared__ float s[64];
    int i = threadIdx.x;
    s[i] = in[i];
    if (sync) __syncthreads();
    out[i] = s[i] + s[(i + 1) % 64];
}

// Two rounds through one tile, out[i] = 2 (in[(i+1) % 64]); `sync` false drops the barrier
// after the reads, so round 2 overwrites s[i] while thread i - 1 may still be reading round 1's.
// Both rounds store the same values, so every thread order gives the right sums: only the race
// detector (make emu-tsan-tests) sees the race.
__global__ void two_rounds_kernel(float* out, const float* in, bool sync) {
    __shared__ float s[64];
    const int i = threadIdx.x;
    float sum = 0.0f;
    for (int round = 0; round < 2; round++) {
        s[i] = in[i];
        __syncthreads();
        sum += s[(i + 1) % 64];
        if (sync) __syncthreads();
    }
    out[i] = sum;
}

// Lane 0 hands a value to the other lanes through shared memory, with `order` between the write
// and the reads: kSyncwarp, or kNone (forward order hides the race; reverse order and the race
// detector do not), or kShuffle, which orders no memory on a GPU but here stops every lane until
// all arrive: every thread order is right, and only the race detector sees the race.
enum Handoff { kNone, kSyncwarp, kShuffle };
__global__ void warp_handoff_kernel(float* out, int order) {
    __shared__ float v;
    if (threadIdx.x == 0) v = 7.0f;
    float one = 1.0f;
    if (order == kSyncwarp) __syncwarp();
    if (order == kShuffle) one = __shfl_sync(0xffffffffu, one, 0);
    out[threadIdx.x] = v * one;
}

// Correct reduction: warp shuffles, static and dynamic shared memory, two barriers.
__global__ void block_sum_kernel(float* out, const float* in, int n) {
    extern __shared__ float partial[];  // one per warp
    __shared__ float total;
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += in[blockIdx.x * n + i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (unsigned w = 0; w < blockDim.x / 32; w++) t += partial[w];
        total = t;
    }
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) out[blockIdx.x] = total;
}

constexpr int kShflLine = __LINE__ + 3;  // the shuffle's line, for the report
__global__ void partial_warp_kernel(float* out) {
    float v = (float)threadIdx.x;
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void exited_lane_kernel(float* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (float)threadIdx.x, 1);
}

__global__ void caller_not_in_mask_kernel(float* out) {
    out[threadIdx.x] = __shfl_sync(0xfffffffeu, 1.0f, 0);
}

constexpr int kBarrierLine = __LINE__ + 3;
__global__ void barrier_after_exit_kernel(float* out) {
    if (threadIdx.x >= 32) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void divergent_barrier_kernel(float* out) {
    if (threadIdx.x < 32)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// lane 0 waits for lane 1 in a shuffle while lane 1 waits at a block barrier
__global__ void deadlock_kernel(float* out) {
    if (threadIdx.x == 0)
        out[0] = __shfl_sync(0x3u, 1.0f, 1);
    else
        __syncthreads();
}

__global__ void write_kernel(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}

// one element too far: only the sanitizer build can see it
__global__ void oob_write_kernel(float* out, int n) {
    out[threadIdx.x + (threadIdx.x == 0 ? n : 0)] = 1.0f;
}

__global__ void misaligned_kernel(float* out) {
    float4 v = *reinterpret_cast<const float4*>(out + 1);  // out + 1 is not 16-byte aligned
    out[0] = v.x;
}

__global__ void dyn_smem_kernel(float* out) {
    extern __shared__ float big[];
    big[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = big[blockDim.x - 1 - threadIdx.x];
}

__global__ void __launch_bounds__(128) bounded_kernel(float* out) {
    out[threadIdx.x] = 1.0f;
}

// reads shared memory nobody wrote: must see the 0xFF fill (NaN), not zeros
__global__ void unwritten_shared_kernel(float* out) {
    __shared__ float s[32];
    out[threadIdx.x] = s[threadIdx.x];
}

// y = a * x + y (n elements)
// One 16x16x16 bf16 product from global memory at element offset `off` with leading dimension
// ldm: CUDA requires 32-byte aligned pointers and ldm a multiple of 16 bytes.
__global__ void wmma_kernel(float* out, const __nv_bfloat16* a, int off, unsigned ldm) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a + off, ldm);
    wmma::load_matrix_sync(fb, a + off, ldm);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

// d (16 x 8) = a (16 x 16) b (16 x 8) + c, row-major floats (bf16 values), by one
// mma.sync.m16n8k16 (emu::mma_m16n8k16_bf16, what cuda/attention.cu runs): each lane builds its
// fragments by the PTX ISA's formulas per element index i (g = lane / 4, t = lane % 4), element i
// in register i / 2, the lower half holding the even i. Launched with `threads` lanes (32: all).
__global__ void mma_ptx_kernel(float* d, const float* a, const float* b, const float* c) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t fa[4] = {}, fb[2] = {};
    float fc[4];
    auto put = [](uint32_t* regs, int i, float v) {
        regs[i / 2] |= (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v)) << (16 * (i % 2));
    };
    for (int i = 0; i < 8; i++) {
        const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        put(fa, i, a[row * 16 + col]);
    }
    for (int i = 0; i < 4; i++) put(fb, i, b[(2 * t + (i & 1) + (i >= 2 ? 8 : 0)) * 8 + g]);
    for (int i = 0; i < 4; i++) fc[i] = c[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)];
    ::emu::mma_m16n8k16_bf16(fc, fa, fb, __FILE__, __LINE__);
    for (int i = 0; i < 4; i++) d[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = fc[i];
}
constexpr int kMmaLine = __LINE__ - 3;

// d (16 x 8) = a (16 x 8) b (8 x 8) + c by one mma.sync.m16n8k8 with tf32 operands
// (emu::mma_m16n8k8_tf32), fragments built by the PTX ISA's formulas per register i:
// A (g + 8 (i % 2), t + 4 (i / 2)), B (t + 4 i, g). The operands go in as they are, not rounded.
__global__ void mma_tf32_kernel(float* d, const float* a, const float* b, const float* c) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t fa[4], fb[2];
    float fc[4];
    for (int i = 0; i < 4; i++) memcpy(&fa[i], &a[(g + 8 * (i % 2)) * 8 + t + 4 * (i / 2)], 4);
    for (int i = 0; i < 2; i++) memcpy(&fb[i], &b[(t + 4 * i) * 8 + g], 4);
    for (int i = 0; i < 4; i++) fc[i] = c[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)];
    ::emu::mma_m16n8k8_tf32(fc, fa, fb, __FILE__, __LINE__);
    for (int i = 0; i < 4; i++) d[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = fc[i];
}

// ldmatrix.x4 as the PTX ISA describes it: lane 8j + r gives the address of row r of matrix j;
// here matrix j, row r, column c holds 64 j + 8 r + c, and the registers go back to the host.
// `offset` elements shift every row (4: 8 bytes, not 16-byte aligned); `global` reads device
// memory instead of shared.
__global__ void ldmatrix_kernel(uint32_t* out, const uint16_t* global, bool trans, int offset) {
    __shared__ uint16_t s[4 * 64 + 8];
    for (int i = threadIdx.x; i < 4 * 64; i += blockDim.x) s[offset + i] = (uint16_t)i;
    __syncthreads();
    const int lane = threadIdx.x;
    const uint16_t* rows = global ? global : s + offset;
    uint32_t r[4];
    ::emu::ldmatrix_x4(r, rows + 64 * (lane / 8) + 8 * (lane % 8), trans, __FILE__, __LINE__);
    for (int j = 0; j < 4; j++) out[4 * lane + j] = r[j];
}
constexpr int kLdmatrixLine = __LINE__ - 3;

__global__ void scale_add_kernel(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// ---- helpers --------------------------------------------------------------------------------
#define CK(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 2;                                                                        \
        }                                                                                    \
    } while (0)

float* dev(const std::vector<float>& h) {
    float* p = nullptr;
    if (cudaMalloc(&p, h.size() * sizeof(float)) != cudaSuccess) return nullptr;
    cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
    return p;
}
std::vector<float> host(const float* p, size_t n) {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}

// Runs kernel<<<1, 64>>>(out, in, sync) on in[i] = i: 0 if out[i] == want(i) for every i, else 1.
template <class Want>
int run_64(void (*kernel)(float*, const float*, bool), bool sync, Want want) {
    std::vector<float> in(64);
    for (int i = 0; i < 64; i++) in[i] = (float)i;
    float *din = dev(in), *dout = dev(std::vector<float>(64));
    kernel<<<1, 64>>>(dout, din, sync);
    CK(cudaGetLastError());
    std::vector<float> out = host(dout, 64);
    for (int i = 0; i < 64; i++)
        if (out[i] != want(i)) return 1;
    return 0;
}
int run_neighbour(bool sync) {
    return run_64(neighbour_kernel, sync, [](int i) { return (float)(i + (i + 1) % 64); });
}
int run_two_rounds(bool sync) {
    return run_64(two_rounds_kernel, sync, [](int i) { return (float)(2 * ((i + 1) % 64)); });
}

int run_block_sum() {
    const int blocks = 3, n = 1000, threads = 256;
    std::vector<float> in((size_t)blocks * n);
    for (size_t i = 0; i < in.size(); i++) in[i] = (float)(i % 7);
    float *din = dev(in), *dout = dev(std::vector<float>(blocks));
    block_sum_kernel<<<blocks, threads, threads / 32 * sizeof(float)>>>(dout, din, n);
    CK(cudaGetLastError());
    std::vector<float> out = host(dout, blocks);
    for (int b = 0; b < blocks; b++) {
        double ref = 0;
        for (int i = 0; i < n; i++) ref += in[(size_t)b * n + i];
        if (std::fabs(out[b] - ref) > 1e-3) return 1;
    }
    return 0;
}

float* scratch(size_t n) {
    return dev(std::vector<float>(n));
}

int run_warp_handoff(Handoff order) {
    float* o = scratch(32);
    warp_handoff_kernel<<<1, 32>>>(o, order);
    CK(cudaGetLastError());
    std::vector<float> out = host(o, 32);
    for (float x : out)
        if (x != 7.0f) return 1;
    return 0;
}

// Small integers for a (16 x K) and b (K x 8), exact in bf16 and tf32 and in the fp32 sums, and
// c (16 x 8); whether d, the kernel's result, is c + a b exactly.
struct MmaCase {
    int K;
    std::vector<float> a, b, c;
    explicit MmaCase(int k) : K(k), a(16 * k), b(k * 8), c(16 * 8) {
        for (size_t i = 0; i < a.size(); i++) a[i] = (float)(i * 7 % 11) - 5;
        for (size_t i = 0; i < b.size(); i++) b[i] = (float)(i * 5 % 9) - 4;
        for (size_t i = 0; i < c.size(); i++) c[i] = (float)(i % 13);
    }
    bool matches(const float* d) const {
        std::vector<float> got = host(d, 16 * 8);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                float want = c[r * 8 + n];
                for (int k = 0; k < K; k++) want += a[r * K + k] * b[k * 8 + n];
                if (got[r * 8 + n] != want) return false;
            }
        return true;
    }
};

// mma_ptx_kernel against the product
int run_mma_ptx(int threads) {
    const MmaCase m(16);
    float* d = scratch(16 * 8);
    mma_ptx_kernel<<<1, threads>>>(d, dev(m.a), dev(m.b), dev(m.c));
    CK(cudaGetLastError());
    return m.matches(d) ? 0 : 1;
}

// mma_tf32_kernel with every operand times (1 + 2^-12), less than a tf32 mantissa's last bit
// at these magnitudes: the hardware's operands are still the integers, so is the product
int run_mma_tf32() {
    const MmaCase m(8);
    std::vector<float> a = m.a, b = m.b;
    for (float& x : a) x *= 1 + 0x1p-12f;
    for (float& x : b) x *= 1 + 0x1p-12f;
    float* d = scratch(16 * 8);
    mma_tf32_kernel<<<1, 32>>>(d, dev(a), dev(b), dev(m.c));
    CK(cudaGetLastError());
    return m.matches(d) ? 0 : 1;
}

// cvt.rna.tf32.f32 on ties (away from zero), below and above half an ulp, and inf / NaN
int run_cvt_tf32() {
    auto tf32 = [](float x) {
        uint32_t u = ::emu::cvt_rna_tf32(x);
        float f;
        memcpy(&f, &u, 4);
        return f;
    };
    const float ulp = 0x1p-10f;
    const bool ok = tf32(1 + ulp / 2) == 1 + ulp && tf32(-(1 + ulp / 2)) == -(1 + ulp) &&
                    tf32(1 + ulp / 2 - 0x1p-23f) == 1 && tf32(1 + ulp * 0.75f) == 1 + ulp && tf32(3.0f) == 3.0f &&
                    std::isinf(tf32(INFINITY)) && std::isnan(tf32(NAN));
    return ok ? 0 : 1;
}

// ldmatrix_kernel against the ISA's register layout: lane l, register j holds matrix j's row
// l / 4, columns 2 (l % 4) and + 1 (trans: column l / 4, rows 2 (l % 4) and + 1), the first low.
int run_ldmatrix(bool trans, int offset, bool global, int threads) {
    uint32_t* out = nullptr;
    uint16_t* g = nullptr;
    CK(cudaMalloc(&out, 128 * sizeof(uint32_t)));
    if (global) CK(cudaMalloc(&g, 256 * sizeof(uint16_t)));
    ldmatrix_kernel<<<1, threads>>>(out, g, trans, offset);
    CK(cudaGetLastError());
    std::vector<uint32_t> got(128);
    CK(cudaMemcpy(got.data(), out, sizeof(uint32_t) * 128, cudaMemcpyDeviceToHost));
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++) {
            const int row = trans ? 2 * (l % 4) : l / 4, col = trans ? l / 4 : 2 * (l % 4);
            const uint32_t lo = 64 * j + 8 * row + col, hi = trans ? lo + 8 : lo + 1;
            if (got[4 * l + j] != (hi << 16 | lo)) return 1;
        }
    return 0;
}

int gemm(int m, int n, int k, int lda, int ldc, size_t a_elems, cublasComputeType_t ct, float* result) {
    cublasHandle_t h;
    cublasCreate(&h);
    std::vector<float> a(a_elems, 1.0f + 1.0f / (1 << 20)), b((size_t)k * n, 1.0f);
    float *A = dev(a), *B = dev(b), *C = scratch((size_t)ldc * n);
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, k,
                                     &zero, C, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "status %s\n", cublasGetStatusName(st));
        return 3;
    }
    if (result) *result = host(C, 1)[0];
    return 0;
}

// out (1 x 1, bf16) = the sum of k = 3 * 8192 bf16 values: 8192 of 2^-13, 8192 of 1, 8192 of -1,
// exactly 1 in fp32 whatever the order; the handle's math mode `mode`. The stand-in splits K into
// parts of 4096 and sums them in bf16 unless the mode disallows it: 0.5, 1, 4097 -> 4096, ... 0.
int split_k_gemm(cublasMath_t mode, float* result) {
    const int k = 3 * 8192;
    std::vector<__nv_bfloat16> a(k), b(k, __float2bfloat16_rn(1.0f));
    for (int i = 0; i < k; i++) a[i] = __float2bfloat16_rn(i < 8192 ? 1.0f / 8192 : i < 16384 ? 1.0f : -1.0f);
    __nv_bfloat16 *A, *B, *C;
    CK(cudaMalloc(&A, k * 2));
    CK(cudaMalloc(&B, k * 2));
    CK(cudaMalloc(&C, 2));
    CK(cudaMemcpy(A, a.data(), k * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, b.data(), k * 2, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    cublasCreate(&h);
    cublasSetMathMode(h, mode);
    const float one = 1.0f, zero = 0.0f;
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, k, &one, A, CUDA_R_16BF, k, B, CUDA_R_16BF, k, &zero, C,
                     CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        return 3;
    __nv_bfloat16 c;
    CK(cudaMemcpy(&c, C, 2, cudaMemcpyDeviceToHost));
    *result = __bfloat162float(c);
    return 0;
}

// ---- stream capture and graphs ----------------------------------------------------------------
constexpr int kRefillLine = __LINE__ + 2;  // the copy that a refill of its pinned source races
int refill_copy(float* dst, const float* pinned_src, cudaStream_t s) {
    CK(cudaMemcpyAsync(dst, pinned_src, sizeof(float), cudaMemcpyHostToDevice, s));
    return 0;
}

constexpr int kCapturedLaunchLine = __LINE__ + 2;  // the captured launch, for the report
void capture_write(float* p, cudaStream_t s) {
    write_kernel<<<1, 32, 0, s>>>(p, 32);
}

// One step of a small "training loop" on stream s: pinned input -> x, y += a x, out = A y (GEMM,
// alpha read from *alpha), out -> pinned output. Every operand is device or pinned memory.
struct Step {
    int n = 64, m = 4;
    float *x, *y, *A, *out, *pin_in, *pin_out;
    cublasHandle_t h;
};

int make_step(Step& t) {
    std::vector<float> a((size_t)t.m * t.n);
    for (size_t i = 0; i < a.size(); i++) a[i] = (float)(i % 5) - 2.0f;
    t.x = scratch(t.n), t.y = dev(std::vector<float>(t.n, 1.0f)), t.A = dev(a), t.out = scratch(t.m);
    CK(cudaMallocHost(&t.pin_in, t.n * sizeof(float)));
    CK(cudaMallocHost(&t.pin_out, t.m * sizeof(float)));
    return cublasCreate(&t.h) == CUBLAS_STATUS_SUCCESS ? 0 : 2;
}

int step(const Step& t, cudaStream_t s, float a, const float* alpha) {
    const float zero = 0.0f;
    CK(cudaMemcpyAsync(t.x, t.pin_in, t.n * sizeof(float), cudaMemcpyHostToDevice, s));
    scale_add_kernel<<<(t.n + 31) / 32, 32, 0, s>>>(t.y, t.x, a, t.n);
    CK(cudaGetLastError());
    CK(cudaMemsetAsync(t.out, 0, t.m * sizeof(float), s));
    if (cublasSetStream(t.h, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSgemm(t.h, CUBLAS_OP_N, CUBLAS_OP_N, t.m, 1, t.n, alpha, t.A, t.m, t.y, t.n, &zero, t.out, t.m) !=
            CUBLAS_STATUS_SUCCESS)
        return 3;
    CK(cudaMemcpyAsync(t.pin_out, t.out, t.m * sizeof(float), cudaMemcpyDeviceToHost, s));
    return 0;
}

// Three steps with new pinned inputs each time, eagerly or as three replays of one capture
// (where a and alpha change on the host after the capture: the replays must not see it).
int three_steps(bool graph, std::vector<float>& results) {
    Step t;
    if (int e = make_step(t)) return e;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    float a = 0.5f, alpha = 2.0f;
    cudaGraphExec_t exec = nullptr;
    if (graph) {
        cudaStreamCaptureStatus st;
        CK(cudaStreamIsCapturing(s, &st));
        if (st != cudaStreamCaptureStatusNone) return 4;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CK(cudaStreamIsCapturing(s, &st));
        if (st != cudaStreamCaptureStatusActive) return 4;
        if (int e = step(t, s, a, &alpha)) return e;
        cudaGraph_t g;
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaStreamIsCapturing(s, &st));
        if (st != cudaStreamCaptureStatusNone) return 4;
        CK(cudaGraphInstantiate(&exec, g, 0));
        CK(cudaGraphDestroy(g));  // the executable graph stands alone
        a = 100.0f, alpha = 100.0f;
    }
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < t.n; i++) t.pin_in[i] = (float)(k * t.n + i) * 0.25f;
        if (graph)
            CK(cudaGraphLaunch(exec, s));
        else if (int e = step(t, s, a, &alpha))
            return e;
        CK(cudaStreamSynchronize(s));
        results.insert(results.end(), t.pin_out, t.pin_out + t.m);
    }
    if (exec) CK(cudaGraphExecDestroy(exec));
    return 0;
}

int graph_matches_eager() {
    std::vector<float> eager, replayed;
    if (int e = three_steps(false, eager)) return e;
    if (int e = three_steps(true, replayed)) return e;
    // the inputs changed between the steps: equal results mean the replays read them
    if (eager.size() != 12 || eager[0] == eager[4] || eager[4] == eager[8]) return 5;
    return eager == replayed ? 0 : 1;
}

// Captures on a new stream (flags), calls `bad` during the capture, and requires `want` from it,
// the capture invalidated, and cudaStreamEndCapture refusing with a null graph.
int refused_in_capture(unsigned flags, cudaStreamCaptureMode mode, cudaError_t want,
                       const std::function<cudaError_t(cudaStream_t)>& bad) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, flags));
    CK(cudaStreamBeginCapture(s, mode));
    cudaError_t e = bad(s);
    if (e != want) {
        std::fprintf(stderr, "test: got %s, expected %s\n", cudaGetErrorName(e), cudaGetErrorName(want));
        return 1;
    }
    cudaStreamCaptureStatus st;
    CK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusInvalidated) return 1;
    cudaGraph_t g = reinterpret_cast<cudaGraph_t>(&st);
    if (cudaStreamEndCapture(s, &g) != cudaErrorStreamCaptureInvalidated || g) return 1;
    return 0;
}

// ---- the cases ----------------------------------------------------------------------------
struct Outcome {
    int status;  // as from waitpid
    std::string err;
};

Outcome in_child(const char* order, const char* mem_bytes, const std::function<int()>& f) {
    int fd[2];
    if (pipe(fd) != 0) return {-1, "pipe failed"};
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        rlimit no_core{0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        setenv("CUDA_EMU_ORDER", order, 1);
        if (mem_bytes) setenv("CUDA_EMU_MEM_BYTES", mem_bytes, 1);
        int rc = f();
        std::fflush(stderr);
        _exit(rc);
    }
    close(fd[1]);
    std::string err;
    char buf[4096];
    for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) err.append(buf, (size_t)r);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return {status, err};
}

bool exited_ok(const Outcome& o) {
    return WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0;
}

// The cases, in order, each named emu_selftest_NAME: main lists them, run_test_list runs them.
std::vector<TestCase> g_cases;
void add_case(const std::string& name, const std::function<std::string()>& why) {
    g_cases.push_back({"emu_selftest_" + name, why, false});
}
void add_skipped(const std::string& name, const std::string& why) {
    g_cases.push_back({"emu_selftest_" + name, nullptr, false, false, why});
}

std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

// The defect must end the child with a failure status and a report containing every pattern.
void expect_report(const std::string& name, const std::vector<std::string>& patterns, const std::function<int()>& f,
                   const char* order = "forward", const char* mem = nullptr) {
    add_case(name, [=] {
        Outcome o = in_child(order, mem, f);
        std::string why;
        if (exited_ok(o)) why = "no report (child exited 0); stderr: " + first_line(o.err);
        for (const auto& p : patterns)
            if (why.empty() && o.err.find(p) == std::string::npos)
                why = "report lacks '" + p + "': " + first_line(o.err);
        return why;
    });
}

// A correct program must exit 0 with nothing on stderr, in every thread order.
void expect_clean(const std::string& name, const std::function<int()>& f, const char* mem = nullptr) {
    add_case(name, [=] {
        std::string why;
        for (const char* order : {"forward", "reverse", "random"}) {
            Outcome o = in_child(order, mem, f);
            if (!exited_ok(o) || !o.err.empty())
                append(why, std::string(order) + ": " + (o.err.empty() ? "wrong result" : first_line(o.err)));
        }
        return why;
    });
}

// A call CUDA refuses: the child checks the error codes itself (exit 0), and the report names it.
void expect_refused(const std::string& name, const std::vector<std::string>& patterns, const std::function<int()>& f) {
    add_case(name, [=] {
        Outcome o = in_child("forward", nullptr, f);
        std::string why;
        if (!exited_ok(o)) why = "wrong error codes or state; stderr: " + first_line(o.err);
        for (const auto& p : patterns)
            if (why.empty() && o.err.find(p) == std::string::npos)
                why = "report lacks '" + p + "': " + first_line(o.err);
        return why;
    });
}

std::string at(int line) {
    return "test_emu_selftest.cu:" + std::to_string(line);
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__SANITIZE_ADDRESS__)
    const bool asan = true;
#else
    const bool asan = false;
#endif
#if defined(__SANITIZE_THREAD__)
    const bool tsan = true;
#else
    const bool tsan = false;
#endif
    expect_clean("correct_kernel_all_orders", [] { return run_neighbour(true) | run_block_sum(); });
    expect_clean("mma_sync_ptx_layouts", [] { return run_mma_ptx(32); });
    expect_clean("mma_tf32_ptx_layouts", [] { return run_mma_tf32(); });
    expect_clean("cvt_rna_tf32_rounding", [] { return run_cvt_tf32(); });
    expect_clean("ldmatrix_ptx_layouts",
                 [] { return run_ldmatrix(false, 0, false, 32) | run_ldmatrix(true, 0, false, 32); });
    expect_report("ldmatrix_misaligned_row", {at(kLdmatrixLine), "ldmatrix", "not 16-byte aligned"},
                  [] { return run_ldmatrix(false, 4, false, 32); });
    expect_report("ldmatrix_global_address", {at(kLdmatrixLine), "ldmatrix", "not in the block's shared memory"},
                  [] { return run_ldmatrix(true, 0, true, 32); });
    expect_report("ldmatrix_partial_warp", {at(kLdmatrixLine), "ldmatrix", "names lane 16, which does not exist"},
                  [] { return run_ldmatrix(false, 0, false, 16); });
    expect_report("mma_sync_partial_warp", {at(kMmaLine), "mma.sync", "names lane 16, which does not exist"},
                  [] { return run_mma_ptx(16); });

    // a missing barrier reads unwritten (0xFF = NaN) shared memory in at least one order
    add_case("missing_syncthreads", []() -> std::string {
        int bad = 0;
        for (const char* order : {"forward", "reverse"})
            bad += !exited_ok(in_child(order, nullptr, [] { return run_neighbour(false); }));
        return bad > 0 ? "" : "the kernel without its barrier gave the right answer in both orders";
    });
    expect_report("partial_warp_shuffle", {at(kShflLine), "names lane 16, which does not exist"}, [] {
        float* o = scratch(48);
        partial_warp_kernel<<<1, 48>>>(o);
        return 0;
    });
    for (const char* order : {"forward", "reverse"})
        expect_report(
            std::string("shuffle_with_exited_lane_") + order, {"__shfl_down_sync", "names lane 16"},
            [] {
                float* o = scratch(32);
                exited_lane_kernel<<<1, 32>>>(o);
                return 0;
            },
            order);
    expect_report("shuffle_caller_not_in_mask", {"leaves out the calling lane 0"}, [] {
        caller_not_in_mask_kernel<<<1, 32>>>(scratch(32));
        return 0;
    });
    for (const char* order : {"forward", "reverse"})
        expect_report(
            std::string("syncthreads_after_exit_") + order, {at(kBarrierLine), "__syncthreads"},
            [] {
                barrier_after_exit_kernel<<<1, 64>>>(scratch(64));
                return 0;
            },
            order);
    expect_report("divergent_syncthreads", {"divergent __syncthreads"}, [] {
        divergent_barrier_kernel<<<1, 64>>>(scratch(64));
        return 0;
    });
    expect_report("deadlock", {"deadlock", "waits at __syncthreads", "waits at __shfl_sync"}, [] {
        deadlock_kernel<<<1, 2>>>(scratch(2));
        return 0;
    });
    expect_report("host_pointer_argument", {"kernel argument 1", "not device memory", "test_emu_selftest.cu:"}, [] {
        static float h[32];
        write_kernel<<<1, 32>>>(h, 32);
        return 0;
    });
    expect_report("freed_pointer_argument", {"kernel argument 1", "not device memory"}, [] {
        float* p = scratch(32);
        cudaFree(p);
        write_kernel<<<1, 32>>>(p, 32);
        return 0;
    });
    expect_report("launch_over_1024_threads", {"launch rejected", "1025 threads", "cudaErrorInvalidConfiguration"}, [] {
        write_kernel<<<1, 1025>>>(scratch(2048), 2048);
        return cudaGetLastError() == cudaErrorInvalidConfiguration ? 1 : 0;
    });
    expect_report("dynamic_smem_over_48k", {"launch rejected", "cudaFuncSetAttribute"}, [] {
        dyn_smem_kernel<<<1, 32, 64 * 1024>>>(scratch(32));
        return cudaGetLastError() == cudaErrorInvalidValue ? 1 : 0;
    });
    expect_clean("dynamic_smem_over_48k_with_attribute", [] {
        CK(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
        float* o = scratch(64);
        dyn_smem_kernel<<<1, 64, 64 * 1024>>>(o);
        CK(cudaGetLastError());
        return host(o, 64)[5] == 2.0f ? 0 : 1;
    });
    auto wmma_run = [](int off, unsigned ldm) {
        __nv_bfloat16* a = nullptr;
        CK(cudaMalloc(&a, 64 * 32 * sizeof(__nv_bfloat16)));
        CK(cudaMemset(a, 0, 64 * 32 * sizeof(__nv_bfloat16)));
        wmma_kernel<<<1, 32>>>(scratch(256), a, off, ldm);
        return 0;
    };
    expect_clean("wmma_aligned", [wmma_run] { return wmma_run(16, 24); });  // 32 bytes in, 48-byte rows
    expect_report("wmma_misaligned_pointer", {"load_matrix_sync", "not 256-bit (32-byte) aligned"},
                  [wmma_run] { return wmma_run(8, 24); });
    expect_report("wmma_bad_ldm", {"load_matrix_sync", "ldm 20", "not a multiple of 16 bytes"},
                  [wmma_run] { return wmma_run(16, 20); });
    expect_report("launch_bounds_exceeded", {"exceeds __launch_bounds__(128)", "test_emu_selftest.cu:"}, [] {
        bounded_kernel<<<1, 256>>>(scratch(256));
        return cudaGetLastError() == cudaErrorLaunchOutOfResources ? 1 : 0;
    });
    expect_clean("unwritten_memory_reads_nan", [] {
        float* o = scratch(32);
        unwritten_shared_kernel<<<1, 32>>>(o);
        float* fresh = nullptr;
        CK(cudaMalloc(&fresh, 4 * sizeof(float)));
        return std::isnan(host(o, 32)[7]) && std::isnan(host(fresh, 4)[3]) ? 0 : 1;
    });
    expect_report("memcpy_past_allocation", {"cudaMemcpy destination", "past the end"}, [] {
        float* p = scratch(10);
        std::vector<float> h(11);
        cudaMemcpy(p, h.data(), 11 * sizeof(float), cudaMemcpyHostToDevice);
        return 0;
    });
    expect_report("memset_past_allocation", {"cudaMemset", "past the end"}, [] {
        cudaMemset(scratch(10), 0, 41);
        return 0;
    });
    expect_report("gemm_bad_ldc", {"cublasGemmEx", "ldc = 3 < max(1, m) = 5", "CUBLAS_STATUS_INVALID_VALUE"},
                  [] { return gemm(5, 4, 3, 5, 3, 15, CUBLAS_COMPUTE_32F, nullptr); });
    expect_report("gemm_operand_past_allocation", {"cublasGemmEx operand A", "past the end"},
                  [] { return gemm(5, 4, 3, 5, 5, 14, CUBLAS_COMPUTE_32F, nullptr); });
    expect_clean("gemm_tf32_rounds_inputs", [] {
        float fp32 = 0, tf32 = 0;
        if (gemm(1, 1, 1, 1, 1, 1, CUBLAS_COMPUTE_32F, &fp32) ||
            gemm(1, 1, 1, 1, 1, 1, CUBLAS_COMPUTE_32F_FAST_TF32, &tf32))
            return 2;
        return fp32 == 1.0f + 1.0f / (1 << 20) && tf32 == 1.0f ? 0 : 1;
    });
    // CUDA_EMU_TF32=truncate: 1 + 2^-11 + 2^-20 (above half a tf32 ulp) rounds up to nearest,
    // down when truncated
    for (const char* mode : {"nearest", "truncate"})
        expect_clean(std::string("gemm_tf32_") + mode, [mode] {
            setenv("CUDA_EMU_TF32", mode, 1);
            const float x = 1.0f + 1.0f / (1 << 11) + 1.0f / (1 << 20);
            float* A = dev(std::vector<float>{x});
            float* B = dev(std::vector<float>{1.0f});
            float* C = scratch(1);
            cublasHandle_t h;
            cublasCreate(&h);
            const float one = 1.0f, zero = 0.0f;
            if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A, CUDA_R_32F, 1, B, CUDA_R_32F, 1, &zero, C,
                             CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT))
                return 2;
            const float want = std::strcmp(mode, "truncate") ? 1.0f + 1.0f / (1 << 10) : 1.0f;
            return host(C, 1)[0] == want ? 0 : 1;
        });
    // CUDA_EMU_DRIVER=12.4: older than the runtime's 13.0, the device and memory calls fail
    expect_clean("old_driver_insufficient", [] {
        setenv("CUDA_EMU_DRIVER", "12.4", 1);
        int n = -1, driver = 0, runtime = 0;
        void* p = nullptr;
        const bool refused = cudaGetDeviceCount(&n) == cudaErrorInsufficientDriver && n == 0 &&
                             cudaMalloc(&p, 16) == cudaErrorInsufficientDriver &&
                             cudaGetLastError() == cudaErrorInsufficientDriver;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        return refused && driver == 12040 && runtime == 13000 ? 0 : 1;
    });
    expect_report("bad_driver_variable", {"error: CUDA_EMU_DRIVER=r580: expected a driver version X.Y"}, [] {
        setenv("CUDA_EMU_DRIVER", "r580", 1);
        int n;
        cudaGetDeviceCount(&n);
        return 0;
    });
    // CUDA_EMU_DRIVER=none: no driver installed, the version CUDA reports then is 0
    expect_clean("no_driver", [] {
        setenv("CUDA_EMU_DRIVER", "none", 1);
        int n = -1, driver = -1;
        cudaDriverGetVersion(&driver);
        return cudaGetDeviceCount(&n) == cudaErrorInsufficientDriver && n == 0 && driver == 0 ? 0 : 1;
    });
    // CUDA_EMU_INIT_ERROR=803: every device call fails with it, named as CUDA names it
    expect_clean("init_error", [] {
        setenv("CUDA_EMU_INIT_ERROR", "803", 1);
        int n = -1;
        void* p = nullptr;
        return cudaGetDeviceCount(&n) == cudaErrorSystemDriverMismatch && n == 0 &&
                       cudaMalloc(&p, 16) == cudaErrorSystemDriverMismatch &&
                       !std::strcmp(cudaGetErrorName(cudaGetLastError()), "cudaErrorSystemDriverMismatch")
                   ? 0
                   : 1;
    });
    // CUDA_VISIBLE_DEVICES: the list ends at its first entry that names no device; the emulated one
    // is index 0, without a UUID
    for (const char* v : {"", "1", "1,0", "MIG-4a9e1c3f-5b2d-5e8a-9f10-2c7d6b1e0a42", "GPU-0"})
        expect_clean(std::string("visible_devices_none_") + (*v ? v : "empty"), [v] {
            setenv("CUDA_VISIBLE_DEVICES", v, 1);
            int n = -1;
            void* p = nullptr;
            const bool none = cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0;
            return none && cudaMalloc(&p, 16) == cudaErrorNoDevice ? 0 : 1;
        });
    for (const char* v : {"0", "0,1"})
        expect_clean(std::string("visible_devices_one_") + v, [v] {
            setenv("CUDA_VISIBLE_DEVICES", v, 1);
            int n = -1;
            return cudaGetDeviceCount(&n) == cudaSuccess && n == 1 ? 0 : 1;
        });
    expect_report("bad_init_error_variable", {"error: CUDA_EMU_INIT_ERROR=12345: expected the code of a CUDA error"},
                  [] {
                      setenv("CUDA_EMU_INIT_ERROR", "12345", 1);
                      int n;
                      cudaGetDeviceCount(&n);
                      return 0;
                  });
    // CUDA_EMU_CC=7.5: the device says sm_75, and a build for sm_80 and newer has no code for it:
    // the attribute query and the launch both fail with cudaErrorNoKernelImageForDevice
    expect_report("old_gpu_no_image", {"launch rejected: the program holds no code for this device's architecture"},
                  [] {
                      setenv("CUDA_EMU_CC", "7.5", 1);
                      cudaDeviceProp p;
                      cudaFuncAttributes a;
                      if (cudaGetDeviceProperties(&p, 0) || p.major != 7 || p.minor != 5) return 0;
                      if (cudaFuncGetAttributes(&a, write_kernel) != cudaErrorNoKernelImageForDevice) return 0;
                      write_kernel<<<1, 1>>>(scratch(1), 1);
                      return cudaGetLastError() == cudaErrorNoKernelImageForDevice ? 1 : 0;
                  });
    expect_clean("no_image_variable", [] {
        setenv("CUDA_EMU_NO_IMAGE", "1", 1);
        cudaFuncAttributes a;
        return cudaFuncGetAttributes(&a, write_kernel) == cudaErrorNoKernelImageForDevice ? 0 : 1;
    });
    expect_report("bad_cc_variable", {"error: CUDA_EMU_CC=sm_90: expected a compute capability X.Y"}, [] {
        setenv("CUDA_EMU_CC", "sm_90", 1);
        cudaDeviceProp p;
        cudaGetDeviceProperties(&p, 0);
        return 0;
    });
    expect_report("bad_tf32_variable", {"error: CUDA_EMU_TF32=sometimes: expected nearest or truncate"}, [] {
        setenv("CUDA_EMU_TF32", "sometimes", 1);
        cublasHandle_t h;
        cublasCreate(&h);
        return 0;
    });
    // a bf16 output over a long K: its parts summed in bf16 unless reduced-precision reductions
    // are off (split_k_gemm)
    expect_clean("gemm_split_k_reduced_precision", [] {
        float allowed = 0, disallowed = 0;
        if (split_k_gemm(CUBLAS_DEFAULT_MATH, &allowed) ||
            split_k_gemm(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, &disallowed))
            return 2;
        return disallowed == 1.0f && allowed != 1.0f ? 0 : 1;
    });
    expect_clean("bf16_round_to_nearest_even", [] {
        const float tie_down = 1.0f + 1.0f / 256, tie_up = 1.0f + 3.0f / 256;  // halfway cases
        return __bfloat162float(__float2bfloat16_rn(tie_down)) == 1.0f &&
                       __bfloat162float(__float2bfloat16_rn(tie_up)) == 1.0f + 1.0f / 64 &&
                       std::isnan(__bfloat162float(__float2bfloat16_rn(NAN)))
                   ? 0
                   : 1;
    });
    expect_clean(
        "capacity_and_out_of_memory",
        [] {  // CUDA_EMU_MEM_BYTES=1000
            float* p = nullptr;
            if (cudaMalloc(&p, 2000) != cudaErrorMemoryAllocation || p) return 1;
            if (cudaGetLastError() != cudaErrorMemoryAllocation) return 1;
            CK(cudaMalloc(&p, 500));  // still works afterwards
            size_t free_b = 0, total = 0;
            CK(cudaMemGetInfo(&free_b, &total));
            return total == 1000 && free_b == 500 ? 0 : 1;
        },
        "1000");
    // ---- stream capture and graphs
    expect_clean("graph_replays_match_eager_runs", graph_matches_eager);
    expect_refused("capture_on_legacy_stream", {"cudaStreamBeginCapture on the legacy stream"}, [] {
        return cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported &&
                       cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeRelaxed) ==
                           cudaErrorStreamCaptureUnsupported
                   ? 0
                   : 1;
    });
    expect_refused("stream_is_capturing_states", {"already captures"}, [] {
        cudaStream_t s, nb;
        CK(cudaStreamCreate(&s));
        CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
        cudaStreamCaptureStatus st;
        CK(cudaStreamIsCapturing(0, &st));
        if (st != cudaStreamCaptureStatusNone) return 1;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        // the legacy stream is unusable while a blocking stream captures; a query does not invalidate
        if (cudaStreamIsCapturing(cudaStreamLegacy, &st) != cudaErrorStreamCaptureImplicit) return 1;
        CK(cudaStreamIsCapturing(nb, &st));
        if (st != cudaStreamCaptureStatusNone) return 1;
        if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaErrorIllegalState) return 1;
        cudaGetLastError();
        cudaGraph_t g = nullptr;
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaStreamIsCapturing(s, &st));
        return st == cudaStreamCaptureStatusNone && g ? 0 : 1;
    });
    for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
        const std::string m = mode == cudaStreamCaptureModeGlobal ? "global" : "thread_local";
        expect_refused("capture_" + m + "_refuses_cudaMalloc", {"cuda-emu: error:", "cudaMalloc while", "captures in"},
                       [mode] {
                           return refused_in_capture(0, mode, cudaErrorStreamCaptureUnsupported, [](cudaStream_t) {
                               float* p;
                               return cudaMalloc(&p, 64);
                           });
                       });
        expect_refused("capture_" + m + "_refuses_cudaFree", {"cudaFree while"}, [mode] {
            float* p = scratch(16);
            return refused_in_capture(0, mode, cudaErrorStreamCaptureUnsupported,
                                      [p](cudaStream_t) { return cudaFree(p); });
        });
        expect_refused("capture_" + m + "_refuses_cudaMallocHost", {"cudaMallocHost while"}, [mode] {
            return refused_in_capture(0, mode, cudaErrorStreamCaptureUnsupported, [](cudaStream_t) {
                float* p;
                return cudaMallocHost(&p, 64);
            });
        });
        expect_refused("capture_" + m + "_refuses_cudaFreeHost", {"cudaFreeHost while"}, [mode] {
            float* p;
            CK(cudaMallocHost(&p, 64));
            return refused_in_capture(0, mode, cudaErrorStreamCaptureUnsupported,
                                      [p](cudaStream_t) { return cudaFreeHost(p); });
        });
    }
    expect_clean("capture_relaxed_allows_cudaMalloc", [] {
        cudaStream_t s;
        CK(cudaStreamCreate(&s));
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        float* p;
        CK(cudaMalloc(&p, 64));
        CK(cudaFree(p));
        cudaGraph_t g;
        CK(cudaStreamEndCapture(s, &g));
        return g ? 0 : 1;
    });
    expect_refused("capture_refuses_sync_cudaMemcpy_on_legacy_stream",
                   {"cudaMemcpy on the legacy stream", "cudaErrorStreamCaptureImplicit"}, [] {
                       float* p = scratch(4);
                       std::vector<float> h(4);
                       return refused_in_capture(
                           0, cudaStreamCaptureModeGlobal, cudaErrorStreamCaptureImplicit,
                           [&](cudaStream_t) { return cudaMemcpy(p, h.data(), 16, cudaMemcpyHostToDevice); });
                   });
    expect_refused("capture_refuses_sync_cudaMemset_on_legacy_stream", {"cudaMemset on the legacy stream"}, [] {
        float* p = scratch(4);
        return refused_in_capture(0, cudaStreamCaptureModeRelaxed, cudaErrorStreamCaptureImplicit,
                                  [p](cudaStream_t) { return cudaMemset(p, 0, 16); });
    });
    expect_refused("capture_refuses_kernel_on_legacy_stream", {"kernel launch on the legacy stream"}, [] {
        float* p = scratch(32);
        return refused_in_capture(0, cudaStreamCaptureModeGlobal, cudaErrorStreamCaptureImplicit, [p](cudaStream_t) {
            write_kernel<<<1, 32>>>(p, 32);
            return cudaGetLastError();
        });
    });
    expect_clean("capture_on_nonblocking_stream_allows_legacy_work", [] {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float* p = scratch(4);
        std::vector<float> h(4, 3.0f);
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CK(cudaMemcpy(p, h.data(), 16, cudaMemcpyHostToDevice));  // runs now, outside the capture
        cudaGraph_t g;
        CK(cudaStreamEndCapture(s, &g));
        return host(p, 4)[2] == 3.0f ? 0 : 1;
    });
    expect_refused("capture_refuses_cudaStreamSynchronize", {"cudaStreamSynchronize of stream"}, [] {
        return refused_in_capture(0, cudaStreamCaptureModeRelaxed, cudaErrorStreamCaptureUnsupported,
                                  [](cudaStream_t s) { return cudaStreamSynchronize(s); });
    });
    expect_refused("capture_refuses_cudaDeviceSynchronize", {"cudaDeviceSynchronize while"}, [] {
        return refused_in_capture(cudaStreamNonBlocking, cudaStreamCaptureModeRelaxed,
                                  cudaErrorStreamCaptureUnsupported,
                                  [](cudaStream_t) { return cudaDeviceSynchronize(); });
    });
    for (bool query : {false, true})
        expect_refused(std::string("capture_refuses_") + (query ? "cudaEventQuery" : "cudaEventSynchronize"),
                       {query ? "cudaEventQuery of an event recorded in the capture"
                              : "cudaEventSynchronize of an event recorded in the capture"},
                       [query] {
                           cudaEvent_t e;
                           CK(cudaEventCreate(&e));
                           return refused_in_capture(0, cudaStreamCaptureModeRelaxed, cudaErrorCapturedEvent,
                                                     [e, query](cudaStream_t s) {
                                                         cudaError_t r = cudaEventRecord(e, s);
                                                         if (r) return r;
                                                         return query ? cudaEventQuery(e) : cudaEventSynchronize(e);
                                                     });
                       });
    expect_refused("capture_refuses_pageable_cudaMemcpyAsync", {"pageable host memory"}, [] {
        float* p = scratch(4);
        static float pageable[4];
        return refused_in_capture(
            0, cudaStreamCaptureModeGlobal, cudaErrorStreamCaptureUnsupported,
            [p](cudaStream_t s) { return cudaMemcpyAsync(p, pageable, 16, cudaMemcpyHostToDevice, s); });
    });
    expect_refused("capture_fork_join_and_unjoined", {"never joined back"}, [] {
        cudaStream_t s, side;
        CK(cudaStreamCreate(&s));
        CK(cudaStreamCreate(&side));
        cudaEvent_t fork, join;
        CK(cudaEventCreate(&fork));
        CK(cudaEventCreate(&join));
        float* p = dev(std::vector<float>(32, 0.0f));
        for (bool joined : {true, false}) {
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            CK(cudaEventRecord(fork, s));
            CK(cudaStreamWaitEvent(side, fork, 0));  // side joins the capture
            write_kernel<<<1, 32, 0, side>>>(p, 32);
            CK(cudaEventRecord(join, side));
            if (joined) CK(cudaStreamWaitEvent(s, join, 0));
            cudaGraph_t g = nullptr;
            cudaError_t e = cudaStreamEndCapture(s, &g);
            if (joined && (e || !g || host(p, 32)[0] != 0.0f)) return 1;  // recorded, not run
            if (!joined && (e != cudaErrorStreamCaptureUnjoined || g)) return 1;
            if (joined) {
                cudaGraphExec_t x;
                CK(cudaGraphInstantiate(&x, g, 0));
                CK(cudaGraphLaunch(x, s));
                if (host(p, 32)[31] != 1.0f) return 1;
            }
        }
        cudaStreamCaptureStatus st;
        CK(cudaStreamIsCapturing(side, &st));
        return st == cudaStreamCaptureStatusNone ? 0 : 1;
    });
    expect_report("replay_reads_buffer_freed_after_capture",
                  {"kernel argument 1", "not device memory", at(kCapturedLaunchLine), "replayed by cudaGraphLaunch"},
                  [] {
                      cudaStream_t s;
                      CK(cudaStreamCreate(&s));
                      float* p = scratch(32);
                      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                      capture_write(p, s);
                      cudaGraph_t g;
                      CK(cudaStreamEndCapture(s, &g));
                      cudaGraphExec_t x;
                      CK(cudaGraphInstantiate(&x, g, 0));
                      CK(cudaGraphLaunch(x, s));  // fine
                      CK(cudaFree(p));
                      CK(cudaGraphLaunch(x, s));  // reads freed memory
                      return 0;
                  });
    expect_report("replay_copies_from_freed_pinned_buffer", {"no longer pinned memory", "replayed by cudaGraphLaunch"},
                  [] {
                      cudaStream_t s;
                      CK(cudaStreamCreate(&s));
                      float *p = scratch(4), *pin;
                      CK(cudaMallocHost(&pin, 16));
                      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                      CK(cudaMemcpyAsync(p, pin, 16, cudaMemcpyHostToDevice, s));
                      cudaGraph_t g;
                      CK(cudaStreamEndCapture(s, &g));
                      cudaGraphExec_t x;
                      CK(cudaGraphInstantiate(&x, g, 0));
                      CK(cudaFreeHost(pin));
                      CK(cudaGraphLaunch(x, s));
                      return 0;
                  });
    expect_report(
        "bad_order_variable", {"error: CUDA_EMU_ORDER=sideways"},
        [] {
            write_kernel<<<1, 32>>>(scratch(32), 32);
            return 0;
        },
        "sideways");
    // CUDA_EMU_DEFER=1 (set in the child before its first CUDA call): queued work runs when the
    // host waits, so correct waiting still works, an early read sees NaN, an early refill is reported
    expect_clean("defer_graph_matches_eager", [] {
        setenv("CUDA_EMU_DEFER", "1", 1);
        return graph_matches_eager();
    });
    expect_clean("defer_result_read_before_the_wait", [] {
        setenv("CUDA_EMU_DEFER", "1", 1);
        cudaStream_t s;
        cudaEvent_t done;
        CK(cudaStreamCreate(&s));
        CK(cudaEventCreate(&done));
        float *p = scratch(32), *pin;
        CK(cudaMallocHost(&pin, 32 * sizeof(float)));
        write_kernel<<<1, 32, 0, s>>>(p, 32);
        CK(cudaMemcpyAsync(pin, p, 32 * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaEventRecord(done, s));
        const bool early_nan = std::isnan(pin[0]) && std::isnan(pin[31]);
        const bool not_ready = cudaEventQuery(done) == cudaErrorNotReady;  // and lets it run
        CK(cudaEventSynchronize(done));
        return early_nan && not_ready && pin[0] == 1.0f && pin[31] == 1.0f ? 0 : 1;
    });
    // a stream reading another's result without waiting on its event reads it before it exists
    expect_clean("defer_stream_waits_on_event", [] {
        setenv("CUDA_EMU_DEFER", "1", 1);
        float result[2];
        for (int wait = 0; wait < 2; wait++) {
            cudaStream_t a, b;
            cudaEvent_t written;
            CK(cudaStreamCreate(&a));
            CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
            CK(cudaEventCreate(&written));
            float *p = scratch(32), *pin;
            CK(cudaMallocHost(&pin, sizeof(float)));
            write_kernel<<<1, 32, 0, a>>>(p, 32);
            CK(cudaEventRecord(written, a));
            if (wait) CK(cudaStreamWaitEvent(b, written, 0));
            CK(cudaMemcpyAsync(pin, p, sizeof(float), cudaMemcpyDeviceToHost, b));
            CK(cudaStreamSynchronize(b));
            result[wait] = *pin;
            CK(cudaDeviceSynchronize());
        }
        return result[0] == 0.0f && result[1] == 1.0f ? 0 : 1;  // without the wait: scratch's zeros
    });
    expect_report("defer_pinned_source_refilled_early",
                  {at(kRefillLine), "wrote its pinned source", "run when the host waited", "CUDA_EMU_DEFER=1"}, [] {
                      setenv("CUDA_EMU_DEFER", "1", 1);
                      cudaStream_t s;
                      CK(cudaStreamCreate(&s));
                      float *p = scratch(4), *pin;
                      CK(cudaMallocHost(&pin, 16));
                      pin[0] = 1.0f;
                      if (int e = refill_copy(p, pin, s)) return e;
                      pin[0] = 2.0f;  // the copy has not run: it must not see this
                      CK(cudaStreamSynchronize(s));
                      return 0;
                  });
    expect_report("bad_defer_variable", {"error: CUDA_EMU_DEFER=yes: expected 0 or 1"}, [] {
        setenv("CUDA_EMU_DEFER", "yes", 1);
        write_kernel<<<1, 32>>>(scratch(32), 32);
        return 0;
    });
    // races that no thread order shows, and one that an order shows: the race detector's job
    expect_clean("barriers_and_syncwarp_race_free", [] { return run_two_rounds(true) | run_warp_handoff(kSyncwarp); });
    if (tsan) {
        for (const char* order : {"forward", "reverse"}) {
            expect_report(
                std::string("race_detected_missing_syncthreads_") + order,
                {"ThreadSanitizer: data race", "two_rounds_kernel", "test_emu_selftest.cu:"},
                [] { return run_two_rounds(false); }, order);
            expect_report(
                std::string("race_detected_missing_syncwarp_") + order,
                {"ThreadSanitizer: data race", "warp_handoff_kernel", "test_emu_selftest.cu:"},
                [] { return run_warp_handoff(kNone); }, order);
            expect_report(
                std::string("race_detected_shuffle_is_no_syncwarp_") + order,
                {"ThreadSanitizer: data race", "warp_handoff_kernel", "test_emu_selftest.cu:"},
                [] { return run_warp_handoff(kShuffle); }, order);
        }
    } else {
        expect_clean("race_unseen_by_thread_orders", [] { return run_two_rounds(false) | run_warp_handoff(kShuffle); });
        for (const char* c : {"missing_syncthreads", "missing_syncwarp", "shuffle_is_no_syncwarp"})
            for (const char* order : {"forward", "reverse"})
                add_skipped(std::string("race_detected_") + c + "_" + order,
                            "needs the race detector build (make emu-tsan-tests)");
    }
    // inside a kernel, out-of-bounds and misaligned accesses are the sanitizer build's job
    if (asan) {
        expect_report("oob_write_in_kernel", {"heap-buffer-overflow", "test_emu_selftest.cu:"}, [] {
            oob_write_kernel<<<1, 32>>>(scratch(32), 32);
            return 0;
        });
        expect_report("misaligned_access_in_kernel", {"misaligned", "test_emu_selftest.cu:"}, [] {
            misaligned_kernel<<<1, 1>>>(scratch(8));
            return 0;
        });
    } else {
        add_skipped("oob_write_in_kernel", "needs the sanitizer build (make emu-asan)");
        add_skipped("misaligned_access_in_kernel", "needs the sanitizer build (make emu-asan)");
    }
    return run_test_list(g_cases, argc, argv);
}
