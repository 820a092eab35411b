// The tensor-core building blocks of the flash attention kernels (attention.cu) and the fused
// LM head (loss.cu): mma.sync on bf16 or tf32 operands with fp32 accumulators, their operand
// loads from shared memory, and the row tiles they read. A warp owns 16 rows; of every 16 x 8
// product tile, lane holds rows g = lane / 4 and g + 8, columns 2t and 2t + 1 (t = lane % 4), so
// a row's reductions join over its quad of lanes. Shared tiles are row-major, each row padded
// by kPad elements so that the rows one operand load reads at once hit 32 different banks.
#pragma once
#include <cstdint>

#include "common.cuh"

namespace gpu {

// sum of x over the quad (lanes 4i .. 4i+3); every lane of the quad gets it
__device__ inline float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

using bf16 = __nv_bfloat16;
constexpr int kMmaWarps = 4, kMmaRows = 16 * kMmaWarps, kMmaThreads = 32 * kMmaWarps;
// Row padding of the shared tiles, in elements (see load_block and the tf32 products)
template <class X>
constexpr int kPad = is_bf16<X> ? 8 : 4;
constexpr int kTiles8 = kMmaRows / 8;  // 8-column product tiles across a tile of rows
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
template <class X>
constexpr int kMmaK = is_bf16<X> ? 16 : 8;  // the summed index of one product

// d (16 x 8, fp32) += a (16 x 16, row-major) b (16 x 8, column-major), bf16 operands: one
// mma.sync, fragments laid out as above (the PTX ISA's "Matrix Fragments for mma.m16n8k16").
// The CPU execution layer (test/cuda_emu) has its own, with the same layouts.
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if CUDA_EMU
    ::emu::mma_m16n8k16_bf16(d, a, b, __FILE__, __LINE__);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// d (16 x 8, fp32) += a (16 x 8) b (8 x 8), tf32 operands (fp32 bit patterns): one mma.sync
// ("Matrix Fragments for mma.m16n8k8", .tf32): a[i] = (g + 8 (i % 2), t + 4 (i / 2)),
// b[i] = (t + 4 i, g), d as above.
__device__ inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if CUDA_EMU
    ::emu::mma_m16n8k8_tf32(d, a, b, __FILE__, __LINE__);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// x rounded to tf32 (nearest, ties away from zero), as the bit pattern of an fp32
__device__ inline uint32_t tf32_bits(float x) {
#if CUDA_EMU
    return ::emu::cvt_rna_tf32(x);
#else
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
#endif
}

// Four 8 x 8 matrices from shared memory (ldmatrix.x4): lane 8j + r gives the address of row r
// of matrix j; lane l gets in r[j] row l / 4, columns 2 (l % 4) and + 1 of matrix j, or with
// Trans column l / 4, rows 2 (l % 4) and + 1. The CPU execution layer has its own, alike.
template <bool Trans>
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bf16* row) {
#if CUDA_EMU
    ::emu::ldmatrix_x4(r, row, Trans, __FILE__, __LINE__);
#else
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    if constexpr (Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr)
                     : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr)
                     : "memory");
#endif
}

// The 16 x 16 block at tile (row-major, ld elements a row) as four 8 x 8 matrices in the order
// (rows 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): the A operand's registers
// (Trans false), or the B operands of two 8-column product tiles when the block's rows are the
// sum's index, B[k][n] = block[k][n] (Trans: r[0..1] columns 0-7, r[2..3] columns 8-15).
template <bool Trans>
__device__ inline void load_block(uint32_t (&r)[4], const bf16* tile, int ld) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4<Trans>(r, tile + lane % 16 * ld + lane / 16 * 8);
}

// The B operands of two 8-column product tiles with B[k][n] = tile[n][k], k < 16: r[0..1] from
// rows 0-7 of the tile, r[2..3] from rows 8-15; matrices (rows 0-7, columns 0-7), (0-7, 8-15),
// (8-15, 0-7), (8-15, 8-15).
__device__ inline void load_b_pair(uint32_t (&r)[4], const bf16* tile, int ld) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4<false>(r, tile + (lane % 8 + lane / 16 * 8) * ld + lane / 8 % 2 * 8);
}

__device__ inline uint32_t pack_bf16(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16 |
           __bfloat16_as_ushort(__float2bfloat16_rn(lo));
}

// tf32 operands come from shared memory one float each: ldmatrix moves 16-bit elements (its
// transposing form would split a float). Rows D + kPad = 4 (mod 8) floats apart put every
// such load of a warp on 32 different banks: lane (g, t) reads row g, column t (+ 4) of an A or
// X Y^T B operand (banks 4g + t), or row 2t (+ 1), column g of an X Y one (banks 8t + g).

// The A operand of a product whose 16 rows and K summed columns start at tile (row-major, ld
// elements a row).
__device__ inline void load_a(uint32_t (&a)[4], const bf16* tile, int ld) {
    load_block<false>(a, tile, ld);
}
__device__ inline void load_a(uint32_t (&a)[4], const float* tile, int ld) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int i = 0; i < 4; i++) a[i] = __float_as_uint(tile[(g + 8 * (i % 2)) * ld + t + 4 * (i / 2)]);
}

