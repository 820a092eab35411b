// Text generation from a trained model: temperature and top-k sampling with a seeded RNG. By
// default incremental decoding: the prompt runs through the model once (the prefill), filling
// the KV cache (GPT::forward_cached), then each new token runs one position against the cache.
// cache = false keeps the full recompute: the whole window's forward pass for every token.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "memory_estimate.h"
#include "model.h"
#include "rng.h"

struct GenOptions {
    int tokens = 64;           // how many to generate
    double temperature = 1.0;  // 0: greedy
    int top_k = 40;            // 0: the whole vocabulary
    int window = 0;            // the longest context the model sees (0: max_seq_len)
    bool cache = true;         // incremental decoding; false: the full recompute
};

// What a run took: the prefill (the prompt's forward pass, which gives the first token) and the
// tokens after it.
struct GenStats {
    size_t prefill_tokens = 0, tokens = 0;
    double prefill_s = 0, generate_s = 0;
};

// The window of o for model m: max_seq_len unless given. Learned positions have no row past
// max_seq_len; the other schemes' tables are computed for any length.
inline int gen_window(const ModelConfig& m, const GenOptions& o) {
    const int W = o.window > 0 ? o.window : m.maxT;
    if (pos_traits(m.pos).learned_table && W > m.maxT)
        throw std::runtime_error("a context of " + std::to_string(W) + " tokens is longer than max_seq_len " +
                                 std::to_string(m.maxT) + ", the rows of the learned position table");
    if (pos_traits(m.pos).decay && W > xpos_max_positions())
        throw std::runtime_error("a context of " + std::to_string(W) + " tokens is past the " +
                                 std::to_string(xpos_max_positions()) +
                                 " positions of pos=xpos (its decay's factors leave fp32's range there)");
    return W;
}

// Whether the token after the first n of the text comes from the cache (one position against it):
// when it holds all but the last of them, their keys rotated under the scaling s the model's tables
// now hold (a scaling whose s follows the length recomputes the cache when s changes). Else the
// prefill runs over the last min(n, W) of them. W: the window.
inline bool gen_from_cache(const ModelConfig& m, const GenOptions& o, int n, int W, double s) {
    return o.cache && n <= W && cached_keys_hold(m, n, s);
}

// The longest forward pass generate() runs after a prompt of n tokens, whose activations are the
// largest it allocates: the prefill, a later one when the text slides past the window W or the
// scaling changes, or without the cache the fixed window.
inline int gen_longest_pass(const ModelConfig& m, int n, const GenOptions& o) {
    const int W = gen_window(m, o);
    if (!o.cache) return std::min(W, n + o.tokens);
    int longest = n;
    double s = positions_s_after(m, n, m.rope_scaling.s(m.rope_scaling.train_len));
    for (int i = n + 1; i < n + o.tokens; i++) {
        if (gen_from_cache(m, o, i, W, s)) continue;
        longest = std::max(longest, std::min(i, W));
        s = positions_s_after(m, std::min(i, W), s);
    }
    return longest;
}

// What generate() allocates after a prompt of n tokens (sample's memory line; equal to what the
// model holds at its peak, test_io's and test_cuda_bf16's memory_table): an inference model with
// position data for the window, the activations of its longest forward pass, the KV cache of one
// row of the window. act_bytes, cpu: as model_memory_parts; the classifier's rows per chunk the
// backend's (chunk) unless the config sets them.
inline MemoryParts gen_memory_parts(ModelConfig m, int n, const GenOptions& o, int act_bytes, bool cpu, int chunk) {
    if (m.classifier_chunk == 0) m.classifier_chunk = chunk;
    const int W = gen_window(m, o);
    return model_memory_parts(m, 1, gen_longest_pass(m, n, o), false, act_bytes, cpu, 1, W, o.cache ? W : 0);
}

