// Kernel lab: LayerNorm over the last dimension (eps 1e-5), forward and backward.
//   1 trainer   cuda/layernorm.cu: one warp per row reading the row three times (mean, variance,
//               output); backward dinp one warp per row, then dw/db in a second kernel (row
//               chunks' sums, added by the last block to finish)
//   2 regs      one warp per row with the row held in registers: forward reads x once; backward
//               fused: dinp and the block's dw/db partial sums from one read of x and dout
//   3 regs-vec4 version 2 with float4 loads and stores
// Versions 2 and 3 are compiled per channel count (C/32 floats per lane): C in 128, 256, 384,
// 512, 768, 1024. Their dw/db are deterministic: each
// warp sums its rows in order, the block's warps are added in order, then the blocks.
// GB/s counts the bytes each pass must move: forward x in, out out (+ mean, rstd);
// backward x, dout, dinp in and dinp out (+ the sums).
// Usage: layernorm [--N 16384] [--C 768] [--reps 20] [--version N]
#include "lab.cuh"
#include "ops/layernorm.h"

#include <type_traits>

namespace {

constexpr int kWarps = 8;         // rows per block (one warp each)
constexpr int kRowsPerWarp = 16;  // backward: rows one warp walks (its dw/db partial covers them)

// The P = C/32 floats of a row that one lane owns: channel (k * 32 + lane) * V + i of element
// k * V + i, so a warp's V-wide loads are contiguous (coalesced).
template <int V, int P>
struct Row {
    float x[P];
    __device__ void load(const float* p, int lane) {
#pragma unroll
        for (int k = 0; k < P / V; k++) {
            const int c = (k * 32 + lane) * V;
            if constexpr (V == 4) {
                float4 f = *reinterpret_cast<const float4*>(p + c);
                x[k * 4] = f.x, x[k * 4 + 1] = f.y, x[k * 4 + 2] = f.z, x[k * 4 + 3] = f.w;
            } else {
                x[k] = p[c];
            }
        }
    }
    // p = x, or with add p += x
    __device__ void store(float* p, int lane, bool add = false) const {
#pragma unroll
        for (int k = 0; k < P / V; k++) {
            const int c = (k * 32 + lane) * V;
            if constexpr (V == 4) {
                float4 f = make_float4(x[k * 4], x[k * 4 + 1], x[k * 4 + 2], x[k * 4 + 3]);
                if (add) {
                    float4 o = *reinterpret_cast<const float4*>(p + c);
                    f.x += o.x, f.y += o.y, f.z += o.z, f.w += o.w;
                }
                *reinterpret_cast<float4*>(p + c) = f;
            } else {
                p[c] = add ? p[c] + x[k] : x[k];
            }
        }
    }
};

template <int V, int P>
__global__ void layernorm_forward_regs_kernel(float* __restrict__ out, float* __restrict__ mean,
                                              float* __restrict__ rstd, const float* __restrict__ inp,
                                              const float* __restrict__ w, const float* __restrict__ b, int N) {
    constexpr int C = 32 * P;
    const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    Row<V, P> r, wr, br;
    r.load(inp + (size_t)row * C, lane);
    wr.load(w, lane);
    br.load(b, lane);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < P; e++) s += r.x[e];
    const float m = gpu::warp_sum(s) / C;
    float v = 0.0f;
#pragma unroll
    for (int e = 0; e < P; e++) v += (r.x[e] - m) * (r.x[e] - m);
    const float rs = rsqrtf(gpu::warp_sum(v) / C + 1e-5f);
#pragma unroll
    for (int e = 0; e < P; e++) r.x[e] = (r.x[e] - m) * rs * wr.x[e] + br.x[e];
    r.store(out + (size_t)row * C, lane);
    if (lane == 0) mean[row] = m, rstd[row] = rs;
}

