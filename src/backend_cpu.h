// The CPU backend: host memory and the reference ops of src/ops/, over float or
// double. The model orchestration (model.h) calls everything through this struct;
// cuda/backend_cuda.h provides the same members for the GPU.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "dist.h"
#include "params.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/crope.h"
#include "ops/encoder.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/rope.h"

template <class Real>
struct CpuBackend {
    using real = Real;
    using act = Real;  // activations in the parameters' type (model.h)
    static Real* alloc(size_t n) { return new Real[n](); }
    static Real* alloc_act(size_t n) { return alloc(n); }
    static void free(Real* p) { delete[] p; }
    static void zero(Real* p, size_t n) {  // both cores: the gradients are 29 MB at the paper's model
#pragma omp parallel for
        for (size_t i = 0; i < n; i += kZeroChunk) std::memset(p + i, 0, std::min(kZeroChunk, n - i) * sizeof(Real));
    }
    static constexpr size_t kZeroChunk = 1 << 16;
    static void copy_to_host(Real* dst, const Real* src, size_t n) { std::memcpy(dst, src, n * sizeof(Real)); }
    static void copy_from_host(Real* dst, const Real* src, size_t n) { std::memcpy(dst, src, n * sizeof(Real)); }
    static int* alloc_int(size_t n) { return new int[n](); }
    static void free_int(int* p) { delete[] p; }
    static void copy_ints_from_host(int* dst, const int* src, size_t n) { std::memcpy(dst, src, n * sizeof(int)); }
    static void synchronize() {}
    // The training step's host side (GPT::train_step), as on the CUDA backend, where the scalars
    // live in device memory and results come back through pinned memory by asynchronous copies:
    // here every op has finished when it returns, so these are plain memory and memcpy.
    static StepScalars* alloc_scalars() { return new StepScalars(); }
    static void free_scalars(StepScalars* s) { delete s; }
    static void copy_scalars_from_host(StepScalars* dst, const StepScalars& src) { *dst = src; }
    static void* alloc_pinned(size_t bytes) { return ::operator new(bytes); }
    static void free_pinned(void* p) { ::operator delete(p); }
    static void copy_to_host_async(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
    using Event = int;
    static Event event_create() { return 0; }
    static void event_record(Event) {}
    static void event_wait(Event) {}
    static void event_destroy(Event) {}
    static constexpr bool asynchronous = false;  // every op has finished when it returns
    static constexpr bool graphs = false;        // CUDA graphs: CudaBackend only
    using Graph = void*;
    static std::string device_name() { return "cpu"; }
    // Profiling mode (GPT::profile): every op has finished when it returns, so the host clock
    // times the phases; profile_read sums the time from each mark to the next into its phase.
    using Mark = std::pair<std::chrono::steady_clock::time_point, int>;
    static std::vector<Mark>& profile_marks() {
        static std::vector<Mark> marks;
        return marks;
    }
    static void profile_mark(int phase) { profile_marks().push_back({std::chrono::steady_clock::now(), phase}); }
    static std::vector<double> profile_read(int nphases) {
        std::vector<Mark>& m = profile_marks();
        std::vector<double> ms(nphases, 0.0);
        for (size_t i = 0; i + 1 < m.size(); i++)
            ms[m[i].second] += std::chrono::duration<double, std::milli>(m[i + 1].first - m[i].first).count();
        m.clear();
        return ms;
    }
    // data-parallel collectives over the ranks (src/dist.h: MPI on host memory)
    static constexpr auto allreduce_sum = dist::allreduce_sum<Real>;
    static constexpr auto reduce_scatter_sum = dist::reduce_scatter_sum<Real>;
    static constexpr auto allgather = dist::allgather<Real>;
    static constexpr bool async_allreduce = false;  // the same cores compute and communicate: no overlap

    // the ops (src/backend_ops.def): each the CPU twin of the same name in src/ops/
#define OP(R, name, params) static constexpr auto name = cpu::name<Real>;
#define OP_F32 OP
#define OP_PLAIN(R, name, params) static constexpr auto name = cpu::name;
#include "backend_ops.def"
#undef OP
#undef OP_F32
#undef OP_PLAIN
    static constexpr int classifier_chunk = kCpuClassifierChunk;  // rows (params.h): BLAS-sized, 103 MiB at V=50304
};
