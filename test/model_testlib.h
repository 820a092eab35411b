// What the tests that drive GPT<BK> op by op share (the trainer runs whole steps,
// GPT::train_step): an AdamW step with scalars from the host, the gradient's norm, and runs of
// generate() compared token by token and logit by logit.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "generate.h"
#include "model.h"
#include "testlib.h"

// One AdamW step of g with the scalars given here (t is 1-based, gscale the clip factor).
// decay_all: every tensor decays, else only matrices.
template <class BK>
void adamw_step(GPT<BK>& g, float lr, double beta1, double beta2, float eps, float wd, bool decay_all, int t,
                float gscale) {
    BK::copy_scalars_from_host(g.scalars, adamw_scalars(lr, beta1, beta2, t, gscale));
    g.adamw({beta1, beta2, eps, wd, decay_all, 0});
}

// The norm of g's gradient buffer (this rank's), on the host (waits for the device).
template <class BK>
double gradient_norm(const GPT<BK>& g) {
    return std::sqrt(BK::sum_squares(g.grads, g.num_params));
}

// A run of generate() (src/generate.h): the prompt and its tokens, the logits (V) each token was
// picked from, and how often on_slide was called.
struct GenRun {
    std::vector<int> ids;
    std::vector<std::vector<double>> logits;
    int slides = 0;
};
template <class BK>
GenRun gen_run(GPT<BK>& m, const std::vector<int>& prompt, const GenOptions& o, uint64_t seed) {
    GenRun r;
    Rng rng(seed);
    GenStats st;
    r.ids = generate(
        m, prompt, o, rng, [&](int, const auto& row) { r.logits.emplace_back(row.begin(), row.end()); },
        [&] { r.slides++; }, st);
    return r;
}

// Why run a differs from run b ("" if it does not): another token, or at some step logits
// further apart than tol times that step's largest |logit|.
inline std::string gen_diff(const GenRun& a, const GenRun& b, double tol) {
    if (a.ids != b.ids || a.logits.size() != b.logits.size()) {
        size_t i = 0;
        while (i < a.ids.size() && i < b.ids.size() && a.ids[i] == b.ids[i]) i++;
        return "tokens differ from position " + std::to_string(i) + " on";
    }
    if (a.slides != b.slides) return "slid " + std::to_string(a.slides) + " vs " + std::to_string(b.slides) + " times";
    for (size_t s = 0; s < a.logits.size(); s++) {
        double d = 0, mx = 0;
        for (size_t v = 0; v < a.logits[s].size(); v++)
            d = std::max(d, std::fabs(a.logits[s][v] - b.logits[s][v])), mx = std::max(mx, std::fabs(b.logits[s][v]));
        if (!(d <= tol * mx))
            return "step " + std::to_string(s) + ": logits differ by " + std::to_string(d) + " (max |logit| " +
                   std::to_string(mx) + ")";
    }
    return "";
}

// Greedy decoding's options.
inline GenOptions greedy() {
    GenOptions o;
    o.temperature = 0;
    return o;
}

// The generation tests' tiny model of scheme pos (rotary tables under scaling), and its weights:
// drawn with seed and tripled, for peaked logits, so that greedy decoding follows the text rather
// than near-ties.
inline ModelConfig gen_config(Pos pos, bool flash, RopeScaling scaling = {}) {
    ModelConfig mc;
    mc.pos = pos, mc.flash = flash, mc.rope_scaling = scaling;
    mc.L = 2, mc.H = 2, mc.C = 16, mc.V = 37, mc.maxT = 32;
    return mc;
}
template <class BK>
void gen_weights(GPT<BK>& m, uint64_t seed) {
    m.init(seed);
    auto p = m.get(m.params);
    for (auto& x : p) x *= 3;
    m.set_params(p);
}

// Runs of n tokens after a prompt of `prompt` tokens through a window W (o: the sampling), on
// backend A with the KV cache and on B with it or not (cache_b), compared at every step (gen_diff);
// each must have slid its window once when the text outgrew it.
template <class A, class B>
std::string gen_compare(const ModelConfig& mc, int prompt, int W, int n, double tol, GenOptions o, bool cache_b) {
    GPT<A> a(mc);
    GPT<B> b(mc);
    gen_weights(a, 7), gen_weights(b, 7);
    o.tokens = n, o.window = W;
    Rng r(11 + (int)mc.pos);
    const auto p = randint(prompt, mc.V, r);
    o.cache = true;
    GenRun ra = gen_run(a, p, o, 5);
    o.cache = cache_b;
    GenRun rb = gen_run(b, p, o, 5);
    std::string why = gen_diff(ra, rb, tol);
    const int slides = prompt + n - 1 > W ? 1 : 0;  // the last token needs no forward pass
    if (why.empty() && ra.slides != slides)
        why = "the window slid " + std::to_string(ra.slides) + " times, not " + std::to_string(slides);
    return why;
}
