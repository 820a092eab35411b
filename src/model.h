// GPT-2 with a choice of position scheme (src/pos.h; this file reads its traits): the one model
// orchestration shared by every backend. A backend BK (CpuBackend<Real> in backend_cpu.h,
// CudaBackend<Act> in cuda/backend_cuda.h) supplies memory and the ops; this file says in which
// order they run: forward_pass, classifier, backward, adamw, and train_step, one step of them.
// Around it: params.h (the parameter layout), weights.h (the parameters in backend memory, their
// host copies, AdamW's pass), activations.h (the buffers the ops write), classifier.h (the LM head
// and the loss), positions.h (the position data), step_queue.h (queuing without waiting for the
// device: readbacks, CUDA graphs, profile marks) and zero.h (data parallel: the gradient sum over
// ranks, ZeRO-1).
//
// Two element types: Real (BK::real) for the parameters, their gradients and AdamW's moments,
// Act (BK::act) for the activations and their gradients. They are the same type except on
// CudaBackend<bf16_t> (Real float, Act bf16). The GEMMs multiply activations by weights of type Act:
// the compute copy wc, which is the parameter buffer itself when Act is Real, else a bf16 copy
// that AdamW writes in its pass. Kept in Real (fp32) whatever Act is, because they are reductions or
// feed the loss: LayerNorm's mean and rstd, flash attention's log-sum-exps, the losses, the
// position data (pos.h). The cuBLAS attention's probabilities and dscores are activations (Act).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "activations.h"
#include "classifier.h"
#include "dist.h"
#include "kv_cache.h"
#include "params.h"
#include "pos.h"
#include "positions.h"
#include "step.h"
#include "step_queue.h"
#include "weights.h"
#include "zero.h"

template <class BK>
struct GPT : ModelWeights<BK> {
    using Real = typename BK::real;
    using Act = typename BK::act;
    using Acts = typename Activations<BK>::Set;
    using W = ModelWeights<BK>;  // the parameters and the other buffers of model_buffers' table
    using W::params, W::grads, W::qkv_expanded, W::dqkv_w, W::pos_buf, W::step_inputs, W::step_targets,
        W::step_losses;
    using W::cfg, W::training, W::layout, W::buf_layout, W::num_params, W::w, W::g, W::wa, W::step_tokens,
        W::need_training, W::reallocate;

    const PosTraits& pt;  // the position scheme's traits
    Positions<BK> positions;  // the position data in pos_buf, its length and scaling
    KVCache<BK> kv;           // incremental decoding's keys and values (generate.h)
    // The training step's scalars that change from step to step (src/step.h), in backend memory.
    StepScalars* scalars = nullptr;
    Activations<BK> acts;
    StepQueue<BK> queue;
    GradSync<BK> sync;
    std::vector<Real> host_losses;
    // Gradient accumulation: train_step's micro-steps, `micro` the one running. The first zeroes
    // the gradients, each scales its loss gradient by the tokens of all of them, and the last one's
    // backward starts the gradient sum over ranks. Their token ids and losses (step_tokens each)
    // live in step_inputs, step_targets and step_losses.
    int micro = 0, micros = 1;

    // use: training or inference; group: the data-parallel process group this model is one rank of
    // (a world of one by default)
    explicit GPT(const ModelConfig& c, ModelUse use = ModelUse::train, const dist::Group& group = dist::Group())
        : W(c, use), pt(pos_traits(c.pos)), positions(cfg, pos_buf), acts(cfg), sync(group, num_params) {
        acts.backward = training;
        queue.mpi = group.mpi;
        positions.cover(cfg.maxT);
        scalars = BK::alloc_scalars();
    }
    ~GPT() {
        queue.drop_graph();
        BK::synchronize();
        BK::free_scalars(scalars);
    }
    // ZeRO-1 over the ranks of the model's group (zero.h); before the weights are set.
    void shard_optimizer() { W::shard_optimizer(sync); }

