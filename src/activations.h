// The activations of GPT<BK>'s forward pass over (B, T) tokens and the buffers of its backward
// (model.h runs the ops that write them): Acts, one set of buffers, and Activations, the model's
// two sets. Training keeps every layer's activations for the backward pass; evaluation keeps one
// layer's worth, and borrows the training set's buffers when they are large enough.
//
// Two element types (model.h says which is which): T, the parameters' (fp32 on the GPU), for
// LayerNorm's mean and rstd, flash attention's log-sum-exps and the losses; A for the rest.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "params.h"

template <class T, class A>
struct Acts {
    int B = 0, Tn = 0, Ls = 0;  // Ls: layers with a slot of their own (L in training, else 1)
    bool train = false;
    bool borrowed = false;  // a view of the training set's buffers (Activations::resize)
    size_t att_n = 0;       // elements of one layer's att or lse
    // per layer: att, the attention probabilities (B,H,T,T), or with cfg.flash lse, the
    // log-sum-exps (B,H,T) (the other one is null). With RoPE, qkv is the GEMM's output without
    // its bias (RoPE adds it into qkvr); fch is always without its bias (GELU adds it).
    A *encoded, *ln1, *qkv, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3, *proj, *lnf, *logits;
    T *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
    // classifier tiles: each row's running max and sum of exp (N), and with a bf16 A d lnf
    // summed over the tiles in T (N, C) before it is rounded into dln (null otherwise)
    T *head_max = nullptr, *head_sum = nullptr, *dlnf = nullptr;
    // classifier chunks: the backend's scratch for one chunk (BK::classifier_head; null if none)
    T* head_scratch = nullptr;
    // backward-only buffers. All in A, dres too (the residual stream's gradient, added into
    // by each LayerNorm backward): it is the dout of GEMMs, whose operands share one type.
    A *dres = nullptr, *dln = nullptr, *datty = nullptr, *dqkv = nullptr, *dqkvr = nullptr, *dfch = nullptr,
      *dfch_gelu = nullptr, *dscores = nullptr;
    int *inputs, *targets;
    std::vector<T*> owned;
    std::vector<A*> owned_act;
};

template <class BK>
struct Activations {
    using T = typename BK::real;
    using A = typename BK::act;
    using Set = Acts<T, A>;

    const ModelConfig& cfg;  // the model's
    Set train, eval;

    explicit Activations(const ModelConfig& c) : cfg(c) {}
    ~Activations() {
        release(train);
        release(eval);
    }
    Activations(const Activations&) = delete;
    Activations& operator=(const Activations&) = delete;

    // Elements of one layer's saved attention state (Acts::att or Acts::lse).
    size_t att_size(int B, int Tn) const { return (size_t)B * cfg.H * Tn * (cfg.flash ? 1 : Tn); }
    // Rows per chunk of the classifier.
    size_t classifier_rows(size_t N) const {
        return std::min(N, (size_t)(cfg.classifier_chunk > 0 ? cfg.classifier_chunk : BK::classifier_chunk));
    }
    // Vocabulary columns per tile of the classifier: all of them (Vp) when it goes by row chunks.
    size_t tile_cols() const {
        return (size_t)(cfg.classifier_tile > 0 ? std::min(cfg.classifier_tile, cfg.Vp()) : cfg.Vp());
    }
    // Elements of the logits buffer: one chunk's rows of all columns, or all N rows of one tile.
    size_t logits_size(size_t N) const {
        return cfg.classifier_tile > 0 ? N * tile_cols() : classifier_rows(N) * cfg.Vp();
    }

    // Elements of the backend's scratch for one classifier chunk (0 with tiles, or none needed).
    size_t head_scratch_size(size_t N) const {
        if (cfg.classifier_tile > 0) return 0;
        return BK::classifier_head_scratch((int)classifier_rows(N), cfg.C, (int)cfg.Vp());
    }

    bool holds(const Set& a, int B, int Tn) const { return a.B == B && a.Tn == Tn; }

