// CPU emulation of CUDA: what a kernel sees (built-in variables, vector types, intrinsics,
// barriers, warp collectives, atomics, shared memory) and the launch that nvcc-emu writes
// in place of k<<<grid, block, smem, stream>>>(args). See test/cuda_emu/README.md.
//
// Blocks run one after another on the calling OS thread; inside a block each CUDA thread is a
// fiber (scheduler.cpp) that runs until it reaches a barrier, a warp collective or its end.
// Everything a fiber touches between two such points is therefore never interleaved with
// another fiber, which makes atomics plain read-modify-writes and __shared__ per-block slots.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __launch_bounds__(...)  // nvcc-emu moves it into the body; this covers macro uses
#ifndef __shared__
#define __shared__ static  // only where nvcc-emu did not rewrite it: no 0xFF fill there
#endif

// ---- vector types, with CUDA's sizes and alignments -------------------------------------
#define EMU_VEC2(T, N, A)               \
    struct alignas(A) N##2 {            \
        T x, y;                         \
    };                                  \
    inline N##2 make_##N##2(T x, T y) { \
        return {x, y};                  \
    }
#define EMU_VEC4(T, N, A)                         \
    struct alignas(A) N##4 {                      \
        T x, y, z, w;                             \
    };                                            \
    inline N##4 make_##N##4(T x, T y, T z, T w) { \
        return {x, y, z, w};                      \
    }
#define EMU_VEC3(T, N)                       \
    struct N##3 {                            \
        T x, y, z;                           \
    };                                       \
    inline N##3 make_##N##3(T x, T y, T z) { \
        return {x, y, z};                    \
    }
EMU_VEC2(float, float, 8)
EMU_VEC3(float, float)
EMU_VEC4(float, float, 16) EMU_VEC2(double, double, 16) EMU_VEC3(double, double) EMU_VEC4(double, double, 16)
    EMU_VEC2(int, int, 8) EMU_VEC3(int, int) EMU_VEC4(int, int, 16) EMU_VEC2(unsigned int, uint, 8)
        EMU_VEC3(unsigned int, uint) EMU_VEC4(unsigned int, uint, 16) EMU_VEC2(signed char, char, 2)
            EMU_VEC4(signed char, char, 4) EMU_VEC2(unsigned char, uchar, 2) EMU_VEC4(unsigned char, uchar, 4)
                EMU_VEC2(short, short, 4) EMU_VEC4(short, short, 8) EMU_VEC2(unsigned short, ushort, 4)
                    EMU_VEC4(unsigned short, ushort, 8) EMU_VEC2(long long, longlong, 16)
                        EMU_VEC2(unsigned long long, ulonglong, 16)
#undef EMU_VEC2
#undef EMU_VEC3
#undef EMU_VEC4

                            struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const {
        return {x, y, z};
    }
};

constexpr int warpSize = 32;

// ---- the emulator's interface (scheduler.cpp, runtime.cpp) ------------------------------
typedef struct CUstream_st* cudaStream_t;
enum cudaError_t : int;

