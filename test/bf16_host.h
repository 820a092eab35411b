// The host's rounding of a float to bf16, for the tests and the kernel lab (the product rounds on
// the device, gpu::to_bf16): what they fill bf16 inputs with and compare the device's rounding to.
#pragma once
#include <cstdint>
#include <cstring>

#include "backend_cuda.h"

// Round to nearest even (NaN stays NaN), as __float2bfloat16_rn.
inline bf16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return {(uint16_t)(u >> 16)};
}
