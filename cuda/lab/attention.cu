// Kernel lab: causal attention, forward and backward, every version side by side.
//   1 cublas       the reference: cuBLAS GEMMs + softmax kernels, (B,H,T,T) probabilities (TF32)
//   2 flash        fused fp32 flash kernels, log-sum-exp saved (cuda/attention.cu)
//   3 cublas-bf16  version 1 with bf16 GEMM operands (--precision bf16)
//   4 flash-bf16   WMMA tensor-core flash kernels (head sizes 16, 32, 64; others run version 2)
// Each version is first checked against the CPU reference (src/ops/attention.h) on a small
// shape, then timed at the given shape: CUDA events, warm-up runs, median of --reps runs.
// TFLOP/s counts the causal half only: forward 2 GEMMs of B*H*T*T/2*D multiply-adds,
// backward 2.5 times that (FlashAttention's convention).
// Usage: attention [--B 16] [--T 1024] [--H 4] [--D 32] [--reps 20] [--version N]
// Under the CPU emulation of CUDA the checks run and the timings read "emulated: not timed".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_cuda.h"
#include "common.cuh"
#include "ops/attention.h"
#include "rng.h"

namespace {

struct Shape {
    int B, T, H, D;
    int C() const { return H * D; }
    size_t nqkv() const { return (size_t)B * T * 3 * C(); }
    size_t nout() const { return (size_t)B * T * C(); }
    size_t natt() const { return (size_t)B * H * T * T; }
};

// Device buffers of one run; att holds the probabilities (cublas) or the log-sum-exps (flash).
struct Buffers {
    float *qkv, *out, *att, *scratch, *dout, *dqkv;
    Buffers(const Shape& s, bool flash, const std::vector<float>& qkv_h, const std::vector<float>& dout_h) {
        size_t natt = flash ? (size_t)s.B * s.H * s.T : s.natt();
        qkv = CudaBackend::alloc(s.nqkv());
        out = CudaBackend::alloc(s.nout());
        att = CudaBackend::alloc(natt);
        scratch = flash ? nullptr : CudaBackend::alloc(natt);
        dout = CudaBackend::alloc(s.nout());
        dqkv = CudaBackend::alloc(s.nqkv());
        CudaBackend::copy_from_host(qkv, qkv_h.data(), qkv_h.size());
        CudaBackend::copy_from_host(dout, dout_h.data(), dout_h.size());
    }
    ~Buffers() {
        for (float* p : {qkv, out, att, scratch, dout, dqkv})
            if (p) CudaBackend::free(p);
    }
};

struct Version {
    const char* name;
    bool flash, bf16;
};
const Version kVersions[] = {{"cublas", false, false}, {"flash", true, false}, {"cublas-bf16", false, true},
                             {"flash-bf16", true, true}};

void forward(const Version& v, Buffers& b, const Shape& s) {
    if (v.flash) gpu::attention_forward_lse(b.out, b.att, b.qkv, s.B, s.T, s.C(), s.H);
    else gpu::attention_forward(b.out, b.att, b.qkv, s.B, s.T, s.C(), s.H);
}

void backward(const Version& v, Buffers& b, const Shape& s) {
    if (v.flash) gpu::attention_backward_lse(b.dqkv, b.dout, b.qkv, b.out, b.att, s.B, s.T, s.C(), s.H);
    else gpu::attention_backward(b.dqkv, b.scratch, b.dout, b.qkv, b.att, s.B, s.T, s.C(), s.H);
}

std::vector<float> randn(size_t n, uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = (float)r.normal();
    return v;
}

double rel_max_err(const std::vector<float>& got, const std::vector<float>& ref) {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = std::fabs((double)got[i] - ref[i]);
        if (std::isnan(d)) return INFINITY;
        diff = std::max(diff, d);
        scale = std::max(scale, std::fabs((double)ref[i]));
    }
    return diff / scale;
}

// Output and gradient of version v against the CPU reference; true if within tolerance.
bool check(const Version& v, const Shape& s) {
    auto qkv = randn(s.nqkv(), 1), dout = randn(s.nout(), 2);
    std::vector<float> out(s.nout()), att(s.natt()), scratch(s.natt()), dqkv(s.nqkv(), 0.0f);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C(), s.H);
    cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C(), s.H);
    Buffers b(s, v.flash, qkv, dout);
    forward(v, b, s);
    backward(v, b, s);
    std::vector<float> gout(s.nout()), gdqkv(s.nqkv());
    CudaBackend::copy_to_host(gout.data(), b.out, gout.size());
    CudaBackend::copy_to_host(gdqkv.data(), b.dqkv, gdqkv.size());
    double eo = rel_max_err(gout, out), eg = rel_max_err(gdqkv, dqkv), tol = v.bf16 ? 2e-2 : 1e-3;
    bool ok = eo <= tol && eg <= tol;
    std::printf("  check %-12s out err %.2e  dqkv err %.2e  (tol %.0e) %s\n", v.name, eo, eg, tol, ok ? "ok" : "FAIL");
    return ok;
}

// Median milliseconds of f over reps runs after warm-up runs.
double time_ms(const std::function<void()>& f, int reps) {
    for (int i = 0; i < 3; i++) f();
    cudaEvent_t a, z;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&z));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaEventRecord(a));
        f();
        cudaCheck(cudaEventRecord(z));
        cudaCheck(cudaEventSynchronize(z));
        cudaCheck(cudaEventElapsedTime(&ms[i], a, z));
    }
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(z));
    std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
    return ms[reps / 2];
}

int arg(int argc, char** argv, const char* name, int def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!std::strcmp(argv[i], name)) {
            char* end = nullptr;
            long x = std::strtol(argv[i + 1], &end, 10);
            if (*end || x < 1) throw std::runtime_error(std::string(name) + " needs a positive integer");
            return (int)x;
        }
    return def;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Shape s{arg(argc, argv, "--B", 16), arg(argc, argv, "--T", 1024), arg(argc, argv, "--H", 4),
                arg(argc, argv, "--D", 32)};
        const int reps = arg(argc, argv, "--reps", 20), only = arg(argc, argv, "--version", 0);
        if (!CudaBackend::available()) throw std::runtime_error("no CUDA device");
        const std::string dev = CudaBackend::device_name();
        const bool emulated = dev.rfind("CUDA emulation", 0) == 0;
        std::printf("attention lab | %s | B=%d T=%d H=%d D=%d\n", dev.c_str(), s.B, s.T, s.H, s.D);
        const Shape small{2, 67, 2, s.D};
        const double fwd_flop = 4.0 * s.B * s.H * (double)s.T * s.T / 2 * s.D;
        bool ok = true;
        for (int i = 0; i < 4; i++) {
            if (only && only != i + 1) continue;
            const Version& v = kVersions[i];
            gpu::set_precision_bf16(v.bf16);
            std::printf("version %d: %s\n", i + 1, v.name);
            ok = check(v, small) && ok;
            if (emulated) {
                std::printf("  time  emulated: not timed\n");
                continue;
            }
            Buffers b(s, v.flash, randn(s.nqkv(), 3), randn(s.nout(), 4));
            double f = time_ms([&] { forward(v, b, s); }, reps);
            double g = time_ms([&] { backward(v, b, s); }, reps);
            std::printf("  time  forward %8.3f ms %7.1f TFLOP/s | backward %8.3f ms %7.1f TFLOP/s\n", f,
                        fwd_flop / f * 1e-9, g, 2.5 * fwd_flop / g * 1e-9);
        }
        gpu::set_precision_bf16(false);
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