namespace emu {

struct ThreadHead {  // the start of a CUDA thread's state (scheduler.cpp has the rest)
    uint3 idx;
};
extern ThreadHead* g_thread;  // the running CUDA thread
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;
inline const uint3& thread_idx() {
    return g_thread->idx;
}

// A bug the emulator found: prints "cuda-emu: error: FILE:LINE: message" plus the kernel,
// block and thread it happened in (when inside a kernel), then aborts.
[[noreturn]] void fail(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// __syncthreads and its counting forms: returns the number of threads whose pred != 0.
int block_barrier(const char* file, int line, int pred);

// Warp collectives. Every lane named in `mask` must call the same collective (same combine
// function) with the same mask; the lanes' inputs are then combined at once by
// `combine(in, param, out, mask)` (arrays indexed by lane), and each lane gets out[lane].
// Naming an exited or missing lane, or leaving the calling lane out, is reported.
// Usable for any warp-wide operation (shuffles, votes, WMMA fragments: pass pointers in `in`).
using WarpCombine = void (*)(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
uint64_t warp_collective(const char* file, int line, const char* what, unsigned mask, uint64_t in, uint64_t param,
                         WarpCombine combine);
int lane_id();
unsigned active_lanes();  // lanes of the caller's warp that exist and have not exited

// Shared memory of the running block: the launch's dynamic buffer, and static slots.
void* dynamic_shared();
void* shared_alloc(size_t bytes, size_t align, const char* file, int line);
extern unsigned long long g_block_serial;  // changes at every block: slots re-bind
// The emulator's own bookkeeping inside kernel code, which every thread shares on purpose: not
// watched by make emu-tsan's race detector.
#define EMU_BOOKKEEPING __attribute__((no_sanitize("thread")))
template <class T>
struct Shared {
    unsigned long long serial = ~0ull;
    T* p = nullptr;
    EMU_BOOKKEEPING T& get(const char* file, int line) {
        if (serial != g_block_serial) {
            p = static_cast<T*>(shared_alloc(sizeof(T), alignof(T), file, line));
            serial = g_block_serial;
        }
        return *p;
    }
};

// __launch_bounds__(max_threads[, min_blocks]) at the top of the kernel body.
void launch_bounds(const char* file, int line, int max_threads, int min_blocks = 0);

// Device memory: the allocation holding [p, p + bytes), or false (runtime.cpp).
bool device_range(const void* p, size_t bytes);
// Host-side checks of library calls: [p, p + bytes) must lie inside one device allocation.
void check_device_range(const char* file, int line, const char* what, const void* p, size_t bytes);
bool stream_valid(cudaStream_t s);  // null, legacy, per-thread or created and not destroyed

// Asynchronous work on stream s (stream.cpp): runs now (with CUDA_EMU_DEFER=1 on a created
// stream: when it is waited for), or, while s captures a graph, is recorded as a node that runs
// at every cudaGraphLaunch (so `work` must own copies of what it reads at the call, and check
// pointers when it runs). Returns cudaSuccess, or the capture's
// error (cudaErrorStreamCaptureImplicit for the legacy stream while a blocking stream captures,
// after a report; cudaErrorStreamCaptureInvalidated once the capture is invalidated).
cudaError_t enqueue(cudaStream_t s, const char* file, int line, const char* what, std::function<void()> work);
bool stream_capturing(cudaStream_t s);
void invalidate_capture(cudaStream_t s);  // a captured call failed: the capture is invalidated
bool in_replay();                         // inside cudaGraphLaunch's run of the nodes

// ---- kernel launch ----------------------------------------------------------------------
struct LaunchCfg {
    const char* file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};

// Checks the launch configuration (a report and CUDA's error if it is rejected), then runs, or
// records while cfg.stream captures, `check(cfg, ctx)` (the pointer arguments) and `run(ctx)` as
// every thread of every block (scheduler.cpp); a replay checks the configuration again.
void launch(const LaunchCfg& cfg, const void* kernel, std::shared_ptr<void> ctx, void (*check)(const LaunchCfg&, void*),
            void (*run)(void*));
// Kernel argument `index` is a pointer not inside any device allocation: report it.
void bad_kernel_pointer(const LaunchCfg& cfg, int index, const void* p);

template <class... A>
struct LaunchCall {
    LaunchCfg cfg;
    std::tuple<A...> args;
};

struct LaunchBuilder {
    LaunchCfg cfg;
    template <class... A>
    LaunchCall<std::decay_t<A>...> operator()(A&&... a) const {
        return {cfg, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
    }
};

inline LaunchBuilder launch_cfg(const char* file, int line, dim3 grid, dim3 block, size_t smem = 0,
                                cudaStream_t stream = nullptr) {
    return {{file, line, grid, block, smem, stream}};
}

template <class T>
void check_kernel_arg(const LaunchCfg& cfg, int index, const T& v) {
    if constexpr (std::is_pointer_v<T>)
        if (v && !device_range(v, 0)) bad_kernel_pointer(cfg, index, v);
}

template <class... P, class... A>
void operator|(void (*kernel)(P...), LaunchCall<A...>&& call) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    struct Ctx {
        void (*k)(P...);
        std::tuple<P...> params;  // converted as CUDA converts launch arguments, frozen as a graph node freezes them
    };
    launch(
        call.cfg, reinterpret_cast<const void*>(kernel),
        std::make_shared<Ctx>(Ctx{kernel, std::tuple<P...>(std::move(call.args))}),
        [](const LaunchCfg& cfg, void* c) {
            std::apply(
                [&](const auto&... p) {
                    int i = 0;
                    (check_kernel_arg(cfg, i++, p), ...);
                },
                static_cast<Ctx*>(c)->params);
        },
        [](void* c) { std::apply(static_cast<Ctx*>(c)->k, static_cast<Ctx*>(c)->params); });
}

}  // namespace emu

#define threadIdx (::emu::thread_idx())
#define blockIdx (static_cast<const uint3&>(::emu::g_block_idx))
#define blockDim (static_cast<const dim3&>(::emu::g_block_dim))
#define gridDim (static_cast<const dim3&>(::emu::g_grid_dim))

// ---- barriers and warp collectives ------------------------------------------------------
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::emu::block_barrier(file, line, 1);
}
inline int __syncthreads_count(int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ::emu::block_barrier(file, line, pred != 0);
}
inline int __syncthreads_and(int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ::emu::block_barrier(file, line, pred != 0) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ::emu::block_barrier(file, line, pred != 0) > 0;
}

namespace emu {
// Shuffle parameter: (kind, lane operand, width) in one word; the combine computes every
// lane's source lane as the hardware does (PTX shfl.sync idx/up/down/bfly).
enum ShflKind : uint64_t { kShflIdx, kShflUp, kShflDown, kShflXor };
void shfl_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
void ballot_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
void sync_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
void reduce_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
void match_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);

// One warp-wide mma.sync.m16n8k16 (bf16 inputs, fp32 accumulators): d = a b + d, every lane
// passing its own fragments; all 32 lanes must take part, as on the hardware.
struct MmaOperands {
    float* d;
    const uint32_t* a;
    const uint32_t* b;
};
void mma_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const char* file,
                              int line) {
    MmaOperands o{d, a, b};
    warp_collective(file, line, "mma.sync.m16n8k16", 0xffffffffu, reinterpret_cast<uintptr_t>(&o), 0, mma_combine);
}

