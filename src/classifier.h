// The tied LM head and the loss (the classifier) of GPT<BK> (model.h), over one set of
// activations a: from the final LayerNorm's output a.lnf (N, C) and the weights' compute copy of
// wte (Vp, C), the per-token losses a.losses (N); in training also d lnf into a.dln and d wte
// accumulated. The logits (N, Vp) never exist whole: the head runs in chunks of rows or in tiles
// of the vocabulary (cfg.classifier_tile), in one buffer of one block's shape; or fused, with no
// logits in memory at all (cfg.classifier_fused).
#pragma once
#include <algorithm>
#include <type_traits>
#include <vector>

#include "activations.h"
#include "params.h"

// Chunk by chunk over the N rows of a.lnf: per chunk the logits (rows, Vp), the losses, and with
// dscale != 0 dlogits = (softmax - onehot) * dscale through the head's backward: d lnf into
// a.dln, d wte accumulated into dwte; the next chunk reuses the logits buffer. How a backend
// fuses them: BK::classifier_head. s: a's sizes (Activations::sizes).
template <class BK, class Set>
void classifier_chunks(const ModelConfig& cfg, Set& a, const ActSizes<size_t>& s, const typename BK::act* wte,
                       typename BK::real* dwte, typename BK::real dscale) {
    using Real = typename BK::real;
    const size_t C = cfg.C, Vp = cfg.Vp(), N = s.N, chunk = s.rows;
    for (size_t r = 0; r < N; r += chunk) {
        int n = (int)std::min(chunk, N - r);
        BK::classifier_head(a.logits, a.losses + r, a.targets + r, a.lnf + r * C, wte,
                            dscale != Real(0) ? a.dln + r * C : nullptr, dwte, a.head_scratch, n, (int)C, cfg.V,
                            (int)Vp, dscale);
    }
}

// Over vocabulary tiles: every GEMM takes all N rows and one tile's columns of wte, so only one
// (N, tile) tile of logits exists, small enough to stay in a GPU's L2 cache between the GEMM that
// writes it and the kernels that read it. Pass 1 folds each tile into each row's running max and
// sum of exp, which give the losses; pass 2 (training) computes each tile's logits again, turns
// them into dlogits and runs the head's backward GEMMs on them: d lnf summed over the tiles (in
// Real), each tile's rows of d wte.
template <class BK, class Set>
void classifier_tiles(const ModelConfig& cfg, Set& a, const ActSizes<size_t>& s, const typename BK::act* wte,
                      typename BK::real* dwte, typename BK::real dscale) {
    using Real = typename BK::real;
    using Act = typename BK::act;
    const size_t C = cfg.C, Vp = cfg.Vp(), N = s.N, tile = s.tile;
    auto tiles = [&](const auto& f) {
        for (size_t v0 = 0; v0 < Vp; v0 += tile) {
            const int w = (int)std::min(tile, Vp - v0);
            BK::matmul_forward(a.logits, a.lnf, wte + v0 * C, nullptr, (int)N, (int)C, w);  // (N, w)
            f((int)v0, w);
        }
    };
    tiles([&](int v0, int w) {
        BK::classifier_tile_lse(a.logits, a.head_max, a.head_sum, a.losses, a.targets, (int)N, w, v0, cfg.V);
    });
    BK::classifier_tile_loss(a.losses, a.head_max, a.head_sum, (int)N);  // head_max: the log-sum-exps now
    if (dscale == Real(0)) return;
    Real* dx;  // d lnf
    if constexpr (!std::is_same<Act, Real>::value)
        dx = a.dlnf;
    else
        dx = a.dln;
    BK::zero(dx, N * C);
    tiles([&](int v0, int w) {
        const Act* wt = wte + (size_t)v0 * C;
        BK::classifier_tile_dlogits(a.logits, a.head_max, a.targets, (int)N, w, v0, cfg.V, dscale);
        BK::matmul_dinp_add(dx, a.logits, wt, (int)N, (int)C, w);
        BK::matmul_backward((Act*)nullptr, dwte + (size_t)v0 * C, nullptr, a.logits, a.lnf, wt, (int)N, (int)C, w);
    });
    if constexpr (!std::is_same<Act, Real>::value) BK::to_bf16(a.dln, dx, N * C);
}

template <class BK, class Set>
void classifier(const ModelConfig& cfg, Set& a, const ActSizes<size_t>& s, const typename BK::act* wte,
                typename BK::real* dwte, typename BK::real dscale) {
    if (cfg.classifier_fused)  // no logits: the log-sum-exps in head_max (backend_ops.def)
        BK::classifier_fused(a.losses, a.head_max, a.targets, a.lnf, wte, dscale != 0 ? a.dln : nullptr, dwte, (int)s.N,
                             cfg.C, cfg.V, cfg.Vp(), dscale);
    else if (cfg.classifier_tile > 0)
        classifier_tiles<BK>(cfg, a, s, wte, dwte, dscale);
    else
        classifier_chunks<BK>(cfg, a, s, wte, dwte, dscale);
}

// Rows [row0, row0 + rows) of the (N, V) logits of a's last forward pass, on the host: computed
// again from the final LayerNorm, a block of the logits buffer's shape at a time (a chunk of
// rows, or all rows of one tile).
template <class BK, class Set>
std::vector<typename BK::real> classifier_logits(const ModelConfig& cfg, Set& a, const ActSizes<size_t>& s,
                                                 const typename BK::act* wte, size_t row0, size_t rows) {
    const size_t C = cfg.C, V = cfg.V, Vp = cfg.Vp(), tile = s.tile;
    const size_t chunk = cfg.classifier_tile > 0 ? rows : s.rows;
    std::vector<typename BK::real> h(rows * V), buf;
    for (size_t r = 0; r < rows; r += chunk)
        for (size_t v0 = 0; v0 < V; v0 += tile) {
            const size_t n = std::min(chunk, rows - r), w = std::min(tile, Vp - v0);
            BK::matmul_forward(a.logits, a.lnf + (row0 + r) * C, wte + v0 * C, nullptr, (int)n, (int)C, (int)w);
            buf.resize(n * w);
            BK::copy_to_host(buf.data(), a.logits, n * w);
            for (size_t i = 0; i < n; i++)
                std::copy_n(buf.begin() + i * w, std::min(w, V - v0), h.begin() + (r + i) * V + v0);
        }
    return h;
}