    // Evaluation borrows the training set's buffers when they are large enough: it uses one
    // layer's slot of each, and each of its buffers is at most the size of that slot. So
    // evaluating during training allocates no second activation set (nor a second logits chunk).
    // Safe with the queued step and its graph: both run in stream order, and every training step
    // writes its activations before it reads them.
    bool eval_fits_train(int B, int Tn) const {
        const Set& t = train;
        size_t N = (size_t)B * Tn, Nt = (size_t)t.B * t.Tn;
        return t.B && N <= Nt && att_size(B, Tn) <= att_size(t.B, t.Tn) && logits_size(N) <= logits_size(Nt) &&
               head_scratch_size(N) <= head_scratch_size(Nt);
    }

    // Makes a (train or eval) hold buffers for (B, Tn); the ones it held are freed (the caller
    // drops whatever CUDA graph reads them first).
    void resize(Set& a, int B, int Tn) {
        const bool training = &a == &train;
        if (training && eval.borrowed) eval = Set();  // a view of the buffers freed here
        release(a);
        if (!training && eval_fits_train(B, Tn)) {
            a = train;
            a.owned.clear(), a.owned_act.clear();
            a.B = B, a.Tn = Tn, a.Ls = 1, a.train = false, a.borrowed = true, a.att_n = att_size(B, Tn);
            return;
        }
        size_t N = (size_t)B * Tn, C = cfg.C, Ls = training ? cfg.L : 1, att = att_size(B, Tn);
        const bool rotary = pos_traits(cfg.pos).rotary;
        auto mk = [&](size_t n) {  // in T
            T* p = BK::alloc(n);
            a.owned.push_back(p);
            return p;
        };
        auto mka = [&](size_t n) {  // in A
            A* p = BK::alloc_act(n);
            a.owned_act.push_back(p);
            return p;
        };
        a.B = B, a.Tn = Tn, a.Ls = (int)Ls, a.train = training, a.att_n = att;
        a.encoded = mka(N * C);
        a.ln1 = mka(Ls * N * C), a.ln1_mean = mk(Ls * N), a.ln1_rstd = mk(Ls * N);
        a.qkv = mka(Ls * N * 3 * C);
        a.qkvr = rotary ? mka(Ls * N * 3 * C) : a.qkv;
        a.att = cfg.flash ? nullptr : mka(Ls * att);
        a.lse = cfg.flash ? mk(Ls * att) : nullptr;
        a.atty = mka(Ls * N * C), a.res2 = mka(Ls * N * C);
        a.ln2 = mka(Ls * N * C), a.ln2_mean = mk(Ls * N), a.ln2_rstd = mk(Ls * N);
        a.fch = mka(Ls * N * 4 * C), a.fch_gelu = mka(Ls * N * 4 * C);
        a.res3 = mka(Ls * N * C), a.proj = mka(N * C);
        a.lnf = mka(N * C), a.lnf_mean = mk(N), a.lnf_rstd = mk(N);
        a.logits = mka(logits_size(N)), a.losses = mk(N);  // logits: one chunk's or one tile's
        if (cfg.classifier_tile > 0) a.head_max = mk(N), a.head_sum = mk(N);
        if (head_scratch_size(N) > 0) a.head_scratch = mk(head_scratch_size(N));
        if (training) {
            a.dres = mka(N * C), a.dln = mka(N * C), a.datty = mka(N * C);
            a.dqkv = mka(N * 3 * C), a.dqkvr = rotary ? mka(N * 3 * C) : a.dqkv;
            a.dfch = mka(N * 4 * C), a.dfch_gelu = mka(N * 4 * C), a.dscores = cfg.flash ? nullptr : mka(att);
            if (!std::is_same<A, T>::value && cfg.classifier_tile > 0) a.dlnf = mk(N * C);
        }
        a.inputs = BK::alloc_int(N);
        a.targets = BK::alloc_int(N);
    }

    void release(Set& a) {
        for (T* p : a.owned) BK::free(p);
        for (A* p : a.owned_act) BK::free(p);
        if (a.B && !a.borrowed) {
            BK::free_int(a.inputs);
            BK::free_int(a.targets);
        }
        a = Set();
    }
};
