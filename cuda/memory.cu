// Device memory for the CUDA backend: a cudaMalloc wrapper that tracks current and peak
// bytes (parameters, activations and every kernel's scratch go through it), and the
// memory / device members of CudaDevice (the CUDA backend without its ops).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <unordered_map>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {
struct Tracker {
    std::mutex mu;
    std::unordered_map<void*, size_t> sizes;
    size_t current = 0, peak = 0;
};
Tracker& tracker() {
    static Tracker t;
    return t;
}
std::string mib(size_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}
}  // namespace

void* device_malloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    Tracker& t = tracker();
    std::lock_guard<std::mutex> lock(t.mu);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // clear the sticky-free error so later calls still work
        throw std::runtime_error("CUDA out of memory allocating " + mib(bytes) + " MiB (in use " + mib(t.current) +
                                 " MiB, peak " + mib(t.peak) + " MiB)");
    }
    cudaCheck(err);
    t.sizes[p] = bytes;
    t.current += bytes;
    if (t.current > t.peak) t.peak = t.current;
    return p;
}

void device_free(void* p) {
    if (!p) return;
    Tracker& t = tracker();
    {
        std::lock_guard<std::mutex> lock(t.mu);
        auto it = t.sizes.find(p);
        if (it != t.sizes.end()) {
            t.current -= it->second;
            t.sizes.erase(it);
        }
    }
    // Never throws: it runs in destructors, possibly while an earlier CUDA error unwinds
    // the stack; that error is the one worth reporting.
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

cudaStream_t main_stream() {
    static cudaStream_t s = [] {
        cudaStream_t st;
        cudaCheck(cudaStreamCreate(&st));
        return st;
    }();
    return s;
}

}  // namespace gpu

float* CudaDevice::alloc(size_t n) {
    return gpu::alloc_zeroed<float>(n);
}

template <class E>
void CudaDevice::free(E* p) {
    gpu::device_free(p);
}

template <class E>
void CudaDevice::zero(E* p, size_t n) {
    if (n) cudaCheck(cudaMemsetAsync(p, 0, n * sizeof(E), gpu::main_stream()));
}

namespace {
// Waits for the copy (and the work queued before it): the host buffer is free on return.
void copy_and_wait(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, kind, gpu::main_stream()));
    cudaCheck(cudaStreamSynchronize(gpu::main_stream()));
}
}  // namespace

template <class E>
void CudaDevice::copy_to_host(E* dst, const E* src, size_t n) {
    copy_and_wait(dst, src, n * sizeof(E), cudaMemcpyDeviceToHost);
}

template <class E>
void CudaDevice::copy_from_host(E* dst, const E* src, size_t n) {
    copy_and_wait(dst, src, n * sizeof(E), cudaMemcpyHostToDevice);
}

// The element types of the model's buffers: fp32, and bf16 (activations, the weights' copy).
#define INSTANTIATE_BUFFER_OPS(E)                                  \
    template void CudaDevice::free(E*);                           \
    template void CudaDevice::zero(E*, size_t);                   \
    template void CudaDevice::copy_to_host(E*, const E*, size_t); \
    template void CudaDevice::copy_from_host(E*, const E*, size_t);
INSTANTIATE_BUFFER_OPS(float)
INSTANTIATE_BUFFER_OPS(bf16_t)
#undef INSTANTIATE_BUFFER_OPS

int* CudaDevice::alloc_int(size_t n) {
    return gpu::alloc_zeroed<int>(n);
}

void CudaDevice::free_int(int* p) {
    gpu::device_free(p);
}

// Token ids and the step's scalars go through pinned staging buffers and cudaMemcpyAsync, so the
// host never waits here: a cudaMemcpy from pageable memory would wait for all queued work (the
// previous step) and leave the GPU idle while the host queues the next. Each kind of upload has
// two buffers used in turn; before one is refilled, the host waits for the event of its previous
// copy, which has read it by then.
namespace gpu {
namespace {
struct StagedUploads {
    struct Buffer {
        void* host = nullptr;  // pinned
        size_t cap = 0;        // bytes
        cudaEvent_t copied = nullptr;
    } buf[2];
    int next = 0;
    void copy(void* dst, const void* src, size_t bytes) {
        Buffer& b = buf[next];
        next ^= 1;
        if (!b.copied) cudaCheck(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming));
        cudaCheck(cudaEventSynchronize(b.copied));  // its last copy is done (at once if never recorded)
        if (bytes > b.cap) {
            if (b.host) cudaCheck(cudaFreeHost(b.host));
            b.host = nullptr, b.cap = 0;
            cudaCheck(cudaMallocHost(&b.host, bytes));
            b.cap = bytes;
        }
        std::memcpy(b.host, src, bytes);
        cudaCheck(cudaMemcpyAsync(dst, b.host, bytes, cudaMemcpyHostToDevice, main_stream()));
        cudaCheck(cudaEventRecord(b.copied, main_stream()));
    }
};
StagedUploads g_token_uploads, g_scalar_uploads;
}  // namespace
}  // namespace gpu

