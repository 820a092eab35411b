// The CUDA backend: device memory and the GPU ops of cuda/*.cu. Same members as CpuBackend
// (src/backend_cpu.h), so GPT<CudaBackend<Act>> (src/model.h) runs on the GPU unchanged; fp32
// activations (Act = float) or bf16 ones (bf16_t, --precision bf16). This header is plain C++
// (no CUDA types): host code compiled by g++ includes it; the definitions live in the .cu files
// (nvcc). Every op is declared once, in namespace gpu below, and defined by the same name in its
// .cu file; CudaBackend<Act> names each one.
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

// ---- ops (same names and argument order as namespace cpu in src/ops/) ----
// Act, the activations' element type, is float or bf16_t (--precision bf16): activations and
// their gradients are Act; parameters, their gradients, LayerNorm's mean/rstd, attention's
// log-sum-exps and the losses are float. The kernels compute in fp32 whatever Act is (bf16 is
// read into float, and every sum, statistic and accumulator is fp32); only stores round to Act.
// The GEMM weights (matmul w, the LM head) are Act too: the model's compute copy of the weights.
template <class Act>
void encoder_forward(Act* out, const int* tok, const float* wte, const float* wpe, int B, int T, int C);
// Deterministic: every (token, channel) sums its positions in increasing position order, a
// long run of one token in pieces of consecutive positions added in order (encoder.cu).
template <class Act>
void encoder_backward(float* dwte, float* dwpe, const Act* dout, const int* tok, int B, int T, int C, int V);

template <class Act>
void layernorm_forward(Act* out, float* mean, float* rstd, const Act* inp, const float* w, const float* b, int N, int C);
// res = x + (y + ybias) (ybias may be null; res may be x), then out = the LayerNorm of res
// (src/ops/layernorm.h)
template <class Act>
void residual_layernorm_forward(Act* res, Act* out, float* mean, float* rstd, const Act* x, const Act* y, const float* ybias,
                                const float* w, const float* b, int N, int C);
// dsum, when given, adds the column sums of dinp as updated (src/ops/layernorm.h says why).
template <class Act>
void layernorm_backward(Act* dinp, float* dw, float* db, float* dsum, const Act* dout, const Act* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C);

// bf16: bf16 tensor-core GEMMs with fp32 accumulation (split-K partials included), the output
// rounded once; dw, dbias fp32. matmul_backward
// overwrites dinp and adds to dw, dbias (src/ops/matmul.h); matmul_dinp_add adds to dinp, in Act
// or in fp32 over bf16 operands (a sum kept in fp32 over several GEMMs: the classifier's tiles).
template <class Act>
void matmul_forward(Act* out, const Act* inp, const Act* w, const float* bias, int N, int IC, int OC);
template <class Act>
void matmul_backward(Act* dinp, float* dw, float* dbias, const Act* dout, const Act* inp, const Act* w, int N, int IC,
                     int OC);
template <class Act, class D>
void matmul_dinp_add(D* dinp, const Act* dout, const Act* w, int N, int IC, int OC);

// rope_forward, gelu_forward/backward and residual_layernorm_forward add the fp32 bias (may be null) of the
// linear layer whose output they read: that layer's GEMM writes none (src/ops/ says how).
template <class Act>
void rope_forward(Act* out, const Act* inp, const float* bias, const PosData<float>& pos, int B, int T, int C, int H);
// The backwards of RoPE and GELU overwrite dinp (no zeroed buffer needed).
template <class Act>
void rope_backward(Act* dinp, const Act* dout, const PosData<float>& pos, int B, int T, int C, int H);

// w: CRoPE's expanded (3C, C) weights, written in Act from the fp32 A, B.
template <class Act>
void crope_expand(Act* w, const float* Am, const float* Bm, int C);
void crope_fold(float* dA, float* dB, const float* dw, int C);

// The attention ops take the position data (src/pos.h, device memory): with ALiBi's slopes (H,),
// each head's scores biased by -slopes[h] (i - j) inside the kernels (src/ops/attention.h).
// The cuBLAS attention: the probabilities att (B,H,T,T) kept for backward, in the activations'
// element type (bf16: scores and probabilities rounded to bf16, softmax in fp32).
template <class Act>
void attention_forward(Act* out, Act* att, const Act* qkv, int B, int T, int C, int H, const PosData<float>& pos);
template <class Act>
void attention_backward(Act* dqkv, Act* scratch, const Act* dout, const Act* qkv, const Act* att, int B, int T, int C,
                        int H, const PosData<float>& pos);