// s (16 x N) += X Y^T: X (16 x D) the warp's A operands, Y (N x D) N rows of a row-major shared
// tile (N a multiple of 16)
template <int D, int N = kMmaRows>
__device__ inline void mma_xyt(float (&s)[N / 8][4], const uint32_t (&x)[D / 16][4], const bf16 (*y)[D + kPad<bf16>]) {
    for (int n = 0; n < N / 8; n += 2)
        for (int k = 0; k < D / 16; k++) {
            uint32_t yb[4];
            load_b_pair(yb, &y[8 * n][16 * k], D + kPad<bf16>);
            mma_bf16(s[n], x[k], {yb[0], yb[1]});
            mma_bf16(s[n + 1], x[k], {yb[2], yb[3]});
        }
}
template <int D, int N = kMmaRows>
__device__ inline void mma_xyt(float (&s)[N / 8][4], const uint32_t (&x)[D / 8][4], const float (*y)[D + kPad<float>]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int n = 0; n < N / 8; n++)
        for (int k = 0; k < D / 8; k++)
            mma_tf32(s[n], x[k],
                     {__float_as_uint(y[8 * n + g][8 * k + t]), __float_as_uint(y[8 * n + g][8 * k + t + 4])});
}

// acc (16 x D) += X Y: X (16 x N) the lane's accumulator tiles (rounded to the operand type
// here), Y (N x D) N rows of a row-major shared tile
template <int D, int N = kMmaRows>
__device__ inline void mma_xy(float (&acc)[D / 8][4], const float (&x)[N / 8][4], const bf16 (*y)[D + kPad<bf16>]) {
    for (int j = 0; j < N / 16; j++) {  // 16 of the summed index at a time
        const uint32_t xa[4] = {pack_bf16(x[2 * j][0], x[2 * j][1]), pack_bf16(x[2 * j][2], x[2 * j][3]),
                                pack_bf16(x[2 * j + 1][0], x[2 * j + 1][1]),
                                pack_bf16(x[2 * j + 1][2], x[2 * j + 1][3])};
        for (int n = 0; n < D / 8; n += 2) {
            uint32_t yb[4];
            load_block<true>(yb, &y[16 * j][8 * n], D + kPad<bf16>);
            mma_bf16(acc[n], xa, {yb[0], yb[1]});
            mma_bf16(acc[n + 1], xa, {yb[2], yb[3]});
        }
    }
}
// tf32: the 8 summed columns of a product in the order the accumulator tile holds them, the same
// for A and B (so the sum is unchanged): A's column t is the tile's column 2t, column t + 4 is
// 2t + 1, so the lane's accumulators are its A operand as they are.
template <int D, int N = kMmaRows>
__device__ inline void mma_xy(float (&acc)[D / 8][4], const float (&x)[N / 8][4], const float (*y)[D + kPad<float>]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int j = 0; j < N / 8; j++) {  // 8 of the summed index at a time
        const uint32_t xa[4] = {tf32_bits(x[j][0]), tf32_bits(x[j][2]), tf32_bits(x[j][1]), tf32_bits(x[j][3])};
        for (int n = 0; n < D / 8; n++)
            mma_tf32(acc[n], xa,
                     {__float_as_uint(y[8 * j + 2 * t][8 * n + g]), __float_as_uint(y[8 * j + 2 * t + 1][8 * n + g])});
    }
}

// rows [t0, t0 + kMmaRows) of one head's D columns (rows ld elements apart from base) into
// tile (row-major; fp32 rounded to tf32); rows past T are zeros. 16-byte loads: the launcher
// checks the alignment.
template <int D, class X>
__device__ inline void load_rows(X (*tile)[D + kPad<X>], const X* base, int t0, int T, size_t ld) {
    constexpr int W = 16 / sizeof(X);
    using P = Pack<X, W>;
    for (int i = threadIdx.x; i < kMmaRows * D / W; i += kMmaThreads) {
        const int j = i / (D / W), c = i % (D / W) * W;
        P v = {};
        if (t0 + j < T) v = *reinterpret_cast<const P*>(base + (size_t)(t0 + j) * ld + c);
        if constexpr (!is_bf16<X>)
            for (int e = 0; e < W; e++) v.e[e] = __uint_as_float(tf32_bits(v.e[e]));
        *reinterpret_cast<P*>(&tile[j][c]) = v;
    }
}

// Stores row r (0: g, 1: g + 8) of the lane's accumulator tiles acc[D / 8], times mul, as
// pairs at dst (the row's column 0).
template <int D, class X>
__device__ inline void store_row(X* dst, const float (&acc)[D / 8][4], int r, float mul) {
    const int t = threadIdx.x % 4;
    for (int n = 0; n < D / 8; n++) {
        const float lo = mul * acc[n][2 * r], hi = mul * acc[n][2 * r + 1];
        if constexpr (is_bf16<X>)
            *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n + 2 * t) = __floats2bfloat162_rn(lo, hi);
        else
            *reinterpret_cast<float2*>(dst + 8 * n + 2 * t) = make_float2(lo, hi);
    }
}

// Adds row r of the lane's accumulator tiles into dst (fp32; the row's one owner writes it).
template <int D>
__device__ inline void add_row(float* dst, const float (&acc)[D / 8][4], int r) {
    const int t = threadIdx.x % 4;
    for (int n = 0; n < D / 8; n++) {
        float2* p = reinterpret_cast<float2*>(dst + 8 * n + 2 * t);
        const float2 v = *p;
        *p = make_float2(v.x + acc[n][2 * r], v.y + acc[n][2 * r + 1]);
    }
}

}  // namespace gpu
