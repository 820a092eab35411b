// What the CUDA test programs (test_cuda, test_cuda_flash, test_cuda_step) share: random
// inputs, device buffers, tolerance checks that append a reason to a failure text, and the
// runner: a name filter from the command line, and every GPU test SKIPPED without CUDA (build
// or device). Functions are inline so a program that uses only some of them builds without
// warnings (test_cuda without CUDA uses none).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "backend_cpu.h"
#include "rng.h"
#ifdef HAVE_CUDA
#include "backend_cuda.h"
#endif

using Vec = std::vector<float>;
using K = CpuBackend<float>;  // the CPU reference, in float
#ifdef HAVE_CUDA
using CB = CudaBackend;
#endif

struct TestCase {
    std::string name;
    std::function<std::string()> run;  // "" = pass, else the reason it failed
    bool gpu = true;                   // needs a CUDA device
};

// One list of names for both builds: without CUDA a GPU test is listed (and reported SKIPPED)
// with no function, so the skip list is visible and complete.
#ifdef HAVE_CUDA
#define CUDA_FN(...) std::function<std::string()>(__VA_ARGS__)
#else
#define CUDA_FN(...) nullptr
#endif

inline Vec randn(size_t n, Rng& r, double s = 1.0) {
    Vec v(n);
    for (auto& x : v) x = (float)(s * r.normal());
    return v;
}

inline std::vector<int> randint(size_t n, int hi, Rng& r) {
    std::vector<int> v(n);
    for (auto& x : v) x = (int)r.below((uint64_t)hi);
    return v;
}

inline std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", x);
    return b;
}

// Appends one sub-case's failure text (may be empty) to why, "; "-separated.
inline void append(std::string& why, const std::string& more) {
    if (!more.empty()) why += (why.empty() ? "" : "; ") + more;
}

// max |got - ref| / max |ref| (so a tolerance is relative to the tensor's scale); NaN or a
// size mismatch fails.
inline double rel_max_err(const Vec& got, const Vec& ref) {
    if (got.size() != ref.size()) return INFINITY;
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = std::fabs((double)got[i] - (double)ref[i]);
        if (std::isnan(d)) return INFINITY;
        diff = std::max(diff, d);
        scale = std::max(scale, std::fabs((double)ref[i]));
    }
    return diff / scale;
}

// Appends "what: rel err X > tol" to why if the tensors differ by more than tol. min_err > 0:
// also fails if they agree better than that (a bf16 result must not be plain fp32).
inline void expect_close(std::string& why, const std::string& what, const Vec& got, const Vec& ref, double tol,
                         double min_err = 0.0) {
    if (got.size() != ref.size()) return append(why, what + ": size mismatch");
    double e = rel_max_err(got, ref);
    if (!(e <= tol))
        append(why, what + ": rel err " + fmt(e) + " > " + fmt(tol));
    else if (e < min_err)
        append(why, what + ": rel err " + fmt(e) + " < " + fmt(min_err) + " (the reduced-precision path not taken?)");
}

// A scalar within tol relative to ref.
inline void expect_near(std::string& why, const std::string& what, double got, double ref, double tol) {
    if (!(std::fabs(got - ref) <= tol * std::fabs(ref))) append(why, what + " " + fmt(got) + " vs " + fmt(ref));
}

#ifdef HAVE_CUDA
// A device copy of a host vector in element type E, freed on scope exit: float (DBuf) or
// bf16_t (DBf16: the values rounded to nearest even); get() reads it back as float.
template <class E>
struct DevBuf {
    E* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) {
        p = std::conditional_t<std::is_same<E, float>::value, CudaBackend, CudaBackendBf16>::alloc_act(n);
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

// gpu::set_tf32(true) for a scope; back to plain fp32 even if the test throws, or every later
// test would run on TF32.
struct Tf32On {
    Tf32On() { gpu::set_tf32(true); }
    ~Tf32On() { gpu::set_tf32(false); }
    Tf32On(const Tf32On&) = delete;
    Tf32On& operator=(const Tf32On&) = delete;
};
#endif

// PROGRAM [NAME...]: with arguments, only the tests whose name contains one of them (for a
// quick subset, e.g. under compute-sanitizer; an argument that matches no test is an error).
// PROGRAM --list: the tests' names, one a line, running nothing (test_pos_coverage reads them).
// GPU tests are SKIPPED without a device, and run with plain fp32 GEMMs (TF32 off) so they
// compare with the CPU at tight tolerances. Returns the exit status.
inline int run_tests(const std::vector<TestCase>& all, int argc, char** argv) {
    if (argc == 2 && std::string(argv[1]) == "--list") {
        for (const auto& t : all) std::printf("%s\n", t.name.c_str());
        return 0;
    }
    std::vector<TestCase> tests;
    for (const auto& t : all) {
        bool keep = argc < 2;
        for (int i = 1; i < argc && !keep; i++) keep = t.name.find(argv[i]) != std::string::npos;
        if (keep) tests.push_back(t);
    }
    for (int i = 1; i < argc; i++) {
        bool used = false;
        for (const auto& t : tests) used = used || t.name.find(argv[i]) != std::string::npos;
        if (!used) {
            std::fprintf(stderr, "error: no test name contains '%s'\n", argv[i]);
            return 2;
        }
    }
#ifdef HAVE_CUDA
    // no GPU, or one that cannot run this build: every GPU test says why
    const CudaBackend::DeviceCheck device = CudaBackend::check_device();
    const bool have_device = device.state == CudaBackend::DeviceCheck::Usable;
    const std::string skip_why = device.why;
    if (have_device) {
        std::printf("# device: %s\n", CudaBackend::device_name().c_str());
        gpu::set_tf32(false);
    }
#else
    const bool have_device = false;
    const char* skip_why = "no CUDA device (built without CUDA)";
#endif
    int failures = 0;
    for (const auto& t : tests) {
        if (t.gpu && !have_device) {
            std::printf("SKIPPED %s: %s\n", t.name.c_str(), std::string(skip_why).c_str());
            continue;
        }
        std::string why;
        try {
            why = t.run();
#ifdef HAVE_CUDA
            if (t.gpu) CudaBackend::synchronize();  // surface asynchronous kernel errors in this test
#endif
        } catch (const std::exception& e) {
            why = std::string("exception: ") + e.what();
        }
        if (why.empty())
            std::printf("PASS %s\n", t.name.c_str());
        else {
            std::printf("FAIL %s: %s\n", t.name.c_str(), why.c_str());
            failures++;
        }
        std::fflush(stdout);
    }
    return failures ? 1 : 0;
}
