// Sum of squares for the global gradient norm (double, deterministic) and the clip scale, both
// left in device memory: the training step never waits for them (src/step.h).
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

constexpr int kNormBlocks = 512;  // at most; set by n alone (not the device), so the bits never change
constexpr int kNormThreads = 256;

// partial[block] = sum over this block's grid-stride share of x[i]^2, in double; the block that
// finishes last sums the partials one after another in block order into *out (one thread: 512
// additions, the same order and bits as the host loop this replaces)
__device__ unsigned g_sum_squares_count;  // last_block's ticket counter
__global__ void sum_squares_kernel(double* __restrict__ out, double* __restrict__ partial, const float* __restrict__ x,
                                   size_t n) {
    __shared__ double sh[32];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
    if (!last_block(&g_sum_squares_count) || threadIdx.x != 0) return;
    double total = 0.0;
    for (unsigned b = 0; b < gridDim.x; b++) total += __ldcg(partial + b);
    *out = total;
}

__global__ void clip_grad_kernel(StepScalars* s, double grad_clip) {
    s->gscale = (float)clip_scale(grad_clip, sqrt(s->sumsq));
}

}  // namespace

void sum_squares_to(double* out, const float* x, size_t n) {
    const cudaStream_t stream = main_stream();
    static Scratch<double> s_partial;
    double* partial = s_partial.get(kNormBlocks);
    if (n == 0) {
        cudaCheck(cudaMemsetAsync(out, 0, sizeof(double), stream));
        return;
    }
    // below 512 x 256 elements every thread holds one at most: the blocks past the last element
    // would add partials of 0.0, so leaving them out keeps the bits
    const unsigned blocks = (unsigned)std::min<size_t>(kNormBlocks, ceil_div(n, (size_t)kNormThreads));
    sum_squares_kernel<<<blocks, kNormThreads, 0, stream>>>(out, partial, x, n);
    cudaCheckLaunch();
}

double sum_squares(const float* x, size_t n) {
    const cudaStream_t stream = main_stream();
    static Scratch<double> s_out;
    double* out = s_out.get(1);
    sum_squares_to(out, x, n);
    double h = 0.0;
    cudaCheck(cudaMemcpyAsync(&h, out, sizeof(double), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return h;
}

void clip_grad(StepScalars* s, double grad_clip) {
    const cudaStream_t stream = main_stream();
    clip_grad_kernel<<<1, 1, 0, stream>>>(s, grad_clip);
    cudaCheckLaunch();
}

}  // namespace gpu
