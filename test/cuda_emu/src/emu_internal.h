// Shared between the emulator's own files (not seen by kernels).
#pragma once
#include <cstdarg>
#include <cstdint>
#include <string>

#include "cuda_runtime.h"

namespace emu {
// An environment variable holding a non-negative integer; anything else is an error (exit 1).
uint64_t parse_env_u64(const char* name, const char* value);
// An environment variable of two values: false when unset or `off`, true when `on`; anything else
// is an error (exit 1).
bool env_switch(const char* name, const char* off, const char* on);
void set_last_error(cudaError_t err);
// The program holds code the pretended device can run (CUDA_EMU_CC, CUDA_EMU_NO_IMAGE: runtime.cpp).
bool has_kernel_image();
cudaError_t set_max_dynamic_smem(const void* kernel, int bytes);

// Prints "cuda-emu: error: FILE:LINE: <fmt applied to ap><suffix>" (the first line of every report;
// stdout flushed first so the report follows what the program printed).
void report_line(const char* file, int line, const char* suffix, const char* fmt, va_list ap);

// A call CUDA refuses: prints "cuda-emu: error: FILE:LINE: message (cudaErrorName)", sets the
// last error and returns err (the program goes on, as with CUDA).
cudaError_t refuse(const char* file, int line, cudaError_t err, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// [p, p + bytes) inside one live cudaMallocHost allocation (runtime.cpp).
bool pinned_range(const void* p, size_t bytes);

// Stream capture (stream.cpp). `call` is the API's name, for the report.
// cudaMalloc and the like: refused (cudaErrorStreamCaptureUnsupported) while a capture that
// prohibits unsafe calls in this thread is active (Global or ThreadLocal mode; Relaxed allows).
cudaError_t unsafe_call(const char* file, int line, const char* call);
// Synchronous work on the legacy stream (cudaMemcpy, cudaMemset, ...): refused with
// cudaErrorStreamCaptureImplicit while a blocking stream captures.
cudaError_t legacy_stream_use(const char* file, int line, const char* call);
// "  in node N (...) of the graph captured at ...\n" during a replay, and where queued work
// was queued and run (CUDA_EMU_DEFER=1); else "".
std::string replay_context();

// CUDA_EMU_DEFER=1 (stream.cpp): the work of created streams is queued and runs when the host
// waits for it. These run all of it (or only the blocking streams', as the legacy stream waits
// for), or stream s's and what it waits on; file:line is the call that waits (for reports).
void run_all_queued(const char* file, int line, bool blocking_only = false);
void run_queued(cudaStream_t s, const char* file, int line);
bool defers(cudaStream_t s);  // work on s is queued now (a created stream that does not capture)
}  // namespace emu