// One warp per kRowsPerWarp rows: dinp (+=) per row, and the warp's dw/db sums over its rows in
// registers, then added over the block's warps in order into partial (gridDim.x, 2, C).
template <int V, int P>
__global__ void layernorm_backward_regs_kernel(float* __restrict__ dinp, float* __restrict__ partial,
                                               const float* __restrict__ dout, const float* __restrict__ inp,
                                               const float* __restrict__ w, const float* __restrict__ mean,
                                               const float* __restrict__ rstd, int N) {
    constexpr int C = 32 * P;
    __shared__ float sums[kWarps][C];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (blockIdx.x * kWarps + warp) * kRowsPerWarp;
    Row<V, P> wr, dw, db;
    wr.load(w, lane);
#pragma unroll
    for (int e = 0; e < P; e++) dw.x[e] = db.x[e] = 0.0f;
    for (int row = row0; row < min(N, row0 + kRowsPerWarp); row++) {
        Row<V, P> x, d;
        x.load(inp + (size_t)row * C, lane);
        d.load(dout + (size_t)row * C, lane);
        const float m = mean[row], rs = rstd[row];
        float sd = 0.0f, sdx = 0.0f;
#pragma unroll
        for (int e = 0; e < P; e++) {
            const float xhat = (x.x[e] - m) * rs, dxhat = d.x[e] * wr.x[e];
            sd += dxhat;
            sdx += dxhat * xhat;
            dw.x[e] += d.x[e] * xhat;
            db.x[e] += d.x[e];
            x.x[e] = xhat;
        }
        sd = gpu::warp_sum(sd) / C;
        sdx = gpu::warp_sum(sdx) / C;
#pragma unroll
        for (int e = 0; e < P; e++) d.x[e] = rs * (d.x[e] * wr.x[e] - sd - x.x[e] * sdx);
        d.store(dinp + (size_t)row * C, lane, true);
    }
    // one sum at a time through shared memory (both at once would pass 48 KiB at C = 1024)
    auto block_sum = [&](const Row<V, P>& r, int which) {
        r.store(sums[warp], lane);
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float t = 0.0f;
            for (int k = 0; k < kWarps; k++) t += sums[k][c];
            partial[((size_t)blockIdx.x * 2 + which) * C + c] = t;
        }
        __syncthreads();
    };
    block_sum(dw, 0);
    block_sum(db, 1);
}

// dw (C) += sum over blocks (in order) of partial[., 0, :]; db likewise
__global__ void sum_partials_kernel(float* __restrict__ dw, float* __restrict__ db, const float* __restrict__ partial,
                                    int nblocks, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float tw = 0.0f, tb = 0.0f;
    for (int k = 0; k < nblocks; k++) {
        tw += partial[((size_t)k * 2) * C + c];
        tb += partial[((size_t)k * 2 + 1) * C + c];
    }
    dw[c] += tw;
    db[c] += tb;
}

// Calls f(std::integral_constant<int, C / 32>()) for the channel counts of the register kernels.
template <class F>
void with_channels(int C, F f) {
    switch (C) {
        case 128:
            return f(std::integral_constant<int, 4>());
        case 256:
            return f(std::integral_constant<int, 8>());
        case 384:
            return f(std::integral_constant<int, 12>());
        case 512:
            return f(std::integral_constant<int, 16>());
        case 768:
            return f(std::integral_constant<int, 24>());
        case 1024:
            return f(std::integral_constant<int, 32>());
    }
    throw std::runtime_error(
        "--C must be one of 128, 256, 384, 512, 768, 1024 (versions 2 and 3 hold a row in "
        "registers), got " +
        std::to_string(C));
}

struct Bufs {
    lab::Buf<float> x, w, b, out, mean, rstd, dout, dinp, dw, db, partial;
    Bufs(int N, int C)
        : x(lab::randn((size_t)N * C, 1)),
          w(lab::randn(C, 2, 0.5f)),
          b(lab::randn(C, 3, 0.5f)),
          out((size_t)N * C),
          mean(N),
          rstd(N),
          dout(lab::randn((size_t)N * C, 4)),
          dinp((size_t)N * C),
          dw(C),
          db(C),
          partial((size_t)gpu::ceil_div(N, kWarps * kRowsPerWarp) * 2 * C) {}
};

