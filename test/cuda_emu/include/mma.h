// WMMA (nvcuda::wmma) of the CUDA emulation: 16x16x16 fragments for the kernels of cuda/.
// The hardware spreads a fragment over the warp's 32 lanes in an unspecified layout; here every
// lane holds the whole tile (row-major over the fragment's own rows and columns), which gives
// the same result for everything the API allows: loads, stores, fill, uniform element-wise
// ops on x[0 .. num_elements) and mma_sync. Each lane reads and writes memory at its own time,
// so a kernel that omits a __syncwarp between lanes' shared-memory writes and a fragment load
// reads stale data here as it may on the GPU. mma_sync is warp-collective: it synchronises
// the warp (all 32 lanes must call it, as on the hardware). Products are exact in fp32
// (bf16 x bf16) and summed in k order in fp32.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "cuda_emu.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
// rows x columns of a fragment's matrix
template <class Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};

template <class Use, int M, int N, int K, class T>
struct FragmentBase {
    static constexpr int rows = Shape<Use, M, N, K>::rows, cols = Shape<Use, M, N, K>::cols;
    static constexpr int num_elements = rows * cols;
    using element_type = T;
    T x[num_elements];
};

// CUDA's rule for every load_matrix_sync / store_matrix_sync: the pointer 256-bit (32-byte)
// aligned, ldm a multiple of 16 bytes (8 bf16 or half elements, 4 floats). A GPU may fault or
// read wrong data otherwise, so the emulation stops with the call site.
template <class T>
inline void check_matrix_ptr(const T* p, unsigned ldm, const char* what, const char* file, int line) {
    if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
        ::emu::fail(file, line, "%s: pointer %p is not 256-bit (32-byte) aligned", what, (const void*)p);
    if (ldm * sizeof(T) % 16 != 0)
        ::emu::fail(file, line, "%s: ldm %u (%zu-byte elements) is not a multiple of 16 bytes", what, ldm, sizeof(T));
}

// element (r, c) of a matrix in memory with leading dimension ldm
template <class T>
inline T& at(T* p, int r, int c, unsigned ldm, bool row_major_mem) {
    return row_major_mem ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment : detail::FragmentBase<Use, M, N, K, T> {};

template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    static_assert(!std::is_same<Layout, void>::value, "an accumulator load needs a layout_t");
    detail::check_matrix_ptr(p, ldm, "load_matrix_sync", file, line);
    constexpr bool rm = std::is_same<Layout, row_major>::value;
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) f.x[r * f.cols + c] = detail::at(p, r, c, ldm, rm);
}

template <int M, int N, int K, class T>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    detail::check_matrix_ptr(p, ldm, "load_matrix_sync", file, line);
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) f.x[r * f.cols + c] = detail::at(p, r, c, ldm, layout == mem_row_major);
}

// Every lane stores the whole tile (each holds all of it here), the same values to the same
// places: not a race, so make emu-tsan does not watch it (nor, then, races with these stores).
template <int M, int N, int K, class T>
EMU_BOOKKEEPING inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                                              layout_t layout, const char* file = __builtin_FILE(),
                                              int line = __builtin_LINE()) {
    detail::check_matrix_ptr(p, ldm, "store_matrix_sync", file, line);
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) detail::at(p, r, c, ldm, layout == mem_row_major) = f.x[r * f.cols + c];
}

template <class Use, int M, int N, int K, class T, class Layout, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const V& v) {
    for (auto& e : f.x) e = T(v);
}

// d = a b + c (d may be c)
template <int M, int N, int K, class TA, class LA, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TA, LB>& b, const fragment<accumulator, M, N, K, TC>& c,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    __syncwarp(0xffffffffu, file, line);
    TC out[M * N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = (float)c.x[i * N + j];
            for (int k = 0; k < K; k++) s += (float)a.x[i * K + k] * (float)b.x[k * N + j];
            out[i * N + j] = TC(s);
        }
    for (int i = 0; i < M * N; i++) d.x[i] = out[i];
}

}  // namespace wmma
}  // namespace nvcuda
