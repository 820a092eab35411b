// Kernel lab: the classifier, the tied LM head (logits = x wte^T) and the fused softmax +
// cross-entropy that writes dlogits over the logits, then the head's backward.
//   1 trainer       matmul.cu (cuBLAS, TF32) + loss.cu (a block of 512 threads per row: one pass for
//                   the log-sum-exp, a second that re-reads the row to write dlogits)
//   2 trainer-bf16  version 1 on bf16 activations (--precision bf16): x, the head's weights, the
//                   logits, dlogits and dx in bf16; fp32 losses and dwte
//   3 warp-row      the loss with one warp per row (no block reduction, no __syncthreads)
//   4 smem-row      the loss with the row cached in shared memory (a block of 1024 threads per
//                   row): each logit read from memory once, not twice; needs 4 V bytes of shared
//                   memory per block (V = 50257 fits on H100/H200, not on A100)
//   5 vocab-tiles   the trainer's --classifier_tile (bf16): all N rows at once in tiles of `tile`
//                   vocabulary columns, two passes:
//                   the first merges each tile's (max, sum of exp) per row and picks the target's
//                   logit; the second computes the tile's logits again, turns them into dlogits
//                   and adds the tile's share of dx (fp32) and its rows of dwte. A tile (N x tile
//                   bf16: 32 MB at N=16384, tile=1024) can stay in the L2 cache from its GEMM to
//                   the kernels that read it, so no logits reach memory; the price is the forward
//                   GEMM twice. Compare its one stage with the sum of version 2's three.
// The check runs the GEMMs in exact fp32 (the timings in TF32, as the trainer does).
// Stages: head (forward GEMM), loss, head-back (the dinp and dwte GEMMs). TFLOP/s for the GEMMs;
// GB/s for the loss counts 8 bytes per logit (read once, dlogits written once). Version 5: one
// stage, TFLOP/s counting the three GEMMs of the other versions (not its second forward GEMM).
// Usage: classifier [--N 16384] [--C 768] [--V 50257] [--tile 1024] [--reps 20] [--version N]
#include "lab.cuh"
#include "ops/loss.h"
#include "ops/matmul.h"

namespace {

constexpr int kWarps = 8, kSmemThreads = 1024;

// One warp per row: online (max, sum) over the lane's columns, a butterfly merge, then dlogits.
__global__ void crossentropy_warp_kernel(float* __restrict__ logits, float* __restrict__ losses,
                                         const int* __restrict__ targets, int N, int V, float dscale) {
    const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    float* z = logits + (size_t)row * V;
    const int target = targets[row];
    const float zt = target >= 0 && target < V ? z[target] : NAN;  // every lane reads it before any write
    float m = -INFINITY, s = 0.0f;
    for (int v = lane; v < V; v += 32) gpu::lse_push(m, s, z[v]);
    gpu::warp_lse(m, s);
    const float logsum = logf(s) + m;
    if (lane == 0) losses[row] = logsum - zt;
    if (dscale == 0.0f) return;
    for (int v = lane; v < V; v += 32) z[v] = expf(z[v] - logsum) * dscale - (v == target ? dscale : 0.0f);
}

// One block per row, the row kept in shared memory (V floats) between the two passes.
__global__ void __launch_bounds__(kSmemThreads)
    crossentropy_smem_kernel(float* __restrict__ logits, float* __restrict__ losses, const int* __restrict__ targets,
                             int V, float dscale) {
    extern __shared__ float zs[];
    __shared__ float sh_m[32], sh_s[32], sh_logsum;
    float* z = logits + (size_t)blockIdx.x * V;
    const int target = targets[blockIdx.x], lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        const float x = z[v];
        zs[v] = x;
        gpu::lse_push(m, s, x);
    }
    gpu::warp_lse(m, s);
    if (lane == 0) sh_m[warp] = m, sh_s[warp] = s;
    __syncthreads();
    if (warp == 0) {
        m = lane < (int)blockDim.x / 32 ? sh_m[lane] : -INFINITY;
        s = lane < (int)blockDim.x / 32 ? sh_s[lane] : 0.0f;
        gpu::warp_lse(m, s);
        if (lane == 0) {
            sh_logsum = logf(s) + m;
            losses[blockIdx.x] = sh_logsum - (target >= 0 && target < V ? zs[target] : NAN);
        }
    }
    __syncthreads();
    if (dscale == 0.0f) return;
    const float logsum = sh_logsum;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        z[v] = expf(zs[v] - logsum) * dscale - (v == target ? dscale : 0.0f);
}

size_t smem_bytes(int V) {
    return (size_t)V * sizeof(float);
}
bool smem_fits(int V) {
    int dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return smem_bytes(V) + 300 <= (size_t)optin;  // + the static arrays
}

struct Shape {
    int N, C, V, tile;
};

