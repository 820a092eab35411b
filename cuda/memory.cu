// Device memory for the CUDA backend: a cudaMalloc wrapper that tracks current and peak
// bytes (parameters, activations and every kernel's scratch go through it), and the
// memory / device members of CudaBackend.
#include <cstdio>
#include <cstring>
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

float* CudaBackend::alloc(size_t n) {
    float* p = static_cast<float*>(gpu::device_malloc(n * sizeof(float)));
    if (p) cudaCheck(cudaMemsetAsync(p, 0, n * sizeof(float), gpu::main_stream()));
    return p;
}

void CudaBackend::free(float* p) {
    gpu::device_free(p);
}

void CudaBackend::zero(float* p, size_t n) {
    if (n) cudaCheck(cudaMemsetAsync(p, 0, n * sizeof(float), gpu::main_stream()));
}

// Both wait for the copy (and the work queued before it): the host buffer is free on return.
void CudaBackend::copy_to_host(float* dst, const float* src, size_t n) {
    if (!n) return;
    cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, gpu::main_stream()));
    cudaCheck(cudaStreamSynchronize(gpu::main_stream()));
}

void CudaBackend::copy_from_host(float* dst, const float* src, size_t n) {
    if (!n) return;
    cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, gpu::main_stream()));
    cudaCheck(cudaStreamSynchronize(gpu::main_stream()));
}

int* CudaBackend::alloc_int(size_t n) {
    int* p = static_cast<int*>(gpu::device_malloc(n * sizeof(int)));
    if (p) cudaCheck(cudaMemsetAsync(p, 0, n * sizeof(int), gpu::main_stream()));
    return p;
}

void CudaBackend::free_int(int* p) {
    gpu::device_free(p);
}

// Token ids go through pinned staging buffers and cudaMemcpyAsync, so the host never waits
// here: a cudaMemcpy from pageable memory would wait for all queued work (the targets are copied
// in the middle of the forward) and leave the GPU idle while the host launches the rest. Two
// buffers alternate (inputs, targets); before one is refilled, the host waits for the event of
// its previous copy, which has read it by then.
namespace gpu {
namespace {
struct Staging {
    int* host = nullptr;  // pinned
    size_t cap = 0;
    cudaEvent_t copied = nullptr;
};
Staging g_staging[2];
int g_next_staging = 0;
}  // namespace
}  // namespace gpu

void CudaBackend::copy_ints_from_host(int* dst, const int* src, size_t n) {
    if (n == 0) return;
    gpu::Staging& s = gpu::g_staging[gpu::g_next_staging];
    gpu::g_next_staging ^= 1;
    if (!s.copied) cudaCheck(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    cudaCheck(cudaEventSynchronize(s.copied));  // its last copy is done (at once if never recorded)
    if (n > s.cap) {
        if (s.host) cudaCheck(cudaFreeHost(s.host));
        s.host = nullptr, s.cap = 0;
        cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&s.host), n * sizeof(int)));
        s.cap = n;
    }
    std::memcpy(s.host, src, n * sizeof(int));
    cudaCheck(cudaMemcpyAsync(dst, s.host, n * sizeof(int), cudaMemcpyHostToDevice, gpu::main_stream()));
    cudaCheck(cudaEventRecord(s.copied, gpu::main_stream()));
}

void CudaBackend::synchronize() {
    cudaCheck(cudaDeviceSynchronize());
}

bool CudaBackend::available() {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return n > 0;
}

std::string CudaBackend::device_name() {
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    return prop.name;
}

size_t CudaBackend::peak_memory() {
    gpu::Tracker& t = gpu::tracker();
    std::lock_guard<std::mutex> lock(t.mu);
    return t.peak;
}

size_t CudaBackend::device_used_memory() {
    size_t free_bytes = 0, total = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total));
    return total - free_bytes;
}

size_t CudaBackend::current_memory() {
    gpu::Tracker& t = gpu::tracker();
    std::lock_guard<std::mutex> lock(t.mu);
    return t.current;
}
