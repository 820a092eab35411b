// Kernel lab: causal attention, forward and backward, every version side by side.
//   1 cublas           the reference: cuBLAS GEMMs + softmax kernels, (B,H,T,T) probabilities (TF32)
//   2 flash            fused fp32 flash kernels, log-sum-exp saved (cuda/attention.cu; the trainer's default)
//   3 flash-bf16       --precision bf16: qkv, out and their gradients in bf16, WMMA tensor-core flash
//                      kernels (head sizes 16, 32, 64; others run version 2's kernels on bf16)
//   4 rope+flash       forward with RoPE as the trainer runs it: the rope kernel over qkv, then version 2
//   5 flash-rope-load  forward of version 2 rotating q and k as they are loaded (no rotated copy of qkv);
//                      CRoPE rotates its projections' output the same way, so this serves both schemes
//   6 cublas-bf16      version 1 on bf16 activations: scores, probabilities and their gradients in bf16
//                      (against version 3, what flash saves in bf16)
// Versions 4 and 5 are forward only (the backward would rotate dq and dk back as they are stored).
// TFLOP/s counts the causal half only: forward 2 GEMMs of B*H*T*T/2*D multiply-adds,
// backward 2.5 times that (FlashAttention's convention).
// Usage: attention [--B 16] [--T 1024] [--H 4] [--D 32] [--reps 20] [--version N]
#include "lab.cuh"
#include "ops/attention.h"
#include "ops/rope.h"
#include "pos.h"

