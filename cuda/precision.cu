// bf16 buffers of the CUDA backend (--precision bf16: CudaBackend<bf16_t>'s activations and the
// model's bf16 copy of the weights): allocation, the copy to the host as float, and the fp32 ->
// bf16 rounding. Their other buffer operations are memory.cu's, instantiated for bf16.
#include <vector>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

__global__ void to_bf16_kernel(__nv_bfloat16* __restrict__ out, const float* __restrict__ in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

}  // namespace

void to_bf16(bf16_t* dst, const float* src, size_t n) {
    const cudaStream_t stream = main_stream();
    if (n == 0) return;
    to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dev(dst), src, n);
    cudaCheckLaunch();
}

}  // namespace gpu

bf16_t* CudaDevice::alloc_bf16(size_t n) {
    return gpu::alloc_zeroed<bf16_t>(n);
}

// bf16 logits to the host as float (GPT::logits): exact, every bf16 is a float
void CudaDevice::copy_to_host(float* dst, const bf16_t* src, size_t n) {
    std::vector<bf16_t> h(n);
    copy_to_host(h.data(), src, n);
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(h[i]);
}