// The next token from a row of logits (V): the largest with temperature 0, else drawn from the
// softmax of the top_k largest over temperature. Ties go to the lower id.
template <class Real>
int pick_token(const std::vector<Real>& row, double temperature, int top_k, Rng& rng) {
    if (temperature <= 0) return (int)(std::max_element(row.begin(), row.end()) - row.begin());  // the first largest
    const int V = (int)row.size();
    std::vector<int> order(V);
    for (int v = 0; v < V; v++) order[v] = v;
    const int k = top_k > 0 && top_k < V ? top_k : V;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    std::vector<double> p(k);
    double sum = 0;
    for (int j = 0; j < k; j++) sum += p[j] = std::exp((row[order[j]] - row[order[0]]) / temperature);
    double r = rng.uniform() * sum;
    for (int j = 0; j < k; j++)
        if ((r -= p[j]) < 0) return order[j];
    return order[k - 1];
}

// Generates o.tokens tokens after ids (the prompt: 1 to the window's tokens), calling
// on_token(id, logits) as each one is picked (logits: the row (V) it was picked from) and
// on_slide() once, when the text first outgrows the window. Past the window, the window slides:
// each token comes from a forward pass over the last `window` tokens at positions 0.. (the
// prefill again, with the cache), as the full recompute does. Returns the prompt and the tokens.
template <class BK, class OnToken, class OnSlide>
std::vector<int> generate(GPT<BK>& model, std::vector<int> ids, const GenOptions& o, Rng& rng, OnToken&& on_token,
                          OnSlide&& on_slide, GenStats& st) {
    const int W = gen_window(model.cfg, o);
    if (ids.empty()) throw std::runtime_error("the prompt is empty: give at least one token id");
    if ((int)ids.size() > W)
        throw std::runtime_error("the prompt has " + std::to_string(ids.size()) + " tokens, more than the context of " +
                                 std::to_string(W));
    model.positions.cover(W);
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    auto lap = [&] {  // seconds since the last lap
        auto t = clock::now();
        double s = std::chrono::duration<double>(t - t0).count();
        t0 = t;
        return s;
    };
    // One fixed window for the full recompute, so the activations are allocated once: attention
    // is causal, so the padding after the last real token does not change its logits.
    const int Tfull = std::min<int>(W, (int)ids.size() + o.tokens);
    if (o.cache) model.kv.reserve(model.cfg, 1, W);
    // the logits after the last token of ids: from the cache when it holds all but the last one,
    // rotated under the same RoPE scaling (one whose s follows the length recomputes the cache)
    auto next_logits = [&](bool first) {
        const int n = (int)ids.size();
        if (!first && gen_from_cache(model.cfg, o, n, W, model.positions.s)) {
            model.forward_cached(&ids.back(), 1, 1, n - 1);
            return model.logits(0, 1);
        }
        std::vector<int> ctx(ids.end() - std::min(n, W), ids.end());
        const int last = (int)ctx.size() - 1;
        if (o.cache) {
            model.forward_cached(ctx.data(), 1, (int)ctx.size(), 0);
        } else {
            ctx.resize(Tfull, 0);
            model.forward(ctx.data(), nullptr, 1, Tfull, false, last + 1);
        }
        return model.logits(last, 1);
    };
    const size_t prompt = ids.size();
    for (int i = 0; i < o.tokens; i++) {
        if ((int)ids.size() == W + 1) on_slide();
        auto row = next_logits(i == 0);
        if (i == 0) st.prefill_s += lap(), st.prefill_tokens += prompt;
        ids.push_back(pick_token(row, o.temperature, o.top_k, rng));
        on_token(ids.back(), row);
    }
    st.generate_s += lap(), st.tokens += o.tokens - 1;
    return ids;
}

// The same without callbacks: the prompt and n tokens after it, sampled with seed.
template <class BK>
std::vector<int> generate(GPT<BK>& model, std::vector<int> ids, int n, double temperature, int top_k, uint64_t seed) {
    Rng rng(seed);
    GenStats st;
    GenOptions o;
    o.tokens = n, o.temperature = temperature, o.top_k = top_k;
    return generate(model, std::move(ids), o, rng, [](int, const auto&) {}, [] {}, st);
}