void CudaDevice::copy_ints_from_host(int* dst, const int* src, size_t n) {
    if (n) gpu::g_token_uploads.copy(dst, src, n * sizeof(int));
}

StepScalars* CudaDevice::alloc_scalars() {
    auto* s = static_cast<StepScalars*>(gpu::device_malloc(sizeof(StepScalars)));
    StepScalars init;
    cudaCheck(cudaMemcpyAsync(s, &init, sizeof init, cudaMemcpyHostToDevice, gpu::main_stream()));
    cudaCheck(cudaStreamSynchronize(gpu::main_stream()));  // `init` is on this stack frame
    return s;
}

void CudaDevice::free_scalars(StepScalars* s) {
    gpu::device_free(s);
}

void CudaDevice::copy_scalars_from_host(StepScalars* dst, const StepScalars& src) {
    gpu::g_scalar_uploads.copy(dst, &src, sizeof src);
}

void* CudaDevice::alloc_pinned(size_t bytes) {
    void* p = nullptr;
    cudaCheck(cudaMallocHost(&p, bytes));
    return p;
}

void CudaDevice::free_pinned(void* p) {
    if (p && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();  // runs in destructors: never throws
}

void CudaDevice::copy_to_host_async(void* dst, const void* src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, gpu::main_stream()));
}

CudaDevice::Event CudaDevice::event_create() {
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}

void CudaDevice::event_record(Event e) {
    cudaCheck(cudaEventRecord(e, gpu::main_stream()));
}

void CudaDevice::event_wait(Event e) {
    cudaCheck(cudaEventSynchronize(e));
}