    // What a graph over activations a reads besides the weights that may be replaced between its
    // replays (StepQueue::Key): every buffer's address and size, the position data's, the
    // micro-steps' ids and losses and their count. A graph whose key changed is captured again.
    typename StepQueue<BK>::Key graph_key(const Acts& a) const {
        typename StepQueue<BK>::Key k = {(size_t)a.B, (size_t)a.T, (size_t)positions.len, (size_t)micros, step_tokens};
        auto add = [&](const void* p) { k.push_back(reinterpret_cast<size_t>(p)); };
        for (const void* p : {(const void*)pos_buf, (const void*)step_inputs, (const void*)step_targets,
                              (const void*)step_losses})
            add(p);
        activation_buffers<size_t, Acts>(cfg, acts.sizes(a), a.train, a.backward,
                                         [&](auto member, size_t) { add(a.*member); });
        return k;
    }

    // The activations for (B, T) (training's or evaluation's) with inputs and, if given, targets
    // (host ids) uploaded into them; the position data for sequences of L tokens (0: T).
    Acts& upload(const int* inputs, const int* targets, int B, int T, bool train, int L = 0) {
        if (T > positions.len) throw std::runtime_error("sequence longer than the position tables");
        positions.set_length(L > 0 ? L : T);
        Acts& a = train ? acts.train : acts.eval;
        if (!acts.holds(a, B, T)) acts.resize(a, B, T);
        const size_t N = (size_t)B * T;
        BK::copy_ints_from_host(a.inputs, inputs, N);
        if (targets) BK::copy_ints_from_host(a.targets, targets, N);
        return a;
    }
    // The training activations for (B, T) (one micro-step's rows) before any evaluation, so that
    // evaluation borrows them. An inference model allocates none: its evaluation runs in the same
    // groups of rows (at most B x T tokens) in a set of its own.
    void reserve_training(int B, int T) {
        if (!training)
            acts.eval_tokens = (size_t)B * T;
        else if (!acts.holds(acts.train, B, T))
            acts.resize(acts.train, B, T);
    }

    // Forward pass over inputs (B,T) (host ids). With targets, returns the mean cross-entropy
    // (without grad: one evaluation batch through eval_queue, read at once); with grad, also
    // zeroes the gradients and runs the classifier's backward (d wte and d lnf in a.dln, for
    // backward()). Without targets it stops at the final LayerNorm (logits() reads it).
    // L: the length the position data is for (0: T), when T holds padding after the sequence.
    double forward(const int* inputs, const int* targets, int B, int T, bool grad, int L = 0) {
        if (targets && !grad) {  // evaluation: the queued path, read at once
            if (queue.eval_queued) throw std::logic_error("forward: evaluation batches are queued (eval_read)");
            eval_queue(inputs, targets, B, T);
            return eval_read().front();
        }
        if (grad) need_training("forward with grad");
        Acts& a = upload(inputs, targets, B, T, grad, L);
        const size_t N = (size_t)B * T;
        forward_pass(a, targets != nullptr);
        if (!targets) return 0.0;
        host_losses.resize(N);
        BK::copy_to_host(host_losses.data(), a.losses, N);
        return mean_loss(host_losses.data(), N);
    }
    // One evaluation batch over inputs and targets (B,T) (host ids), queued without waiting for the
    // device: per group of rows (Activations::eval_rows: at most a training micro-step's tokens, so a
    // long T borrows the training buffers too) the uploads, the forward pass (with use_graph the
    // replay of evaluation's graph) and the loss, and an asynchronous copy of its per-token losses
    // into the batch's. eval_read() returns the batches' means. after(row0, rows), if given, runs
    // after each group, while logits() can read its rows.
    void eval_queue(const int* inputs, const int* targets, int B, int T,
                    const std::function<void(int, int)>& after = nullptr) {
        const int rows = acts.eval_rows(B, T);
        for (int r = 0; r < B; r += rows) {
            const size_t at = (size_t)r * T;
            Acts& a = upload(inputs + at, targets + at, rows, T, false);
            queue.run_eval(graph_key(a), [&] { forward_pass(a, true); });
            queue.fetch_eval(a.losses, at, (size_t)rows * T, (size_t)B * T);
            if (after) after(r, rows);
        }
    }
    std::vector<double> eval_read() { return queue.eval_read(); }

