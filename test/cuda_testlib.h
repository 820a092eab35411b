// What the CUDA test programs (test_cuda, test_cuda_flash, test_cuda_step, ...) add to the one
// harness (testlib.h): device buffers, the device memory and graphs in use, TF32 for a scope, and
// run_tests, which SKIPs every GPU test without CUDA (build or device). Functions are inline so a
// program that uses only some of them builds without warnings (test_cuda without CUDA uses none).
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend_cpu.h"
#include "pos.h"
#include "testlib.h"
#ifdef HAVE_CUDA
#include "backend_cuda.h"
#include "bf16_host.h"
#endif

using K = CpuBackend<float>;  // the CPU reference, in float
#ifdef HAVE_CUDA
using CB = CudaBackend<float>;
#endif

// One list of names for both builds: without CUDA a GPU test is listed (and reported SKIPPED)
// with no function, so the skip list is visible and complete.
#ifdef HAVE_CUDA
#define CUDA_FN(...) std::function<std::string()>(__VA_ARGS__)
#else
#define CUDA_FN(...) nullptr
#endif

#ifdef HAVE_CUDA
// A device copy of a host vector in element type E, freed on scope exit: float (DBuf) or
// bf16_t (DBf16: the values rounded to nearest even); get() reads it back as float.
template <class E>
struct DevBuf {
    E* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) {
        p = CudaBackend<E>::alloc_act(n);
    }
    explicit DevBuf(const Vec& h) : DevBuf(h.size()) {
        if constexpr (std::is_same<E, float>::value) {
            CB::copy_from_host(p, h.data(), n);
        } else {
            std::vector<E> b(n);
            for (size_t i = 0; i < n; i++) b[i] = float_to_bf16(h[i]);
            CB::copy_from_host(p, b.data(), n);
        }
    }
    ~DevBuf() { CB::free(p); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    Vec get() const {
        Vec h(n);
        CB::copy_to_host(h.data(), p, n);
        return h;
    }
};
using DBuf = DevBuf<float>;
using DBf16 = DevBuf<bf16_t>;

struct DInts {
    int* p = nullptr;
    explicit DInts(const std::vector<int>& h) {
        p = CB::alloc_int(h.size());
        CB::copy_ints_from_host(p, h.data(), h.size());
    }
    ~DInts() { CB::free_int(p); }
    DInts(const DInts&) = delete;
    DInts& operator=(const DInts&) = delete;
};

// x rounded to bf16 (nearest even) and back: the values a bf16 buffer of x holds.
inline Vec bf16_round(Vec x) {
    for (auto& v : x) v = bf16_to_float(float_to_bf16(v));
    return x;
}

// What the backend holds, counted at the CUDA runtime's calls (cuda_testlib.cu): bytes
// cudaMalloc'd and not freed (parameters, activations, every kernel's scratch), and CUDA graphs
// instantiated and not destroyed.
size_t device_bytes();
size_t graphs_alive();

// gpu::set_tf32(true) for a scope; back to plain fp32 even if the test throws, or every later
// test would run on TF32.
struct Tf32On {
    Tf32On() { gpu::set_tf32(true); }
    ~Tf32On() { gpu::set_tf32(false); }
    Tf32On(const Tf32On&) = delete;
    Tf32On& operator=(const Tf32On&) = delete;
};
#endif

// A scheme's position data (pos_buffer, src/pos.h) as the rope and attention ops take it: for the
// CPU twins and, copied on first use, for the GPU's. (H, alibi): ALiBi's slopes, or no data at all.
struct TestPos {
    PosBuffer buf;
    Vec host;
    TestPos(Pos p, int n, int C, int H)
        : buf(pos_buffer(pos_traits(p), n, C, H, 10000.0, kSinScale)), host(buf.data.begin(), buf.data.end()) {}
    TestPos(int H, bool alibi) : TestPos(alibi ? Pos::alibi : Pos::nope, 0, H, H) {}
    PosData<float> cpu() const { return buf.view<float>(host.data()); }
#ifdef HAVE_CUDA
    PosData<float> gpu() const {
        if (host.empty()) return {};
        if (!dev) dev = std::make_unique<DBuf>(host);
        return buf.view<float>(dev->p);
    }
    mutable std::unique_ptr<DBuf> dev;
#endif
};

// run_test_list (testlib.h) with the GPU tests SKIPPED without a usable device, and run with plain
// fp32 GEMMs (TF32 off) so they compare with the CPU at tight tolerances; each GPU test waits for
// its kernels, so an asynchronous error fails that test.
inline int run_tests(std::vector<TestCase> all, int argc, char** argv) {
#ifdef HAVE_CUDA
    // no GPU, or one that cannot run this build: every GPU test says why
    const CudaDevice::DeviceCheck device = CudaDevice::check_device();
    const bool have_device = device.state == CudaDevice::DeviceCheck::Usable;
    if (have_device && !(argc == 2 && std::string(argv[1]) == "--list")) {
        std::printf("# device: %s\n", CudaDevice::device_name().c_str());
        gpu::set_tf32(false);
    }
    for (TestCase& t : all)
        if (t.gpu && t.run)
            t.run = [run = t.run] {
                std::string why = run();
                CudaDevice::synchronize();
                return why;
            };
    return run_test_list(all, argc, argv, have_device ? "" : device.why);
#else
    return run_test_list(all, argc, argv, "no CUDA device (built without CUDA)");
#endif
}
