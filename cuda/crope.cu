// CRoPE's complex-linear Q/K/V weights: expand (A, B) (3, C/2, C/2) into the equivalent real
// (3C, C) matrix whose 2x2 blocks are [[a, -b], [b, a]], and fold its gradient back.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// One thread per element of W (3C, C): coalesced writes, in E (the activations' type: W is a
// GEMM operand).
template <class E>
__global__ void crope_expand_kernel(E* __restrict__ w, const float* __restrict__ A, const float* __restrict__ Bm,
                                    int C, size_t total) {
    const int h = C / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / C;  // p*C + r
        int col = (int)(i % C);
        int p = (int)(row / C), r = (int)(row % C);
        size_t k = ((size_t)p * h + r / 2) * h + col / 2;  // A[p, r/2, col/2]
        bool odd_row = r & 1, odd_col = col & 1;
        float v;
        if (odd_row == odd_col)
            v = A[k];
        else
            v = odd_row ? Bm[k] : -Bm[k];  // (even, odd) = -b ; (odd, even) = b
        w[i] = from_f32<E>(v);
    }
}

// One thread per (p, i, j): dA += dW[2i,2j] + dW[2i+1,2j+1] ; dB += dW[2i+1,2j] - dW[2i,2j+1]
__global__ void crope_fold_kernel(float* __restrict__ dA, float* __restrict__ dB, const float* __restrict__ dw, int C,
                                  size_t total) {
    const int h = C / 2;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        size_t pi = k / h;  // p*h + i
        int j = (int)(k % h);
        int p = (int)(pi / h), i = (int)(pi % h);
        const float* r0 = dw + ((size_t)p * C + 2 * i) * C;
        const float* r1 = r0 + C;
        float2 a = *reinterpret_cast<const float2*>(r0 + 2 * j);  // (dW[2i,2j], dW[2i,2j+1])
        float2 b = *reinterpret_cast<const float2*>(r1 + 2 * j);  // (dW[2i+1,2j], dW[2i+1,2j+1])
        dA[k] += a.x + b.y;
        dB[k] += b.x - a.y;
    }
}

}  // namespace

template <class Act>
void crope_expand(Act* w, const float* Am, const float* Bm, int C) {
    const cudaStream_t stream = main_stream();
    size_t total = (size_t)3 * C * C;
    if (total == 0) return;
    crope_expand_kernel<dev_t<Act>><<<grid_for(total, 256), 256, 0, stream>>>(dev(w), Am, Bm, C, total);
    cudaCheckLaunch();
}

void crope_fold(float* dA, float* dB, const float* dw, int C) {
    const cudaStream_t stream = main_stream();
    size_t total = (size_t)3 * (C / 2) * (C / 2);
    if (total == 0) return;
    crope_fold_kernel<<<grid_for(total, 256), 256, 0, stream>>>(dA, dB, dw, C, total);
    cudaCheckLaunch();
}

GPU_INSTANTIATE(crope_expand)

}  // namespace gpu