// Flash attention (FlashAttention-2 style, attention.cu): out (B,T,C) and lse (B,H,T), the
// log-sum-exp of each query row's scaled scores; nothing of size T x T is stored. Backward
// recomputes the scores from qkv and lse and reads the forward's out; deterministic (no
// atomics). Head sizes D = C/H of 8, 16, 32, 64 or 128; others throw. bf16: tensor-core
// (mma.sync) kernels at D = 16, 32, 64, the fp32 kernels reading bf16 at the others.
template <class Act>
void attention_forward_lse(Act* out, float* lse, const Act* qkv, int B, int T, int C, int H, const PosData<float>& pos);
template <class Act>
void attention_backward_lse(Act* dqkv, const Act* dout, const Act* qkv, const Act* out, const float* lse, int B, int T,
                            int C, int H, const PosData<float>& pos);
// Incremental decoding (src/generate.h): kv_cache_write stores the keys and values of qkv (B,T,3C)
// at positions [pos, pos + T) of the cache kc, vc (B, cap, C); attention_decode runs the one query
// of qkv (B,1,3C), at position n - 1, against the cache's first n positions into out (B,C).
template <class Act>
void kv_cache_write(Act* kc, Act* vc, const Act* qkv, int B, int T, int C, int pos, int cap);
template <class Act>
void attention_decode(Act* out, const Act* qkv, const Act* kc, const Act* vc, int B, int n, int cap, int C, int H,
                      const PosData<float>& pos);
// Whether the flash kernels take head size D; the check throws, listing the sizes they take
// (the launchers call it, and the trainer before it starts).
bool flash_supports_head_size(int D);
void check_flash_head_size(int D);

template <class Act>
void gelu_forward(Act* out, const Act* inp, const float* bias, int N, int C);
template <class Act>
void gelu_backward(Act* dinp, const Act* inp, const float* bias, const Act* dout, int N, int C);

// losses (N) = -log softmax(logits)[target]; with dscale != 0, logits (N, ld) <- (softmax - onehot)
// * dscale. Rows of ld >= V columns (the padded vocabulary): columns [V, ld) are left out of the
// softmax and get dlogits 0. Vector loads (16 bytes) when ld allows and logits is aligned.
// Losses, the max and the sum are fp32 whatever Act is; dlogits overwrite the logits in A.
template <class Act>
void classifier_loss(Act* logits, float* losses, const int* targets, int N, int V, int ld, float dscale);
// The same over vocabulary tiles z (N, w) of the padded logits' columns [v0, v0 + w), columns
// >= V left out (src/ops/loss.h has the CPU twins and says what each pass does): per tile,
// the running max m and sum of exp s, and the target's logit into losses; then the losses, and m
// becomes the log-sum-exp; then per tile, dlogits over z from it.
template <class Act>
void classifier_tile_lse(const Act* z, float* m, float* s, float* losses, const int* targets, int N, int w, int v0, int V);
void classifier_tile_loss(float* losses, float* m, const float* s, int N);
template <class Act>
void classifier_tile_dlogits(Act* z, const float* lse, const int* targets, int N, int w, int v0, int V, float dscale);
// The LM head and the loss of one chunk of rows (GPT::classifier): the logits GEMM, the loss and,
// with dscale != 0, the head's backward (d x into dx, d w added into dw): three launches over one
// chunk's logits, which stay in HBM (the CPU backend fuses them by tiles: src/ops/loss.h). It
// needs no scratch: classifier_head_scratch is 0.
template <class Act>
void classifier_head(Act* logits, float* losses, const int* targets, const Act* x, const Act* w, Act* dx, float* dw,
                     float* scratch, int N, int C, int V, int Vp, float dscale);
size_t classifier_head_scratch(int rows, int C, int Vp);

// lr, bias corrections and clip scale from s (device memory), read when the kernel runs.
// p_act (may be null): the compute copy of the weights, p rounded to bf16, written in the
// same pass.
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const StepScalars* s, double beta1,
                  double beta2, float eps, float wd);
