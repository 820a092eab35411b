// Runtime API of the CUDA emulation: device memory (malloc-backed, filled with 0xFF so that
// a read of memory nobody wrote gives NaN / -1, capacity CUDA_EMU_MEM_BYTES), range checks
// of copies and memsets against the allocations, errors, one H200-like device, and streams
// and events (work runs at the call, so they only keep order and time).
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "cuda_runtime.h"
#include "emu_internal.h"

namespace emu {

namespace {

struct Alloc {
    size_t bytes;
    const char* file;
    int line;
};

struct Memory {
    std::map<uintptr_t, Alloc> allocs;  // by start address
    size_t used = 0;
};
Memory& memory() {
    static Memory m;
    return m;
}

cudaError_t g_last = cudaSuccess;

constexpr size_t kH200Bytes = 143771ull << 20;  // what an H200 reports (143771 MiB)

size_t capacity() {
    static const size_t c = [] {
        const char* e = std::getenv("CUDA_EMU_MEM_BYTES");
        return e ? (size_t)parse_env_u64("CUDA_EMU_MEM_BYTES", e) : kH200Bytes;
    }();
    return c;
}

// The allocation containing p (p may be its end), or nullptr.
const std::pair<const uintptr_t, Alloc>* find(const void* p) {
    const auto& a = memory().allocs;
    uintptr_t u = reinterpret_cast<uintptr_t>(p);
    auto it = a.upper_bound(u);
    if (it == a.begin()) return nullptr;
    --it;
    return u <= it->first + it->second.bytes ? &*it : nullptr;
}

cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) g_last = e;
    return e;
}

bool is_device(const void* p) {
    return find(p) != nullptr;
}

}  // namespace

uint64_t parse_env_u64(const char* name, const char* value) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(value, &end, 10);
    if (!*value || *end || value[0] == '-') {
        std::fprintf(stderr, "error: %s=%s: expected a non-negative integer\n", name, value);
        std::exit(1);
    }
    return v;
}

void set_last_error(cudaError_t err) {
    g_last = err;
}

bool device_range(const void* p, size_t bytes) {
    const auto* a = find(p);
    return a && reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second.bytes;
}

void check_device_range(const char* file, int line, const char* what, const void* p, size_t bytes) {
    const auto* a = find(p);
    if (!a) fail(file, line, "%s: %p is not device memory (a host pointer, or freed)", what, p);
    uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes, aend = a->first + a->second.bytes;
    if (end > aend)
        fail(file, line,
             "%s: %zu bytes at offset %zu run %zu bytes past the end of their allocation of %zu bytes (allocated at "
             "%s:%d)",
             what, bytes, (size_t)(reinterpret_cast<uintptr_t>(p) - a->first), (size_t)(end - aend), a->second.bytes,
             a->second.file, a->second.line);
}

}  // namespace emu

using emu::ret;

const char* cudaGetErrorName(cudaError_t err) {
    switch (err) {
#define E(x) \
    case x:  \
        return #x;
        E(cudaSuccess)
        E(cudaErrorInvalidValue) E(cudaErrorMemoryAllocation) E(cudaErrorInitializationError)
            E(cudaErrorInvalidConfiguration) E(cudaErrorInvalidDevicePointer) E(cudaErrorInvalidMemcpyDirection)
                E(cudaErrorInvalidDeviceFunction) E(cudaErrorNoDevice) E(cudaErrorInvalidDevice)
                    E(cudaErrorInvalidResourceHandle) E(cudaErrorNotReady) E(cudaErrorIllegalAddress)
                        E(cudaErrorLaunchOutOfResources) E(cudaErrorNotSupported) E(cudaErrorUnknown)
#undef E
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
    switch (err) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer:
            return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection:
            return "invalid copy direction for memcpy";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorNoDevice:
            return "no CUDA-capable device is detected";
        case cudaErrorInvalidResourceHandle:
            return "invalid resource handle";
        case cudaErrorNotReady:
            return "device not ready";
        case cudaErrorIllegalAddress:
            return "an illegal memory access was encountered";
        case cudaErrorLaunchOutOfResources:
            return "too many resources requested for launch";
        case cudaErrorNotSupported:
            return "operation not supported";
        default:
            return "unknown error";
    }
}

