// Shared helpers for the CUDA kernels: checked-call macros, the GEMM helpers, the TF32
// switch, the tracked device allocator, ceil_div and warp reductions.
//
// Everything here lives in namespace `gpu`, not `cuda`: CCCL (pulled in by cub) owns
// `cuda::` and `cuda::std`, and a namespace of ours of that name would collide with it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "backend_cuda.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* file, int line) {
    throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " +
                             cudaGetErrorString(err));
}

inline bool debug_sync() {
    static const bool on = [] {
        const char* e = std::getenv("LLM_CUDA_SYNC");
        return e && e[0] == '1';
    }();
    return on;
}

// defined in matmul.cu, beside cuBLAS's loader
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* file, int line);

}  // namespace gpu

// One checked-call macro per API. On error: throw std::runtime_error("<API> error at file:line: <reason>").
#define cudaCheck(call)                                                                                   \
    do {                                                                                                  \
        cudaError_t cuda_check_err_ = (call);                                                             \
        if (cuda_check_err_ != cudaSuccess) ::gpu::throw_cuda_error(cuda_check_err_, __FILE__, __LINE__); \
    } while (0)

#define cublasCheck(call)                                                    \
    do {                                                                     \
        cublasStatus_t cublas_check_st_ = (call);                            \
        if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                       \
            ::gpu::throw_cublas_error(cublas_check_st_, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: catches bad launch configurations right away (cheap; no sync).
// With LLM_CUDA_SYNC=1 in the environment it also synchronises, so an asynchronous fault
// (illegal address, ...) is reported at the launch that caused it (debugging only: slow).
#define cudaCheckLaunch()                                            \
    do {                                                             \
        cudaCheck(cudaGetLastError());                               \
        if (::gpu::debug_sync()) cudaCheck(cudaDeviceSynchronize()); \
    } while (0)

namespace gpu {

// ---- sizes -------------------------------------------------------------------------------
// ceil(a / b)
template <class I, class J>
__host__ __device__ constexpr I ceil_div(I a, J b) {
    return (a + static_cast<I>(b) - 1) / static_cast<I>(b);
}

// Calls f(std::integral_constant<int, n>) when n is one of Sizes (the sizes a kernel template is
// instantiated for) and returns true; false, without calling f, for the others.
template <int... Sizes, class F>
bool with_size(int n, F f) {
    return ((n == Sizes && (f(std::integral_constant<int, Sizes>()), true)) || ...);
}

// Grid size for a grid-stride loop over n elements: enough blocks to fill the GPU, capped so
// that the int grid dimension never overflows (the loops use size_t indices).
inline unsigned int grid_for(size_t n, int block) {
    size_t g = (n + static_cast<size_t>(block) - 1) / static_cast<size_t>(block);
    if (g > 65535u * 16u) g = 65535u * 16u;
    if (g == 0) g = 1;
    return static_cast<unsigned int>(g);
}

// ---- tracked device memory (defined in memory.cu) ---------------------------------------
// Every device allocation of the backend (parameters, activations and the kernels' scratch
// buffers) goes through these, so peak memory is counted in one place.
void* device_malloc(size_t bytes);
void device_free(void* p);
// A scratch buffer that was outgrown: freed, or while a CUDA graph exists (which may read it)
// kept until the last graph is freed (graph.cu).
void scratch_retire(void* p);

// The backend's buffers of any element type (memory.cu: float and int, precision.cu: bf16), on
// its compute stream (main_stream, backend_cuda.h).
cudaStream_t main_stream();
template <class E>
E* alloc_zeroed(size_t n) {
    E* p = static_cast<E*>(device_malloc(n * sizeof(E)));
    if (p) cudaCheck(cudaMemsetAsync(p, 0, n * sizeof(E), main_stream()));
    return p;
}

// A grow-only device scratch buffer owned by one launcher (kept for the life of the process).
template <class T>
struct Scratch {
    T* ptr = nullptr;
    size_t cap = 0;  // elements
    T* get(size_t n) {
        if (n > cap) {
            // forget the old buffer before allocating: if device_malloc throws (out of memory),
            // a later smaller request must not get the freed pointer back
            T* old = ptr;
            ptr = nullptr;
            cap = 0;
            scratch_retire(old);
            ptr = static_cast<T*>(device_malloc(n * sizeof(T)));
            cap = n;
        }
        return ptr;
    }
    // get(n), a new buffer zero-filled on `stream`: counters that every launch leaves at zero
    T* get_zeroed(size_t n, cudaStream_t stream) {
        const size_t before = cap;
        T* p = get(n);
        if (cap != before) cudaCheck(cudaMemsetAsync(p, 0, cap * sizeof(T), stream));
        return p;
    }
};

// GEMM helpers (matmul.cu), COLUMN-major like cuBLAS: C (m,n) = alpha op(A) op(B) + beta C.
// In (A and B) and Out (C) are float or bf16_t: fp32 inputs use TF32 when it is on; bf16
// inputs multiply on bf16 tensor cores; the accumulation is fp32 either way.
template <class In, class Out>
void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const In* A, int lda, const In* B, int ldb, float beta,
             Out* C, int ldc, cudaStream_t stream);
// The same over `batch` matrices at the given strides; X (A, B and C) is float or bf16_t.
template <class X>
void gemm_cm_strided_batched(bool ta, bool tb, int m, int n, int k, float alpha, const X* A, int lda, long long strideA,
                             const X* B, int ldb, long long strideB, float beta, X* C, int ldc, long long strideC,
                             int batch, cudaStream_t stream);
// ---- activation element types -------------------------------------------------------------
// The launchers take the host types (float, bf16_t: backend_cuda.h); the kernels the device
// types (float, __nv_bfloat16) of the same bytes: dev() converts the pointers.
template <class Act>
struct DevType {
    using type = Act;
};
template <>
struct DevType<bf16_t> {
    using type = __nv_bfloat16;
};
template <class Act>
using dev_t = typename DevType<Act>::type;
template <class Act>
inline dev_t<Act>* dev(Act* p) {
    return reinterpret_cast<dev_t<Act>*>(p);
}
template <class Act>
inline const dev_t<Act>* dev(const Act* p) {
    return reinterpret_cast<const dev_t<Act>*>(p);
}
template <class Act>
constexpr bool is_bf16 = std::is_same<Act, bf16_t>::value || std::is_same<Act, __nv_bfloat16>::value;

// Loads widen to fp32, stores round to the element type (nearest even).
__device__ inline float f32(float x) {
    return x;
}
__device__ inline float f32(__nv_bfloat16 x) {
    return __bfloat162float(x);
}
template <class E>
__device__ inline E from_f32(float x) {
    if constexpr (std::is_same<E, float>::value)
        return x;
    else
        return __float2bfloat16_rn(x);
}

// ---- warp / block reductions ------------------------------------------------------------
// Butterfly reductions: every lane ends with the full result; the order of operations is
// fixed, so results are bitwise reproducible.
template <class T>
__device__ inline T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <class T>
__device__ inline T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). Every thread gets
// the result. `shared` must hold 32 values. Ends with a __syncthreads so it can be reused.
template <class T>
__device__ inline T block_sum(T v, T* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    T r = lane < nwarps ? shared[lane] : T(0);
    r = warp_sum(r);
    __syncthreads();
    return r;
}

// ---- sums over rows in one launch -----------------------------------------------------------
// A column sum over N rows, deterministic and in one kernel: each block writes the sums of its
// own fixed rows (its partial) and takes a ticket, and the blocks that finish last add the
// partials in a fixed order. The bits do not depend on the order the blocks ran in.

// True, in all its threads, in the block that arrives last of `arrivals` blocks at count: the
// others' writes before they arrived are visible then. count (zero before) is zero again after,
// ready for the next launch or graph replay.
__device__ inline bool last_to_arrive(unsigned* count, unsigned arrivals) {
    __shared__ bool last;
    __threadfence();  // this block's writes, before its ticket
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        last = atomicInc(count, arrivals - 1) == arrivals - 1;  // wraps to 0
        // the ticket, before the block reads the others' writes
        __threadfence();
    }
    __syncthreads();
    return last;
}
// The same over every block of the grid. One count per kernel: kernels on one stream run one at
// a time.
__device__ inline bool last_block(unsigned* count) {
    return last_to_arrive(count, gridDim.x * gridDim.y);
}

