// The model's parameters: its shape (ModelConfig), the order, names and shapes of its tensors in
// one flat buffer (MODEL.md's checkpoint table), their counts, the initial weights, and pointers
// to each tensor inside a buffer. Backend-independent: GPT<BK> (model.h) allocates the buffers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pos.h"
#include "rng.h"

struct ModelConfig {
    Pos pos = Pos::rope;
    int L = 4, H = 4, C = 128, V = 50257, maxT = 1024;
    // The MLP's hidden width F (d_ff): 0 = 4C, GPT-2's.
    int mlp_hidden = 0;
    double rope_base = 10000;
    RopeScaling rope_scaling;  // rotary only: the tables' scaling for long sequences (pos.h)
    double sin_scale = kSinScale;  // sinusoidal only: the fixed table's factor (pos.h)
    // Attention keeps each row's log-sum-exp (B,H,T) for backward (flash kernels on the GPU,
    // their loop twin on the CPU) instead of the probabilities (B,H,T,T).
    bool flash = false;
    // The vocabulary rows of wte are padded to a multiple of vocab_pad inside the model (zero rows
    // no token uses): aligned logits rows for vector loads and tensor-core GEMMs. The loss ignores
    // the padded columns, so their gradient stays zero; checkpoints hold the real (V, C) wte.
    int vocab_pad = 128;
    // Rows of B*T per chunk of the classifier (src/classifier.h): only one chunk's logits exist at a
    // time. 0 = the backend's choice (BK::classifier_chunk).
    int classifier_chunk = 0;
    // > 0: the classifier goes over all B*T rows at once in tiles of this many vocabulary columns
    // (classifier_tiles, src/classifier.h) instead of in chunks of rows: only one tile's logits exist.
    int classifier_tile = 0;
    // The head without logits in memory (classifier_fused, src/classifier.h): each row's
    // log-sum-exp and its gradients from logits computed again where needed.
    bool classifier_fused = false;
    int Vp() const { return (V + vocab_pad - 1) / vocab_pad * vocab_pad; }
    int F() const { return mlp_hidden > 0 ? mlp_hidden : 4 * C; }
};

// CpuBackend's classifier chunk (rows); also what the CPU memory estimate assumes.
constexpr int kCpuClassifierChunk = 512;

// One parameter tensor in the flat parameter buffer. Per-layer tensors are
// stacked over layers (leading dimension L).
struct ParamTensor {
    std::string name;
    std::vector<int64_t> shape;
    size_t offset = 0, numel = 0;
    bool matrix = false;  // weight matrices and embeddings (decayed with decay=matrices)
};

// The parameter layout (order, names, shapes): MODEL.md's checkpoint table. With padded, wte has
// the model's Vp rows (the layout of GPT's buffers) instead of V (the checkpoints').
inline std::vector<ParamTensor> param_layout(const ModelConfig& m, bool padded = false) {
    int64_t L = m.L, C = m.C, F = m.F();
    std::vector<ParamTensor> t;
    auto add = [&](const char* name, std::vector<int64_t> shape, bool matrix) {
        ParamTensor p{name, shape, 0, 1, matrix};
        for (auto d : shape) p.numel *= d;
        p.offset = t.empty() ? 0 : t.back().offset + t.back().numel;
        t.push_back(p);
    };
    add("wte", {padded ? m.Vp() : m.V, C}, true);
    const PosTraits& pt = pos_traits(m.pos);
    if (pt.learned_table) add("wpe", {m.maxT, C}, true);
    add("ln1.weight", {L, C}, false);
    add("ln1.bias", {L, C}, false);
    if (pt.complex_qkv) {
        add("attn.qkv.A", {L, 3, C / 2, C / 2}, true);
        add("attn.qkv.B", {L, 3, C / 2, C / 2}, true);
    } else {
        add("attn.qkv.weight", {L, 3 * C, C}, true);
    }
    add("attn.qkv.bias", {L, 3 * C}, false);
    add("attn.proj.weight", {L, C, C}, true);
    add("attn.proj.bias", {L, C}, false);
    add("ln2.weight", {L, C}, false);
    add("ln2.bias", {L, C}, false);
    add("mlp.fc.weight", {L, F, C}, true);
    add("mlp.fc.bias", {L, F}, false);
    add("mlp.proj.weight", {L, C, F}, true);
    add("mlp.proj.bias", {L, C}, false);
    add("lnf.weight", {C}, false);
    add("lnf.bias", {C}, false);
    return t;
}

struct ParamCounts {
    size_t total = 0, embeddings = 0, attention = 0;
};

