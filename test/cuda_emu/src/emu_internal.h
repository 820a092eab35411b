// Shared between the emulator's own files (not seen by kernels).
#pragma once
#include <cstdint>

#include "cuda_runtime.h"

namespace emu {
// An environment variable holding a non-negative integer; anything else is an error (exit 1).
uint64_t parse_env_u64(const char* name, const char* value);
void set_last_error(cudaError_t err);
cudaError_t set_max_dynamic_smem(const void* kernel, int bytes);
}  // namespace emu