// W elements of E in one access: 16 bytes when W = 16 / sizeof(E).
template <class E, int W>
struct alignas(sizeof(E) * W) Pack {
    E e[W];
};

// Whether rows of n elements of E, from every pointer given, go in 16-byte packs: n a multiple
// of the pack and the pointers 16-byte aligned (null ones pass).
template <class E>
inline bool packs_fit(size_t n, std::initializer_list<const void*> ptrs) {
    if (n % (16 / sizeof(E)) != 0) return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<uintptr_t>(p) & 15u) return false;
    return true;
}

// launch(std::integral_constant<int, W>{}): W = 16 bytes of E when packs_fit(n, ptrs), else MinW
// (what an op needs at the least: RoPE's pairs).
template <class E, int MinW = 1, class L>
void with_pack(size_t n, std::initializer_list<const void*> ptrs, L launch) {
    if (packs_fit<E>(n, ptrs))
        launch(std::integral_constant<int, 16 / sizeof(E)>{});
    else
        launch(std::integral_constant<int, MinW>{});
}

template <class E, int W>
__device__ inline Pack<E, W> load_pack(const E* x, size_t i) {
    return *reinterpret_cast<const Pack<E, W>*>(x + i);
}

// The W elements x[i + k] of a row plus the bias of the linear layer that wrote them (columns
// c + k; bias may be null), in fp32: the elementwise op after a GEMM adds its bias (GELU, RoPE,
// the residual add).
template <class E, int W>
__device__ inline void biased_pack(float (&y)[W], const E* x, const float* bias, size_t i, int c) {
    const Pack<E, W> p = load_pack<E, W>(x, i);
    for (int k = 0; k < W; k++) y[k] = f32(p.e[k]) + (bias ? bias[c + k] : 0.0f);
}

