// The kernel lab's shared code (test/lab/*.cu, after llm.c's dev/cuda): argument parsing,
// device buffers, random inputs, the check against a CPU reference, CUDA-event timing and
// the loop over numbered versions. A lab program lists its versions (version 1 = the kernel
// the trainer uses today) and lab::run checks each one on a small shape, then times it at
// the given shape; under the CPU emulation of CUDA (test/cuda_emu) the timings read
// "emulated: not timed". Output (test/test_lab.sh reads it), each check through the tests' protocol:
//   version N: NAME
//     check NAME  <what> err E ... (tol T)
//   PASS TITLE_NAME                          or   FAIL TITLE_NAME: why
//     time  <stage> X ms Y GB/s | ...      or   time  emulated: not timed
#pragma once
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../bf16_host.h"
#include "../testlib.h"
#include "backend_cuda.h"
#include "common.cuh"
#include "rng.h"

namespace lab {

// Command line: --NAME VALUE pairs, every NAME one of the defaults given, every VALUE a
// positive integer; --reps (timed runs, default 20) and --version (0 = all) always exist.
struct Args {
    std::map<std::string, int> v;
    std::vector<std::string> order;  // the shape's names, as given
    Args(int argc, char** argv, std::vector<std::pair<std::string, int>> defaults) {
        defaults.push_back({"reps", 20});
        defaults.push_back({"version", 0});
        for (auto& d : defaults) {
            v[d.first] = d.second;
            order.push_back(d.first);
        }
        for (int i = 1; i < argc; i += 2) {
            std::string a = argv[i];
            if (a.rfind("--", 0) != 0 || !v.count(a.substr(2))) {
                std::string known;
                for (auto& d : defaults) known += " --" + d.first;
                throw std::runtime_error("unknown argument '" + a + "' (options:" + known + ")");
            }
            if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
            char* end = nullptr;
            errno = 0;
            long x = std::strtol(argv[i + 1], &end, 10);
            if (end == argv[i + 1] || *end || errno || x < 1 || x > (1L << 30))
                throw std::runtime_error(a + " needs a positive integer, got '" + argv[i + 1] + "'");
            v[a.substr(2)] = (int)x;
        }
    }
    int operator[](const std::string& name) const { return v.at(name); }
};

// A device array of n T's (cudaMalloc, freed on destruction).
template <class T>
struct Buf {
    T* p = nullptr;
    size_t n = 0;
    explicit Buf(size_t n_) : n(n_) {
        cudaCheck(cudaMalloc((void**)&p, std::max<size_t>(n, 1) * sizeof(T)));
        cudaCheck(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(T)));
    }
    explicit Buf(const std::vector<T>& h) : Buf(h.size()) { upload(h); }
    ~Buf() { cudaFree(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    void upload(const std::vector<T>& h) { cudaCheck(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
    std::vector<T> host() const {
        std::vector<T> h(n);
        cudaCheck(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
    operator T*() const { return p; }
};

// n normal samples times scale (seeded: every version sees the same inputs). Past 4M values
// the samples repeat: only the timings use such sizes, and drawing 124M normals per buffer
// would take seconds of the GPU check's budget.
inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
    Rng r(seed);
    std::vector<float> v(n);
    const size_t fresh = std::min(n, (size_t)1 << 22);
    for (size_t i = 0; i < fresh; i++) v[i] = scale * (float)r.normal();
    for (size_t i = fresh; i < n; i++) v[i] = v[i - fresh];
    return v;
}

// x in the activations' element type A (float, or bf16_t rounded to nearest even), and back
// to float: the trainer's bf16 versions take bf16 buffers.
template <class Act>
std::vector<Act> to_act(const std::vector<float>& x) {
    if constexpr (std::is_same<Act, float>::value) {
        return x;
    } else {
        std::vector<Act> y(x.size());
        for (size_t i = 0; i < x.size(); i++) y[i] = float_to_bf16(x[i]);
        return y;
    }
}
inline std::vector<float> to_float(const std::vector<float>& x) {
    return x;
}
inline std::vector<float> to_float(const std::vector<bf16_t>& x) {
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = bf16_to_float(x[i]);
    return y;
}

// max |got - ref| / max |ref|; infinite on NaN or a size mismatch
inline double rel_max_err(const std::vector<float>& got, const std::vector<float>& ref) {
    if (got.size() != ref.size()) return INFINITY;
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = std::fabs((double)got[i] - ref[i]);
        if (std::isnan(d)) return INFINITY;
        diff = std::max(diff, d);
        scale = std::max(scale, std::fabs((double)ref[i]));
    }
    return diff / scale;
}

// A version's check, through the tests' protocol (testlib.h): its errors on one line, then
// "PASS TITLE_NAME" or "FAIL TITLE_NAME: why" when one is past tol. Returns whether all are within.
inline std::string& title() {  // the program's (run sets it)
    static std::string t;
    return t;
}
inline bool report(const std::string& name, const std::vector<std::pair<const char*, double>>& errs, double tol) {
    bool ok = true;
    std::string line;
    char buf[96];
    for (auto& [what, e] : errs) {
        std::snprintf(buf, sizeof buf, "  %s err %.2e", what, e);
        line += buf;
        ok = ok && e <= tol;  // NaN fails
    }
    std::snprintf(buf, sizeof buf, "  (tol %.0e)", tol);
    line += buf;
    std::printf("  check %-16s%s\n", name.c_str(), line.c_str());
    ::report(title() + "_" + name, ok ? "" : "an error past the tolerance:" + line);
    return ok;
}

// Median milliseconds of f over reps runs after 3 warm-up runs (CUDA events on the default stream).
inline double time_ms(const std::function<void()>& f, int reps) {
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

// A timed stage of a version: `work` per run in bytes moved (GB/s) or FLOPs (TFLOP/s).
struct Stage {
    const char* what;
    std::function<void()> run;
    double work;
    bool flops;
};

// Times each stage and prints them on one line.
inline void print_times(const std::vector<Stage>& stages, int reps) {
    std::string line = "  time ";
    char buf[128];
    for (size_t i = 0; i < stages.size(); i++) {
        const Stage& s = stages[i];
        double ms = time_ms(s.run, reps);
        if (s.flops)
            std::snprintf(buf, sizeof buf, " %s %8.3f ms %7.1f TFLOP/s", s.what, ms, s.work / ms * 1e-9);
        else
            std::snprintf(buf, sizeof buf, " %s %8.3f ms %7.1f GB/s", s.what, ms, s.work / ms * 1e-6);
        line += (i ? " |" : "") + std::string(buf);
    }
    std::printf("%s\n", line.c_str());
}

// A numbered version: check() prints its check line and returns whether it matched the CPU
// reference; time() builds its buffers at the full shape and calls print_times.
struct Version {
    std::string name;
    std::function<bool()> check;
    std::function<void()> time;
};

inline bool emulated() {
    return CudaDevice::device_name().rfind("CUDA emulation", 0) == 0;
}

// The program's main: header line, then every version (or only --version N). Exit status 0
// when every version checked matched its reference; errors print "error: ..." and exit 1.
inline int run(int argc, char** argv, const char* title, std::vector<std::pair<std::string, int>> defaults,
               const std::function<std::vector<Version>(const Args&)>& versions) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as it comes (gpu_check.sh keeps them)
    try {
        Args args(argc, argv, std::move(defaults));
        const CudaDevice::DeviceCheck device = CudaDevice::check_device();
        if (device.state != CudaDevice::DeviceCheck::Usable) throw std::runtime_error(device.why);
        std::vector<Version> vs = versions(args);
        const int only = args["version"];
        if (only > (int)vs.size())
            throw std::runtime_error("--version " + std::to_string(only) + ": this lab has versions 1 to " +
                                     std::to_string(vs.size()));
        std::string shape;
        for (auto& k : args.order)
            if (k != "reps" && k != "version") shape += " " + k + "=" + std::to_string(args[k]);
        std::printf("%s lab | %s |%s\n", title, CudaDevice::device_name().c_str(), shape.c_str());
        lab::title() = title;
        bool ok = true;
        for (size_t i = 0; i < vs.size(); i++) {
            if (only && only != (int)i + 1) continue;
            std::printf("version %zu: %s\n", i + 1, vs[i].name.c_str());
            ok = vs[i].check() && ok;
            if (emulated())
                std::printf("  time  emulated: not timed\n");
            else
                vs[i].time();
        }
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

}  // namespace lab