cudaError_t cudaGetLastError() {
    cudaError_t e = emu::g_last;
    emu::g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() {
    return emu::g_last;
}

// ---- device -----------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* dev) {
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) {
    return ret(dev == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
    if (dev != 0) return ret(cudaErrorInvalidDevice);
    std::memset(p, 0, sizeof *p);
    std::snprintf(p->name, sizeof p->name, "CUDA emulation on the CPU (H200-like, sm_90)");
    p->totalGlobalMem = emu::capacity();
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = 232448;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9, p->minor = 0;
    p->multiProcessorCount = 132;
    p->l2CacheSize = 60 * 1024 * 1024;
    p->maxThreadsPerMultiProcessor = 2048;
    p->memoryBusWidth = 6144;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int dev) {
    cudaDeviceProp p;
    if (cudaError_t e = cudaGetDeviceProperties(&p, dev)) return e;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock:
            *v = p.maxThreadsPerBlock;
            break;
        case cudaDevAttrMaxSharedMemoryPerBlock:
            *v = (int)p.sharedMemPerBlock;
            break;
        case cudaDevAttrWarpSize:
            *v = 32;
            break;
        case cudaDevAttrMultiProcessorCount:
            *v = p.multiProcessorCount;
            break;
        case cudaDevAttrComputeCapabilityMajor:
            *v = p.major;
            break;
        case cudaDevAttrComputeCapabilityMinor:
            *v = p.minor;
            break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin:
            *v = (int)p.sharedMemPerBlockOptin;
            break;
        default:
            return ret(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
    return cudaSuccess;
}
cudaError_t cudaDeviceReset() {
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    *total_bytes = emu::capacity();
    *free_bytes = *total_bytes - std::min(*total_bytes, emu::memory().used);
    return cudaSuccess;
}

// ---- memory -----------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t bytes, const char* file, int line) {
    *p = nullptr;
    if (bytes == 0) return cudaSuccess;
    emu::Memory& m = emu::memory();
    if (bytes > emu::capacity() - std::min(emu::capacity(), m.used)) return ret(cudaErrorMemoryAllocation);
    void* q = nullptr;
    if (posix_memalign(&q, 256, bytes) != 0) return ret(cudaErrorMemoryAllocation);  // exact size: ASan sees overruns
    std::memset(q, 0xFF, bytes);  // never-written memory reads as NaN / -1
    m.allocs[reinterpret_cast<uintptr_t>(q)] = {bytes, file, line};
    m.used += bytes;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void* p, const char* file, int line) {
    if (!p) return cudaSuccess;
    emu::Memory& m = emu::memory();
    auto it = m.allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.allocs.end()) emu::fail(file, line, "cudaFree(%p): not a pointer that cudaMalloc returned", p);
    m.used -= it->second.bytes;
    m.allocs.erase(it);
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
    *p = std::malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* p) {
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* file, int line) {
    if (kind == cudaMemcpyDefault)
        kind = (cudaMemcpyKind)((emu::is_device(src) ? 2 : 0) + (emu::is_device(dst) ? 1 : 0));
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice) return ret(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0) return cudaSuccess;
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
        emu::check_device_range(file, line, "cudaMemcpy destination", dst, bytes);
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
        emu::check_device_range(file, line, "cudaMemcpy source", src, bytes);
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                            const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    return cudaMemcpy(dst, src, bytes, kind, file, line);
}

cudaError_t cudaMemset(void* p, int value, size_t bytes, const char* file, int line) {
    if (bytes == 0) return cudaSuccess;
    emu::check_device_range(file, line, "cudaMemset", p, bytes);
    std::memset(p, value & 0xFF, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s, const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    return cudaMemset(p, value, bytes, file, line);
}

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) return ret(emu::set_max_dynamic_smem(kernel, value));
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return ret(cudaErrorInvalidValue);
}

// ---- streams and events -----------------------------------------------------------------
struct CUstream_st {};
struct CUevent_st {
    std::chrono::steady_clock::time_point t;
    bool recorded = false;
};

namespace emu {
namespace {
std::set<const void*>& live_handles() {
    static std::set<const void*> s;
    return s;
}
}  // namespace
bool stream_valid(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || live_handles().count(s);
}
}  // namespace emu

cudaError_t cudaStreamCreate(cudaStream_t* s) {
    return cudaStreamCreateWithFlags(s, 0);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    *s = new CUstream_st;
    emu::live_handles().insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !emu::live_handles().erase(s)) return ret(cudaErrorInvalidResourceHandle);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    return emu::stream_valid(s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    return emu::stream_valid(s) && emu::live_handles().count(e) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
    return cudaEventCreateWithFlags(e, 0);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    *e = new CUevent_st;
    emu::live_handles().insert(*e);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e || !emu::live_handles().erase(e)) return ret(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!emu::live_handles().count(e) || !emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    e->t = std::chrono::steady_clock::now();
    e->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    return emu::live_handles().count(e) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    return cudaEventSynchronize(e);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!emu::live_handles().count(a) || !emu::live_handles().count(b)) return ret(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded) return ret(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}