// V floats of partials that other blocks wrote during this launch: L2 loads (__ldcg), 16 bytes
// at once when V = 4
template <int V>
__device__ inline Pack<float, V> ldcg_pack(const float* p) {
    Pack<float, V> r;
    if constexpr (V == 4) {
        const float4 q = __ldcg(reinterpret_cast<const float4*>(p));
        r.e[0] = q.x, r.e[1] = q.y, r.e[2] = q.z, r.e[3] = q.w;
    } else {
        for (int e = 0; e < V; e++) r.e[e] = __ldcg(p + e);
    }
    return r;
}

// The parts k = k0, k0 + dk, ... < nparts of the V floats at p + k stride, summed in k order.
template <int V>
__device__ inline Pack<float, V> sum_parts(const float* p, size_t stride, int k0, int dk, int nparts) {
    Pack<float, V> t = {};
#pragma unroll 8
    for (int k = k0; k < nparts; k += dk) {
        const Pack<float, V> u = ldcg_pack<V>(p + (size_t)k * stride);
        for (int e = 0; e < V; e++) t.e[e] += u.e[e];
    }
    return t;
}

// The sums over k < nparts of partial (nparts, NQ, C) at columns [c0, c1) of each q: out(q, c, sum),
// by the block's threads (at most kColThreads), V columns a thread, in a fixed order: with a
// thread per V columns and threads to spare, G groups of threads each sum the parts k = g, g + G,
// ... and the G sums are added in g order; else every part in order. (V = 4 needs C, c0 and c1
// multiples of 4.)
constexpr int kColThreads = 256;
template <int V, int NQ, class Out>
__device__ inline void fold_parts_v(Out out, const float* partial, int nparts, int C, int c0, int c1) {
    __shared__ Pack<float, V> group_sum[kColThreads];
    const int nthreads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int nv = (c1 - c0) / V, nvec = NQ * nv;  // vector t: q = t / nv, columns c0 + (t % nv) V + e
    const size_t stride = (size_t)NQ * C;
    auto column = [&](int t) { return c0 + (t % nv) * V; };
    auto first = [&](int t) { return partial + (size_t)(t / nv) * C + column(t); };
    if (2 * nvec > nthreads) {
        for (int t = tid; t < nvec; t += nthreads) {
            const Pack<float, V> s = sum_parts<V>(first(t), stride, 0, 1, nparts);
            for (int e = 0; e < V; e++) out(t / nv, column(t) + e, s.e[e]);
        }
        return;
    }
    const int G = nthreads / nvec, t = tid % nvec, g = tid / nvec;
    if (g < G) group_sum[tid] = sum_parts<V>(first(t), stride, g, G, nparts);
    __syncthreads();
    if (g != 0) return;
    Pack<float, V> s = group_sum[t];
    for (int h = 1; h < G; h++)
        for (int e = 0; e < V; e++) s.e[e] += group_sum[h * nvec + t].e[e];
    for (int e = 0; e < V; e++) out(t / nv, column(t) + e, s.e[e]);
}
template <int NQ, class Out>
__device__ inline void fold_parts(Out out, const float* partial, int nparts, int C, int c0, int c1) {
    if (C % 4 == 0)
        fold_parts_v<4, NQ>(out, partial, nparts, C, c0, c1);
    else
        fold_parts_v<1, NQ>(out, partial, nparts, C, c0, c1);
}

