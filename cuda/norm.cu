// Sum of squares for the global gradient norm (double, deterministic).
#include <vector>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kNormBlocks = 512;  // fixed (not device-dependent), so the bits never change
constexpr int kNormThreads = 256;

// partial[block] = sum over this block's grid-stride share of x[i]^2, in double
__global__ void sum_squares_kernel(double* __restrict__ partial, const float* __restrict__ x, size_t n) {
    __shared__ double sh[32];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

}  // namespace

double sum_squares(const float* x, size_t n, cudaStream_t stream) {
    if (n == 0) return 0.0;
    static Scratch<double> s_partial;
    double* partial = s_partial.get(kNormBlocks);
    sum_squares_kernel<<<kNormBlocks, kNormThreads, 0, stream>>>(partial, x, n);
    cudaCheckLaunch();
    // second pass on the host, in block order (512 doubles), after waiting for the stream
    std::vector<double> h(kNormBlocks);
    cudaCheck(cudaMemcpyAsync(h.data(), partial, kNormBlocks * sizeof(double), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    double total = 0.0;
    for (double v : h) total += v;
    return total;
}

}  // namespace gpu
