// The CUDA backend: device memory and the GPU ops of cuda/*.cu. Same members as CpuBackend
// (src/backend_cpu.h), so GPT<CudaBackend<Act>> (src/model.h) runs on the GPU unchanged; fp32
// activations (Act = float) or bf16 ones (bf16_t, --precision bf16). This header is plain C++
// (no CUDA types): host code compiled by g++ includes it; the definitions live in the .cu files
// (nvcc). Every op is listed once, in src/backend_ops.def: namespace gpu below declares it from
// there, its .cu file defines it by the same name, and CudaBackend<Act> names it from there too.
//
// All pointers passed to the ops are device pointers. Every op queues its kernels and cuBLAS
// calls on the backend's one compute stream, gpu::main_stream(), and does not synchronise,
// except sum_squares, which returns a host double. Backward ops accumulate (+=) into every
// gradient output, as the CPU twins do.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "device.h"
#include "pos.h"
#include "step.h"

// CUDA's own declarations of the handles, so host code compiled by g++ needs no CUDA header.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

// A bfloat16 as host code sees it: the upper 16 bits of a float. The kernels read the same
// bytes as CUDA's __nv_bfloat16 (common.cuh); host code needs no CUDA header.
struct bf16_t {
    uint16_t bits;
};
inline float bf16_to_float(bf16_t h) {
    uint32_t u = (uint32_t)h.bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

namespace gpu {

// The backend's compute stream (created on first use; blocking, so work left on the legacy
// default stream stays ordered before it).
cudaStream_t main_stream();

// ---- the ops: src/backend_ops.def's list (same names and arguments as namespace cpu in src/ops/),
// declared here. The kernels compute in fp32 whatever Act is (bf16 is read into float, and every
// sum, statistic and accumulator is fp32); only stores round to Act.
#define OP(R, name, params) template <class Act> R name params;
#define OP_F32(R, name, params) R name params;
#define OP_PLAIN OP_F32
#include "backend_ops.def"
#undef OP
#undef OP_F32
#undef OP_PLAIN
// In the .cu file that defines it: the launcher `name` for both activation types.
#define GPU_INSTANTIATE(name)                   \
    template decltype(name<float>) name<float>; \
    template decltype(name<bf16_t>) name<bf16_t>;

// ---- what the CUDA backend alone has
// The loss kernel's launcher (classifier_head's second launch): losses (N) = -log
// softmax(logits)[target]; with dscale != 0, logits (N, ld) <- (softmax - onehot) * dscale. Rows
// of ld >= V columns (the padded vocabulary): columns [V, ld) are left out of the softmax and get
// dlogits 0. Vector loads (16 bytes) when ld allows and logits is aligned. Losses, the max and the
// sum are fp32 whatever Act is; dlogits overwrite the logits in Act.
template <class Act>
void classifier_loss(Act* logits, float* losses, const int* targets, int N, int V, int ld, float dscale);
// Why classifier_fused cannot run at width C (empty: it can): C not one its kernels take, or
// fp32 activations with TF32 off.
std::string classifier_fused_unsupported(int C, bool bf16);
// adamw_update that also writes p_act, p rounded to bf16 in the same pass: the GEMMs' copy of
// the weights with bf16 activations.
void adamw_update_bf16(float* p, const float* g, float* m, float* v, bf16_t* p_act, size_t n, const StepScalars* s,
                       double beta1, double beta2, float eps, float wd);
// dst = src rounded to nearest even bf16 (the weights' compute copy after they are set).
void to_bf16(bf16_t* dst, const float* src, size_t n);
// Whether the flash kernels take head size D; the check throws, listing the sizes they take
// (the launchers call it, and the trainer before it starts).
bool flash_supports_head_size(int D);
void check_flash_head_size(int D);

// CUDA graphs of the training step (graph.cu): capture records what `work` queues on `stream`
// (global mode: a call that would synchronise fails the capture, which is then ended and the
// error thrown) and instantiates it; graph_launch replays it. While a graph exists, the grow-only
// scratch buffers keep the buffers they outgrow (the graph may read them) until the last graph
// is freed. *nodes (if given): the graph's node count (kernels, GEMM kernels, memsets, copies).
cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& work, size_t* nodes = nullptr);
void graph_launch(cudaGraphExec_t graph, cudaStream_t stream);
void graph_free(cudaGraphExec_t graph);

// TF32 tensor cores for the fp32 GEMMs (matmul and attention) and the fp32 flash attention
// kernels (the trainer's --tf32). On by default (speed); tests comparing against the CPU turn it
// off. bf16 products are bf16 whatever this says.
void set_tf32(bool on);
bool tf32_enabled();

}  // namespace gpu