// vec: 0 = the trainer's kernels, else the register kernels with V = vec
void forward(int vec, Bufs& q, int N, int C) {
    if (vec == 0)
        return gpu::layernorm_forward(q.out.p, q.mean.p, q.rstd.p, q.x.p, q.w.p, q.b.p, N, C);
    with_channels(C, [&](auto p) {
        constexpr int P = p.value;
        const unsigned grid = gpu::ceil_div(N, kWarps);
        if (vec == 1)
            layernorm_forward_regs_kernel<1, P>
                <<<grid, 32 * kWarps>>>(q.out.p, q.mean.p, q.rstd.p, q.x.p, q.w.p, q.b.p, N);
        else
            layernorm_forward_regs_kernel<4, P>
                <<<grid, 32 * kWarps>>>(q.out.p, q.mean.p, q.rstd.p, q.x.p, q.w.p, q.b.p, N);
    });
    cudaCheckLaunch();
}

void backward(int vec, Bufs& q, int N, int C) {
    if (vec == 0)
        return gpu::layernorm_backward(q.dinp.p, q.dw.p, q.db.p, nullptr, q.dout.p, q.x.p, q.w.p, q.mean.p, q.rstd.p, N,
                                       C);
    const int blocks = gpu::ceil_div(N, kWarps * kRowsPerWarp);
    with_channels(C, [&](auto p) {
        constexpr int P = p.value;
        if (vec == 1)
            layernorm_backward_regs_kernel<1, P>
                <<<blocks, 32 * kWarps>>>(q.dinp.p, q.partial.p, q.dout.p, q.x.p, q.w.p, q.mean.p, q.rstd.p, N);
        else
            layernorm_backward_regs_kernel<4, P>
                <<<blocks, 32 * kWarps>>>(q.dinp.p, q.partial.p, q.dout.p, q.x.p, q.w.p, q.mean.p, q.rstd.p, N);
    });
    cudaCheckLaunch();
    sum_partials_kernel<<<gpu::ceil_div(C, 256), 256>>>(q.dw.p, q.db.p, q.partial.p, blocks, C);
    cudaCheckLaunch();
}

bool check(const char* name, int vec, int N, int C) {
    Bufs q(N, C);
    auto x = q.x.host(), w = q.w.host(), b = q.b.host(), dout = q.dout.host();
    std::vector<float> out((size_t)N * C), mean(N), rstd(N), dinp((size_t)N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    cpu::layernorm_backward<float>(dinp.data(), dw.data(), db.data(), nullptr, dout.data(), x.data(), w.data(),
                                   mean.data(), rstd.data(), N, C);
    forward(vec, q, N, C);
    backward(vec, q, N, C);
    return lab::report(name,
                       {{"out", lab::rel_max_err(q.out.host(), out)},
                        {"dinp", lab::rel_max_err(q.dinp.host(), dinp)},
                        {"dw", lab::rel_max_err(q.dw.host(), dw)},
                        {"db", lab::rel_max_err(q.db.host(), db)}},
                       1e-4);
}

}  // namespace

int main(int argc, char** argv) {
    return lab::run(argc, argv, "layernorm", {{"N", 16384}, {"C", 768}}, [](const lab::Args& a) {
        const int N = a["N"], C = a["C"], reps = a["reps"];
        with_channels(C, [](auto) {});    // throws for a channel count without register kernels
        const int Ns = std::min(N, 300);  // the check's rows: several backward blocks, a partial last one
        std::vector<lab::Version> vs;
        const char* names[] = {"trainer", "regs", "regs-vec4"};
        const int vecs[] = {0, 1, 4};
        for (int i = 0; i < 3; i++) {
            const char* name = names[i];
            const int vec = vecs[i];
            vs.push_back({name, [=] { return check(name, vec, Ns, C); },
                          [=] {
                              Bufs q(N, C);
                              const double row = 4.0 * N * C;
                              lab::print_times(
                                  {{"forward", [&] { forward(vec, q, N, C); }, 2 * row + 8.0 * N, false},
                                   {"backward", [&] { backward(vec, q, N, C); }, 4 * row + 8.0 * N, false}},
                                  reps);
                          }});
        }
        return vs;
    });
}
