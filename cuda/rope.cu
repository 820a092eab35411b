// RoPE on the packed qkv (B, T, 3C): q and k (the first 2C channels) have each adjacent
// pair (2j, 2j+1) of every head rotated by the angle of position t (row t of the
// position data's cos/sin tables (n, D/2), src/pos.h; k's own with xpos); v (the last C channels) passes through.
#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {

// out = R (inp + bias) with R the rotation by +angle (SGN = 1: forward; the qkv GEMM writes no
// bias, bias (3C) may be null) or by -angle (SGN = -1: the backward, R^T, no bias), overwritten,
// W elements (r, c..c+W-1) of the (B*T, 3C) qkv at a time, W even: whole pairs. KTAB: k reads
// its own tables (xpos's decay); a kernel of its own, so RoPE's keeps its registers.
template <class E, int W, int SGN, bool KTAB>
struct Rope {
    E* out;
    const E* inp;
    const float* bias;
    const float* cos_t;  // q's tables
    const float* sin_t;
    const float* kcos_t;  // k's (KTAB)
    const float* ksin_t;
    int T, C, D;
    __device__ void operator()(size_t i, int r, int c) const {
        static_assert(W % 2 == 0, "RoPE takes whole pairs");
        float y[W];
        biased_pack(y, inp, bias, i, c);
        // W divides 3C, so C (W a power of two): a pack is all q, all k or all v
        const float* ct = KTAB && c >= C ? kcos_t : cos_t;
        const float* st = KTAB && c >= C ? ksin_t : sin_t;
        for (int k = 0; k < W && c + k < 2 * C; k += 2) {  // q and k rotate; v (from 2C) passes
            const size_t j = (size_t)(r % T) * (D / 2) + ((c + k) % D) / 2;
            const float cs = ct[j], sn = SGN * st[j], x0 = y[k], x1 = y[k + 1];
            y[k] = x0 * cs - x1 * sn;
            y[k + 1] = x0 * sn + x1 * cs;
        }
        store_pack(out, i, y);
    }
};

// W: 16 bytes of E when the row and the pointers allow, else one pair (always aligned to its size)
template <int SGN, class Act>
void rope(Act* out, const Act* inp, const float* bias, const PosData<float>& pos, int B, int T, int C, int H,
          cudaStream_t stream) {
    using E = dev_t<Act>;
    with_pack<E, 2>((size_t)3 * C, {out, inp}, [&](auto w) {
        constexpr int W = decltype(w)::value;
        const int D = C / H;
        if (pos.kcos)
            for_each_element<W>(Rope<E, W, SGN, true>{dev(out), dev(inp), bias, pos.cos, pos.sin, pos.kcos, pos.ksin, T, C, D},
                                B * T, 3 * C, stream);
        else
            for_each_element<W>(Rope<E, W, SGN, false>{dev(out), dev(inp), bias, pos.cos, pos.sin, nullptr, nullptr, T, C, D},
                                B * T, 3 * C, stream);
    });
}

}  // namespace

template <class Act>
void rope_forward(Act* out, const Act* inp, const float* bias, const PosData<float>& pos, int B, int T, int C, int H) {
    const cudaStream_t stream = main_stream();
    rope<1>(out, inp, bias, pos, B, T, C, H, stream);
}

template <class Act>
void rope_backward(Act* dinp, const Act* dout, const PosData<float>& pos, int B, int T, int C, int H) {
    const cudaStream_t stream = main_stream();
    rope<-1>(dinp, dout, nullptr, pos, B, T, C, H, stream);
}

GPU_INSTANTIATE(rope_forward)
GPU_INSTANTIATE(rope_backward)

}  // namespace gpu