// The CUDA backend's memory, streams, graphs and device: everything but the ops, the same for
// both activation types (CudaBackend<Act> below adds the ops).
struct CudaDevice {
    using real = float;
    static float* alloc(size_t n);        // zero-filled, like CpuBackend
    static bf16_t* alloc_bf16(size_t n);  // zero-filled (precision.cu)
    // buffers of float or bf16_t (E; memory.cu instantiates both)
    template <class E>
    static void free(E* p);
    template <class E>
    static void zero(E* p, size_t n);
    template <class E>
    static void copy_to_host(E* dst, const E* src, size_t n);  // synchronous
    template <class E>
    static void copy_from_host(E* dst, const E* src, size_t n);         // synchronous
    static void copy_to_host(float* dst, const bf16_t* src, size_t n);  // widens (precision.cu)
    static int* alloc_int(size_t n);
    static void free_int(int* p);
    static void copy_ints_from_host(int* dst, const int* src, size_t n);
    static void synchronize();
    static constexpr bool asynchronous = true;  // ops return before their work is done
    // The training step without waiting (GPT::train_step): its scalars (src/step.h) in device
    // memory, uploaded through pinned staging buffers like the token ids; results copied back into
    // pinned host memory (alloc_pinned) with copy_to_host_async, an event marking when they are there.
    static StepScalars* alloc_scalars();
    static void free_scalars(StepScalars* s);
    static void copy_scalars_from_host(StepScalars* dst, const StepScalars& src);  // does not wait
    static void* alloc_pinned(size_t bytes);
    static void free_pinned(void* p);
    static void copy_to_host_async(void* dst, const void* src, size_t bytes);
    using Event = cudaEvent_t;
    static Event event_create();
    static void event_record(Event e);  // on the compute stream, after the work queued so far
    static void event_wait(Event e);
    static void event_destroy(Event e);
    // The step as one CUDA graph (gpu::capture_begin ...) on the compute stream.
    static constexpr bool graphs = true;
    using Graph = cudaGraphExec_t;
    static Graph capture(const std::function<void()>& work, size_t* nodes) {
        return gpu::capture(gpu::main_stream(), work, nodes);
    }
    static void graph_launch(Graph g) { gpu::graph_launch(g, gpu::main_stream()); }
    static void graph_free(Graph g) { gpu::graph_free(g); }
    using DeviceCheck = ::DeviceCheck;  // src/device.h
    static DeviceCheck check_device(int local_rank = 0);
    static std::string device_name();
    static size_t peak_memory();         // bytes, all allocations of this backend (incl. kernel scratch)
    static size_t device_used_memory();  // bytes in use on the device as the driver sees it (all processes)
    // Profiling mode (GPT::profile, cuda/profile.cu): a CUDA event per mark on the stream;
    // profile_read waits for the last one and sums the time from each mark to the next into
    // its phase.
    static void profile_mark(int phase);
    static std::vector<double> profile_read(int nphases);
    // data-parallel collectives over the ranks on device memory (cuda/nccl.cu: NCCL, as
    // src/dist.h's host collectives: in place, a block per rank)
    static void allreduce_sum(float* x, size_t n);
    static void reduce_scatter_sum(float* x, size_t block);
    static void allgather(float* x, size_t block);
    // Overlap with the backward pass: sums the parts on a communication stream once the work
    // queued so far on the compute stream is done; allreduce_wait() waits for every part.
    static constexpr bool async_allreduce = true;
    static void allreduce_sum_async(const std::vector<std::pair<float*, size_t>>& parts);
    static void allreduce_wait();
    static void use_device(int local_rank);  // one GPU per process: local_rank modulo the GPUs
};

// The backend GPT<CudaBackend<Act>> runs (src/model.h): Act = float, or bf16_t (--precision bf16:
// activations and their gradients in bf16, half the memory and traffic of fp32, GEMMs on bf16
// tensor cores; fp32 master weights, gradients and AdamW moments; the model keeps a bf16 copy of
// the weights for the GEMMs, model.h's GPT::wc, which AdamW writes). Each op is its launcher in
// namespace gpu (above; defined in cuda/*.cu by the same name), which queues on main_stream().
template <class Act>
struct CudaBackend : CudaDevice {
    using act = Act;  // the activations' element type (model.h)
    static Act* alloc_act(size_t n) {
        if constexpr (std::is_same<Act, float>::value)
            return alloc(n);
        else
            return alloc_bf16(n);
    }

#define OP(R, name, params) static constexpr auto name = gpu::name<Act>;
#define OP_F32(R, name, params) static constexpr auto name = gpu::name;
#define OP_PLAIN OP_F32
#include "backend_ops.def"
#undef OP
#undef OP_F32
#undef OP_PLAIN
    static constexpr auto adamw_update_bf16 = gpu::adamw_update_bf16;
    static constexpr auto to_bf16 = gpu::to_bf16;
    // rows per classifier chunk: 4096 x 50304 fp32 logits (786 MiB, a quarter of the paper batch's);
    // until scripts/gpu_check.sh's LM head sweep measures the others (its head.md names the fastest)
    static constexpr int classifier_chunk = 4096;
};