void CudaDevice::event_destroy(Event e) {
    if (e && cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
}

void CudaDevice::synchronize() {
    cudaCheck(cudaDeviceSynchronize());
}

namespace {
// A kernel of this build: cudaFuncGetAttributes on it fails when the build holds no code the
// GPU can run (built for other architectures).
__global__ void probe_kernel() {}

std::string cuda_version(int v) {  // CUDA's encoding, 1000 major + 10 minor
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// What to do when the driver cannot give us the GPU, by the error it gives.
std::string device_advice(cudaError_t err, int driver, int runtime) {
    switch (err) {
        case cudaErrorInsufficientDriver:
            return "the NVIDIA driver supports CUDA " + cuda_version(driver) + ", this build's runtime is CUDA " +
                   cuda_version(runtime) +
                   ": update the driver (CUDA 13 needs R580 or newer), install NVIDIA's forward-compatibility "
                   "package cuda-compat, or build with an older CUDA toolkit";
        case cudaErrorSystemNotReady:
            return "the GPUs' NVSwitch fabric is not up: on an NVSwitch system (HGX, DGX) start NVIDIA's "
                   "fabric manager (systemctl start nvidia-fabricmanager, the driver's own version) and see "
                   "nvidia-smi -q's Fabric state";
        case cudaErrorSystemDriverMismatch:
            return "the NVIDIA kernel module and the driver's library differ: after a driver upgrade without a reboot, "
                   "reboot; with NVIDIA's forward-compatibility package cuda-compat on LD_LIBRARY_PATH over a driver "
                   "new enough without it, take it off LD_LIBRARY_PATH";
        case cudaErrorCompatNotSupportedOnDevice:
            return "NVIDIA's forward-compatibility package (cuda-compat) does not support this GPU: take it off the "
                   "library path and update the driver";
        case cudaErrorDevicesUnavailable:
            return "the GPU is busy or in a prohibited compute mode (see nvidia-smi -q -d COMPUTE)";
        default:
            return "the driver cannot start the GPU: see what nvidia-smi says, and whether this user may open "
                   "/dev/nvidia*";
    }
}

std::string error_text(cudaError_t err) {
    return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

// CUDA says only "no device" for a GPU in MIG mode without an instance; NVML (the driver's
// libnvidia-ml.so.1, loaded here only to ask that, and absent on machines without a driver) tells
// it from no GPU. Why the first such GPU cannot run, or "" (no NVML, or no GPU in MIG mode).
std::string mig_without_instance() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "";
    // NVML's C API (nvml.h): 0 is NVML_SUCCESS, a device is an opaque pointer, MIG mode 1 is enabled
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    auto handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    auto mig = reinterpret_cast<int (*)(void*, unsigned*, unsigned*)>(dlsym(lib, "nvmlDeviceGetMigMode"));
    auto name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
    std::string why;
    unsigned n = 0;
    if (init && shutdown && count && handle && mig && name && init() == 0) {
        if (count(&n) == 0)
            for (unsigned i = 0; i < n && why.empty(); i++) {
                void* dev = nullptr;
                unsigned current = 0, pending = 0;
                char gpu[96] = "";  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
                if (handle(i, &dev) || mig(dev, &current, &pending) || current != 1) continue;
                if (name(dev, gpu, sizeof gpu)) std::strcpy(gpu, "name unknown");
                why = "GPU " + std::to_string(i) + " (" + gpu +
                      ") is in MIG mode and has no MIG instance CUDA can use: create one (sudo nvidia-smi mig -cgi "
                      "PROFILE -C; nvidia-smi mig -lgip lists the profiles), or turn MIG off (sudo nvidia-smi -mig 0, "
                      "then a GPU reset)";
            }
        shutdown();
    }
    dlclose(lib);
    return why;
}
}  // namespace

CudaDevice::DeviceCheck CudaDevice::check_device(int local_rank) {
    int n = 0, driver = 0, runtime = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaGetLastError();
    const bool none = err == cudaErrorNoDevice || (!err && n == 0);
    if (const std::string mig = none ? mig_without_instance() : ""; !mig.empty())
        return {DeviceCheck::Unusable, mig};
    // CUDA_VISIBLE_DEVICES hides every GPU (an index or UUID nvidia-smi -L does not list, a GPU in
    // MIG mode without an instance): someone meant one to be used
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); none && visible)
        return {DeviceCheck::Unusable, "no GPU visible with CUDA_VISIBLE_DEVICES='" + std::string(visible) +
                                           "': unset it, or name an index or UUID that nvidia-smi -L lists (a GPU in "
                                           "MIG mode needs an instance: nvidia-smi mig -lgi)"};
    // no driver installed (its version 0) or no GPU: a machine without one, nothing to fix
    if (none || (err == cudaErrorInsufficientDriver && driver == 0))
        return {DeviceCheck::Absent, "no CUDA device found"};
    if (err) return {DeviceCheck::Unusable, error_text(err) + ": " + device_advice(err, driver, runtime)};
    const int dev = local_rank % n;
    cudaDeviceProp p;
    if ((err = cudaGetDeviceProperties(&p, dev)) || (err = cudaSetDevice(dev))) {
        (void)cudaGetLastError();
        return {DeviceCheck::Unusable, error_text(err) + ": " + device_advice(err, driver, runtime)};
    }
    const std::string gpu = std::string(p.name) + ", sm_" + std::to_string(10 * p.major + p.minor);
    // TF32 and bf16 tensor-core instructions (mma.sync .tf32 / .bf16) start at sm_80
    if (p.major < 8)
        return {DeviceCheck::Unusable, "the GPU (" + gpu +
                                           ") is too old for this trainer: its kernels need sm_80 or newer (A100, "
                                           "H100, H200, RTX 30xx and later)"};
    cudaFuncAttributes attr;
    if ((err = cudaFuncGetAttributes(&attr, probe_kernel))) {
        (void)cudaGetLastError();
        return {DeviceCheck::Unusable, error_text(err) + ": this build holds no code for the GPU (" + gpu +
                                           "): build it for this GPU (make clean && make, with its sm_" +
                                           std::to_string(10 * p.major + p.minor) + " in NVCCFLAGS if you set them)"};
    }
    return {DeviceCheck::Usable, ""};
}

std::string CudaDevice::device_name() {
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    return prop.name;
}

size_t CudaDevice::peak_memory() {
    gpu::Tracker& t = gpu::tracker();
    std::lock_guard<std::mutex> lock(t.mu);
    return t.peak;
}

size_t CudaDevice::device_used_memory() {
    size_t free_bytes = 0, total = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total));
    return total - free_bytes;
}
