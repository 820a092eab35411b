// The CUDA backend: device memory and the GPU ops of cuda/*.cu, float only.
// Same members as CpuBackend (src/backend_cpu.h), so GPT<CudaBackend> (src/model.h) runs on
// the GPU unchanged. This header is plain C++ (no CUDA types): host code compiled by g++
// includes it; the definitions live in the .cu files (nvcc).
//
// All pointers passed to the ops are device pointers. Every op takes the stream it launches
// on (its kernels and its cuBLAS calls) as its last argument and does not synchronise, except
// sum_squares, which returns a host double. CudaBackend runs them all on one compute stream,
// gpu::main_stream(). Backward ops accumulate (+=) into every gradient output, as the CPU
// twins do.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "step.h"

// CUDA's own declarations of the handles, so host code compiled by g++ needs no CUDA header.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

namespace gpu {

// The backend's compute stream (created on first use; blocking, so work left on the legacy
// default stream stays ordered before it).
cudaStream_t main_stream();

// ---- ops (same names and argument order as namespace cpu in src/ops/) ----
void encoder_forward(float* out, const int* tok, const float* wte, const float* wpe, int B, int T, int C,
                     cudaStream_t stream);
// Deterministic: every (token, channel) sums its positions in increasing position order.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tok, int B, int T, int C,
                      cudaStream_t stream);

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                       int C, cudaStream_t stream);
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t stream);

void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int IC, int OC,
                    cudaStream_t stream);
void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w, int N,
                     int IC, int OC, cudaStream_t stream);

void rope_forward(float* out, const float* inp, const float* cos_t, const float* sin_t, int B, int T, int C, int H,
                  cudaStream_t stream);
void rope_backward(float* dinp, const float* dout, const float* cos_t, const float* sin_t, int B, int T, int C, int H,
                   cudaStream_t stream);

void crope_expand(float* w, const float* A, const float* Bm, int C, cudaStream_t stream);
void crope_fold(float* dA, float* dB, const float* dw, int C, cudaStream_t stream);

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H, cudaStream_t stream);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int H, cudaStream_t stream);

// Flash attention (FlashAttention-2 style, attention.cu): out (B,T,C) and lse (B,H,T), the
// log-sum-exp of each query row's scaled scores; nothing of size T x T is stored. Backward
// recomputes the scores from qkv and lse and reads the forward's out; deterministic (no
// atomics). Head sizes D = C/H of 8, 16, 32, 64 or 128; others throw.
void attention_forward_lse(float* out, float* lse, const float* qkv, int B, int T, int C, int H, cudaStream_t stream);
void attention_backward_lse(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                            int T, int C, int H, cudaStream_t stream);
// Whether the flash kernels take head size D; the check throws, listing the sizes they take
// (the launchers call it, and the trainer before it starts).
bool flash_supports_head_size(int D);
void check_flash_head_size(int D);

void gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, cudaStream_t stream);

void residual_forward(float* out, const float* a, const float* b, size_t n, cudaStream_t stream);

void softmax_crossentropy(float* logits, float* losses, const int* targets, int N, int V, float dscale,
                          cudaStream_t stream);
// The same over rows of ld >= V columns (the padded vocabulary): columns [V, ld) are left out of
// the softmax and get dlogits 0. float4 loads when ld % 4 == 0 and logits is 16-byte aligned.
void classifier_loss(float* logits, float* losses, const int* targets, int N, int V, int ld, float dscale,
                     cudaStream_t stream);

// lr, bias corrections and clip scale from s (device memory), read when the kernel runs
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const StepScalars* s, double beta1,
                  double beta2, float eps, float wd, cudaStream_t stream);
// Sum of x[i]^2 in double, deterministic (fixed grid and reduction order), into *out (device).
void sum_squares_to(double* out, const float* x, size_t n, cudaStream_t stream);
// The same returned to the host. Synchronises.
double sum_squares(const float* x, size_t n, cudaStream_t stream);
// s->gscale = clip_scale(grad_clip, sqrt(s->sumsq)) (src/step.h), on the device.
void clip_grad(StepScalars* s, double grad_clip, cudaStream_t stream);

