// GPT-2 with a choice of position scheme (src/pos.h; this file reads its traits):
// the one model orchestration shared by every backend. A backend BK (CpuBackend<T>
// in backend_cpu.h, CudaBackend and CudaBackendBf16 in cuda/backend_cuda.h) supplies memory
// and the ops; this file says in which order they run: forward, backward, AdamW update.
//
// Two element types: T (BK::real) for the parameters, their gradients and AdamW's moments,
// A (BK::act) for the activations and their gradients. They are the same type except on
// CudaBackendBf16 (T float, A bf16). The GEMMs multiply activations by weights of type A: the
// compute copy wc, which is the parameter buffer itself when A is T, else a bf16 copy that
// AdamW writes in its pass. Kept in T (fp32) whatever A is, because they are reductions or
// feed the loss: LayerNorm's mean and rstd, flash attention's log-sum-exps, the losses, the
// fixed position tables. The cuBLAS attention's probabilities and dscores are activations (A).
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dist.h"
#include "pos.h"
#include "rng.h"
#include "step.h"

struct ModelConfig {
    Pos pos = Pos::rope;
    int L = 4, H = 4, C = 128, V = 50257, maxT = 1024;
    double rope_base = 10000;
    // Attention keeps each row's log-sum-exp (B,H,T) for backward (flash kernels on the GPU,
    // their loop twin on the CPU) instead of the probabilities (B,H,T,T).
    bool flash = false;
    // The vocabulary rows of wte are padded to a multiple of vocab_pad inside the model (zero rows
    // no token uses): aligned logits rows for vector loads and tensor-core GEMMs. The loss ignores
    // the padded columns, so their gradient stays zero; checkpoints hold the real (V, C) wte.
    int vocab_pad = 128;
    // Rows of B*T per chunk of the classifier (GPT::classifier): only one chunk's logits exist at a
    // time. 0 = the backend's choice (BK::classifier_chunk).
    int classifier_chunk = 0;
    // > 0: the classifier goes over all B*T rows at once in tiles of this many vocabulary columns
    // (GPT::classifier_tiles) instead of in chunks of rows: only one tile's logits exist.
    int classifier_tile = 0;
    int Vp() const { return (V + vocab_pad - 1) / vocab_pad * vocab_pad; }
};

// Phases of a training step in the profiling mode (GPT::profile): the LM head and loss
// (GPT::classifier, forward and backward), attention (forward and backward), AdamW, and the rest.
enum class Phase { head, attention, rest, adamw };
constexpr int kPhases = 4;
constexpr const char* kPhaseNames[kPhases] = {"head_loss", "attention", "rest", "adamw"};

// AdamW's settings that stay fixed over a run (the learning rate and the step count are
// train_step's arguments). torch.optim.AdamW semantics; clipping as torch's clip_grad_norm_.
struct AdamWConfig {
    double beta1 = 0.9, beta2 = 0.999;
    float eps = 1e-8f, wd = 0.0f;
    bool decay_all = true;  // every tensor decays, else only weight matrices and embeddings
    double grad_clip = 0;   // clip the global gradient norm to this (0 = off)
    bool operator==(const AdamWConfig& o) const {
        return beta1 == o.beta1 && beta2 == o.beta2 && eps == o.eps && wd == o.wd && decay_all == o.decay_all &&
               grad_clip == o.grad_clip;
    }
};

