// The buffers of GPT<BK> (model.h), each declared once in a table from which the model allocates
// and the memory estimate (memory_estimate.cpp: model_memory_parts, train --memory, sample's
// memory line) sums, so the two cannot disagree. model_buffers: the model's own (weights, and in a
// model that trains their gradients and AdamW's moments; the GEMMs' copy, CRoPE's expanded
// weights, the position data), gradient accumulation's ids and losses, and the KV cache, members of
// ModelBuffers. activation_buffers: the activations of its forward pass over (B, T) tokens and, in
// a model that trains, the buffers of its backward, members of Acts, one set of them; Activations
// holds the model's two sets. The training set keeps every layer's activations (for the backward
// pass, or an inference model's attention maps); evaluation keeps one layer's worth, and borrows
// the training set's buffers when they are large enough.
//
// Two element types (model.h says which is which): Real, the parameters' (fp32 on the GPU), for
// LayerNorm's mean and rstd, flash attention's log-sum-exps and the losses; Act for the rest.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "params.h"
#include "pos.h"

template <class RealT, class ActT>
struct Acts {
    using Real = RealT;
    using Act = ActT;
    int B = 0, T = 0, Ls = 0;  // Ls: layers with a slot of their own (L in training, else 1)
    bool train = false;        // the training set: every layer's slot
    bool backward = false;     // and the backward's buffers (a model that trains)
    bool borrowed = false;     // a view of the training set's buffers (Activations::resize)
    size_t att_n = 0;          // elements of one layer's att or lse
    // per layer: att, the attention probabilities (B,H,T,T), or with cfg.flash lse, the
    // log-sum-exps (B,H,T) (the other one is null). With RoPE, qkv is the GEMM's output without
    // its bias (RoPE adds it into qkvr); fch is always without its bias (GELU adds it).
    Act *encoded = nullptr, *ln1 = nullptr, *qkv = nullptr, *qkvr = nullptr, *att = nullptr, *atty = nullptr,
        *res2 = nullptr, *ln2 = nullptr, *fch = nullptr, *fch_gelu = nullptr, *res3 = nullptr, *proj = nullptr,
        *lnf = nullptr, *logits = nullptr;
    Real *ln1_mean = nullptr, *ln1_rstd = nullptr, *lse = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr,
         *lnf_mean = nullptr, *lnf_rstd = nullptr, *losses = nullptr;
    // classifier tiles: each row's running max and sum of exp (N), and with a bf16 Act d lnf
    // summed over the tiles in Real (N, C) before it is rounded into dln (null otherwise); the
    // fused classifier: each row's log-sum-exp in head_max
    Real *head_max = nullptr, *head_sum = nullptr, *dlnf = nullptr;
    // classifier chunks: the backend's scratch for one chunk (BK::classifier_head; null if none)
    Real* head_scratch = nullptr;
    // backward-only buffers. All in Act, dres too (the residual stream's gradient, added into
    // by each LayerNorm backward): it is the dout of GEMMs, whose operands share one type.
    Act *dres = nullptr, *dln = nullptr, *datty = nullptr, *dqkv = nullptr, *dqkvr = nullptr, *dfch = nullptr,
        *dfch_gelu = nullptr, *dscores = nullptr;
    int *inputs = nullptr, *targets = nullptr;  // the token ids (N)
    std::vector<Real*> owned;
    std::vector<Act*> owned_act;
    std::vector<int*> owned_int;
};

// The classifier's buffers depend on the backend: the rows per chunk it takes when the config
// leaves them to it (BK::classifier_chunk), and the scratch its head needs for one chunk
// (BK::classifier_head_scratch; null: none).
struct ClassifierHead {
    int chunk;
    size_t (*scratch)(int rows, int C, int Vp);
};
template <class BK>
ClassifierHead classifier_head_of() {
    return {BK::classifier_chunk, BK::classifier_head_scratch};
}