    // Incremental decoding's forward (without grad) over inputs (B,T) (host ids) at positions
    // [first, first + T) of each row, into the evaluation activations (logits() reads them): every
    // layer's keys and values go into the cache at those positions. first 0: the prefill, its
    // attention the causal one over the T positions; first > 0: one token (T = 1) whose query
    // attends to the cache's first + 1 positions.
    void forward_cached(const int* inputs, int B, int T, int first) {
        if (!kv.holds(B, first, T)) throw std::logic_error("forward_cached: outside the KV cache (KVCache::reserve)");
        if (first > 0 && T != 1) throw std::logic_error("forward_cached: after the prefill, one token at a time");
        if (first + T > positions.len) throw std::runtime_error("position past the position tables");
        forward_pass(upload(inputs, nullptr, B, T, false, first + T), false, first);
    }

    // The forward pass over a.inputs (and with loss, a.targets) in backend memory; with a.backward
    // (a training model's training activations) also the gradients' zeroing and the classifier's
    // backward.
    // first >= 0 (forward_cached): the tokens sit at positions [first, first + T) and the KV cache
    // is written; the position data is read from position first on.
    void forward_pass(Acts& a, bool loss, int first = -1) {
        const bool grad = a.backward;
        int B = a.B, T = a.T, H = cfg.H;
        size_t N = (size_t)B * T, C = cfg.C, F = cfg.F();  // F: the MLP's hidden width
        queue.mark(Phase::rest, grad);
        if (pt.complex_qkv)
            for (int l = 0; l < cfg.L; l++)
                BK::crope_expand(qkv_expanded + (size_t)l * 3 * C * C, w.qkvA + (size_t)l * 3 * C * C / 4,
                                 w.qkvB + (size_t)l * 3 * C * C / 4, (int)C);

        const int p0 = std::max(first, 0);  // the first token's position
        const PosData<Real>& pos = positions.view;
        const PosData<Real> at = pos.from(p0, (int)C, (int)C / H);
        const Real* add_pos = pt.learned_table ? w.wpe + (size_t)p0 * C : at.table;  // fp32, as wte
        BK::encoder_forward(a.encoded, a.inputs, w.wte, add_pos, B, T, (int)C);
        // The LayerNorm before layer l (l = L: the final one) and where it writes. Each one after
        // the first comes with the residual add before it (residual_layernorm_forward).
        struct Norm {
            Act* out;
            Real *mean, *rstd;
            const Real *w, *b;
        };
        auto norm = [&](int l) -> Norm {
            if (l == cfg.L) return {a.lnf, a.lnf_mean, a.lnf_rstd, w.lnfw, w.lnfb};
            size_t s = a.train ? l : 0;  // slot of this layer's activations
            return {a.ln1 + s * N * C, a.ln1_mean + s * N, a.ln1_rstd + s * N, w.ln1w + l * C, w.ln1b + l * C};
        };
        Norm n0 = norm(0);
        BK::layernorm_forward(n0.out, n0.mean, n0.rstd, a.encoded, n0.w, n0.b, (int)N, (int)C);
        for (int l = 0; l < cfg.L; l++) {
            size_t s = a.train ? l : 0;  // slot of this layer's activations
            const Act* x = l == 0 ? a.encoded : a.res3 + (a.train ? l - 1 : 0) * N * C;  // (B,T,C)
            const Act* ln1 = norm(l).out;
            Act* qkv = a.qkv + s * N * 3 * C;
            Act* qkvr = a.qkvr + s * N * 3 * C;
            Act* atty = a.atty + s * N * C;
            Act* res2 = a.res2 + s * N * C;
            Act* ln2 = a.ln2 + s * N * C;
            Act* fch = a.fch + s * N * F;            // (B,T,F)
            Act* fch_gelu = a.fch_gelu + s * N * F;  // (B,T,F)
            Act* res3 = a.res3 + s * N * C;
            // The biases go in with the elementwise op after each GEMM (RoPE, the residual adds,
            // GELU), not in a pass of their own; without RoPE the qkv GEMM adds its bias itself.
            const Real* qkvb = w.qkvb + l * 3 * C;
            BK::matmul_forward(qkv, ln1, qkv_weight(l), pt.rotary ? nullptr : qkvb, (int)N, (int)C, (int)(3 * C));
            if (pt.rotary) BK::rope_forward(qkvr, qkv, qkvb, at, B, T, (int)C, H);  // (B,T,3C)
            queue.mark(Phase::attention, grad);
            if (first >= 0) BK::kv_cache_write(kv.keys(l), kv.values(l), qkvr, B, T, (int)C, first, kv.positions);
            if (first > 0)
                BK::attention_decode(atty, qkvr, kv.keys(l), kv.values(l), B, first + 1, kv.positions, (int)C, H, pos);
            else if (cfg.flash)
                BK::attention_forward_lse(atty, a.lse + s * a.att_n, qkvr, B, T, (int)C, H, pos);  // (B,T,C)
            else
                BK::attention_forward(atty, a.att + s * a.att_n, qkvr, B, T, (int)C, H, pos);
            queue.mark(Phase::rest, grad);
            BK::matmul_forward(a.proj, atty, wa.projw + l * C * C, nullptr, (int)N, (int)C, (int)C);
            BK::residual_layernorm_forward(res2, ln2, a.ln2_mean + s * N, a.ln2_rstd + s * N, x, a.proj,
                                           w.projb + l * C, w.ln2w + l * C, w.ln2b + l * C, (int)N, (int)C);
            BK::matmul_forward(fch, ln2, wa.fcw + l * F * C, nullptr, (int)N, (int)C, (int)F);
            BK::gelu_forward(fch_gelu, fch, w.fcb + l * F, (int)N, (int)F);
            BK::matmul_forward(a.proj, fch_gelu, wa.fc2w + l * C * F, nullptr, (int)N, (int)F, (int)C);
            Norm next = norm(l + 1);
            BK::residual_layernorm_forward(res3, next.out, next.mean, next.rstd, res2, a.proj, w.fc2b + l * C, next.w,
                                           next.b, (int)N, (int)C);
        }
        if (!loss) return;
        if (grad && micro == 0) BK::zero(grads, num_params);
        // the loss gradient is scaled by 1 / (tokens of all micro-steps and ranks): summed over
        // them, it is the global batch's mean's
        double dscale = 1.0 / ((double)N * micros * sync.group.world);
        queue.mark(Phase::head, grad);
        classifier<BK>(cfg, a, acts.sizes(a), wa.wte, g.wte, grad ? Real(dscale) : Real(0));
        queue.mark(Phase::rest, grad);
    }

