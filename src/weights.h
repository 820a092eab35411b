// The parameters of GPT<BK> (model.h) in backend memory: model_buffers' table allocated
// (activations.h), the tensors' pointers into it, the host copies in the checkpoints' layout,
// and AdamW's pass over them. model.h runs the ops on them.
//
// Two layouts: `layout`, the checkpoints' tensors (what get() returns and set_params() takes),
// and `buf_layout`, the same with wte's padded rows (Vp - V, zero) as the buffers hold them.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "activations.h"
#include "params.h"
#include "step.h"
#include "zero.h"

// What a model is built for: training (with the optimiser's buffers: gradients, AdamW's moments,
// the backward's activations), or inference (sampling, evaluation only, attention maps), which
// allocates none of them (model_buffers, activation_buffers).
enum class ModelUse { train, inference };

template <class BK>
struct ModelWeights : ModelBuffers<typename BK::real, typename BK::act> {
    using Real = typename BK::real;
    using Act = typename BK::act;
    using Bufs = ModelBuffers<Real, Act>;                              // the buffers of model_buffers' table
    static constexpr bool kActCopy = !std::is_same<Act, Real>::value;  // wc is a copy of the weights in Act

    ModelConfig cfg;
    const bool training;  // ModelUse::train
    std::vector<ParamTensor> layout, buf_layout;
    size_t num_params = 0;  // elements of each parameter buffer
    TensorsOf<Real> w, g;   // the tensors in params and grads
    TensorsOf<Act> wa;      // into wc
    // The size of the table's other part: gradient accumulation's ids and losses (step_tokens each).
    size_t step_tokens = 0;

    ModelWeights(const ModelConfig& c, ModelUse use)
        : cfg(c),
          training(use == ModelUse::train),
          layout(param_layout(c)),
          buf_layout(param_layout(c, true)),
          num_params(buf_layout.back().offset + buf_layout.back().numel) {
        if (cfg.vocab_pad < 1) throw std::runtime_error("vocab_pad must be at least 1");
        buffers(ModelPart::own, [](auto& p, size_t n) { p = alloc_of(p, n); });
        point_buffers();
    }
    ~ModelWeights() {
        for (ModelPart part : {ModelPart::own, ModelPart::steps})
            buffers(part, [](auto& p, size_t) { release(p); });
    }
    ModelWeights(const ModelWeights&) = delete;
    ModelWeights& operator=(const ModelWeights&) = delete;

    // f(buffer, elements) for each buffer of a part of model_buffers' table.
    template <class F>
    void buffers(ModelPart part, F&& f) {
        ModelSizes<size_t> s;
        s.P = num_params, s.positions = cfg.maxT, s.train = training, s.step_tokens = step_tokens;
        model_buffers<size_t, Bufs>(cfg, s, part, [&](auto member, size_t n) { f(this->*member, n); });
    }
    // A part's buffers made again for new sizes (set by `resize`).
    template <class Resize>
    void reallocate(ModelPart part, Resize&& resize) {
        buffers(part, [](auto& p, size_t) { release(p); });
        resize();
        buffers(part, [](auto& p, size_t n) { p = alloc_of(p, n); });
    }
    // What only a model that trains can do (what: the call) fails in an inference model.
    void need_training(const char* what) const {
        if (!training) throw std::logic_error(std::string(what) + ": a model built for inference does not train");
    }
    // A buffer of n elements of p's type, and its release.
    template <class E>
    static E* alloc_of(E*, size_t n) {
        if constexpr (std::is_same<E, int>::value)
            return BK::alloc_int(n);
        else if constexpr (std::is_same<E, Real>::value)
            return BK::alloc(n);
        else
            return BK::alloc_act(n);
    }
    template <class E>
    static void release(E*& p) {
        if constexpr (std::is_same<E, int>::value) {
            if (p) BK::free_int(p);
        } else {
            if (p) BK::free(p);
        }
        p = nullptr;
    }

    // The tensors' pointers into params and grads, and wc and wa: the parameters themselves, or
    // (kActCopy) a buffer of their rounded copy.
    void point_buffers() {
        w = point(buf_layout, this->params);
        g = this->grads ? point(buf_layout, this->grads) : TensorsOf<Real>();  // an inference model has none
        if constexpr (!kActCopy) this->wc = this->params;  // else a buffer of its own (model_buffers)
        wa = point(buf_layout, this->wc);
    }
    // Rounds all of params into wc (kActCopy), after the weights were set other than by AdamW.
    void refresh_compute_copy() {
        if constexpr (kActCopy) BK::to_bf16(this->wc, this->params, num_params);
    }
    // ZeRO-1 over the ranks of sync's group (zero.h); before the weights are set.
    void shard_optimizer(GradSync<BK>& sync) {
        need_training("shard_optimizer");
        if (sync.shard_buffers(num_params, this->params, this->grads, this->m, this->v)) point_buffers();
    }