// The sizes the buffers of a set for (B, T) tokens are made of, in Num: size_t to allocate,
// double to estimate (an absurd config must give a large number there, not an overflowed one).
template <class Num>
struct ActSizes {
    Num N;        // rows: B*T
    Num att;      // one layer's att (B,H,T,T) or lse (B,H,T)
    Num rows;     // rows per classifier chunk (fused: 1, the rows logits() reads at a time)
    Num tile;     // vocabulary columns per classifier tile: all of them (Vp) when it goes by row chunks
    Num logits;   // the logits buffer: one chunk's rows of all columns, or all N rows of one tile
    Num scratch;  // the backend's scratch for one classifier chunk (0 with tiles, or none needed)
};
template <class Num>
ActSizes<Num> act_sizes(const ModelConfig& cfg, const ClassifierHead& head, int B, int T) {
    ActSizes<Num> s;
    const bool tiles = cfg.classifier_tile > 0;
    s.N = Num(B) * T;
    s.att = Num(B) * cfg.H * T * (cfg.flash ? 1 : T);
    s.rows = std::min(s.N, Num(cfg.classifier_fused       ? 1
                               : cfg.classifier_chunk > 0 ? cfg.classifier_chunk
                                                          : head.chunk));
    s.tile = Num(tiles ? std::min(cfg.classifier_tile, cfg.Vp()) : cfg.Vp());
    s.logits = tiles ? s.N * s.tile : s.rows * cfg.Vp();
    s.scratch =
        tiles || cfg.classifier_fused || !head.scratch ? Num(0) : Num(head.scratch((int)s.rows, cfg.C, cfg.Vp()));
    return s;
}

// Every buffer of one set (Set: an Acts), declared once: f(&Set::member, elements) for each
// that the set holds, its element type the member's. Per-layer buffers have Ls slots (train: L);
// the ones after `if (!backward)` exist only for a backward pass (the training set of a model that
// trains). A new buffer is a member of Acts and a line here.
template <class Num, class Set, class F>
void activation_buffers(const ModelConfig& cfg, const ActSizes<Num>& s, bool train, bool backward, F&& f) {
    const PosTraits& pt = pos_traits(cfg.pos);
    const Num N = s.N, C = cfg.C, Ls = train ? cfg.L : 1;
    f(&Set::inputs, N), f(&Set::targets, N);
    f(&Set::encoded, N * C);
    f(&Set::ln1, Ls * N * C), f(&Set::ln1_mean, Ls * N), f(&Set::ln1_rstd, Ls * N);
    f(&Set::qkv, Ls * N * 3 * C);
    if (pt.rotary) f(&Set::qkvr, Ls * N * 3 * C);  // else qkvr is qkv
    if (cfg.flash)
        f(&Set::lse, Ls * s.att);
    else
        f(&Set::att, Ls * s.att);
    f(&Set::atty, Ls * N * C), f(&Set::res2, Ls * N * C);
    f(&Set::ln2, Ls * N * C), f(&Set::ln2_mean, Ls * N), f(&Set::ln2_rstd, Ls * N);
    f(&Set::fch, Ls * N * cfg.F()), f(&Set::fch_gelu, Ls * N * cfg.F());  // (B,T,F) each
    f(&Set::res3, Ls * N * C), f(&Set::proj, N * C);
    f(&Set::lnf, N * C), f(&Set::lnf_mean, N), f(&Set::lnf_rstd, N);
    f(&Set::logits, s.logits), f(&Set::losses, N);  // logits: one chunk's, one tile's or (fused) one row's
    if (cfg.classifier_tile > 0 || cfg.classifier_fused) f(&Set::head_max, N);
    if (cfg.classifier_tile > 0) f(&Set::head_sum, N);
    if (s.scratch > 0) f(&Set::head_scratch, s.scratch);
    if (!backward) return;
    f(&Set::dres, N * C), f(&Set::dln, N * C), f(&Set::datty, N * C);
    f(&Set::dqkv, N * 3 * C);
    if (pt.rotary) f(&Set::dqkvr, N * 3 * C);  // else dqkvr is dqkv
    f(&Set::dfch, N * cfg.F()), f(&Set::dfch_gelu, N * cfg.F());
    if (!cfg.flash) f(&Set::dscores, s.att);
    if (!std::is_same<typename Set::Act, typename Set::Real>::value && cfg.classifier_tile > 0) f(&Set::dlnf, N * C);
}