void adamw_update(float* p, const float* g, float* m, float* v, bf16_t* p_act, size_t n, const StepScalars* s,
                  double beta1, double beta2, float eps, float wd);
// Sum of x[i]^2 in double, deterministic (fixed grid and reduction order), into *out (device).
void sum_squares_to(double* out, const float* x, size_t n);
// The same returned to the host. Synchronises.
double sum_squares(const float* x, size_t n);
// s->gscale = clip_scale(grad_clip, sqrt(s->sumsq)) (src/step.h), on the device.
void clip_grad(StepScalars* s, double grad_clip);
// dst = src rounded to nearest even bf16 (the weights' compute copy after they are set).
void to_bf16(bf16_t* dst, const float* src, size_t n);

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
    // Whether this process can compute on its GPU (local_rank modulo the GPUs, as use_device):
    // Absent (no driver or no GPU: nothing is wrong), Unusable (a GPU that the driver, its age or
    // this build cannot run, or CUDA_VISIBLE_DEVICES hides; `why`: the CUDA error and what to do,
    // in one line) or Usable.
    struct DeviceCheck {
        enum State { Absent, Unusable, Usable } state;
        std::string why;
    };
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

    static constexpr auto encoder_forward = gpu::encoder_forward<Act>;
    static constexpr auto encoder_backward = gpu::encoder_backward<Act>;
    static constexpr auto layernorm_forward = gpu::layernorm_forward<Act>;
    static constexpr auto residual_layernorm_forward = gpu::residual_layernorm_forward<Act>;
    static constexpr auto layernorm_backward = gpu::layernorm_backward<Act>;
    static constexpr auto matmul_forward = gpu::matmul_forward<Act>;
    static constexpr auto matmul_backward = gpu::matmul_backward<Act>;
    static constexpr auto matmul_dinp_add = gpu::matmul_dinp_add<Act, float>;
    static constexpr auto rope_forward = gpu::rope_forward<Act>;
    static constexpr auto rope_backward = gpu::rope_backward<Act>;
    static constexpr auto crope_expand = gpu::crope_expand<Act>;
    static constexpr auto crope_fold = gpu::crope_fold;
    static constexpr auto attention_forward = gpu::attention_forward<Act>;
    static constexpr auto attention_backward = gpu::attention_backward<Act>;
    static constexpr auto attention_forward_lse = gpu::attention_forward_lse<Act>;
    static constexpr auto attention_backward_lse = gpu::attention_backward_lse<Act>;
    static constexpr auto kv_cache_write = gpu::kv_cache_write<Act>;
    static constexpr auto attention_decode = gpu::attention_decode<Act>;
    static constexpr auto gelu_forward = gpu::gelu_forward<Act>;
    static constexpr auto gelu_backward = gpu::gelu_backward<Act>;
    static constexpr auto classifier_head = gpu::classifier_head<Act>;
    static constexpr auto classifier_head_scratch = gpu::classifier_head_scratch;
    static constexpr auto classifier_tile_lse = gpu::classifier_tile_lse<Act>;
    static constexpr auto classifier_tile_loss = gpu::classifier_tile_loss;
    static constexpr auto classifier_tile_dlogits = gpu::classifier_tile_dlogits<Act>;
    // rows per classifier chunk: 4096 x 50304 fp32 logits (786 MiB, a quarter of the paper batch's);
    // until scripts/gpu_check.sh's LM head sweep measures the others (its head.md names the fastest)
    static constexpr int classifier_chunk = 4096;
    // bf16: AdamW also writes the GEMMs' copy of the weights (the overload with p_act)
    using AdamW = std::conditional_t<std::is_same<Act, float>::value,
                                     void (*)(float*, const float*, float*, float*, size_t, const StepScalars*, double,
                                              double, float, float),
                                     void (*)(float*, const float*, float*, float*, bf16_t*, size_t,
                                              const StepScalars*, double, double, float, float)>;
    static constexpr AdamW adamw_update = gpu::adamw_update;
    static constexpr auto sum_squares = gpu::sum_squares;
    static constexpr auto sum_squares_to = gpu::sum_squares_to;
    static constexpr auto clip_grad = gpu::clip_grad;
    static constexpr auto to_bf16 = gpu::to_bf16;
};