// One warp-wide mma.sync.m16n8k8 (tf32 inputs, fp32 accumulators): d = a b + d, every lane
// passing its own fragments, the tf32 operands as fp32 bit patterns; all 32 lanes must take part.
void mma_tf32_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
inline void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const char* file,
                             int line) {
    MmaOperands o{d, a, b};
    warp_collective(file, line, "mma.sync.m16n8k8.tf32", 0xffffffffu, reinterpret_cast<uintptr_t>(&o), 0,
                    mma_tf32_combine);
}

// cvt.rna.tf32.f32: x rounded to tf32 (10 mantissa bits; to nearest, ties away from zero),
// returned as its fp32 bit pattern (the low 13 bits zero); infinities and NaNs pass through.
inline uint32_t cvt_rna_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (u & 0x7f800000u) == 0x7f800000u ? u : (u + 0x1000u) & 0xffffe000u;
}

// One warp-wide ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: four 8 x 8 matrices of 16-bit
// elements; lane 8j + r passes the address of row r of matrix j (16 bytes of shared memory,
// 16-byte aligned), and lane l receives in r[j] two elements of matrix j: row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1, or with trans column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1 (the
// first in the low half). All 32 lanes must take part, as on the hardware.
struct LdmatrixOperands {
    uint32_t* r;
    const void* row;
};
void ldmatrix_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask);
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans, const char* file, int line) {
    LdmatrixOperands o{r, row};
    warp_collective(file, line, trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", 0xffffffffu,
                    reinterpret_cast<uintptr_t>(&o), trans, ldmatrix_combine);
}

template <class T>
T shfl(const char* file, int line, const char* what, unsigned mask, T v, ShflKind kind, int operand, int width) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type wider than 64 bits");
    if (width <= 0 || width > 32 || (width & (width - 1)))
        fail(file, line, "%s: width %d is not a power of two in [1, 32]", what, width);
    uint64_t in = 0, param = (uint64_t)kind | ((uint64_t)(unsigned)operand << 8) | ((uint64_t)width << 40);
    memcpy(&in, &v, sizeof(T));
    uint64_t out = warp_collective(file, line, what, mask, in, param, shfl_combine);
    T r;
    memcpy(&r, &out, sizeof(T));
    return r;
}
}  // namespace emu