// The model's own buffers (GPT<BK> is one), with the element types of Acts.
template <class RealT, class ActT>
struct ModelBuffers {
    using Real = RealT;
    using Act = ActT;
    // weights, gradients and AdamW's two moments, P elements each (the buffer layout)
    Real *params = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
    Act* wc = nullptr;            // the GEMMs' weights: params itself, or (Act not Real) their copy in Act
    Act* qkv_expanded = nullptr;  // complex_qkv: real (L,3C,C) weights
    Real* dqkv_w = nullptr;       // and one layer's (3C,C) gradient
    Real* pos_buf = nullptr;      // the position data (pos.h) in one buffer; null when the scheme has none
    // Gradient accumulation: the step's token ids and losses (N each), which each micro-step's
    // slice of the training activations stands in for.
    int *step_inputs = nullptr, *step_targets = nullptr;
    Real* step_losses = nullptr;
};

// The parts of model_buffers' table, each allocated at its own time: the model's own (with it),
// and gradient accumulation's ids and losses (when the model meets such a step).
enum class ModelPart { own, steps };

// What the sizes of model_buffers' buffers follow, in Num (as ActSizes).
template <class Num>
struct ModelSizes {
    Num P = 0;             // elements of a parameter buffer (the buffer layout)
    int positions = 0;     // the positions the position data covers
    bool train = true;     // a model that trains (gradients, AdamW's moments); else one for inference
    Num step_tokens = 0;   // gradient accumulation: the tokens of a step
};

// Every buffer of one part of ModelBuffers, declared once: f(&Set::member, elements) for each the
// model holds. Those under `if (s.train)` exist only in a model that trains: an inference model
// (sampling, evaluation only, attention maps) holds none of the optimiser's.
template <class Num, class Set, class F>
void model_buffers(const ModelConfig& cfg, const ModelSizes<Num>& s, ModelPart part, F&& f) {
    const Num C = cfg.C;
    if (part == ModelPart::steps) {
        f(&Set::step_inputs, s.step_tokens), f(&Set::step_targets, s.step_tokens), f(&Set::step_losses, s.step_tokens);
        return;
    }
    const PosTraits& pt = pos_traits(cfg.pos);
    f(&Set::params, s.P);
    if (s.train) f(&Set::grads, s.P), f(&Set::m, s.P), f(&Set::v, s.P);
    if (!std::is_same<typename Set::Act, typename Set::Real>::value) f(&Set::wc, s.P);
    if (pt.complex_qkv) {
        f(&Set::qkv_expanded, Num(cfg.L) * 3 * C * C);
        if (s.train) f(&Set::dqkv_w, 3 * C * C);
    }
    const size_t pos = pos_layout(pt, s.positions, cfg.C, cfg.H).size;
    if (pos) f(&Set::pos_buf, Num(pos));
}

// Incremental decoding's KV cache (KVCache, kv_cache.h): every layer's keys and values as
// attention reads them (after RoPE), k and v (L, rows, positions, C) each.
template <class ActT>
struct KVBuffers {
    using Act = ActT;
    Act *k = nullptr, *v = nullptr;
};
template <class Num, class Set, class F>
void kv_buffers(const ModelConfig& cfg, Num rows, Num positions, F&& f) {
    const Num n = Num(cfg.L) * rows * positions * cfg.C;
    f(&Set::k, n), f(&Set::v, n);
}

// Evaluation runs a batch of B rows of T tokens in groups of rows: the largest divisor of B
// whose tokens are at most `tokens` (a training micro-step's), at least one row. A longer T
// then takes fewer rows, not more memory; groups of one shape share one graph.
template <class Num>
int eval_group_rows(int B, int T, Num tokens) {
    for (int g = B; g > 1; g--)
        if (B % g == 0 && Num(g) * T <= tokens) return g;
    return 1;
}

