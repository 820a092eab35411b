// RoPE on the packed qkv (B, T, 3C): q and k (the first 2C channels) have each adjacent
// pair (2j, 2j+1) of every head rotated by the angle of position t (row t of the
// precomputed cos/sin tables (maxT, D/2)); v (the last C channels) passes through.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// out = R (x + bias) (the qkv GEMM writes no bias; bias (3C) may be null), overwritten. One
// thread per channel pair of a row: pairs 0..C-1 are q,k; pairs C..3C/2-1 are v. E: the element
// type of out and inp (fp32 arithmetic).
template <class E>
__global__ void rope_forward_kernel(E* __restrict__ out, const E* __restrict__ inp, const float* __restrict__ bias,
                                    const float* __restrict__ cos_t, const float* __restrict__ sin_t, int T, int C,
                                    int D, size_t total_pairs) {
    struct alignas(2 * sizeof(E)) Pair {
        E a, b;
    };
    const size_t pairs_per_row = (size_t)3 * C / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total_pairs;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / pairs_per_row;
        int e = 2 * (int)(i % pairs_per_row);  // channel of the pair's first element, in [0, 3C)
        size_t idx = bt * 3 * C + e;
        // e even, 3C even: the pair is aligned to its size (one vector access)
        const Pair p = *reinterpret_cast<const Pair*>(inp + idx);
        float2 x = {f32(p.a), f32(p.b)}, y;
        if (bias) x.x += bias[e], x.y += bias[e + 1];
        if (e < 2 * C) {
            int t = (int)(bt % T);
            int j = (e % D) / 2;
            float c = cos_t[(size_t)t * (D / 2) + j];
            float s = sin_t[(size_t)t * (D / 2) + j];
            y.x = x.x * c - x.y * s;
            y.y = x.x * s + x.y * c;
        } else {
            y = x;
        }
        *reinterpret_cast<Pair*>(out + idx) = Pair{from_f32<E>(y.x), from_f32<E>(y.y)};
    }
}

// The backward of element (r, c) of the (B*T, 3C) qkv: dinp = R^T dout (rotated by -angle; v
// passed through), overwritten, and v[0] = dinp as stored, the term of the qkv bias's gradient
// (column_sums, common.cuh). Each element reads both of its pair (the other one from cache).
template <class E>
struct RopeBackward {
    E* __restrict__ dinp;
    const E* __restrict__ dout;
    const float* __restrict__ cos_t;
    const float* __restrict__ sin_t;
    int T, C, D;
    __device__ void operator()(size_t i, int r, int c, float* v) const {
        float y = f32(dout[i]);
        if (c < 2 * C) {
            const int odd = c & 1, j = (c % D) / 2;
            const float x0 = f32(dout[i - odd]), x1 = f32(dout[i - odd + 1]);
            const float cs = cos_t[(size_t)(r % T) * (D / 2) + j], sn = sin_t[(size_t)(r % T) * (D / 2) + j];
            y = odd ? -x0 * sn + x1 * cs : x0 * cs + x1 * sn;
        }
        store_summed(dinp, i, y, v);
    }
};

}  // namespace

template <class A>
void rope_forward(A* out, const A* inp, const float* bias, const float* cos_t, const float* sin_t, int B, int T, int C,
                  int H, cudaStream_t stream) {
    size_t total = (size_t)B * T * 3 * C / 2;
    if (total == 0) return;
    rope_forward_kernel<dev_t<A>>
        <<<grid_for(total, 256), 256, 0, stream>>>(dev(out), dev(inp), bias, cos_t, sin_t, T, C, C / H, total);
    cudaCheckLaunch();
}

template <class A>
void rope_backward(A* dinp, float* dbias, const A* dout, const float* cos_t, const float* sin_t, int B, int T, int C,
                   int H, cudaStream_t stream) {
    const RopeBackward<dev_t<A>> op{dev(dinp), dev(dout), cos_t, sin_t, T, C, C / H};
    if (dbias)
        column_sums<1>(SumInto{dbias}, B * T, 3 * C, op, stream);  // the qkv bias gradient, as written
    else
        for_each_element(op, B * T, 3 * C, stream);
}

#define INSTANTIATE(A)                                                                                     \
    template void rope_forward(A*, const A*, const float*, const float*, const float*, int, int, int, int, \
                               cudaStream_t);                                                              \
    template void rope_backward(A*, float*, const A*, const float*, const float*, int, int, int, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16_t)
#undef INSTANTIATE

}  // namespace gpu