namespace {

struct Shape {
    int B, T, H, D;
    int C() const { return H * D; }
    size_t nqkv() const { return (size_t)B * T * 3 * C(); }
    size_t nout() const { return (size_t)B * T * C(); }
    size_t natt() const { return (size_t)B * H * T * T; }
};

// ---- version 6: flash forward with RoPE applied at load ----------------------------------
// The fp32 flash forward of cuda/attention.cu (same tiling: kQuad threads per query row,
// kRows rows per block, key/value tiles of kTile rows up to the diagonal), reading q and k
// from the unrotated qkv and rotating each element as it is loaded: element d of a pair
// (2j, 2j+1) needs its partner, both read from global memory (the partner is in the same
// 32-byte sector, so no extra traffic).
constexpr int kQuad = 4, kRows = 64, kTile = 32, kThreads = kRows * kQuad;

// Element d of x (one head's q or k at a position whose cos/sin rows are c, s), rotated.
__device__ inline float rotated(const float* x, int d, const float* c, const float* s) {
    const int j = d / 2;
    return d % 2 == 0 ? x[d] * c[j] - x[d + 1] * s[j] : x[d - 1] * s[j] + x[d] * c[j];
}

// grid (B*H, ceil(T/kRows)). out (B,T,C), lse (B,H,T), qkv (B,T,3C) unrotated, cos_t/sin_t (T, D/2).
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_rope_kernel(float* __restrict__ out, float* __restrict__ lse, const float* __restrict__ qkv,
                              const float* __restrict__ cos_t, const float* __restrict__ sin_t, int T, int C, int H,
                              float scale) {
    constexpr int E = D / kQuad;
    __shared__ float ks[kTile][D], vs[kTile][D];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, r = threadIdx.x % kQuad;
    const int row0 = (int)(gridDim.y - 1 - blockIdx.y) * kRows, t = row0 + threadIdx.x / kQuad;
    const size_t C3 = 3 * (size_t)C;
    const float* base = qkv + (size_t)b * T * C3 + h * D;
    float q[E], o[E];
    for (int e = 0; e < E; e++) {
        q[e] = t < T ? rotated(base + t * C3, r + kQuad * e, cos_t + t * (D / 2), sin_t + t * (D / 2)) * scale : 0.0f;
        o[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int kend = min(T, row0 + kRows);
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
            const int j = i / D, d = i % D, tk = k0 + j;
            const float* row = base + (size_t)tk * C3;
            ks[j][d] = tk < T ? rotated(row + C, d, cos_t + tk * (D / 2), sin_t + tk * (D / 2)) : 0.0f;
            vs[j][d] = tk < T ? row[2 * C + d] : 0.0f;
        }
        __syncthreads();
        float s[kTile], mt = m;
#pragma unroll
        for (int j = 0; j < kTile; j++) {
            float p = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) p += q[e] * ks[j][r + kQuad * e];
            p += __shfl_xor_sync(0xffffffffu, p, 1);
            p += __shfl_xor_sync(0xffffffffu, p, 2);
            s[j] = k0 + j <= t ? p : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        float alpha = expf(m - mt);
        l *= alpha;
        for (int e = 0; e < E; e++) o[e] *= alpha;
#pragma unroll
        for (int j = 0; j < kTile; j++) {
            float p = expf(s[j] - mt);
            l += p;
#pragma unroll
            for (int e = 0; e < E; e++) o[e] += p * vs[j][r + kQuad * e];
        }
        m = mt;
    }
    if (t >= T) return;
    float* o_t = out + ((size_t)b * T + t) * C + h * D;
    for (int e = 0; e < E; e++) o_t[r + kQuad * e] = o[e] / l;
    if (r == 0) lse[(size_t)bh * T + t] = m + logf(l);
}

void flash_forward_rope(float* out, float* lse, const float* qkv, const float* cos_t, const float* sin_t,
                        const Shape& s) {
    const dim3 grid((unsigned)(s.B * s.H), (unsigned)gpu::ceil_div(s.T, kRows));
    const float scale = 1.0f / sqrtf((float)s.D);
    switch (s.D) {
        case 16:
            flash_forward_rope_kernel<16><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        case 32:
            flash_forward_rope_kernel<32><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        case 64:
            flash_forward_rope_kernel<64><<<grid, kThreads>>>(out, lse, qkv, cos_t, sin_t, s.T, s.C(), s.H, scale);
            break;
        default:
            throw std::runtime_error("flash-rope-load supports head sizes 16, 32 and 64, got " + std::to_string(s.D));
    }
    cudaCheckLaunch();
}

// ---- the versions ------------------------------------------------------------------------
enum Kind { kCublas, kFlash, kRopeThenFlash, kFlashRopeLoad };

struct Case {
    const char* name;
    Kind kind;
    bool bf16;
};
const Case kCases[] = {{"cublas", kCublas, false},
                       {"flash", kFlash, false},
                       {"flash-bf16", kFlash, true},
                       {"rope+flash", kRopeThenFlash, false},
                       {"flash-rope-load", kFlashRopeLoad, false},
                       {"cublas-bf16", kCublas, true}};

bool uses_rope(const Case& v) {
    return v.kind == kRopeThenFlash || v.kind == kFlashRopeLoad;
}

// Device buffers of one run: the probabilities and their gradient (cublas) or the log-sum-exps
// (flash). A: the activations' element type (float; bf16_t for the bf16 versions).
template <class A>
struct Buffers {
    lab::Buf<A> qkv, qkvr, out, dout, dqkv, att, scratch;
    lab::Buf<float> lse, cos_t, sin_t;
    Buffers(const Shape& s, const Case& v, const std::vector<float>& qkv_h, const std::vector<float>& dout_h,
            const std::vector<float>& cos_h, const std::vector<float>& sin_h)
        : qkv(lab::to_act<A>(qkv_h)),
          qkvr(v.kind == kRopeThenFlash ? s.nqkv() : 0),
          out(s.nout()),
          dout(lab::to_act<A>(dout_h)),
          dqkv(s.nqkv()),
          att(v.kind == kCublas ? s.natt() : 0),
          scratch(v.kind == kCublas ? s.natt() : 0),
          lse(v.kind == kCublas ? 0 : (size_t)s.B * s.H * s.T),
          cos_t(cos_h),
          sin_t(sin_h) {}
};

template <class A>
void forward(const Case& v, Buffers<A>& b, const Shape& s) {
    switch (v.kind) {
        case kCublas:
            gpu::attention_forward(b.out.p, b.att.p, b.qkv.p, s.B, s.T, s.C(), s.H, gpu::main_stream());
            break;
        case kFlash:
            gpu::attention_forward_lse(b.out.p, b.lse.p, b.qkv.p, s.B, s.T, s.C(), s.H, gpu::main_stream());
            break;
        case kRopeThenFlash:
            gpu::rope_forward(b.qkvr.p, b.qkv.p, nullptr, b.cos_t.p, b.sin_t.p, s.B, s.T, s.C(), s.H,
                              gpu::main_stream());
            gpu::attention_forward_lse(b.out.p, b.lse.p, b.qkvr.p, s.B, s.T, s.C(), s.H, gpu::main_stream());
            break;
        case kFlashRopeLoad:  // fp32 only (kCases)
            if constexpr (std::is_same<A, float>::value) flash_forward_rope(b.out, b.lse, b.qkv, b.cos_t, b.sin_t, s);
            break;
    }
}

template <class A>
void backward(const Case& v, Buffers<A>& b, const Shape& s) {
    if (v.kind == kFlash)
        gpu::attention_backward_lse(b.dqkv.p, b.dout.p, b.qkv.p, b.out.p, b.lse.p, s.B, s.T, s.C(), s.H,
                                    gpu::main_stream());
    else
        gpu::attention_backward(b.dqkv.p, b.scratch.p, b.dout.p, b.qkv.p, b.att.p, s.B, s.T, s.C(), s.H,
                                gpu::main_stream());
}

// RoPE tables (T, D/2) in float, as the trainer builds them (base 10000)
void rope_tables_f(std::vector<float>& c, std::vector<float>& s, const Shape& sh) {
    std::vector<double> cd, sd;
    rope_tables(cd, sd, sh.T, sh.D, 10000.0);
    c.assign(cd.begin(), cd.end());
    s.assign(sd.begin(), sd.end());
}

// Output (and, for the versions with a backward, the gradient) against the CPU reference, on
// the same inputs (bf16 values for flash-bf16).
template <class A>
bool check(const Case& v, const Shape& s) {
    auto qkv = lab::to_float(lab::to_act<A>(lab::randn(s.nqkv(), 1)));
    auto dout = lab::to_float(lab::to_act<A>(lab::randn(s.nout(), 2)));
    std::vector<float> cos_t, sin_t, out(s.nout()), att(s.natt()), scratch(s.natt()), dqkv(s.nqkv(), 0.0f);
    rope_tables_f(cos_t, sin_t, s);
    std::vector<float> qkvr = qkv;
    if (uses_rope(v))
        cpu::rope_forward(qkvr.data(), qkv.data(), (const float*)nullptr, cos_t.data(), sin_t.data(), s.B, s.T, s.C(),
                          s.H);
    cpu::attention_forward(out.data(), att.data(), qkvr.data(), s.B, s.T, s.C(), s.H);
    Buffers<A> b(s, v, qkv, dout, cos_t, sin_t);
    forward(v, b, s);
    const double tol = v.bf16 ? 2e-2 : 1e-3;
    const auto got_out = lab::to_float(b.out.host());
    if (uses_rope(v)) return lab::report(v.name, {{"out", lab::rel_max_err(got_out, out)}}, tol);
    cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C(), s.H);
    backward(v, b, s);
    return lab::report(
        v.name,
        {{"out", lab::rel_max_err(got_out, out)}, {"dqkv", lab::rel_max_err(lab::to_float(b.dqkv.host()), dqkv)}}, tol);
}