    // Rows [row0, row0 + rows) of the (B*T, V) logits of the last forward without grad (of an
    // evaluation batch: of its last group of rows), on the host. The classifier keeps no logits:
    // they are computed again from the final LayerNorm, a block of the logits buffer's shape at a
    // time (a chunk of rows, or all rows of one tile).
    std::vector<Real> logits(size_t row0, size_t rows) {
        return classifier_logits<BK>(cfg, acts.eval, acts.sizes(acts.eval), wa.wte, row0, rows);
    }

    const Act* qkv_weight(int l) const {
        size_t C = cfg.C;
        return (pt.complex_qkv ? qkv_expanded : wa.qkvw) + (size_t)l * 3 * C * C;
    }

    // Backward pass of the last forward(…, grad=true): fills grads.
    void backward() {
        need_training("backward");
        Acts& a = acts.train;
        int B = a.B, T = a.T, H = cfg.H;
        size_t N = (size_t)B * T, C = cfg.C, F = cfg.F();  // F: the MLP's hidden width
        // forward() zeroed the gradients and left d lnf in a.dln (classifier)
        BK::zero(a.dres, N * C);
        // Each LayerNorm backward adds into the residual stream's gradient, and also sums what it
        // leaves there over the rows: the gradient of the bias of the branch added to the stream
        // just before (res3 = res2 + fc2 out + fc2b, res2 = res3[l-1] + proj out + projb).
        BK::layernorm_backward(a.dres, g.lnfw, g.lnfb, g.fc2b + (cfg.L - 1) * C, a.dln, a.res3 + (cfg.L - 1) * N * C,
                               w.lnfw, a.lnf_mean, a.lnf_rstd, (int)N, (int)C);
        for (int l = cfg.L - 1; l >= 0; l--) {
            // a.dres holds d(res3[l]); the residual passes it on unchanged.
            const Act* x = l == 0 ? a.encoded : a.res3 + (l - 1) * N * C;
            BK::matmul_backward(a.dfch_gelu, g.fc2w + l * C * F, nullptr, a.dres, a.fch_gelu + l * N * F,
                                wa.fc2w + l * C * F, (int)N, (int)F, (int)C);
            BK::gelu_backward(a.dfch, a.fch + l * N * F, w.fcb + l * F, a.dfch_gelu, (int)N, (int)F);
            BK::matmul_backward(a.dln, g.fcw + l * F * C, g.fcb + l * F, a.dfch, a.ln2 + l * N * C, wa.fcw + l * F * C,
                                (int)N, (int)C, (int)F);
            BK::layernorm_backward(a.dres, g.ln2w + l * C, g.ln2b + l * C, g.projb + l * C, a.dln, a.res2 + l * N * C,
                                   w.ln2w + l * C, a.ln2_mean + l * N, a.ln2_rstd + l * N, (int)N, (int)C);
            // a.dres now holds d(res2[l])
            BK::matmul_backward(a.datty, g.projw + l * C * C, nullptr, a.dres, a.atty + l * N * C, wa.projw + l * C * C,
                                (int)N, (int)C, (int)C);
            const size_t at = l * a.att_n;
            queue.mark(Phase::attention);
            if (cfg.flash)
                BK::attention_backward_lse(a.dqkvr, a.datty, a.qkvr + l * N * 3 * C, a.atty + l * N * C, a.lse + at, B,
                                           T, (int)C, H, positions.view);
            else
                BK::attention_backward(a.dqkvr, a.dscores, a.datty, a.qkvr + l * N * 3 * C, a.att + at, B, T, (int)C, H,
                                       positions.view);
            queue.mark(Phase::rest);
            if (a.dqkv != a.dqkvr) {
                BK::rope_backward(a.dqkv, a.dqkvr, positions.view, B, T, (int)C, H);
            }
            if (pt.complex_qkv) {
                BK::zero(dqkv_w, 3 * C * C);
                BK::matmul_backward(a.dln, dqkv_w, g.qkvb + l * 3 * C, a.dqkv, a.ln1 + l * N * C, qkv_weight(l), (int)N,
                                    (int)C, (int)(3 * C));
                BK::crope_fold(g.qkvA + l * 3 * C * C / 4, g.qkvB + l * 3 * C * C / 4, dqkv_w, (int)C);
            } else {
                BK::matmul_backward(a.dln, g.qkvw + l * 3 * C * C, g.qkvb + l * 3 * C, a.dqkv, a.ln1 + l * N * C,
                                    wa.qkvw + l * 3 * C * C, (int)N, (int)C, (int)(3 * C));
            }
            BK::layernorm_backward(a.dres, g.ln1w + l * C, g.ln1b + l * C, l > 0 ? g.fc2b + (l - 1) * C : nullptr,
                                   a.dln, x, w.ln1w + l * C, a.ln1_mean + l * N, a.ln1_rstd + l * N, (int)N, (int)C);
            // a.dres now holds d(x) = d(res3[l-1])
            if (micro == micros - 1) sync.layer_done(buf_layout, grads, cfg.L, l);  // layer l's gradients are final
        }
        BK::encoder_backward(g.wte, pt.learned_table ? g.wpe : nullptr, a.dres, a.inputs, B, T, (int)C, cfg.V);
        if (micro == micros - 1) sync.layer_done(buf_layout, grads, cfg.L, -1);
    }