// A: the activations' element type (float; bf16_t for trainer-bf16 and vocab-tiles).
// logits: (N, logit_cols), all V columns, or one tile's (vocab-tiles).
template <class Act>
struct Bufs {
    lab::Buf<Act> x, wte, logits, dx;
    lab::Buf<float> losses, dwte;
    lab::Buf<int> targets;
    Bufs(const Shape& s, const std::vector<int>& t, int logit_cols = 0)
        : x(lab::to_act<Act>(lab::randn((size_t)s.N * s.C, 1))),
          wte(lab::to_act<Act>(lab::randn((size_t)s.V * s.C, 2, 0.1f))),
          logits((size_t)s.N * (logit_cols ? logit_cols : s.V)),
          dx((size_t)s.N * s.C),
          losses(s.N),
          dwte((size_t)s.V * s.C),
          targets(t) {}
};

std::vector<int> random_targets(const Shape& s) {
    Rng r(5);
    std::vector<int> t(s.N);
    for (int& x : t) x = (int)r.below(s.V);
    return t;
}

template <class Act>
void head(Bufs<Act>& b, const Shape& s) {
    gpu::matmul_forward(b.logits.p, b.x.p, b.wte.p, nullptr, s.N, s.C, s.V);
}

template <class Act>
void loss(int version, Bufs<Act>& b, const Shape& s) {
    const float dscale = 1.0f / s.N;
    if (version <= 2)
        return gpu::classifier_loss(b.logits.p, b.losses.p, b.targets.p, s.N, s.V, s.V, dscale);
    if constexpr (std::is_same<Act, float>::value) {  // versions 3 and 4 are fp32 only
        if (version == 3) {
            crossentropy_warp_kernel<<<gpu::ceil_div(s.N, kWarps), 32 * kWarps>>>(b.logits.p, b.losses.p, b.targets.p,
                                                                                  s.N, s.V, dscale);
        } else {
            cudaCheck(cudaFuncSetAttribute(crossentropy_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem_bytes(s.V)));
            crossentropy_smem_kernel<<<s.N, kSmemThreads, smem_bytes(s.V)>>>(b.logits.p, b.losses.p, b.targets.p, s.V,
                                                                             dscale);
        }
        cudaCheckLaunch();
    }
}

template <class Act>
void head_back(Bufs<Act>& b, const Shape& s) {
    gpu::matmul_backward(b.dx.p, b.dwte.p, nullptr, b.logits.p, b.x.p, b.wte.p, s.N, s.C, s.V);
}

// The CPU's results on the device buffers' inputs (their values as float).
struct Reference {
    std::vector<float> dlogits, losses, dx, dwte;
};
template <class Act>
Reference reference(const lab::Buf<Act>& xb, const lab::Buf<Act>& wteb, const std::vector<int>& t, const Shape& s) {
    auto x = lab::to_float(xb.host()), wte = lab::to_float(wteb.host());
    Reference r{std::vector<float>((size_t)s.N * s.V), std::vector<float>(s.N), std::vector<float>((size_t)s.N * s.C),
                std::vector<float>((size_t)s.V * s.C)};
    cpu::matmul_forward<float>(r.dlogits.data(), x.data(), wte.data(), nullptr, s.N, s.C, s.V);
    cpu::classifier_loss(r.dlogits.data(), r.losses.data(), t.data(), s.N, s.V, s.V, 1.0f / s.N);
    cpu::matmul_backward<float>(r.dx.data(), r.dwte.data(), nullptr, r.dlogits.data(), x.data(), wte.data(), s.N, s.C,
                                s.V);
    return r;
}

// Against the CPU with exact fp32 GEMMs (TF32 off), so the loss kernels are held to fp32
// accuracy; on the same inputs (bf16 values for trainer-bf16, whose stored logits, dlogits and
// dx are bf16: 3e-2).
template <class Act>
bool check(const char* name, int version, const Shape& s) {
    gpu::set_tf32(false);
    const auto t = random_targets(s);
    Bufs<Act> b(s, t);
    const Reference r = reference(b.x, b.wte, t, s);
    head(b, s);
    loss(version, b, s);
    head_back(b, s);
    gpu::set_tf32(true);  // the trainer's setting, for the timings
    return lab::report(name,
                       {{"loss", lab::rel_max_err(b.losses.host(), r.losses)},
                        {"dlogits", lab::rel_max_err(lab::to_float(b.logits.host()), r.dlogits)},
                        {"dx", lab::rel_max_err(lab::to_float(b.dx.host()), r.dx)},
                        {"dwte", lab::rel_max_err(b.dwte.host(), r.dwte)}},
                       version == 2 ? 3e-2 : 1e-4);
}

// ---- version 5: vocab-tiles (bf16) --------------------------------------------------------------
// The trainer's classifier_tile path (src/classifier.h: classifier_tiles, loss.cu's classifier_tile_*
// kernels) on the lab's unpadded V: the last tile is partial.

