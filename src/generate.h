// Text generation from a trained model: temperature and top-k sampling with a seeded RNG.
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "model.h"
#include "rng.h"

// Samples n tokens after prompt (non-empty). Keeps the last maxT tokens as
// context; temperature 0 means greedy; top_k 0 means the whole vocabulary.
template <class BK>
std::vector<int> generate(GPT<BK>& model, std::vector<int> ids, int n, double temperature, int top_k, uint64_t seed) {
    if (ids.empty()) throw std::runtime_error("the prompt is empty: give at least one token id");
    Rng rng(seed);
    const int V = model.cfg.V;
    // One fixed window length, so the activations are allocated once: attention is
    // causal, so the padding after the last real token does not change its logits.
    const int T = std::min<int>(model.cfg.maxT, (int)ids.size() + n);
    for (int i = 0; i < n; i++) {
        int start = std::max(0, (int)ids.size() - T);
        std::vector<int> ctx(ids.begin() + start, ids.end());
        int last = (int)ctx.size() - 1;
        ctx.resize(T, 0);
        model.forward(ctx.data(), nullptr, 1, T, false);
        auto row = model.logits(last, 1);  // (V)
        std::vector<int> order(V);
        for (int v = 0; v < V; v++) order[v] = v;
        int k = top_k > 0 && top_k < V ? top_k : V;
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
        int next = order[0];
        if (temperature > 0) {
            std::vector<double> p(k);
            double sum = 0;
            for (int j = 0; j < k; j++) sum += p[j] = std::exp((row[order[j]] - row[order[0]]) / temperature);
            double r = rng.uniform() * sum;
            for (int j = 0; j < k; j++)
                if ((r -= p[j]) < 0 || j == k - 1) {
                    next = order[j];
                    break;
                }
        }
        ids.push_back(next);
    }
    return ids;
}