    // AdamW over every tensor (weights.h) with the learning rate, bias corrections and clip scale of
    // `scalars`, on this rank's shard.
    void adamw(const AdamWConfig& o) {
        queue.mark(Phase::adamw);
        W::adamw(o, scalars, sync.shard);
    }

    // One training step over inputs and targets (B,T) (host ids), queued without waiting for the
    // device: the uploads, forward, backward, the gradient sum over ranks and its norm, the clip
    // scale and AdamW (t 1-based), then asynchronous copies of the per-token losses and the norm
    // into pinned memory. read_step() returns them once the step has finished; at most two steps
    // are unread at a time. With use_graph (step_queue.h) every step after the first replays one
    // CUDA graph: all that changes from step to step is read from device memory (a.inputs,
    // a.targets, scalars).
    // accum > 1: the B rows in accum micro-steps of B / accum rows, their gradients summed (the
    // same step up to float rounding, in the activations of one micro-step).
    void train_step(const int* inputs, const int* targets, int B, int T, const AdamWConfig& opt, float lr, int t,
                    int accum = 1) {
        need_training("train_step");
        if (queue.unread.size() == 2) throw std::logic_error("train_step: two steps are unread (read_step)");
        if (accum < 1 || B % accum) throw std::logic_error("train_step: B is not a multiple of accum");
        micros = accum;
        Acts& a = accum == 1 ? upload(inputs, targets, B, T, true) : upload_steps(inputs, targets, B, T);
        BK::copy_scalars_from_host(scalars, adamw_scalars(lr, opt.beta1, opt.beta2, t));
        auto& r = queue.next();
        queue.run_step(opt, graph_key(a), [&] {
            const size_t Nm = (size_t)a.B * T;
            int *inputs0 = a.inputs, *targets0 = a.targets;
            auto* losses0 = a.losses;
            for (micro = 0; micro < micros; micro++) {
                if (micros > 1)  // this micro-step's rows of the step's ids and losses
                    a.inputs = step_inputs + micro * Nm, a.targets = step_targets + micro * Nm,
                    a.losses = step_losses + micro * Nm;
                forward_pass(a, true);
                backward();
            }
            micro = 0;
            a.inputs = inputs0, a.targets = targets0, a.losses = losses0;
            r.comm_ms = sync.reduce(grads, num_params, scalars);
            BK::clip_grad(scalars, opt.grad_clip);
            adamw(opt);
        });
        queue.fetch(r, micros > 1 ? step_losses : a.losses, (size_t)B * T, scalars);
        micros = 1;  // forward(…, grad=true) outside train_step is one batch
    }
    // The training activations of one micro-step (B / micros rows) and all of the step's ids on the
    // device, in step_inputs and step_targets.
    Acts& upload_steps(const int* inputs, const int* targets, int B, int T) {
        if (T > positions.len) throw std::runtime_error("sequence longer than the position tables");
        positions.set_length(T);
        const size_t N = (size_t)B * T;
        if (N != step_tokens) reallocate(ModelPart::steps, [&] { step_tokens = N; });
        reserve_training(B / micros, T);
        BK::copy_ints_from_host(step_inputs, inputs, N);
        BK::copy_ints_from_host(step_targets, targets, N);
        return acts.train;
    }
    // The oldest unread step's mean loss (this rank's tokens) and gradient norm; waits for it.
    StepResult read_step() { return queue.read_step(); }

    // The attention probabilities of every layer over inputs (B,T) (host ids), (L,B,H,T,T) on the
    // host: one forward pass (without the loss) into the training activations, where each layer
    // has a slot of its own. Only the cublas mode keeps them (flash keeps each row's log-sum-exp).
    std::vector<Act> attention_maps(const int* inputs, int B, int T) {
        if (cfg.flash) throw std::logic_error("attention_maps: the flash attention mode keeps no probabilities");
        forward_pass(upload(inputs, nullptr, B, T, true), false);
        std::vector<Act> h((size_t)cfg.L * acts.train.att_n);
        BK::copy_to_host(h.data(), acts.train.att, h.size());
        return h;
    }
};