// The other versions' buffers with logits of one tile, each row's running max and sum of exp, and
// dx's fp32 sums.
struct TileBufs : Bufs<bf16_t> {
    lab::Buf<float> m, s, dx32;
    TileBufs(const Shape& sh, const std::vector<int>& t)
        : Bufs<bf16_t>(sh, t, std::min(sh.tile, sh.V)), m(sh.N), s(sh.N), dx32((size_t)sh.N * sh.C) {}
};

// losses, dx (= the head's input gradient) and dwte += the head's weight gradient
void vocab_tiles(TileBufs& b, const Shape& sh) {
    const int N = sh.N, C = sh.C;
    auto tiles = [&](const std::function<void(int v0, int w)>& f) {
        for (int v0 = 0; v0 < sh.V; v0 += sh.tile) {
            const int w = std::min(sh.tile, sh.V - v0);
            gpu::matmul_forward(b.logits.p, b.x.p, b.wte.p + (size_t)v0 * C, nullptr, N, C, w);  // (N, w)
            f(v0, w);
        }
    };
    tiles([&](int v0, int w) {
        gpu::classifier_tile_lse(b.logits.p, b.m.p, b.s.p, b.losses.p, b.targets.p, N, w, v0, sh.V);
    });
    gpu::classifier_tile_loss(b.losses.p, b.m.p, b.s.p, N);
    cudaCheck(cudaMemsetAsync(b.dx32.p, 0, b.dx32.n * sizeof(float), gpu::main_stream()));
    tiles([&](int v0, int w) {
        gpu::classifier_tile_dlogits(b.logits.p, b.m.p, b.targets.p, N, w, v0, sh.V, 1.0f / N);
        const size_t o = (size_t)v0 * C;
        gpu::matmul_dinp_add(b.dx32.p, b.logits.p, b.wte.p + o, N, C, w);
        gpu::matmul_backward<bf16_t>(nullptr, b.dwte.p + o, nullptr, b.logits.p, b.x.p, b.wte.p + o, N, C, w);
    });
    gpu::to_bf16(b.dx.p, b.dx32.p, b.dx.n);
}

bool check_tiles(const char* name, const Shape& s) {
    gpu::set_tf32(false);
    const auto t = random_targets(s);
    TileBufs b(s, t);
    const Reference r = reference(b.x, b.wte, t, s);
    vocab_tiles(b, s);
    gpu::set_tf32(true);
    return lab::report(name,
                       {{"loss", lab::rel_max_err(b.losses.host(), r.losses)},
                        {"dx", lab::rel_max_err(lab::to_float(b.dx.host()), r.dx)},
                        {"dwte", lab::rel_max_err(b.dwte.host(), r.dwte)}},
                       3e-2);
}

void time_tiles(const Shape& s, int reps) {
    TileBufs b(s, random_targets(s));
    lab::print_times({{"head+loss+back", [&] { vocab_tiles(b, s); }, 6.0 * s.N * s.C * (double)s.V, true}}, reps);
}

template <class Act>
void time_version(int version, const Shape& s, int reps) {
    if (version == 4 && !smem_fits(s.V)) {
        std::printf("  time  not run: %zu bytes of shared memory per block exceed this GPU's limit\n", smem_bytes(s.V));
        return;
    }
    Bufs<Act> b(s, random_targets(s));
    const double gemm = 2.0 * s.N * s.C * (double)s.V;
    lab::print_times({{"head", [&] { head(b, s); }, gemm, true},
                      {"loss", [&] { loss(version, b, s); }, 8.0 * s.N * s.V, false},
                      {"head-back", [&] { head_back(b, s); }, 2 * gemm, true}},
                     reps);
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::pair<std::string, int>> shape = {{"N", 16384}, {"C", 768}, {"V", 50257}, {"tile", 1024}};
    return lab::run(argc, argv, "classifier", shape, [](const lab::Args& a) {
        // the small check has a partial last tile (1001 = 7 x 128 + 105)
        const Shape s{a["N"], a["C"], a["V"], a["tile"]}, small{37, 64, 1001, 128};
        const int reps = a["reps"];
        std::vector<lab::Version> vs;
        const char* names[] = {"trainer", "trainer-bf16", "warp-row", "smem-row"};
        for (int i = 1; i <= 4; i++) {
            const char* name = names[i - 1];
            vs.push_back({name, [=] { return i == 2 ? check<bf16_t>(name, i, small) : check<float>(name, i, small); },
                          [=] { i == 2 ? time_version<bf16_t>(i, s, reps) : time_version<float>(i, s, reps); }});
        }
        vs.push_back({"vocab-tiles", [=] { return check_tiles("vocab-tiles", small); }, [=] { time_tiles(s, reps); }});
        return vs;
    });
}
