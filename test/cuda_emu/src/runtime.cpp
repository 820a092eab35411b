// Runtime API of the CUDA emulation: device memory (malloc-backed, filled with 0xFF so that
// a read of memory nobody wrote gives NaN / -1, capacity CUDA_EMU_MEM_BYTES), range checks
// of copies and memsets against the allocations, pinned host memory, errors, one H200-like
// device. Streams, events and graphs are in stream.cpp.
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "cuda_runtime.h"
#include "emu_internal.h"

namespace emu {

namespace {

struct Alloc {
    size_t bytes;
    const char* file;
    int line;
};

using Allocs = std::map<uintptr_t, Alloc>;  // by start address
struct Memory {
    Allocs allocs, pinned;  // device memory; cudaMallocHost's
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

// The allocation of `a` containing p (p may be its end), or nullptr.
const std::pair<const uintptr_t, Alloc>* find(const void* p, const Allocs& a = memory().allocs) {
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

constexpr int kRuntimeVersion = 13000;  // the CUDA runtime the emulation stands for, 13.0

// CUDA_EMU_DRIVER=X.Y: the driver's version as CUDA encodes it (1000 X + 10 Y), `none` for 0 (no
// driver installed); default, the runtime's
int driver_version() {
    static const int v = [] {
        const char* e = std::getenv("CUDA_EMU_DRIVER");
        if (!e) return kRuntimeVersion;
        if (!std::strcmp(e, "none")) return 0;
        unsigned major = 0, minor = 0;
        char tail = 0;
        if (std::sscanf(e, "%u.%u%c", &major, &minor, &tail) != 2 || major > 99 || minor > 99) {
            std::fprintf(stderr, "error: CUDA_EMU_DRIVER=%s: expected a driver version X.Y (e.g. 12.4) or none\n", e);
            std::exit(1);
        }
        return (int)(1000 * major + 10 * minor);
    }();
    return v;
}

// CUDA_EMU_INIT_ERROR=N: the error every device call returns (a CUDA error code this emulation
// names); default none
cudaError_t init_error() {
    static const cudaError_t err = [] {
        const char* e = std::getenv("CUDA_EMU_INIT_ERROR");
        if (!e) return cudaSuccess;
        const auto code = (cudaError_t)parse_env_u64("CUDA_EMU_INIT_ERROR", e);
        const bool named = code == cudaErrorUnknown || std::strcmp(cudaGetErrorName(code), "cudaErrorUnknown");
        if (code == cudaSuccess || !named) {
            std::fprintf(stderr, "error: CUDA_EMU_INIT_ERROR=%s: expected the code of a CUDA error (e.g. 803)\n", e);
            std::exit(1);
        }
        return code;
    }();
    return err;
}

// CUDA_VISIBLE_DEVICES, as CUDA reads it: a list of device indices or UUIDs whose first entry
// that names no device ends it. The one emulated device is index 0 and has no UUID, so it is
// visible when the variable is unset or its first entry is 0.
bool device_visible() {
    static const bool visible = [] {
        const char* e = std::getenv("CUDA_VISIBLE_DEVICES");
        return !e || (std::strcspn(e, ",") == 1 && e[0] == '0');
    }();
    return visible;
}

// The device calls' first check: the pretended driver's error, or none
cudaError_t driver_check() {
    if (driver_version() < kRuntimeVersion) return ret(cudaErrorInsufficientDriver);
    if (cudaError_t e = init_error()) return ret(e);
    return ret(device_visible() ? cudaSuccess : cudaErrorNoDevice);
}

// CUDA_EMU_CC=X.Y: the device's compute capability, 10 X + Y (default 90, an H200's)
int compute_capability() {
    static const int cc = [] {
        const char* e = std::getenv("CUDA_EMU_CC");
        if (!e) return 90;
        unsigned major = 0, minor = 0;
        char tail = 0;
        if (std::sscanf(e, "%u.%u%c", &major, &minor, &tail) != 2 || major < 1 || major > 99 || minor > 9) {
            std::fprintf(stderr, "error: CUDA_EMU_CC=%s: expected a compute capability X.Y (e.g. 7.5)\n", e);
            std::exit(1);
        }
        return (int)(10 * major + minor);
    }();
    return cc;
}

bool is_device(const void* p) {
    return find(p) != nullptr;
}

}  // namespace

// The program is built for sm_80 and newer (as the Makefile builds it), unless
// CUDA_EMU_NO_IMAGE=1 says it holds no code for the device at all.
bool has_kernel_image() {
    static const bool no_image = env_switch("CUDA_EMU_NO_IMAGE", "0", "1");
    return compute_capability() >= 80 && !no_image;
}

uint64_t parse_env_u64(const char* name, const char* value) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(value, &end, 10);
    if (!*value || *end || value[0] == '-') {
        std::fprintf(stderr, "error: %s=%s: expected a non-negative integer\n", name, value);
        std::exit(1);
    }
    return v;
}

bool env_switch(const char* name, const char* off, const char* on) {
    const char* e = std::getenv(name);
    if (!e || !std::strcmp(e, off)) return false;
    if (!std::strcmp(e, on)) return true;
    std::fprintf(stderr, "error: %s=%s: expected %s or %s\n", name, e, off, on);
    std::exit(1);
}

void set_last_error(cudaError_t err) {
    g_last = err;
}

bool device_range(const void* p, size_t bytes) {
    const auto* a = find(p);
    return a && reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second.bytes;
}

bool pinned_range(const void* p, size_t bytes) {
    const auto* a = find(p, memory().pinned);
    return a && reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second.bytes;
}

cudaError_t refuse(const char* file, int line, cudaError_t err, const char* fmt, ...) {
    std::string name = std::string(" (") + cudaGetErrorName(err) + ")";
    va_list ap;
    va_start(ap, fmt);
    report_line(file, line, name.c_str(), fmt, ap);
    va_end(ap);
    std::fflush(stderr);
    set_last_error(err);
    return err;
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

using emu::driver_check;
using emu::driver_version;
using emu::kRuntimeVersion;
using emu::ret;

const char* cudaGetErrorName(cudaError_t err) {
    switch (err) {
#define E(x) \
    case x:  \
        return #x;
        E(cudaSuccess)
        E(cudaErrorInvalidValue)
        E(cudaErrorMemoryAllocation)
        E(cudaErrorInitializationError) E(cudaErrorInvalidConfiguration) E(cudaErrorInsufficientDriver)
            E(cudaErrorDevicesUnavailable) E(cudaErrorNoKernelImageForDevice) E(cudaErrorSystemNotReady)
                E(cudaErrorSystemDriverMismatch)
                E(cudaErrorCompatNotSupportedOnDevice) E(cudaErrorInvalidDevicePointer)
            E(cudaErrorInvalidMemcpyDirection) E(cudaErrorInvalidDeviceFunction) E(cudaErrorNoDevice)
                E(cudaErrorInvalidDevice) E(cudaErrorInvalidResourceHandle) E(cudaErrorIllegalState)
                    E(cudaErrorNotReady) E(cudaErrorIllegalAddress) E(cudaErrorLaunchOutOfResources)
                        E(cudaErrorNotSupported) E(cudaErrorStreamCaptureUnsupported)
                            E(cudaErrorStreamCaptureInvalidated) E(cudaErrorStreamCaptureMerge)
                                E(cudaErrorStreamCaptureUnmatched) E(cudaErrorStreamCaptureUnjoined)
                                    E(cudaErrorStreamCaptureIsolation) E(cudaErrorStreamCaptureImplicit)
                                        E(cudaErrorCapturedEvent) E(cudaErrorStreamCaptureWrongThread)
                                            E(cudaErrorUnknown)
#undef E
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
    switch (err) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInsufficientDriver:
            return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorInitializationError:
            return "initialization error";
        case cudaErrorDevicesUnavailable:
            return "CUDA-capable device(s) is/are busy or unavailable";
        case cudaErrorNoKernelImageForDevice:
            return "no kernel image is available for execution on the device";
        case cudaErrorSystemNotReady:
            return "system not yet initialized";
        case cudaErrorSystemDriverMismatch:
            return "system has unsupported display driver / cuda driver combination";
        case cudaErrorCompatNotSupportedOnDevice:
            return "forward compatibility was attempted on non supported HW";
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
        case cudaErrorIllegalState:
            return "the operation cannot be performed in the present state";
        case cudaErrorStreamCaptureUnsupported:
            return "operation not permitted when stream is capturing";
        case cudaErrorStreamCaptureInvalidated:
            return "operation failed due to a previous error during capture";
        case cudaErrorStreamCaptureMerge:
            return "operation would result in a merge of separate capture sequences";
        case cudaErrorStreamCaptureUnmatched:
            return "capture was not ended in the same stream as it began";
        case cudaErrorStreamCaptureUnjoined:
            return "capturing stream has unjoined work";
        case cudaErrorStreamCaptureIsolation:
            return "dependency created on uncaptured work in another stream";
        case cudaErrorStreamCaptureImplicit:
            return "operation would make the legacy stream depend on a capturing blocking stream";
        case cudaErrorCapturedEvent:
            return "operation not permitted on an event last recorded in a capturing stream";
        case cudaErrorStreamCaptureWrongThread:
            return "attempt to terminate a thread-local capture sequence from another thread";
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
cudaError_t cudaDriverGetVersion(int* version) {
    *version = driver_version();
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
    *version = kRuntimeVersion;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* n) {
    *n = 0;
    if (cudaError_t e = driver_check()) return e;
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* dev) {
    *dev = 0;
    return driver_check();
}
cudaError_t cudaSetDevice(int dev) {
    if (cudaError_t e = driver_check()) return e;
    return ret(dev == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
    if (cudaError_t e = driver_check()) return e;
    if (dev != 0) return ret(cudaErrorInvalidDevice);
    std::memset(p, 0, sizeof *p);
    const int cc = emu::compute_capability();
    std::snprintf(p->name, sizeof p->name, "%s", cc == 90 ? "CUDA emulation on the CPU (H200-like, sm_90)" : "CUDA emulation on the CPU");
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
    p->major = cc / 10, p->minor = cc % 10;
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
    if (cudaError_t e = driver_check()) return e;
    if (cudaError_t e = emu::unsafe_call(file, line, "cudaMalloc")) return e;
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
    if (cudaError_t e = emu::unsafe_call(file, line, "cudaFree")) return e;
    if (!p) return cudaSuccess;
    emu::run_all_queued(file, line);  // cudaFree waits for the device
    emu::Memory& m = emu::memory();
    auto it = m.allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.allocs.end()) emu::fail(file, line, "cudaFree(%p): not a pointer that cudaMalloc returned", p);
    m.used -= it->second.bytes;
    m.allocs.erase(it);
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes, const char* file, int line) {
    *p = nullptr;
    if (cudaError_t e = driver_check()) return e;
    if (cudaError_t e = emu::unsafe_call(file, line, "cudaMallocHost")) return e;
    *p = std::malloc(bytes ? bytes : 1);
    if (!*p) return ret(cudaErrorMemoryAllocation);
    emu::memory().pinned[reinterpret_cast<uintptr_t>(*p)] = {bytes, file, line};
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p, const char* file, int line) {
    if (cudaError_t e = emu::unsafe_call(file, line, "cudaFreeHost")) return e;
    if (!p) return cudaSuccess;
    emu::run_all_queued(file, line);  // as cudaFree
    if (!emu::memory().pinned.erase(reinterpret_cast<uintptr_t>(p)))
        emu::fail(file, line, "cudaFreeHost(%p): not a pointer that cudaMallocHost returned", p);
    std::free(p);
    return cudaSuccess;
}

namespace emu {
namespace {

cudaMemcpyKind resolve(cudaMemcpyKind kind, const void* dst, const void* src) {
    if (kind != cudaMemcpyDefault) return kind;
    return (cudaMemcpyKind)((is_device(src) ? 2 : 0) + (is_device(dst) ? 1 : 0));
}

bool valid_kind(cudaMemcpyKind kind) {
    return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDeviceToDevice;
}

// The copy as it runs, eagerly or in a replay; a replay also needs the host side still pinned.
void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* file, int line) {
    const bool to_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool from_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (to_dev) check_device_range(file, line, "cudaMemcpy destination", dst, bytes);
    if (from_dev) check_device_range(file, line, "cudaMemcpy source", src, bytes);
    if (in_replay() && kind != cudaMemcpyDeviceToDevice && !pinned_range(to_dev ? src : dst, bytes))
        fail(file, line,
             "captured cudaMemcpyAsync: the host %s %p (%zu bytes) is no longer pinned memory (freed with "
             "cudaFreeHost?)",
             to_dev ? "source" : "destination", to_dev ? src : dst, bytes);
    std::memmove(dst, src, bytes);
}

// CUDA_EMU_DEFER=1: a copy between the host and the device, queued as CUDA treats it. Pageable
// memory: a host-to-device copy reads the source at the call (CUDA stages it), a device-to-host
// copy runs at the call, after its stream's queue. Pinned memory is the copy's own until it has
// run: the destination reads as 0xFF (NaN) until then, and the source must keep the bytes it had
// at the call (a host that refills it too early is reported).
cudaError_t queue_host_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                            const char* file, int line) {
    const bool to_dev = kind == cudaMemcpyHostToDevice;
    const bool pinned = pinned_range(to_dev ? src : dst, bytes);
    if (!to_dev) {
        if (pinned) std::memset(dst, 0xFF, bytes);
        cudaError_t e = enqueue(s, file, line, "cudaMemcpyAsync", [=] { copy(dst, src, bytes, kind, file, line); });
        if (!pinned) run_queued(s, file, line);
        return e;
    }
    auto at_call = std::make_shared<std::vector<char>>((const char*)src, (const char*)src + bytes);
    return enqueue(s, file, line, "cudaMemcpyAsync", [=] {
        if (pinned && std::memcmp(src, at_call->data(), bytes))
            fail(file, line,
                 "cudaMemcpyAsync: the host wrote its pinned source %p (%zu bytes) after this call and before the "
                 "copy ran: on a GPU the copy reads the old or the new bytes; wait for the copy (an event recorded "
                 "after it) before refilling the buffer",
                 src, bytes);
        copy(dst, at_call->data(), bytes, kind, file, line);
    });
}

void set(void* p, int value, size_t bytes, const char* file, int line) {
    check_device_range(file, line, "cudaMemset", p, bytes);
    std::memset(p, value & 0xFF, bytes);
}

}  // namespace
}  // namespace emu

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* file, int line) {
    kind = emu::resolve(kind, dst, src);
    if (!emu::valid_kind(kind)) return ret(cudaErrorInvalidMemcpyDirection);
    if (cudaError_t e = emu::legacy_stream_use(file, line, "cudaMemcpy")) return e;
    if (bytes == 0) return cudaSuccess;
    emu::copy(dst, src, bytes, kind, file, line);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                            const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    kind = emu::resolve(kind, dst, src);
    if (!emu::valid_kind(kind)) return ret(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0) return cudaSuccess;
    // a graph's copy node reads the host buffer at each replay: it must be pinned, as on a GPU
    const void* host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
    if (host && emu::stream_capturing(s) && !emu::pinned_range(host, bytes)) {
        emu::invalidate_capture(s);
        return emu::refuse(file, line, cudaErrorStreamCaptureUnsupported,
                           "cudaMemcpyAsync during stream capture with pageable host memory %p (%zu bytes): capture "
                           "needs cudaMallocHost memory",
                           host, bytes);
    }
    if (host && emu::defers(s)) return ret(emu::queue_host_copy(dst, src, bytes, kind, s, file, line));
    return ret(emu::enqueue(s, file, line, "cudaMemcpyAsync", [=] { emu::copy(dst, src, bytes, kind, file, line); }));
}

cudaError_t cudaMemset(void* p, int value, size_t bytes, const char* file, int line) {
    if (cudaError_t e = emu::legacy_stream_use(file, line, "cudaMemset")) return e;
    if (bytes == 0) return cudaSuccess;
    emu::set(p, value, bytes, file, line);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s, const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    return ret(emu::enqueue(s, file, line, "cudaMemsetAsync", [=] { emu::set(p, value, bytes, file, line); }));
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void*) {
    if (cudaError_t e = driver_check()) return e;
    if (!emu::has_kernel_image()) return ret(cudaErrorNoKernelImageForDevice);
    *attr = cudaFuncAttributes{};
    attr->binaryVersion = attr->ptxVersion = std::min(emu::compute_capability(), 90);
    attr->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) return ret(emu::set_max_dynamic_smem(kernel, value));
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return ret(cudaErrorInvalidValue);
}
