// AdamW with torch.optim.AdamW semantics (decoupled decay, bias-corrected moments, eps
// outside the sqrt), the same operation order as the CPU twin (src/ops/adamw.h). The learning
// rate, bias corrections and clip scale are read from device memory (StepScalars, src/step.h)
// when the kernel runs, so a captured step stays valid as they change.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// p_act (may be null): p rounded to bf16 in the same pass (the GEMMs' copy of the weights)
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, __nv_bfloat16* __restrict__ p_act, size_t n,
                             const StepScalars* __restrict__ s, float beta1, float c1, float beta2, float c2,
                             float eps, float wd) {
    const float lr = s->lr, bc1 = (float)s->bc1, bc2 = (float)s->bc2, gscale = s->gscale;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] * gscale;
        float pi = p[i];
        pi -= lr * wd * pi;
        float mi = beta1 * m[i] + c1 * gi;
        float vi = beta2 * v[i] + c2 * gi * gi;
        pi -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (p_act) p_act[i] = __float2bfloat16_rn(pi);
    }
}

}  // namespace

void adamw_update_bf16(float* p, const float* g, float* m, float* v, bf16_t* p_act, size_t n, const StepScalars* s, double beta1, double beta2, float eps, float wd) {
    const cudaStream_t stream = main_stream();
    if (n == 0) return;
    // 1 - beta in double, as the CPU twin (and torch) computes it
    adamw_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, g, m, v, dev(p_act), n, s, (float)beta1, (float)(1 - beta1),
                                                       (float)beta2, (float)(1 - beta2), eps, wd);
    cudaCheckLaunch();
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const StepScalars* s, double beta1, double beta2, float eps, float wd) {
    adamw_update_bf16(p, g, m, v, nullptr, n, s, beta1, beta2, eps, wd);
}

}  // namespace gpu