// Whether every buffer of an evaluation set of sizes e is at most the training set's of sizes t
// (all its layers' slots), so that it can borrow them. Both lists come from the one table in the
// same order; the training set's goes on past the evaluation's (its backward's buffers, after
// those, are never borrowed).
template <class Num, class Set>
bool eval_fits(const ModelConfig& cfg, const ActSizes<Num>& e, const ActSizes<Num>& t) {
    std::vector<Num> ev, tv;
    activation_buffers<Num, Set>(cfg, e, false, false, [&](auto, Num n) { ev.push_back(n); });
    activation_buffers<Num, Set>(cfg, t, true, false, [&](auto, Num n) { tv.push_back(n); });
    for (size_t i = 0; i < ev.size(); i++)
        if (ev[i] > tv[i]) return false;
    return true;
}

template <class BK>
struct Activations {
    using Real = typename BK::real;
    using Act = typename BK::act;
    using Set = Acts<Real, Act>;

    const ModelConfig& cfg;  // the model's
    const ClassifierHead head = classifier_head_of<BK>();
    Set train, eval;
    bool backward = true;    // the training set holds the backward's buffers (a model that trains)
    size_t eval_tokens = 0;  // without a training set, the most tokens evaluation runs at a time (0: all)

    explicit Activations(const ModelConfig& c) : cfg(c) {}
    ~Activations() {
        release(train);
        release(eval);
    }
    Activations(const Activations&) = delete;
    Activations& operator=(const Activations&) = delete;

    ActSizes<size_t> sizes(int B, int T) const { return act_sizes<size_t>(cfg, head, B, T); }
    ActSizes<size_t> sizes(const Set& a) const { return sizes(a.B, a.T); }

    bool holds(const Set& a, int B, int T) const { return a.B == B && a.T == T; }

    // Evaluation borrows the training set's buffers when they are large enough (eval_fits): it
    // uses one layer's slot of each. So evaluating during training allocates no second activation
    // set (nor a second logits chunk). Safe with the queued step and its graph: both run in stream
    // order, and every training step writes its activations before it reads them.
    bool eval_fits_train(int B, int T) const {
        return train.B && eval_fits<size_t, Set>(cfg, sizes(B, T), sizes(train));
    }
    // The rows of B that evaluation at length T runs at a time (eval_group_rows): as many as the
    // training set's tokens, else eval_tokens, all B when neither is set.
    int eval_rows(int B, int T) const {
        const size_t tokens = train.B ? sizes(train).N : eval_tokens;
        return tokens ? eval_group_rows(B, T, tokens) : B;
    }

    // Makes a (train or eval) hold buffers for (B, T); the ones it held are freed (a CUDA graph
    // that read them is captured again: GPT::graph_key).
    void resize(Set& a, int B, int T) {
        const bool training = &a == &train;
        if (training && eval.borrowed) eval = Set();  // a view of the buffers freed here
        release(a);
        if (!training && eval_fits_train(B, T)) {
            a = train;
            a.owned.clear(), a.owned_act.clear(), a.owned_int.clear();
            a.B = B, a.T = T, a.Ls = 1, a.train = a.backward = false, a.borrowed = true, a.att_n = sizes(B, T).att;
            return;
        }
        const ActSizes<size_t> s = sizes(B, T);
        a.B = B, a.T = T, a.Ls = training ? cfg.L : 1, a.train = training, a.att_n = s.att;
        a.backward = training && backward;
        activation_buffers<size_t, Set>(cfg, s, a.train, a.backward, [&](auto member, size_t n) {
            auto& p = a.*member;
            if constexpr (std::is_same<decltype(p), int*&>::value)
                a.owned_int.push_back(p = BK::alloc_int(n));
            else if constexpr (std::is_same<decltype(p), Act*&>::value)
                a.owned_act.push_back(p = BK::alloc_act(n));
            else
                a.owned.push_back(p = BK::alloc(n));
        });
        if (!a.qkvr) a.qkvr = a.qkv;
        if (a.backward && !a.dqkvr) a.dqkvr = a.dqkv;
    }

    void release(Set& a) {
        for (Real* p : a.owned) BK::free(p);
        for (Act* p : a.owned_act) BK::free(p);
        for (int* p : a.owned_int) BK::free_int(p);
        a = Set();
    }
};