template <class A>
void time_case(const Case& v, const Shape& s, int reps) {
    std::vector<float> cos_t, sin_t;
    rope_tables_f(cos_t, sin_t, s);
    Buffers<A> b(s, v, lab::randn(s.nqkv(), 3), lab::randn(s.nout(), 4), cos_t, sin_t);
    const double fwd_flop = 4.0 * s.B * s.H * (double)s.T * s.T / 2 * s.D;
    std::vector<lab::Stage> stages = {{"forward", [&] { forward(v, b, s); }, fwd_flop, true}};
    if (!uses_rope(v)) stages.push_back({"backward", [&] { backward(v, b, s); }, 2.5 * fwd_flop, true});
    lab::print_times(stages, reps);
}

}  // namespace

int main(int argc, char** argv) {
    return lab::run(argc, argv, "attention", {{"B", 16}, {"T", 1024}, {"H", 4}, {"D", 32}}, [](const lab::Args& a) {
        const Shape s{a["B"], a["T"], a["H"], a["D"]}, small{2, 67, 2, a["D"]};
        const int reps = a["reps"];
        std::vector<lab::Version> vs;
        for (const Case& c : kCases)
            vs.push_back({c.name, [&c, small] { return c.bf16 ? check<bf16_t>(c, small) : check<float>(c, small); },
                          [&c, s, reps] { c.bf16 ? time_case<bf16_t>(c, s, reps) : time_case<float>(c, s, reps); }});
        return vs;
    });
}