    // Host vectors in the checkpoint layout <-> the buffer layout: wte comes first, so only the
    // tensors after it move, by the padded rows (zero in the buffer layout).
    std::vector<Real> padded(const std::vector<Real>& h) const {
        size_t real = (size_t)cfg.V * cfg.C, pad = (size_t)(cfg.Vp() - cfg.V) * cfg.C;
        if (h.size() + pad != num_params) throw std::logic_error("padded: not a vector of the checkpoint layout");
        std::vector<Real> b(num_params, Real(0));
        std::copy(h.begin(), h.begin() + real, b.begin());
        std::copy(h.begin() + real, h.end(), b.begin() + real + pad);
        return b;
    }
    std::vector<Real> unpadded(const std::vector<Real>& b) const {
        size_t real = (size_t)cfg.V * cfg.C, pad = (size_t)(cfg.Vp() - cfg.V) * cfg.C;
        std::vector<Real> h(b.begin(), b.begin() + real);
        h.insert(h.end(), b.begin() + real + pad, b.begin() + num_params);
        return h;
    }
    // Uploads a host copy of all parameters (layout order): as padded() lays them out, without a
    // second host copy of the weights (wte's rows, zeros for its padded rows, the other tensors).
    void set_params(const std::vector<Real>& host) {
        const size_t real = (size_t)cfg.V * cfg.C, pad = (size_t)(cfg.Vp() - cfg.V) * cfg.C;
        if (host.size() + pad != num_params)
            throw std::logic_error("set_params: not a vector of the checkpoint layout");
        BK::copy_from_host(this->params, host.data(), real);
        BK::zero(this->params + real, pad);
        BK::copy_from_host(this->params + real + pad, host.data() + real, host.size() - real);
        refresh_compute_copy();
    }
    // A buffer (params, grads, m, v) on the host: as it is (buffer layout), or in layout order.
    std::vector<Real> get_buffer(const Real* buf) const {
        std::vector<Real> h(num_params);
        BK::copy_to_host(h.data(), buf, num_params);
        return h;
    }
    std::vector<Real> get(const Real* buf) const { return unpadded(get_buffer(buf)); }
    void init(uint64_t seed) {
        auto p = init_params(cfg, seed);
        set_params(std::vector<Real>(p.begin(), p.end()));
    }

    // AdamW over every tensor with the learning rate, bias corrections and clip scale of
    // `scalars`. With ZeRO-1 each rank updates its shard, then every rank gathers the whole weights.
    // kActCopy: AdamW writes the compute copy in the same pass; with ZeRO-1 the gathered weights
    // of the other ranks' shards are rounded afterwards.
    // The update is elementwise, so each run of adjacent tensors with the same weight decay is one
    // call (with decay=all, the whole buffer: one kernel, not one per tensor).
    void adamw(const AdamWConfig& o, const StepScalars* scalars, const Shard& shard) {
        need_training("adamw");
        size_t b = 0, e = 0;  // the run [b, e) of this rank's shard
        float wd = 0;
        auto update_run = [&] {
            if (b >= e) return;
            Real *pb = this->params + b, *gb = this->grads + b, *mb = this->m + (b - shard.begin),
                 *vb = this->v + (b - shard.begin);
            if constexpr (kActCopy)
                BK::adamw_update_bf16(pb, gb, mb, vb, this->wc + b, e - b, scalars, o.beta1, o.beta2, o.eps, wd);
            else
                BK::adamw_update(pb, gb, mb, vb, e - b, scalars, o.beta1, o.beta2, o.eps, wd);
        };
        for (const auto& p : buf_layout) {
            const size_t pb = std::max(p.offset, shard.begin), pe = std::min(p.offset + p.numel, shard.end);
            const float pwd = (o.decay_all || p.matrix) ? o.wd : 0.0f;
            if (pb >= pe) continue;
            if (pb == e && pwd == wd) {
                e = pe;  // the run goes on
                continue;
            }
            update_run();
            b = pb, e = pe, wd = pwd;
        }
        update_run();
        if (shard.zero) {
            BK::allgather(this->params, shard.block);
            refresh_compute_copy();
        }
    }
};