inline ParamCounts param_counts(const ModelConfig& m) {
    ParamCounts c;
    for (const auto& t : param_layout(m)) {
        c.total += t.numel;
        if (t.name == "wte" || t.name == "wpe") c.embeddings += t.numel;
        if (t.name.rfind("attn.", 0) == 0) c.attention += t.numel;
    }
    return c;
}

// The same model with position scheme p and the default MLP width 4C: what match_params compares with.
inline ModelConfig with_scheme(ModelConfig m, Pos p) {
    m.pos = p, m.mlp_hidden = 0;
    return m;
}

// The MLP width, a multiple of 8 (at least 8), that gives m the parameter count nearest that of
// with_scheme(m, other): the count grows linearly with the width (match_params: CRoPE's saved
// Q/K/V weights spent on a wider MLP).
inline int matched_mlp_hidden(ModelConfig m, Pos other) {
    const double target = (double)param_counts(with_scheme(m, other)).total;
    m.mlp_hidden = 8;
    const double at8 = (double)param_counts(m).total;
    m.mlp_hidden = 16;
    const double per8 = (double)param_counts(m).total - at8;
    return 8 * (int)std::max(1L, 1 + std::lround((target - at8) / per8));
}

// Initial weights (MODEL.md): N(0, 0.02) for matrices, mlp/attn output projections
// scaled by 1/sqrt(2L), biases 0, LayerNorm weights 1. Drawn in double so a
// float and a double model start from the same values.
inline std::vector<double> init_params(const ModelConfig& m, uint64_t seed) {
    auto layout = param_layout(m);
    std::vector<double> p(layout.back().offset + layout.back().numel, 0.0);
    Rng rng(seed);
    for (const auto& t : layout) {
        double* x = p.data() + t.offset;
        bool is_ln_weight = t.name == "ln1.weight" || t.name == "ln2.weight" || t.name == "lnf.weight";
        if (is_ln_weight) {
            for (size_t i = 0; i < t.numel; i++) x[i] = 1.0;
        } else if (t.matrix) {
            bool residual_proj = t.name == "attn.proj.weight" || t.name == "mlp.proj.weight";
            double std = 0.02 / (residual_proj ? std::sqrt(2.0 * m.L) : 1.0);
            for (size_t i = 0; i < t.numel; i++) x[i] = std * rng.normal();
        }
    }
    return p;
}

// Pointers to each parameter tensor (or its gradient, or the compute copy) inside a flat buffer of
// the layout `point` is given (nullptr: absent in this position scheme).
template <class X>
struct TensorsOf {
    X *wte = nullptr, *wpe = nullptr, *ln1w = nullptr, *ln1b = nullptr, *qkvw = nullptr, *qkvA = nullptr,
      *qkvB = nullptr, *qkvb = nullptr;
    X *projw = nullptr, *projb = nullptr, *ln2w = nullptr, *ln2b = nullptr, *fcw = nullptr, *fcb = nullptr,
      *fc2w = nullptr, *fc2b = nullptr, *lnfw = nullptr, *lnfb = nullptr;
};

template <class X>
TensorsOf<X> point(const std::vector<ParamTensor>& layout, X* base) {
    TensorsOf<X> t;
    const std::pair<const char*, X* TensorsOf<X>::*> names[] = {
        {"wte", &TensorsOf<X>::wte},
        {"wpe", &TensorsOf<X>::wpe},
        {"ln1.weight", &TensorsOf<X>::ln1w},
        {"ln1.bias", &TensorsOf<X>::ln1b},
        {"attn.qkv.weight", &TensorsOf<X>::qkvw},
        {"attn.qkv.A", &TensorsOf<X>::qkvA},
        {"attn.qkv.B", &TensorsOf<X>::qkvB},
        {"attn.qkv.bias", &TensorsOf<X>::qkvb},
        {"attn.proj.weight", &TensorsOf<X>::projw},
        {"attn.proj.bias", &TensorsOf<X>::projb},
        {"ln2.weight", &TensorsOf<X>::ln2w},
        {"ln2.bias", &TensorsOf<X>::ln2b},
        {"mlp.fc.weight", &TensorsOf<X>::fcw},
        {"mlp.fc.bias", &TensorsOf<X>::fcb},
        {"mlp.proj.weight", &TensorsOf<X>::fc2w},
        {"mlp.proj.bias", &TensorsOf<X>::fc2b},
        {"lnf.weight", &TensorsOf<X>::lnfw},
        {"lnf.bias", &TensorsOf<X>::lnfb},
    };
    for (const ParamTensor& p : layout)
        for (const auto& [name, member] : names)
            if (p.name == name) t.*member = base + p.offset;
    return t;
}