// Column sums over the N rows of a row-major (N, C) array, NQ sums at a time, deterministic. The op
// value(i, r, c, v) takes the W elements (r, c + k), k < W, i = r * C + c (C % W == 0, one access
// when they are 16 bytes), and writes the NQ values to sum of each into v[q][k]: dst(q, c) += the
// sum of the q-th over the rows. (An elementwise op that also stored its output here would sum its
// own bias gradient, but a store between the loads of one row and the next keeps a thread to one
// row in flight: too few bytes in flight at the paper's size.)
// A block has kColThreads threads: X across packs of W columns (the row's packs rounded up to a
// power of 2, at most 32), Y = kColThreads / X row phases. Block (cx, chunk) sums the rows
// [chunk R, chunk R + R) of X packs: thread (x, y) its rows y, y + Y, ... in order, then the Y
// phases in order, into partial row `chunk` (nchunks, NQ, C). R, a multiple of Y, gives at least
// kColBlocks blocks where N allows (at C = 128: 342 blocks of 48 rows in bf16, 293 of 56 in fp32,
// for 16K rows). The chunks are added in two levels, so that many blocks share the work (one block
// adding every chunk took as long as the main pass): the chunks in groups of `group` (about
// sqrt(nchunks)) consecutive ones; the last block of column block cx to finish in a group adds the
// group's partials of cx's columns into partial row nchunks + group index (fold_parts), and the
// last of those in cx adds the groups' rows into dst. The order of the sums depends on N, C and W
// only: the same bits on any GPU, whatever order the blocks run in.
constexpr int kColBlocks = 2 * 132;  // two waves of an H100's or H200's 132 SMs
// At least 2 blocks an SM: a budget of 128 registers a thread (they take 71-80); with the block size
// alone ptxas aimed at 32 and spilled (scripts/check_spills.sh).
// tickets (colblocks, 1 + ngroups): cx's count of groups done, then of chunks done in each group.
template <int NQ, int W, class F, class Dst>
__global__ void __launch_bounds__(kColThreads, 2)
    column_sums_kernel(Dst dst, float* __restrict__ partial, unsigned* __restrict__ tickets, int N, int C,
                       int rows_per_chunk, int group, F value) {
    __shared__ float s[NQ * (kColThreads * W + kColThreads)];  // (q, y, column), rows X W + 1 apart
    const int X = blockDim.x, Y = blockDim.y, x = threadIdx.x, y = threadIdx.y, L = X * W + 1;
    const int c = (blockIdx.x * X + x) * W;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float a[NQ][W] = {};
    if (c < C)
        for (int r = r0 + y; r < r1; r += Y) {
            float v[NQ][W];
            value((size_t)r * C + c, r, c, v);
            for (int q = 0; q < NQ; q++)
                for (int k = 0; k < W; k++) a[q][k] += v[q][k];
        }
    for (int q = 0; q < NQ; q++)
        for (int k = 0; k < W; k++) s[(q * Y + y) * L + x * W + k] = a[q][k];
    __syncthreads();
    // the block's NQ x (X W) sums over its Y phases, in phase order, by all its threads
    for (int j = y * X + x; j < NQ * X * W; j += kColThreads) {
        const int q = j / (X * W), col = j % (X * W), cc = blockIdx.x * X * W + col;
        if (cc >= C) continue;
        float t = 0.0f;
        for (int p = 0; p < Y; p++) t += s[(q * Y + p) * L + col];
        partial[((size_t)blockIdx.y * NQ + q) * C + cc] = t;
    }
    // the chunks [k0, k1) of this block's group, at its columns [c0, c1)
    const int nchunks = gridDim.y, ngroups = ceil_div(nchunks, group), g = blockIdx.y / group;
    const int k0 = g * group, k1 = min(nchunks, k0 + group);
    const int c0 = blockIdx.x * X * W, c1 = min(C, c0 + X * W);
    const size_t row = (size_t)NQ * C;
    unsigned* count = tickets + (size_t)blockIdx.x * (1 + ngroups);
    if (!last_to_arrive(count + 1 + g, k1 - k0)) return;
    float* group_row = partial + (nchunks + g) * row;
    fold_parts<NQ>([&](int q, int cc, float t) { group_row[(size_t)q * C + cc] = t; }, partial + k0 * row, k1 - k0,
                   C, c0, c1);
    if (!last_to_arrive(count, ngroups)) return;
    fold_parts<NQ>([&](int q, int cc, float t) { dst(q, cc) += t; }, partial + nchunks * row, ngroups, C, c0, c1);
}