#define EMU_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32, EMU_SITE) {
    return ::emu::shfl(file, line, "__shfl_sync", mask, v, ::emu::kShflIdx, src, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, EMU_SITE) {
    return ::emu::shfl(file, line, "__shfl_up_sync", mask, v, ::emu::kShflUp, (int)delta, width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, EMU_SITE) {
    return ::emu::shfl(file, line, "__shfl_down_sync", mask, v, ::emu::kShflDown, (int)delta, width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, EMU_SITE) {
    return ::emu::shfl(file, line, "__shfl_xor_sync", mask, v, ::emu::kShflXor, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred, EMU_SITE) {
    return (unsigned)::emu::warp_collective(file, line, "__ballot_sync", mask, pred != 0, 0, ::emu::ballot_combine);
}
inline int __any_sync(unsigned mask, int pred, EMU_SITE) {
    return ::emu::warp_collective(file, line, "__any_sync", mask, pred != 0, 0, ::emu::ballot_combine) != 0;
}
inline int __all_sync(unsigned mask, int pred, EMU_SITE) {
    return ::emu::warp_collective(file, line, "__all_sync", mask, pred != 0, 0, ::emu::ballot_combine) == mask;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, EMU_SITE) {
    ::emu::warp_collective(file, line, "__syncwarp", mask, 0, 0, ::emu::sync_combine);
}
// __reduce_{add,min,max}_sync (sm_80+), unsigned and int
inline unsigned __reduce_add_sync(unsigned mask, unsigned v, EMU_SITE) {
    return (unsigned)::emu::warp_collective(file, line, "__reduce_add_sync", mask, v, 0, ::emu::reduce_combine);
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v, EMU_SITE) {
    return (unsigned)::emu::warp_collective(file, line, "__reduce_min_sync", mask, v, 1, ::emu::reduce_combine);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v, EMU_SITE) {
    return (unsigned)::emu::warp_collective(file, line, "__reduce_max_sync", mask, v, 2, ::emu::reduce_combine);
}
inline unsigned __match_any_sync(unsigned mask, unsigned long long v, EMU_SITE) {
    return (unsigned)::emu::warp_collective(file, line, "__match_any_sync", mask, v, 0, ::emu::match_combine);
}
inline unsigned __activemask() {
    return ::emu::active_lanes();
}
#undef EMU_SITE

// ---- memory fences, loads, timing -------------------------------------------------------
// Fibers only switch at barriers and collectives, so fences only need to stop the compiler.
inline void __threadfence() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
template <class T>
inline T __ldg(const T* p) {
    return *p;
}
template <class T>
inline T __ldcg(const T* p) {
    return *p;
}
long long clock64();
inline void __nanosleep(unsigned) {}

// ---- atomics (plain read-modify-write: see the top of this file) ------------------------
// In make emu-tsan's kernels the load and the store are atomic ones, so that the race detector
// does not take atomics for races; acquire and release, as the fences around them would order.
template <class T>
inline T emu_atomic_load(const T* a) {
#if defined(__SANITIZE_THREAD__)
    T v;
    __atomic_load(a, &v, __ATOMIC_ACQUIRE);
    return v;
#else
    return *a;
#endif
}
template <class T>
inline void emu_atomic_store(T* a, T v) {
#if defined(__SANITIZE_THREAD__)
    __atomic_store(a, &v, __ATOMIC_RELEASE);
#else
    *a = v;
#endif
}
#define EMU_ATOMIC(name, T, expr)       \
    inline T name(T* a, T v) {          \
        T old = emu_atomic_load(a);     \
        emu_atomic_store(a, (T)(expr)); \
        return old;                     \
    }
#define EMU_ATOMIC_ALL(T)                       \
    EMU_ATOMIC(atomicAdd, T, old + v)           \
    EMU_ATOMIC(atomicSub, T, old - v)           \
    EMU_ATOMIC(atomicExch, T, v)                \
    EMU_ATOMIC(atomicMin, T, v < old ? v : old) \
    EMU_ATOMIC(atomicMax, T, v > old ? v : old)
EMU_ATOMIC_ALL(int)
EMU_ATOMIC_ALL(unsigned int)
EMU_ATOMIC_ALL(unsigned long long)
EMU_ATOMIC(atomicAdd, float, old + v)
EMU_ATOMIC(atomicAdd, double, old + v)
EMU_ATOMIC(atomicExch, float, v)
EMU_ATOMIC(atomicAnd, int, old& v)
EMU_ATOMIC(atomicOr, int, old | v)
EMU_ATOMIC(atomicXor, int, old ^ v)
EMU_ATOMIC(atomicAnd, unsigned int, old& v)
EMU_ATOMIC(atomicOr, unsigned int, old | v)
EMU_ATOMIC(atomicXor, unsigned int, old ^ v)
#undef EMU_ATOMIC_ALL
#undef EMU_ATOMIC
template <class T>
inline T atomicCAS(T* a, T compare, T v) {
    T old = emu_atomic_load(a);
    if (old == compare) emu_atomic_store(a, v);
    return old;
}
inline unsigned atomicInc(unsigned* a, unsigned v) {
    unsigned old = emu_atomic_load(a);
    emu_atomic_store(a, old >= v ? 0u : old + 1);
    return old;
}

// ---- math and bit intrinsics ------------------------------------------------------------
inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
    return 1.0 / sqrt(x);
}
inline float __expf(float x) {
    return expf(x);
}
inline float __logf(float x) {
    return logf(x);
}
inline float __sinf(float x) {
    return sinf(x);
}
inline float __cosf(float x) {
    return cosf(x);
}
inline float __tanf(float x) {
    return tanf(x);
}
inline float __powf(float x, float y) {
    return powf(x, y);
}
inline float __fdividef(float x, float y) {
    return x / y;
}
inline float __frcp_rn(float x) {
    return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
    return sqrtf(x);
}
inline float __fmaf_rn(float x, float y, float z) {
    return fmaf(x, y, z);
}
inline float __fadd_rn(float x, float y) {
    return x + y;
}
inline float __fmul_rn(float x, float y) {
    return x * y;
}
inline float __saturatef(float x) {
    return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
}
inline void __sincosf(float x, float* s, float* c) {
    *s = sinf(x);
    *c = cosf(x);
}
inline int __float_as_int(float x) {
    int i;
    memcpy(&i, &x, 4);
    return i;
}
inline unsigned __float_as_uint(float x) {
    unsigned i;
    memcpy(&i, &x, 4);
    return i;
}
inline float __int_as_float(int i) {
    float x;
    memcpy(&x, &i, 4);
    return x;
}
inline float __uint_as_float(unsigned i) {
    float x;
    memcpy(&x, &i, 4);
    return x;
}
inline long long __double_as_longlong(double x) {
    long long i;
    memcpy(&i, &x, 8);
    return i;
}
inline double __longlong_as_double(long long i) {
    double x;
    memcpy(&x, &i, 8);
    return x;
}
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
inline int __clz(int x) {
    return x ? __builtin_clz((unsigned)x) : 32;
}
inline int __clzll(long long x) {
    return x ? __builtin_clzll((unsigned long long)x) : 64;
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
    return __builtin_ffsll(x);
}
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline int __mul24(int a, int b) {
    return a * b;
}
inline int __mulhi(int a, int b) {
    return (int)(((long long)a * b) >> 32);
}

// CUDA's global min/max overloads (device code calls them unqualified)
#define EMU_MINMAX(T)         \
    inline T min(T a, T b) {  \
        return b < a ? b : a; \
    }                         \
    inline T max(T a, T b) {  \
        return a < b ? b : a; \
    }
EMU_MINMAX(int)
EMU_MINMAX(unsigned int)
EMU_MINMAX(long)
EMU_MINMAX(unsigned long)
EMU_MINMAX(long long)
EMU_MINMAX(unsigned long long)
EMU_MINMAX(double)
#undef EMU_MINMAX
inline float min(float a, float b) {
    return fminf(a, b);
}
inline float max(float a, float b) {
    return fmaxf(a, b);
}
