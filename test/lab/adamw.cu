// Kernel lab: the AdamW update over every parameter tensor of a GPT-2 layout (--L layers of
// width --C, vocabulary --V, --maxT positions: the 148 tensors of 124M by default; weight decay
// on the matrices only, as the trainer does).
//   1 trainer     cuda/adamw.cu: a scalar grid-stride kernel, one launch per tensor
//   2 vec4        float4 loads and stores (a scalar tail), one launch per tensor
//   3 one-launch  version 2 over all tensors in a single launch, a block per 4096-float chunk
//                 (the launch overhead of 148 mostly tiny tensors goes)
// GB/s counts 28 bytes per parameter (p, g, m, v read; p, m, v written).
// Usage: adamw [--L 12] [--C 768] [--V 50257] [--maxT 1024] [--reps 20] [--version N]
#include "lab.cuh"
#include "ops/adamw.h"

namespace {

struct Hyper {
    float lr = 6e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, gscale = 0.8f;
    int t = 3;
};

// The tensors of a GPT-2 (offset, size, decayed); float4 alignment holds at every offset
// when C is a multiple of 4.
struct Tensor {
    size_t offset, n;
    bool matrix;
};
std::vector<Tensor> gpt2_layout(int L, int C, int V, int maxT) {
    std::vector<std::pair<size_t, bool>> sizes = {{(size_t)V * C, true}, {(size_t)maxT * C, true}};
    const size_t c = C;
    for (int l = 0; l < L; l++)
        for (auto s : {std::make_pair(c, false),
                       {c, false},
                       {3 * c * c, true},
                       {3 * c, false},
                       {c * c, true},
                       {c, false},
                       {c, false},
                       {c, false},
                       {4 * c * c, true},
                       {4 * c, false},
                       {4 * c * c, true},
                       {c, false}})
            sizes.push_back(s);
    sizes.push_back({c, false});
    sizes.push_back({c, false});
    std::vector<Tensor> t;
    size_t off = 0;
    for (auto& [n, matrix] : sizes) {
        t.push_back({off, n, matrix});
        off += n;
    }
    return t;
}

// One parameter's update, in the operation order of cuda/adamw.cu and the CPU twin.
__device__ inline void adamw_one(float& p, float g, float& m, float& v, const Hyper& h, float wd, float bc1,
                                 float bc2) {
    g *= h.gscale;
    p -= h.lr * wd * p;
    m = h.beta1 * m + (1.0f - h.beta1) * g;
    v = h.beta2 * v + (1.0f - h.beta2) * g * g;
    p -= h.lr * (m / bc1) / (sqrtf(v / bc2) + h.eps);
}

// n parameters at p, g, m, v (16-byte aligned): float4 over the first n/4*4, scalar tail.
__device__ inline void adamw_vec4(float* p, const float* g, float* m, float* v, size_t n, const Hyper& h, float wd,
                                  float bc1, float bc2, size_t first, size_t stride) {
    const size_t n4 = n / 4;
    for (size_t i = first; i < n4; i += stride) {
        float4 P = reinterpret_cast<float4*>(p)[i], G = reinterpret_cast<const float4*>(g)[i];
        float4 M = reinterpret_cast<float4*>(m)[i], Vv = reinterpret_cast<float4*>(v)[i];
        adamw_one(P.x, G.x, M.x, Vv.x, h, wd, bc1, bc2);
        adamw_one(P.y, G.y, M.y, Vv.y, h, wd, bc1, bc2);
        adamw_one(P.z, G.z, M.z, Vv.z, h, wd, bc1, bc2);
        adamw_one(P.w, G.w, M.w, Vv.w, h, wd, bc1, bc2);
        reinterpret_cast<float4*>(p)[i] = P;
        reinterpret_cast<float4*>(m)[i] = M;
        reinterpret_cast<float4*>(v)[i] = Vv;
    }
    for (size_t i = n4 * 4 + first; i < n; i += stride) adamw_one(p[i], g[i], m[i], v[i], h, wd, bc1, bc2);
}

__global__ void adamw_vec4_kernel(float* p, const float* g, float* m, float* v, size_t n, Hyper h, float wd, float bc1,
                                  float bc2) {
    adamw_vec4(p, g, m, v, n, h, wd, bc1, bc2, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
               (size_t)gridDim.x * blockDim.x);
}

// Every tensor in one launch (a multi-tensor apply): each block updates one chunk of kChunk
// floats of one tensor; the table, passed by value (kernel parameters hold 4 KiB), gives each
// tensor's first block, and a block finds its tensor by binary search.
constexpr int kMaxTensors = 160, kChunk = 4096;
struct Table {
    size_t offset[kMaxTensors];
    unsigned n[kMaxTensors], first_block[kMaxTensors];
    unsigned char decay[kMaxTensors];
    int count;
};
static_assert(sizeof(Table) + 64 < 4096, "kernel parameters are limited to 4 KiB");

__global__ void adamw_multi_kernel(float* p, const float* g, float* m, float* v, Table t, Hyper h, float bc1,
                                   float bc2) {
    int lo = 0, hi = t.count - 1;  // the last tensor whose first block is <= this block
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (t.first_block[mid] <= blockIdx.x)
            lo = mid;
        else
            hi = mid - 1;
    }
    const size_t begin = t.offset[lo] + (size_t)(blockIdx.x - t.first_block[lo]) * kChunk;
    const size_t n = min((size_t)kChunk, t.offset[lo] + t.n[lo] - begin);
    adamw_vec4(p + begin, g + begin, m + begin, v + begin, n, h, t.decay[lo] ? h.wd : 0.0f, bc1, bc2, threadIdx.x,
               blockDim.x);
}