// The launch: the shape of the blocks and the chunk of rows from N, C and W alone (never from the
// device), so the bits are the same on any GPU.
template <int NQ, int W, class F, class Dst>
void column_sums(Dst dst, int N, int C, F value, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    const int packs = C / W;
    int X = 1;
    while (X < packs && X < 32) X *= 2;
    const int Y = kColThreads / X, colblocks = ceil_div(packs, X);
    const int rows_per_chunk = std::max(1, N / ceil_div(kColBlocks, colblocks) / Y) * Y;
    const int nchunks = ceil_div(N, rows_per_chunk);
    int group = 1;  // ceil(sqrt(nchunks))
    while (group * group < nchunks) group++;
    const int ngroups = ceil_div(nchunks, group);
    static Scratch<float> s_partial;
    static Scratch<unsigned> s_tickets;
    float* partial = s_partial.get((size_t)(nchunks + ngroups) * NQ * C);
    unsigned* tickets = s_tickets.get_zeroed((size_t)colblocks * (1 + ngroups), stream);
    column_sums_kernel<NQ, W, F, Dst><<<dim3(colblocks, nchunks), dim3(X, Y), 0, stream>>>(
        dst, partial, tickets, N, C, rows_per_chunk, group, value);
    cudaCheckLaunch();
}

// x[i + k] = y[k] rounded to E, k < W: one access when W elements are 16 bytes.
template <class E, int W>
__device__ inline void store_pack(E* x, size_t i, const float (&y)[W]) {
    Pack<E, W> p;
    for (int k = 0; k < W; k++) p.e[k] = from_f32<E>(y[k]);
    *reinterpret_cast<Pack<E, W>*>(x + i) = p;
}

// An elementwise op over the N * C elements of a row-major (N, C) array, W at a time (C % W ==
// 0): op(i, r, c) takes the elements (r, c + k), k < W, i = r * C + c.
template <int W, class F>
__global__ void for_each_element_kernel(F op, size_t packs, int C) {
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < packs; p += (size_t)gridDim.x * blockDim.x) {
        const size_t i = p * W;
        op(i, (int)(i / C), (int)(i % C));
    }
}
template <int W, class F>
void for_each_element(F op, int N, int C, cudaStream_t stream) {
    const size_t packs = (size_t)N * C / W;
    if (packs == 0) return;
    for_each_element_kernel<W, F><<<grid_for(packs, 256), 256, 0, stream>>>(op, packs, C);
    cudaCheckLaunch();
}

// dst for one sum: column c of p
struct SumInto {
    float* p;
    __device__ float& operator()(int, int c) const { return p[c]; }
};

// Online log-sum-exp: merge (m, s) with (m2, s2), where s = sum of exp(x - m) over a set of
// x with max m. An empty set is (-inf, 0); it is guarded so exp(-inf - -inf) = NaN never
// appears.
__device__ inline void lse_merge(float& m, float& s, float m2, float s2) {
    float mm = fmaxf(m, m2);
    float a = s == 0.0f ? 0.0f : s * expf(m - mm);
    float b = s2 == 0.0f ? 0.0f : s2 * expf(m2 - mm);
    m = mm;
    s = a + b;
}

// Add one value x to a running (m, s).
__device__ inline void lse_push(float& m, float& s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.0f;  // at the start m = -inf, s = 0: expf(-inf) = 0
        m = x;
    } else {
        s += expf(x - m);
    }
}

// Butterfly merge across the warp; every lane ends with the warp's (m, s).
__device__ inline void warp_lse(float& m, float& s) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, m2, s2);
    }
}

}  // namespace gpu