// What a training step gives back (GPT::read_step).
struct StepResult {
    double loss = 0;     // mean cross-entropy of this rank's tokens
    double norm = 0;     // global gradient norm (before clipping)
    double comm_ms = 0;  // data parallel: time of the gradient sum and the norm
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

// The parameter layout (order, names, shapes): README's checkpoint table. With padded, wte has
// the model's Vp rows (the layout of GPT's buffers) instead of V (the checkpoints').
inline std::vector<ParamTensor> param_layout(const ModelConfig& m, bool padded = false) {
    int64_t L = m.L, C = m.C;
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
    add("mlp.fc.weight", {L, 4 * C, C}, true);
    add("mlp.fc.bias", {L, 4 * C}, false);
    add("mlp.proj.weight", {L, C, 4 * C}, true);
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

template <class BK>
struct GPT {
    using T = typename BK::real;
    using A = typename BK::act;
    static constexpr bool kActCopy = !std::is_same<A, T>::value;  // wc is a copy of the weights in A

    // Pointers to each parameter tensor (or its gradient, or the compute copy) inside a flat buffer.
    template <class X>
    struct TensorsOf {
        X *wte = nullptr, *wpe = nullptr, *ln1w, *ln1b, *qkvw = nullptr, *qkvA = nullptr, *qkvB = nullptr, *qkvb;
        X *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fc2w, *fc2b, *lnfw, *lnfb;
    };
    using Tensors = TensorsOf<T>;

    // Activations for one (B, T). Training keeps every layer's activations for the
    // backward pass; evaluation reuses one layer's worth.
    struct Acts {
        int B = 0, Tn = 0, Ls = 0;
        bool train = false;
        bool borrowed = false;  // a view of the training activations' buffers (GPT::ensure_acts)
        // per layer: att, the attention probabilities (B,H,T,T), or with cfg.flash lse, the
        // log-sum-exps (B,H,T) (the other one is null). With RoPE, qkv is the GEMM's output without
        // its bias (RoPE adds it into qkvr); fch is always without its bias (GELU adds it).
        A *encoded, *ln1, *qkv, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3, *proj, *lnf, *logits;
        T *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
        // classifier tiles: each row's running max and sum of exp (N), and with kActCopy d lnf
        // summed over the tiles in T (N, C) before it is rounded into dln (null otherwise)
        T *head_max = nullptr, *head_sum = nullptr, *dlnf = nullptr;
        // backward-only buffers. All in A, dres too (the residual stream's gradient, added into
        // by each LayerNorm backward): it is the dout of GEMMs, whose operands share one type.
        A *dres = nullptr, *dln = nullptr, *datty = nullptr, *dqkv = nullptr, *dqkvr = nullptr, *dfch = nullptr,
          *dfch_gelu = nullptr, *dscores = nullptr;
        int *inputs, *targets;
        std::vector<T*> owned;
        std::vector<A*> owned_act;
    };

    ModelConfig cfg;
    const PosTraits& pt;  // the position scheme's traits
    // layout: the checkpoints' tensors (what get() returns and set_params() takes); buf_layout: the
    // same with wte's Vp rows, as the buffers hold them. num_params: elements of each buffer.
    std::vector<ParamTensor> layout, buf_layout;
    size_t num_params = 0;
    T *params = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
    A* wc = nullptr;    // the GEMMs' weights: params, or their copy in A (kActCopy)
    dist::Shard shard;  // data parallel: the part of the parameters whose AdamW moments m, v hold
    Tensors w, g;
    TensorsOf<A> wa;            // into wc
    A* qkv_expanded = nullptr;  // complex_qkv: real (L,3C,C) weights
    T* dqkv_w = nullptr;        // and a (3C,C) gradient
    T *pos_table = nullptr, *rope_cos = nullptr, *rope_sin = nullptr;
    int table_len = 0;  // positions covered by the tables
    Acts train_acts, eval_acts;
    std::vector<T> host_losses;
    // The training step's scalars that change from step to step (src/step.h), in backend memory.
    StepScalars* scalars = nullptr;
    // Per-token losses on their way to the host: pinned memory, grown as needed, filled by an
    // asynchronous copy; read only once an event recorded after the copy has passed.
    struct HostLosses {
        T* p = nullptr;
        size_t n = 0, cap = 0;
        // Queues the copy of n losses from backend memory (the last copy into it has been read).
        void fetch(const T* src, size_t count) {
            if (count > cap) {
                BK::free_pinned(p);
                p = static_cast<T*>(BK::alloc_pinned(count * sizeof(T)));
                cap = count;
            }
            n = count;
            BK::copy_to_host_async(p, src, count * sizeof(T));
        }
        double mean() const { return GPT::mean(p, n); }
        void release() { BK::free_pinned(p), p = nullptr, n = cap = 0; }
    };
    // train_step's results on their way to the host: pinned memory filled by asynchronous copies,
    // an event when they are there. Two, used in turn: step k+1 is queued before step k is read.
    struct Readback {
        HostLosses losses;  // (B*T) per-token losses
        StepScalars* scalars = nullptr;
        double comm_ms = 0;
        typename BK::Event done{};
    };
    Readback readback[2];
    std::deque<Readback*> unread;  // queued steps not read yet, oldest first
    int next_readback = 0;
    // CudaBackend: with use_graph, train_step replays one CUDA graph of the whole step, captured
    // at the first step after an eager one (which sized every scratch buffer).
    bool use_graph = false;
    typename BK::Graph graph{};
    AdamWConfig graph_opt;   // the settings of the graph (its kernel arguments: it is dropped when they change)
    size_t graph_nodes = 0;  // nodes of the last graph captured (kernels, GEMMs, memsets, copies)
    int eager_steps = 0;     // train steps run eagerly since the graph was last dropped
    // Evaluation batches queued without waiting (eval_queue): each batch's per-token losses copied
    // into its own pinned buffer, an event after the last copy; eval_read() waits once. With
    // use_graph the evaluation forward replays its own CUDA graph, captured at the second batch
    // of a shape (the first, eager, sizes the scratch buffers).
    std::vector<HostLosses> eval_losses;
    size_t eval_queued = 0;  // batches queued since the last eval_read
    typename BK::Event eval_done{};
    typename BK::Graph eval_graph{};
    bool eval_eager = false;  // an eager batch ran at eval_acts' shape since eval_graph was dropped
    // Profiling mode: the training step marks its phases (BK::profile_mark: the time from one mark
    // to the next counts to the first one's phase); profile_read() ends the step's timeline.
    bool profile = false;
    void mark(Phase p, bool training = true) {
        if (profile && training) BK::profile_mark((int)p);
    }
    // Milliseconds per phase (kPhaseNames order) since the step's first mark; waits for the step.
    std::vector<double> profile_read() {
        BK::profile_mark((int)Phase::rest);  // the end of the last phase
        return BK::profile_read(kPhases);
    }

    explicit GPT(const ModelConfig& c)
        : cfg(c), pt(pos_traits(c.pos)), layout(param_layout(c)), buf_layout(param_layout(c, true)) {
        if (cfg.vocab_pad < 1) throw std::runtime_error("vocab_pad must be at least 1");
        num_params = buf_layout.back().offset + buf_layout.back().numel;
        params = BK::alloc(num_params);
        grads = BK::alloc(num_params);
        m = BK::alloc(num_params);
        v = BK::alloc(num_params);
        w = point(params);
        g = point(grads);
        point_compute_copy();
        shard = dist::shard_of(num_params, false);
        if (pt.complex_qkv) {
            qkv_expanded = BK::alloc_act((size_t)cfg.L * 3 * cfg.C * cfg.C);
            dqkv_w = BK::alloc((size_t)3 * cfg.C * cfg.C);
        }
        set_max_positions(cfg.maxT);
        scalars = BK::alloc_scalars();
        for (Readback& r : readback) {
            r.scalars = static_cast<StepScalars*>(BK::alloc_pinned(sizeof(StepScalars)));
            r.done = BK::event_create();
        }
        eval_done = BK::event_create();
    }
    ~GPT() {
        drop_graph();
        BK::synchronize();  // no copy into the readback buffers is still on its way
        for (Readback& r : readback) {
            r.losses.release();
            BK::free_pinned(r.scalars);
            BK::event_destroy(r.done);
        }
        for (HostLosses& e : eval_losses) e.release();
        BK::event_destroy(eval_done);
        BK::free_scalars(scalars);
        for (T* p : {params, grads, m, v, dqkv_w, pos_table, rope_cos, rope_sin})
            if (p) BK::free(p);
        if (qkv_expanded) BK::free(qkv_expanded);
        if (kActCopy && wc) BK::free(wc);
        free_acts(train_acts);
        free_acts(eval_acts);
    }
    GPT(const GPT&) = delete;
    GPT& operator=(const GPT&) = delete;

    template <class X>
    TensorsOf<X> point(X* base) const {
        TensorsOf<X> t;
        for (const auto& p : buf_layout) {
            X* x = base + p.offset;
            const std::string& n = p.name;
            if (n == "wte")
                t.wte = x;
            else if (n == "wpe")
                t.wpe = x;
            else if (n == "ln1.weight")
                t.ln1w = x;
            else if (n == "ln1.bias")
                t.ln1b = x;
            else if (n == "attn.qkv.weight")
                t.qkvw = x;
            else if (n == "attn.qkv.A")
                t.qkvA = x;
            else if (n == "attn.qkv.B")
                t.qkvB = x;
            else if (n == "attn.qkv.bias")
                t.qkvb = x;
            else if (n == "attn.proj.weight")
                t.projw = x;
            else if (n == "attn.proj.bias")
                t.projb = x;
            else if (n == "ln2.weight")
                t.ln2w = x;
            else if (n == "ln2.bias")
                t.ln2b = x;
            else if (n == "mlp.fc.weight")
                t.fcw = x;
            else if (n == "mlp.fc.bias")
                t.fcb = x;
            else if (n == "mlp.proj.weight")
                t.fc2w = x;
            else if (n == "mlp.proj.bias")
                t.fc2b = x;
            else if (n == "lnf.weight")
                t.lnfw = x;
            else if (n == "lnf.bias")
                t.lnfb = x;
        }
        return t;
    }

    // wc and wa: the parameters themselves, or (kActCopy) a buffer of their rounded copy.
    void point_compute_copy() {
        if constexpr (kActCopy) {
            if (!wc) wc = BK::alloc_act(num_params);
        } else {
            wc = params;
        }
        wa = point(wc);
    }
    // Rounds all of params into wc (kActCopy), after the weights were set other than by AdamW.
    void refresh_compute_copy() {
        if constexpr (kActCopy) BK::to_bf16(wc, params, num_params);
    }

    // ZeRO-1 over the ranks of dist::group(): m and v keep only this rank's shard; params and
    // grads grow to block x world elements (a zero tail) so collectives split them evenly.
    // Call before the weights are set.
    void shard_optimizer() {
        shard = dist::shard_of(num_params, true);
        if (!shard.zero) return;
        for (T** p : {&params, &grads}) BK::free(*p), *p = BK::alloc(shard.block * dist::group().world);
        for (T** p : {&m, &v}) BK::free(*p), *p = BK::alloc(shard.block);
        w = point(params);
        g = point(grads);
        point_compute_copy();
    }

    // Host vectors in the checkpoint layout <-> the buffer layout: wte comes first, so only the
    // tensors after it move, by the padded rows (zero in the buffer layout).
    std::vector<T> padded(const std::vector<T>& h) const {
        size_t real = (size_t)cfg.V * cfg.C, pad = (size_t)(cfg.Vp() - cfg.V) * cfg.C;
        if (h.size() + pad != num_params) throw std::logic_error("padded: not a vector of the checkpoint layout");
        std::vector<T> b(num_params, T(0));
        std::copy(h.begin(), h.begin() + real, b.begin());
        std::copy(h.begin() + real, h.end(), b.begin() + real + pad);
        return b;
    }
    std::vector<T> unpadded(const std::vector<T>& b) const {
        size_t real = (size_t)cfg.V * cfg.C, pad = (size_t)(cfg.Vp() - cfg.V) * cfg.C;
        std::vector<T> h(b.begin(), b.begin() + real);
        h.insert(h.end(), b.begin() + real + pad, b.begin() + num_params);
        return h;
    }
    // Uploads a host copy of all parameters (layout order).
    void set_params(const std::vector<T>& host) {
        BK::copy_from_host(params, padded(host).data(), num_params);
        refresh_compute_copy();
    }
    // A buffer (params, grads, m, v) on the host: as it is (buffer layout), or in layout order.
    std::vector<T> get_buffer(const T* buf) const {
        std::vector<T> h(num_params);
        BK::copy_to_host(h.data(), buf, num_params);
        return h;
    }
    std::vector<T> get(const T* buf) const { return unpadded(get_buffer(buf)); }
    void init(uint64_t seed) {
        auto p = init_params(cfg, seed);
        set_params(std::vector<T>(p.begin(), p.end()));
    }

    // Fixed position tables (sinusoidal, rotary) must cover the longest sequence run.
    void set_max_positions(int n) {
        if (n <= table_len) return;
        drop_graph();  // it reads the tables replaced here
        table_len = n;
        auto upload = [](T*& dst, const std::vector<double>& src) {
            if (dst) BK::free(dst);
            dst = BK::alloc(src.size());
            std::vector<T> t(src.begin(), src.end());
            BK::copy_from_host(dst, t.data(), t.size());
        };
        if (pt.fixed_table) upload(pos_table, sinusoidal_table(n, cfg.C));
        if (pt.rotary) {
            std::vector<double> c, s;
            rope_tables(c, s, n, cfg.C / cfg.H, cfg.rope_base);
            upload(rope_cos, c);
            upload(rope_sin, s);
        }
    }

    void free_acts(Acts& a) {
        for (T* p : a.owned) BK::free(p);
        for (A* p : a.owned_act) BK::free(p);
        if (a.B && !a.borrowed) {
            BK::free_int(a.inputs);
            BK::free_int(a.targets);
        }
        a = Acts();
    }

    // Elements of one layer's saved attention state (Acts::att or Acts::lse).
    size_t att_size(int B, int Tn) const { return (size_t)B * cfg.H * Tn * (cfg.flash ? 1 : Tn); }

    // Evaluation borrows the training activations' buffers when they are large enough: it uses
    // one layer's slot of each, and each of its buffers is at most the size of that slot. So
    // evaluating during training allocates no second activation set (nor a second logits chunk).
    // Safe with the queued step and its graph: both run in stream order, and every training step
    // writes its activations before it reads them.
    bool eval_fits_train(int B, int Tn) const {
        const Acts& t = train_acts;
        size_t N = (size_t)B * Tn, Nt = (size_t)t.B * t.Tn;
        return t.B && N <= Nt && att_size(B, Tn) <= att_size(t.B, t.Tn) && logits_size(N) <= logits_size(Nt);
    }

    // The training activations for (B, Tn) before any evaluation, so that evaluation borrows them.
    void reserve_training(int B, int Tn) { ensure_acts(train_acts, B, Tn, true); }

    void ensure_acts(Acts& a, int B, int Tn, bool train) {
        if (a.B == B && a.Tn == Tn) return;
        if (&a == &train_acts) {
            drop_graph();                                // it reads the buffers freed here
            if (eval_acts.borrowed) eval_acts = Acts();  // a view of them
        }
        if (&a == &eval_acts) drop_eval_graph();  // it reads the buffers replaced here
        free_acts(a);
        if (!train && eval_fits_train(B, Tn)) {
            a = train_acts;
            a.owned.clear(), a.owned_act.clear();
            a.B = B, a.Tn = Tn, a.Ls = 1, a.train = false, a.borrowed = true;
            return;
        }
        size_t N = (size_t)B * Tn, C = cfg.C, Ls = train ? cfg.L : 1, att = att_size(B, Tn);
        auto mk = [&](size_t n) {  // fp32 (T)
            T* p = BK::alloc(n);
            a.owned.push_back(p);
            return p;
        };
        auto mka = [&](size_t n) {  // activations (A)
            A* p = BK::alloc_act(n);
            a.owned_act.push_back(p);
            return p;
        };
        a.B = B, a.Tn = Tn, a.Ls = (int)Ls, a.train = train;
        a.encoded = mka(N * C);
        a.ln1 = mka(Ls * N * C), a.ln1_mean = mk(Ls * N), a.ln1_rstd = mk(Ls * N);
        a.qkv = mka(Ls * N * 3 * C);
        a.qkvr = pt.rotary ? mka(Ls * N * 3 * C) : a.qkv;
        a.att = cfg.flash ? nullptr : mka(Ls * att);
        a.lse = cfg.flash ? mk(Ls * att) : nullptr;
        a.atty = mka(Ls * N * C), a.res2 = mka(Ls * N * C);
        a.ln2 = mka(Ls * N * C), a.ln2_mean = mk(Ls * N), a.ln2_rstd = mk(Ls * N);
        a.fch = mka(Ls * N * 4 * C), a.fch_gelu = mka(Ls * N * 4 * C);
        a.res3 = mka(Ls * N * C), a.proj = mka(N * C);
        a.lnf = mka(N * C), a.lnf_mean = mk(N), a.lnf_rstd = mk(N);
        a.logits = mka(logits_size(N)), a.losses = mk(N);  // logits: one chunk's or one tile's
        if (cfg.classifier_tile > 0) a.head_max = mk(N), a.head_sum = mk(N);
        if (train) {
            a.dres = mka(N * C), a.dln = mka(N * C), a.datty = mka(N * C);
            a.dqkv = mka(N * 3 * C), a.dqkvr = pt.rotary ? mka(N * 3 * C) : a.dqkv;
            a.dfch = mka(N * 4 * C), a.dfch_gelu = mka(N * 4 * C), a.dscores = cfg.flash ? nullptr : mka(att);
            if (kActCopy && cfg.classifier_tile > 0) a.dlnf = mk(N * C);
        }
        a.inputs = BK::alloc_int(N);
        a.targets = BK::alloc_int(N);
    }

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

    // Forward pass over inputs (B,T) (host ids). With targets, returns the mean cross-entropy
    // (without grad: one evaluation batch through eval_queue, read at once); with grad, also
    // zeroes the gradients and runs the classifier's backward (d wte and d lnf in a.dln, for
    // backward()). Without targets it stops at the final LayerNorm (logits() reads it).
    double forward(const int* inputs, const int* targets, int B, int Tn, bool grad) {
        if (targets && !grad) {  // evaluation: the queued path, read at once
            if (eval_queued) throw std::logic_error("forward: evaluation batches are queued (eval_read)");
            eval_queue(inputs, targets, B, Tn);
            return eval_read().front();
        }
        Acts& a = upload(inputs, targets, B, Tn, grad);
        const size_t N = (size_t)B * Tn;
        forward_pass(a, targets != nullptr);
        if (!targets) return 0.0;
        host_losses.resize(N);
        BK::copy_to_host(host_losses.data(), a.losses, N);
        return mean(host_losses.data(), N);
    }
    // One evaluation batch over inputs and targets (B,T) (host ids), queued without waiting for the
    // device: the uploads, the forward pass and the loss, and an asynchronous copy of the per-token
    // losses into pinned memory. eval_read() returns the queued batches' mean losses.
    void eval_queue(const int* inputs, const int* targets, int B, int Tn) {
        Acts& a = upload(inputs, targets, B, Tn, false);
        // with use_graph the replay of eval_graph, captured when a second batch of this shape comes
        auto forward = [&] { forward_pass(a, true); };
        if (!replay(eval_graph, eval_eager, forward)) forward(), eval_eager = true;
        if (eval_queued == eval_losses.size()) eval_losses.emplace_back();
        eval_losses[eval_queued++].fetch(a.losses, (size_t)B * Tn);  // read at the last eval_read
        BK::event_record(eval_done);
    }
    // The mean loss of each batch queued by eval_queue since the last call, in order; waits for them.
    std::vector<double> eval_read() {
        std::vector<double> means;
        if (eval_queued) BK::event_wait(eval_done);
        for (size_t i = 0; i < eval_queued; i++) means.push_back(eval_losses[i].mean());
        eval_queued = 0;
        return means;
    }
    // The activations for (B, Tn) (training's or evaluation's) with inputs and, if given, targets
    // (host ids) uploaded into them.
    Acts& upload(const int* inputs, const int* targets, int B, int Tn, bool train) {
        if (Tn > table_len) throw std::runtime_error("sequence longer than the position tables");
        Acts& a = train ? train_acts : eval_acts;
        ensure_acts(a, B, Tn, train);
        const size_t N = (size_t)B * Tn;
        BK::copy_ints_from_host(a.inputs, inputs, N);
        if (targets) BK::copy_ints_from_host(a.targets, targets, N);
        return a;
    }

    // The mean of n per-token losses, summed in order in double (the same on every backend).
    static double mean(const T* losses, size_t n) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += losses[i];
        return sum / n;
    }

    // The forward pass over a.inputs (and with loss, a.targets) in backend memory; with a.train
    // (the training activations) also the gradients' zeroing and the classifier's backward.
    void forward_pass(Acts& a, bool loss) {
        const bool grad = a.train;
        int B = a.B, Tn = a.Tn, H = cfg.H;
        size_t N = (size_t)B * Tn, C = cfg.C;
        mark(Phase::rest, grad);
        if (pt.complex_qkv)
            for (int l = 0; l < cfg.L; l++)
                BK::crope_expand(qkv_expanded + (size_t)l * 3 * C * C, w.qkvA + (size_t)l * 3 * C * C / 4,
                                 w.qkvB + (size_t)l * 3 * C * C / 4, (int)C);

        const T* add_pos = pt.learned_table ? w.wpe : pt.fixed_table ? pos_table : nullptr;  // fp32, as wte
        BK::encoder_forward(a.encoded, a.inputs, w.wte, add_pos, B, Tn, (int)C);
        // The LayerNorm before layer l (l = L: the final one) and where it writes. Each one after
        // the first comes with the residual add before it (residual_layernorm_forward).
        struct Norm {
            A* out;
            T *mean, *rstd;
            const T *w, *b;
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
            const A* x = l == 0 ? a.encoded : a.res3 + (a.train ? l - 1 : 0) * N * C;  // (B,T,C)
            const A* ln1 = norm(l).out;
            A* qkv = a.qkv + s * N * 3 * C;
            A* qkvr = a.qkvr + s * N * 3 * C;
            A* atty = a.atty + s * N * C;
            A* res2 = a.res2 + s * N * C;
            A* ln2 = a.ln2 + s * N * C;
            A* fch = a.fch + s * N * 4 * C;
            A* fch_gelu = a.fch_gelu + s * N * 4 * C;
            A* res3 = a.res3 + s * N * C;
            // The biases go in with the elementwise op after each GEMM (RoPE, the residual adds,
            // GELU), not in a pass of their own; without RoPE the qkv GEMM adds its bias itself.
            const T* qkvb = w.qkvb + l * 3 * C;
            BK::matmul_forward(qkv, ln1, qkv_weight(l), pt.rotary ? nullptr : qkvb, (int)N, (int)C, (int)(3 * C));
            if (pt.rotary) BK::rope_forward(qkvr, qkv, qkvb, rope_cos, rope_sin, B, Tn, (int)C, H);  // (B,T,3C)
            mark(Phase::attention, grad);
            if (cfg.flash)
                BK::attention_forward_lse(atty, a.lse + s * att_size(B, Tn), qkvr, B, Tn, (int)C, H);  // (B,T,C)
            else
                BK::attention_forward(atty, a.att + s * att_size(B, Tn), qkvr, B, Tn, (int)C, H);
            mark(Phase::rest, grad);
            BK::matmul_forward(a.proj, atty, wa.projw + l * C * C, nullptr, (int)N, (int)C, (int)C);
            BK::residual_layernorm_forward(res2, ln2, a.ln2_mean + s * N, a.ln2_rstd + s * N, x, a.proj,
                                           w.projb + l * C, w.ln2w + l * C, w.ln2b + l * C, (int)N, (int)C);
            BK::matmul_forward(fch, ln2, wa.fcw + l * 4 * C * C, nullptr, (int)N, (int)C, (int)(4 * C));
            BK::gelu_forward(fch_gelu, fch, w.fcb + l * 4 * C, (int)N, (int)(4 * C));
            BK::matmul_forward(a.proj, fch_gelu, wa.fc2w + l * 4 * C * C, nullptr, (int)N, (int)(4 * C), (int)C);
            Norm next = norm(l + 1);
            BK::residual_layernorm_forward(res3, next.out, next.mean, next.rstd, res2, a.proj, w.fc2b + l * C, next.w,
                                           next.b, (int)N, (int)C);
        }
        if (!loss) return;
        if (grad) BK::zero(grads, num_params);
        // the loss gradient is scaled by 1 / (tokens of all ranks): summed over ranks, it is the global mean's
        double dscale = 1.0 / ((double)N * dist::group().world);
        mark(Phase::head, grad);
        classifier(a, N, grad ? T(dscale) : T(0));
        mark(Phase::rest, grad);
    }

    // The tied LM head and the loss, fused, chunk by chunk over the N rows of a.lnf: per chunk
    // the logits (rows, Vp), then the losses with dlogits = (softmax - onehot) * dscale written
    // over them, then (dscale != 0) the head's two backward GEMMs, d lnf into a.dln and d wte
    // accumulated, before the next chunk reuses the logits buffer.
    void classifier(Acts& a, size_t N, T dscale) {
        if (cfg.classifier_tile > 0) return classifier_tiles(a, N, dscale);
        size_t C = cfg.C, Vp = cfg.Vp(), chunk = classifier_rows(N);
        for (size_t r = 0; r < N; r += chunk) {
            int n = (int)std::min(chunk, N - r);
            BK::matmul_forward(a.logits, a.lnf + r * C, wa.wte, nullptr, n, (int)C, (int)Vp);  // (n, Vp)
            BK::classifier_loss(a.logits, a.losses + r, a.targets + r, n, cfg.V, (int)Vp, dscale);
            if (dscale != T(0))
                BK::matmul_backward(a.dln + r * C, g.wte, nullptr, a.logits, a.lnf + r * C, wa.wte, n, (int)C, (int)Vp);
        }
    }

    // The classifier over vocabulary tiles (cfg.classifier_tile): every GEMM takes all N rows and
    // one tile's columns of wte, so only one (N, tile) tile of logits exists, small enough to stay
    // in a GPU's L2 cache between the GEMM that writes it and the kernels that read it. Pass 1 folds
    // each tile into each row's running max and sum of exp, which give the losses; pass 2 (training)
    // computes each tile's logits again, turns them into dlogits and runs the head's backward GEMMs
    // on them: d lnf summed over the tiles (in T), each tile's rows of d wte.
    void classifier_tiles(Acts& a, size_t N, T dscale) {
        const size_t C = cfg.C, Vp = cfg.Vp(), tile = tile_cols();
        auto tiles = [&](const auto& f) {
            for (size_t v0 = 0; v0 < Vp; v0 += tile) {
                const int w = (int)std::min(tile, Vp - v0);
                BK::matmul_forward(a.logits, a.lnf, wa.wte + v0 * C, nullptr, (int)N, (int)C, w);  // (N, w)
                f((int)v0, w);
            }
        };
        tiles([&](int v0, int w) {
            BK::classifier_tile_lse(a.logits, a.head_max, a.head_sum, a.losses, a.targets, (int)N, w, v0, cfg.V);
        });
        BK::classifier_tile_loss(a.losses, a.head_max, a.head_sum, (int)N);  // head_max: the log-sum-exps now
        if (dscale == T(0)) return;
        T* dx;  // d lnf
        if constexpr (kActCopy)
            dx = a.dlnf;
        else
            dx = a.dln;
        BK::zero(dx, N * C);
        tiles([&](int v0, int w) {
            const A* wt = wa.wte + (size_t)v0 * C;
            BK::classifier_tile_dlogits(a.logits, a.head_max, a.targets, (int)N, w, v0, cfg.V, dscale);
            BK::matmul_dinp_add(dx, a.logits, wt, (int)N, (int)C, w);
            BK::matmul_backward((A*)nullptr, g.wte + (size_t)v0 * C, nullptr, a.logits, a.lnf, wt, (int)N, (int)C, w);
        });
        if constexpr (kActCopy) BK::to_bf16(a.dln, dx, N * C);
    }

    // Rows [row0, row0 + rows) of the (B*T, V) logits of the last forward without grad, on the
    // host. The classifier keeps no logits: they are computed again from the final LayerNorm, a
    // block of the logits buffer's shape at a time (a chunk of rows, or all rows of one tile).
    std::vector<T> logits(size_t row0, size_t rows) {
        Acts& a = eval_acts;
        const size_t C = cfg.C, V = cfg.V, Vp = cfg.Vp(), tile = tile_cols();
        const size_t chunk = cfg.classifier_tile > 0 ? rows : classifier_rows((size_t)a.B * a.Tn);
        std::vector<T> h(rows * V), buf;
        for (size_t r = 0; r < rows; r += chunk)
            for (size_t v0 = 0; v0 < V; v0 += tile) {
                const size_t n = std::min(chunk, rows - r), w = std::min(tile, Vp - v0);
                BK::matmul_forward(a.logits, a.lnf + (row0 + r) * C, wa.wte + v0 * C, nullptr, (int)n, (int)C, (int)w);
                buf.resize(n * w);
                BK::copy_to_host(buf.data(), a.logits, n * w);
                for (size_t i = 0; i < n; i++)
                    std::copy_n(buf.begin() + i * w, std::min(w, V - v0), h.begin() + (r + i) * V + v0);
            }
        return h;
    }

    const A* qkv_weight(int l) const {
        size_t C = cfg.C;
        return (pt.complex_qkv ? qkv_expanded : wa.qkvw) + (size_t)l * 3 * C * C;
    }

    // Backward pass of the last forward(…, grad=true): fills grads.
    void backward() {
        Acts& a = train_acts;
        int B = a.B, Tn = a.Tn, H = cfg.H;
        size_t N = (size_t)B * Tn, C = cfg.C;
        // forward() zeroed the gradients and left d lnf in a.dln (classifier)
        BK::zero(a.dres, N * C);
        // Each LayerNorm backward adds into the residual stream's gradient, and also sums what it
        // leaves there over the rows: the gradient of the bias of the branch added to the stream
        // just before (res3 = res2 + fc2 out + fc2b, res2 = res3[l-1] + proj out + projb).
        BK::layernorm_backward(a.dres, g.lnfw, g.lnfb, g.fc2b + (cfg.L - 1) * C, a.dln, a.res3 + (cfg.L - 1) * N * C,
                               w.lnfw, a.lnf_mean, a.lnf_rstd, (int)N, (int)C);
        for (int l = cfg.L - 1; l >= 0; l--) {
            // a.dres holds d(res3[l]); the residual passes it on unchanged.
            const A* x = l == 0 ? a.encoded : a.res3 + (l - 1) * N * C;
            BK::matmul_backward(a.dfch_gelu, g.fc2w + l * 4 * C * C, nullptr, a.dres, a.fch_gelu + l * N * 4 * C,
                                wa.fc2w + l * 4 * C * C, (int)N, (int)(4 * C), (int)C);
            BK::gelu_backward(a.dfch, a.fch + l * N * 4 * C, w.fcb + l * 4 * C, a.dfch_gelu, (int)N, (int)(4 * C));
            BK::matmul_backward(a.dln, g.fcw + l * 4 * C * C, g.fcb + l * 4 * C, a.dfch, a.ln2 + l * N * C,
                                wa.fcw + l * 4 * C * C, (int)N, (int)C, (int)(4 * C));
            BK::layernorm_backward(a.dres, g.ln2w + l * C, g.ln2b + l * C, g.projb + l * C, a.dln, a.res2 + l * N * C,
                                   w.ln2w + l * C, a.ln2_mean + l * N, a.ln2_rstd + l * N, (int)N, (int)C);
            // a.dres now holds d(res2[l])
            BK::matmul_backward(a.datty, g.projw + l * C * C, nullptr, a.dres, a.atty + l * N * C, wa.projw + l * C * C,
                                (int)N, (int)C, (int)C);
            const size_t at = l * att_size(B, Tn);
            mark(Phase::attention);
            if (cfg.flash)
                BK::attention_backward_lse(a.dqkvr, a.datty, a.qkvr + l * N * 3 * C, a.atty + l * N * C, a.lse + at, B,
                                           Tn, (int)C, H);
            else
                BK::attention_backward(a.dqkvr, a.dscores, a.datty, a.qkvr + l * N * 3 * C, a.att + at, B, Tn, (int)C,
                                       H);
            mark(Phase::rest);
            if (a.dqkv != a.dqkvr) {
                BK::rope_backward(a.dqkv, a.dqkvr, rope_cos, rope_sin, B, Tn, (int)C, H);
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
            start_grad_sum(l);  // layer l's gradients are final
        }
        BK::encoder_backward(g.wte, pt.learned_table ? g.wpe : nullptr, a.dres, a.inputs, B, Tn, (int)C);
        start_grad_sum(-1);
    }

    // Data parallel without ZeRO-1, on a backend whose collectives run beside its compute (CUDA:
    // NCCL on its own stream): each layer's gradients are summed across ranks while the backward of
    // the layers before it runs; the embeddings and the final LayerNorm's at the end.
    bool overlap_grads() const { return BK::async_allreduce && dist::group().mpi && !shard.zero; }
    void start_grad_sum(int l) {
        if constexpr (BK::async_allreduce)
            if (overlap_grads()) BK::allreduce_sum_async(grad_parts(l));
    }
    // Layer l's slice of every per-layer tensor (stacked over L), or with l = -1 the other tensors.
    std::vector<std::pair<T*, size_t>> grad_parts(int l) const {
        std::vector<std::pair<T*, size_t>> parts;
        for (const auto& p : buf_layout) {
            bool whole = p.name == "wte" || p.name == "wpe" || p.name == "lnf.weight" || p.name == "lnf.bias";
            if (l < 0 && whole) parts.push_back({grads + p.offset, p.numel});
            if (l >= 0 && !whole) parts.push_back({grads + p.offset + l * (p.numel / cfg.L), p.numel / cfg.L});
        }
        return parts;
    }

    // The norm of this rank's gradient buffer, on the host (waits for the device).
    double grad_norm() const { return std::sqrt(BK::sum_squares(grads, num_params)); }

    // Data parallel: sums the gradients over the ranks (with ZeRO-1 only this rank's shard, by a
    // reduce-scatter); a no-op sum at world size 1. Then the global gradient's sum of squares into
    // scalars->sumsq, on the device without waiting at world size 1. Under mpirun it waits (the
    // norm of ZeRO-1's shards is summed on the host) and returns the time it took (comm_ms).
    double reduce_grads() {
        const bool timed = dist::group().mpi;
        if (timed) BK::synchronize();  // time the gradient sum alone
        auto t0 = std::chrono::steady_clock::now();
        bool overlapped = false;  // started during backward()
        if constexpr (BK::async_allreduce)
            if ((overlapped = overlap_grads())) BK::allreduce_wait();
        if (shard.zero) {
            BK::reduce_scatter_sum(grads, shard.block);
            size_t n = shard.end - shard.begin;
            StepScalars h = read_scalars();
            h.sumsq = dist::sum(n ? BK::sum_squares(grads + shard.begin, n) : 0.0);
            BK::copy_scalars_from_host(scalars, h);
        } else {
            if (!overlapped) BK::allreduce_sum(grads, num_params);
            BK::sum_squares_to(&scalars->sumsq, grads, num_params);
        }
        if (!timed) return 0;
        BK::synchronize();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }

    // The step's scalars on the host (waits for the device).
    StepScalars read_scalars() {
        StepScalars h;
        BK::copy_to_host_async(&h, scalars, sizeof h);
        BK::synchronize();
        return h;
    }

    // AdamW over every tensor with the learning rate, bias corrections and clip scale of
    // `scalars`. With ZeRO-1 each rank updates its shard, then every rank gathers the whole weights.
    // kActCopy: AdamW writes the compute copy in the same pass; with ZeRO-1 the gathered weights
    // of the other ranks' shards are rounded afterwards.
    // The update is elementwise, so each run of adjacent tensors with the same weight decay is one
    // call (with decay=all, the whole buffer: one kernel, not one per tensor).
    void adamw(const AdamWConfig& o) {
        mark(Phase::adamw);
        size_t b = 0, e = 0;  // the run [b, e) of this rank's shard
        float wd = 0;
        auto update_run = [&] {
            if (b >= e) return;
            T *pb = params + b, *gb = grads + b, *mb = m + (b - shard.begin), *vb = v + (b - shard.begin);
            if constexpr (kActCopy)
                BK::adamw_update(pb, gb, mb, vb, wc + b, e - b, scalars, o.beta1, o.beta2, o.eps, wd);
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
            BK::allgather(params, shard.block);
            refresh_compute_copy();
        }
    }

    // One AdamW step with the scalars given by the host (t is 1-based, gscale the clip factor).
    // decay_all: every tensor decays, else only matrices.
    void update(float lr, double beta1, double beta2, float eps, float wd, bool decay_all, int t, float gscale) {
        BK::copy_scalars_from_host(scalars, adamw_scalars(lr, beta1, beta2, t, gscale));
        adamw({beta1, beta2, eps, wd, decay_all, 0});
    }

    // One training step over inputs and targets (B,T) (host ids), queued without waiting for the
    // device: the uploads, forward, backward, the gradient sum over ranks and its norm, the clip
    // scale and AdamW (t 1-based), then asynchronous copies of the per-token losses and the norm
    // into pinned memory. read_step() returns them once the step has finished; at most two steps
    // are unread at a time. With use_graph (CudaBackend, one process, no profiling) the step
    // after an eager one is captured as a CUDA graph and every later step replays it: all that
    // changes from step to step is read from device memory (a.inputs, a.targets, scalars).
    void train_step(const int* inputs, const int* targets, int B, int Tn, const AdamWConfig& opt, float lr, int t) {
        if (unread.size() == 2) throw std::logic_error("train_step: two steps are unread (read_step)");
        Acts& a = upload(inputs, targets, B, Tn, true);
        const size_t N = (size_t)B * Tn;
        BK::copy_scalars_from_host(scalars, adamw_scalars(lr, opt.beta1, opt.beta2, t));
        Readback& r = readback[next_readback];
        next_readback ^= 1;
        auto step = [&] {
            forward_pass(a, true);
            backward();
            r.comm_ms = reduce_grads();
            BK::clip_grad(scalars, opt.grad_clip);
            adamw(opt);
        };
        if (graph && !(opt == graph_opt)) drop_graph();  // its kernels hold the old settings
        graph_opt = opt;
        if (!replay(graph, eager_steps > 0, step, &graph_nodes)) step(), eager_steps++;
        r.losses.fetch(a.losses, N);  // its last step was read
        BK::copy_to_host_async(r.scalars, scalars, sizeof(StepScalars));
        BK::event_record(r.done);
        unread.push_back(&r);
    }

    // The oldest unread step's mean loss (this rank's tokens) and gradient norm; waits for it.
    StepResult read_step() {
        if (unread.empty()) throw std::logic_error("read_step: no step queued");
        Readback& r = *unread.front();
        unread.pop_front();
        BK::event_wait(r.done);
        return {r.losses.mean(), std::sqrt(r.scalars->sumsq), r.comm_ms};
    }

    // Whether train_step replays a CUDA graph: a backend with graphs, use_graph on, one process,
    // outside the profiling mode (the trainer's header says which, before the model exists).
    static bool graph_step(bool use_graph, bool profile) {
        return BK::graphs && use_graph && !profile && !dist::group().mpi;
    }

    // Runs `work` as the replay of graph g (captured now if there is none; *nodes: its size); false
    // when the work is to run eagerly: not graph_step, or not warm (no eager run since g was
    // dropped: the first sizes the grow-only scratch buffers). The training step's graph and
    // evaluation's.
    template <class F>
    bool replay(typename BK::Graph& g, bool warm, const F& work, size_t* nodes = nullptr) {
        if constexpr (BK::graphs) {
            if (!graph_step(use_graph, profile) || !warm) return false;
            if (!g) g = BK::capture(work, nodes);
            BK::graph_launch(g);
            return true;
        }
        return false;
    }

    // Frees the graphs: before the buffers they read are freed, or when the settings the training
    // step's holds change.
    void drop_graph() {
        if constexpr (BK::graphs)
            if (graph) BK::graph_free(graph), graph = {};
        eager_steps = 0;
        drop_eval_graph();
    }
    void drop_eval_graph() {
        if constexpr (BK::graphs)
            if (eval_graph) BK::graph_free(eval_graph), eval_graph = {};
        eval_eager = false;
    }
};
