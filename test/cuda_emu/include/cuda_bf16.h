// bf16 of the CUDA emulation: __nv_bfloat16 stores the upper 16 bits of a float; conversions
// from float round to nearest even (NaN stays NaN), as CUDA's __float2bfloat16_rn.
#pragma once

#include "cuda_emu.h"

struct __nv_bfloat16;
namespace emu {
inline unsigned short f2bf_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
inline float bf2f(unsigned short h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
}  // namespace emu

struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(::emu::f2bf_rn(f)) {}
    __nv_bfloat16(double f) : __x(::emu::f2bf_rn((float)f)) {}
    __nv_bfloat16(int i) : __x(::emu::f2bf_rn((float)i)) {}
    operator float() const { return ::emu::bf2f(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 h;
    h.__x = u;
    return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) {
    return h.__x;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    return __ushort_as_bfloat16(::emu::f2bf_rn(f));
}
inline __nv_bfloat16 __float2bfloat16(float f) {
    return __float2bfloat16_rn(f);
}
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return __ushort_as_bfloat16((u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((u >> 16) | 0x40)
                                                                : (unsigned short)(u >> 16));
}
inline float __bfloat162float(__nv_bfloat16 h) {
    return ::emu::bf2f(h.__x);
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) {
    return __floats2bfloat162_rn(f.x, f.y);
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
    return {__bfloat162float(h.x), __bfloat162float(h.y)};
}
inline float __low2float(__nv_bfloat162 h) {
    return __bfloat162float(h.x);
}
inline float __high2float(__nv_bfloat162 h) {
    return __bfloat162float(h.y);
}
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) {
    return {h, h};
}

// arithmetic: computed in float, rounded once (as the sm_80+ instructions do)
#define EMU_BF16_OP(name, op)                                                   \
    inline __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) {               \
        return __float2bfloat16_rn(__bfloat162float(a) op __bfloat162float(b)); \
    }                                                                           \
    inline __nv_bfloat16 operator op(__nv_bfloat16 a, __nv_bfloat16 b) {        \
        return name(a, b);                                                      \
    }                                                                           \
    inline __nv_bfloat16& operator op##=(__nv_bfloat16& a, __nv_bfloat16 b) {   \
        return a = name(a, b);                                                  \
    }
EMU_BF16_OP(__hadd, +)
EMU_BF16_OP(__hsub, -)
EMU_BF16_OP(__hmul, *)
EMU_BF16_OP(__hdiv, /)
#undef EMU_BF16_OP
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16_rn(fmaf(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c)));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
    return __ushort_as_bfloat16(a.__x ^ 0x8000);
}
inline __nv_bfloat16 __habs(__nv_bfloat16 a) {
    return __ushort_as_bfloat16(a.__x & 0x7fff);
}
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
    return (float)a < (float)b ? b : a;
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
    return (float)b < (float)a ? b : a;
}