struct State {
    lab::Buf<float> p, g, m, v;
    explicit State(size_t n)
        : p(lab::randn(n, 1)), g(lab::randn(n, 2, 0.1f)), m(lab::randn(n, 3, 0.01f)), v(lab::randn(n, 4, 0.0f)) {}
};

void step(int version, State& s, const std::vector<Tensor>& layout, const Hyper& h) {
    // the trainer's kernel reads lr, bias corrections and clip scale from device memory
    static StepScalars* scalars = CudaDevice::alloc_scalars();
    CudaDevice::copy_scalars_from_host(scalars, adamw_scalars(h.lr, h.beta1, h.beta2, h.t, h.gscale));
    const float bc1 = (float)(1.0 - std::pow((double)h.beta1, h.t)),
                bc2 = (float)(1.0 - std::pow((double)h.beta2, h.t));
    if (version == 3) {
        Table t;
        unsigned blocks = 0;
        t.count = (int)layout.size();
        for (int k = 0; k < t.count; k++) {
            t.offset[k] = layout[k].offset, t.n[k] = (unsigned)layout[k].n, t.decay[k] = layout[k].matrix;
            t.first_block[k] = blocks;
            blocks += (unsigned)gpu::ceil_div(layout[k].n, (size_t)kChunk);
        }
        adamw_multi_kernel<<<blocks, 256>>>(s.p.p, s.g.p, s.m.p, s.v.p, t, h, bc1, bc2);
        cudaCheckLaunch();
        return;
    }
    for (const Tensor& k : layout) {
        const float wd = k.matrix ? h.wd : 0.0f;
        float *p = s.p + k.offset, *m = s.m + k.offset, *v = s.v + k.offset;
        const float* g = s.g + k.offset;
        if (version == 1) {
            gpu::adamw_update(p, g, m, v, k.n, scalars, h.beta1, h.beta2, h.eps, wd);
        } else {
            adamw_vec4_kernel<<<gpu::grid_for(k.n / 4 + 1, 256), 256>>>(p, g, m, v, k.n, h, wd, bc1, bc2);
            cudaCheckLaunch();
        }
    }
}

bool check(const char* name, int version, const std::vector<Tensor>& layout) {
    const Hyper h;
    const size_t n = layout.back().offset + layout.back().n;
    State s(n);
    auto p = s.p.host(), g = s.g.host(), m = s.m.host(), v = s.v.host();
    const StepScalars sc = adamw_scalars(h.lr, h.beta1, h.beta2, h.t, h.gscale);
    for (const Tensor& k : layout)
        cpu::adamw_update(p.data() + k.offset, g.data() + k.offset, m.data() + k.offset, v.data() + k.offset, k.n, &sc,
                          h.beta1, h.beta2, h.eps, k.matrix ? h.wd : 0.0f);
    step(version, s, layout, h);
    return lab::report(name,
                       {{"p", lab::rel_max_err(s.p.host(), p)},
                        {"m", lab::rel_max_err(s.m.host(), m)},
                        {"v", lab::rel_max_err(s.v.host(), v)}},
                       1e-5);
}

}  // namespace

int main(int argc, char** argv) {
    return lab::run(argc, argv, "adamw", {{"L", 12}, {"C", 768}, {"V", 50257}, {"maxT", 1024}}, [](const lab::Args& a) {
        if (a["C"] % 4)
            throw std::runtime_error("--C must be a multiple of 4 (float4 tensors), got " + std::to_string(a["C"]));
        if (12 * a["L"] + 5 > kMaxTensors)
            throw std::runtime_error("--L must be at most " + std::to_string((kMaxTensors - 4) / 12));
        const auto layout = gpt2_layout(a["L"], a["C"], a["V"], a["maxT"]);
        auto small = gpt2_layout(2, 36, 101, 17);  // the check: a few chunks, and an odd tensor for the tails
        small.push_back({small.back().offset + small.back().n, 4099, false});
        const size_t n = layout.back().offset + layout.back().n;
        const int reps = a["reps"];
        std::vector<lab::Version> vs;
        const char* names[] = {"trainer", "vec4", "one-launch"};
        for (int i = 0; i < 3; i++) {
            const char* name = names[i];
            vs.push_back({name, [=] { return check(name, i + 1, small); },
                          [=] {
                              State s(n);
                              const Hyper h;
                              lab::print_times({{"step", [&] { step(i + 1, s, layout, h); }, 28.0 * n, false}}, reps);
                          }});
        }
        return vs;
    });
}