// CUDA graphs of the training step (graph.cu): capture records what `work` queues on `stream`
// (global mode: a call that would synchronise fails the capture, which is then ended and the
// error thrown) and instantiates it; graph_launch replays it. While a graph exists, the grow-only
// scratch buffers keep the buffers they outgrow (the graph may read them) until the last graph
// is freed.
cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& work);
void graph_launch(cudaGraphExec_t graph, cudaStream_t stream);
void graph_free(cudaGraphExec_t graph);
size_t graph_count();  // graphs instantiated and not freed

// TF32 tensor cores for the GEMMs (matmul and attention). On by default (speed);
// tests comparing against the CPU turn it off.
void set_tf32(bool on);
bool tf32_enabled();

// bf16 mixed precision, off by default (plain fp32). When on, every GEMM of matmul_forward /
// matmul_backward (linear layers and the tied LM head) and of attention_forward /
// attention_backward (QK^T, PV and their gradients) multiplies bf16 copies of its fp32
// operands, made on the fly into scratch buffers, with fp32 accumulation and fp32 output
// (like torch.autocast). Parameters (fp32 master weights), gradients, AdamW moments,
// activations, softmax, LayerNorm, GELU, the loss and all reductions stay fp32. The TF32
// switch does not apply to these bf16 GEMMs.
void set_precision_bf16(bool on);
bool precision_bf16();

}  // namespace gpu

// A member of CudaBackend that calls gpu::NAME with the model's arguments on the compute stream.
#define CUDA_BACKEND_OP(name) \
    static constexpr auto name = [](auto... args) { return gpu::name(args..., gpu::main_stream()); }

struct CudaBackend {
    using real = float;
    static float* alloc(size_t n);  // zero-filled, like CpuBackend
    static void free(float* p);
    static void zero(float* p, size_t n);
    static void copy_to_host(float* dst, const float* src, size_t n);    // synchronous
    static void copy_from_host(float* dst, const float* src, size_t n);  // synchronous
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
    static Graph capture(const std::function<void()>& work) { return gpu::capture(gpu::main_stream(), work); }
    static void graph_launch(Graph g) { gpu::graph_launch(g, gpu::main_stream()); }
    static void graph_free(Graph g) { gpu::graph_free(g); }
    static bool available();  // a CUDA device is usable; never throws
    static std::string device_name();
    static size_t peak_memory();         // bytes, all allocations of this backend (incl. kernel scratch)
    static size_t current_memory();      // bytes now allocated
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

    CUDA_BACKEND_OP(encoder_forward);
    CUDA_BACKEND_OP(encoder_backward);
    CUDA_BACKEND_OP(layernorm_forward);
    CUDA_BACKEND_OP(layernorm_backward);
    CUDA_BACKEND_OP(matmul_forward);
    CUDA_BACKEND_OP(matmul_backward);
    CUDA_BACKEND_OP(rope_forward);
    CUDA_BACKEND_OP(rope_backward);
    CUDA_BACKEND_OP(crope_expand);
    CUDA_BACKEND_OP(crope_fold);
    CUDA_BACKEND_OP(attention_forward);
    CUDA_BACKEND_OP(attention_backward);
    CUDA_BACKEND_OP(attention_forward_lse);
    CUDA_BACKEND_OP(attention_backward_lse);
    CUDA_BACKEND_OP(gelu_forward);
    CUDA_BACKEND_OP(gelu_backward);
    CUDA_BACKEND_OP(residual_forward);
    CUDA_BACKEND_OP(softmax_crossentropy);
    CUDA_BACKEND_OP(classifier_loss);
    // rows per classifier chunk: 4096 x 50304 fp32 logits (786 MiB, a quarter of the paper batch's)
    static constexpr int classifier_chunk = 4096;
    CUDA_BACKEND_OP(adamw_update);
    CUDA_BACKEND_OP(sum_squares);
    CUDA_BACKEND_OP(sum_squares_to);
    CUDA_BACKEND_OP(clip_grad);
};

#undef CUDA_BACKEND_OP
