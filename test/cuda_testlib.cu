// What the CUDA test programs measure of the backend through the CUDA runtime, so the backend
// keeps no counter for them: the device bytes allocated and the CUDA graphs alive. The programs
// are linked with ld's --wrap of the four calls below (Makefile, CUDA_TEST_WRAP): every call to
// cudaMalloc from the backend or the test reaches __wrap_cudaMalloc here, which calls the
// runtime's (__real_cudaMalloc) and counts. Calls inside CUDA's own libraries (cuBLAS's
// workspace) are not seen.
#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace {
std::mutex g_mu;
std::unordered_map<void*, size_t> g_sizes;  // live allocations
size_t g_bytes = 0, g_graphs = 0;
}  // namespace

// declared in cuda_testlib.h
size_t device_bytes() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_bytes;
}

size_t graphs_alive() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_graphs;
}

// The emulator's calls take their call site too (file, line: test/cuda_emu/include/cuda_runtime.h).
#ifdef CUDA_EMU
#define SITE , const char *file, int line
#define PASS_SITE , file, line
#else
#define SITE
#define PASS_SITE
#endif

extern "C" {
cudaError_t __real_cudaMalloc(void** p, size_t bytes SITE);
cudaError_t __real_cudaFree(void* p SITE);
cudaError_t __real_cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags SITE);
cudaError_t __real_cudaGraphExecDestroy(cudaGraphExec_t exec);

cudaError_t __wrap_cudaMalloc(void** p, size_t bytes SITE) {
    cudaError_t err = __real_cudaMalloc(p, bytes PASS_SITE);
    if (err == cudaSuccess && *p) {
        std::lock_guard<std::mutex> lock(g_mu);
        g_sizes[*p] = bytes;
        g_bytes += bytes;
    }
    return err;
}

cudaError_t __wrap_cudaFree(void* p SITE) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_sizes.find(p);
        if (it != g_sizes.end()) {
            g_bytes -= it->second;
            g_sizes.erase(it);
        }
    }
    return __real_cudaFree(p PASS_SITE);
}

cudaError_t __wrap_cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags SITE) {
    cudaError_t err = __real_cudaGraphInstantiate(exec, graph, flags PASS_SITE);
    if (err == cudaSuccess) {
        std::lock_guard<std::mutex> lock(g_mu);
        g_graphs++;
    }
    return err;
}

cudaError_t __wrap_cudaGraphExecDestroy(cudaGraphExec_t exec) {
    cudaError_t err = __real_cudaGraphExecDestroy(exec);
    if (err == cudaSuccess) {
        std::lock_guard<std::mutex> lock(g_mu);
        g_graphs--;
    }
    return err;
}
}
