// Gradient checks in double precision: finite differences against the analytic
// backward, for every parameter tensor of a tiny model in each position scheme of
// pos.h (--list prints those per-scheme checks' names) and for
// the inputs of each op; plus the float-vs-double, RoPE relative-position,
// CRoPE-as-complex-matmul, ALiBi-by-hand and AdamW-by-hand checks. Prints a table of the max
// relative error per tensor, |analytic - numeric|max / max(|analytic|max, |numeric|max).
// The model checks' finite differences run on every core (each thread its own model), with the
// same numbers as on one.
#include <omp.h>

#include <complex>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend_cpu.h"
#include "config.h"
#include "model.h"
#include "model_testlib.h"
#include "testlib.h"

using Vd = std::vector<double>;
// Threads for the model checks' finite differences (all the cores); everything else, and the ops
// inside those threads, run on one thread: at these tiny sizes OpenMP's fork and join per op costs
// more than the op.
static int g_cores = 1;
static const double kTol = 1e-6;

static double rel_err(const Vd& a, const Vd& b) {
    double diff = 0, scale = 1e-300;
    for (size_t i = 0; i < a.size(); i++) {
        diff = std::max(diff, std::fabs(a[i] - b[i]));
        scale = std::max({scale, std::fabs(a[i]), std::fabs(b[i])});
    }
    return diff / scale;
}

static void table_row(const std::string& check, const std::string& tensor, double err, size_t n) {
    printf("| %-24s | %-20s | %8zu | %9.2e |\n", check.c_str(), tensor.c_str(), n, err);
}

// The central difference (f(x + h) - f(x - h)) / 2h in the element xi, which f reads; xi is restored.
template <class F>
static double central_difference(double& xi, F&& f, double h = 1e-5) {
    double x0 = xi;
    xi = x0 + h;
    double fp = f();
    xi = x0 - h;
    double fm = f();
    xi = x0;
    return (fp - fm) / (2 * h);
}

// Central differences of f with respect to every element of x.
static Vd numeric_grad(Vd& x, const std::function<double()>& f) {
    Vd g(x.size());
    for (size_t i = 0; i < x.size(); i++) g[i] = central_difference(x[i], f);
    return g;
}

// An op check: loss = sum(out * dout) for a fixed random dout; compares the
// analytic gradient of each named input with finite differences.
struct OpCheck {
    std::string op;
    std::vector<std::pair<std::string, Vd*>> inputs;
    std::function<Vd()> forward;                         // returns out
    std::function<std::vector<Vd>(const Vd&)> backward;  // dout -> grads, one per input
    void run(Rng& rng) {
        Vd out = forward();
        Vd dout = randn<Vd>(out.size(), rng);
        auto loss = [&] {
            Vd o = forward();
            double s = 0;
            for (size_t i = 0; i < o.size(); i++) s += o[i] * dout[i];
            return s;
        };
        std::vector<Vd> grads = backward(dout);
        bool ok = true;
        std::string worst;
        for (size_t k = 0; k < inputs.size(); k++) {
            Vd num = numeric_grad(*inputs[k].second, loss);
            double e = rel_err(grads[k], num);
            table_row(op, inputs[k].first, e, num.size());
            if (!(e < kTol)) {
                ok = false;
                worst = inputs[k].first + " rel err " + fmt(e);
            }
        }
        check("gradcheck_op_" + op, ok, worst);
    }
};

static void op_checks(Rng& rng) {
    const int B = 2, T = 5, C = 8, H = 2, V = 11, N = B * T;
    using K = CpuBackend<double>;
    std::vector<int> tok(N), tgt(N);
    for (int i = 0; i < N; i++) tok[i] = (int)rng.below(V), tgt[i] = (int)rng.below(V);

    Vd x = randn<Vd>(N * C, rng), w = randn<Vd>(C, rng), b = randn<Vd>(C, rng);
    OpCheck{"layernorm",
            {{"inp", &x}, {"weight", &w}, {"bias", &b}},
            [&] {
                Vd o(N * C), m(N), r(N);
                K::layernorm_forward(o.data(), m.data(), r.data(), x.data(), w.data(), b.data(), N, C);
                return o;
            },
            [&](const Vd& d) {
                Vd o(N * C), m(N), r(N), dx(N * C), dw(C), db(C);
                K::layernorm_forward(o.data(), m.data(), r.data(), x.data(), w.data(), b.data(), N, C);
                K::layernorm_backward(dx.data(), dw.data(), db.data(), nullptr, d.data(), x.data(), w.data(), m.data(),
                                      r.data(), N, C);
                return std::vector<Vd>{dx, dw, db};
            }}
        .run(rng);

    Vd mx = randn<Vd>(N * C, rng), mw = randn<Vd>(3 * C * C, rng), mb = randn<Vd>(3 * C, rng);
    OpCheck{"matmul",
            {{"inp", &mx}, {"weight", &mw}, {"bias", &mb}},
            [&] {
                Vd o(N * 3 * C);
                K::matmul_forward(o.data(), mx.data(), mw.data(), mb.data(), N, C, 3 * C);
                return o;
            },
            [&](const Vd& d) {
                Vd dx(N * C), dw(3 * C * C), db(3 * C);
                K::matmul_backward(dx.data(), dw.data(), db.data(), d.data(), mx.data(), mw.data(), N, C, 3 * C);
                return std::vector<Vd>{dx, dw, db};
            }}
        .run(rng);

    // the tied LM head: logits = x wte^T, no bias
    Vd hx = randn<Vd>(N * C, rng), hw = randn<Vd>(V * C, rng);
    OpCheck{"tied_head",
            {{"lnf_out", &hx}, {"wte", &hw}},
            [&] {
                Vd o(N * V);
                K::matmul_forward(o.data(), hx.data(), hw.data(), nullptr, N, C, V);
                return o;
            },
            [&](const Vd& d) {
                Vd dx(N * C), dw(V * C);
                K::matmul_backward(dx.data(), dw.data(), nullptr, d.data(), hx.data(), hw.data(), N, C, V);
                return std::vector<Vd>{dx, dw};
            }}
        .run(rng);

    // both attention paths without and with ALiBi's bias (slopes steeper than alibi_slopes' to weigh
    // in at T = 5)
    Vd qkv = randn<Vd>(N * 3 * C, rng), steep = {0.7, 1.3};
    PosData<double> alibi;
    alibi.slopes = steep.data();
    for (const PosData<double>& sl : {PosData<double>(), alibi}) {
        const std::string bias = sl.slopes ? "_alibi" : "";
        OpCheck{"attention" + bias,
                {{"qkv", &qkv}},
                [&] {
                    Vd o(N * C), att(B * H * T * T);
                    K::attention_forward(o.data(), att.data(), qkv.data(), B, T, C, H, sl);
                    return o;
                },
                [&](const Vd& d) {
                    Vd o(N * C), att(B * H * T * T), sc(B * H * T * T), dq(N * 3 * C);
                    K::attention_forward(o.data(), att.data(), qkv.data(), B, T, C, H, sl);
                    K::attention_backward(dq.data(), sc.data(), d.data(), qkv.data(), att.data(), B, T, C, H, sl);
                    return std::vector<Vd>{dq};
                }}
            .run(rng);

        // the flash path's CPU twin: backward rebuilds the probabilities from the row log-sum-exps
        OpCheck{"attention_lse" + bias,
                {{"qkv", &qkv}},
                [&] {
                    Vd o(N * C), lse(B * H * T);
                    K::attention_forward_lse(o.data(), lse.data(), qkv.data(), B, T, C, H, sl);
                    return o;
                },
                [&](const Vd& d) {
                    Vd o(N * C), lse(B * H * T), dq(N * 3 * C);
                    K::attention_forward_lse(o.data(), lse.data(), qkv.data(), B, T, C, H, sl);
                    K::attention_backward_lse(dq.data(), d.data(), qkv.data(), o.data(), lse.data(), B, T, C, H, sl);
                    return std::vector<Vd>{dq};
                }}
            .run(rng);
    }

    // rope, and xpos from position 1500 on, where its decay factors are far from 1
    const PosBuffer rope = pos_buffer(pos_traits(Pos::rope), T, C, H, 10000.0, kSinScale);
    const PosBuffer xpos = pos_buffer(pos_traits(Pos::xpos), T + 1500, C, H, 10000.0, kSinScale);
    // the bias of the layer before RoPE or GELU goes in with it: its gradient is the column sums
    // of the input gradient (what the linear layer's backward computes from it)
    auto column_sums = [](const Vd& x, size_t cols) {
        Vd s(cols, 0.0);
        for (size_t i = 0; i < x.size(); i++) s[i % cols] += x[i];
        return s;
    };
    for (const auto& [name, rpos] : {std::pair{"rope", rope.view(rope.data.data())},
                                     std::pair{"xpos", xpos.view(xpos.data.data()).from(1500, C, C / H)}}) {
        Vd rin = randn<Vd>(N * 3 * C, rng), rb = randn<Vd>(3 * C, rng);
        OpCheck{name,
                {{"qkv", &rin}, {"bias", &rb}},
                [&] {
                    Vd o(N * 3 * C);
                    K::rope_forward(o.data(), rin.data(), rb.data(), rpos, B, T, C, H);
                    return o;
                },
                [&](const Vd& d) {
                    Vd di(N * 3 * C);
                    K::rope_backward(di.data(), d.data(), rpos, B, T, C, H);
                    return std::vector<Vd>{di, column_sums(di, 3 * C)};
                }}
            .run(rng);
    }

    // CRoPE projection: expand A,B then the matmul; gradients through the fold
    Vd cA = randn<Vd>(3 * C * C / 4, rng), cB = randn<Vd>(3 * C * C / 4, rng), cx = randn<Vd>(N * C, rng),
       cb = randn<Vd>(3 * C, rng);
    OpCheck{"crope_projection",
            {{"inp", &cx}, {"A", &cA}, {"B", &cB}, {"bias", &cb}},
            [&] {
                Vd W(3 * C * C), o(N * 3 * C);
                K::crope_expand(W.data(), cA.data(), cB.data(), C);
                K::matmul_forward(o.data(), cx.data(), W.data(), cb.data(), N, C, 3 * C);
                return o;
            },
            [&](const Vd& d) {
                Vd W(3 * C * C), dW(3 * C * C), dx(N * C), dA(cA.size()), dB(cB.size()), db(3 * C);
                K::crope_expand(W.data(), cA.data(), cB.data(), C);
                K::matmul_backward(dx.data(), dW.data(), db.data(), d.data(), cx.data(), W.data(), N, C, 3 * C);
                K::crope_fold(dA.data(), dB.data(), dW.data(), C);
                return std::vector<Vd>{dx, dA, dB, db};
            }}
        .run(rng);

    Vd gx = randn<Vd>(N * 4 * C, rng, 2.0), gb = randn<Vd>(4 * C, rng);
    OpCheck{"gelu",
            {{"inp", &gx}, {"bias", &gb}},
            [&] {
                Vd o(gx.size());
                K::gelu_forward(o.data(), gx.data(), gb.data(), N, 4 * C);
                return o;
            },
            [&](const Vd& d) {
                Vd dx(gx.size());
                K::gelu_backward(dx.data(), gx.data(), gb.data(), d.data(), N, 4 * C);
                return std::vector<Vd>{dx, column_sums(dx, 4 * C)};
            }}
        .run(rng);

    // softmax + cross-entropy: out = per-row losses; dlogits = (p - onehot) * dscale
    // per row, so for an upstream d per row the gradient is dlogits scaled by d.
    Vd lg = randn<Vd>(N * V, rng, 2.0);
    OpCheck{"softmax_crossentropy",
            {{"logits", &lg}},
            [&] {
                Vd z = lg, loss(N);
                cpu::classifier_loss(z.data(), loss.data(), tgt.data(), N, V, V, 0.0);
                return loss;
            },
            [&](const Vd& d) {
                Vd z = lg, loss(N);
                cpu::classifier_loss(z.data(), loss.data(), tgt.data(), N, V, V, 1.0);
                for (int i = 0; i < N; i++)
                    for (int v = 0; v < V; v++) z[(size_t)i * V + v] *= d[i];
                return std::vector<Vd>{z};
            }}
        .run(rng);

    Vd ew = randn<Vd>(V * C, rng), ep = randn<Vd>(T * C, rng);
    OpCheck{"embeddings",
            {{"wte", &ew}, {"wpe", &ep}},
            [&] {
                Vd o(N * C);
                K::encoder_forward(o.data(), tok.data(), ew.data(), ep.data(), B, T, C);
                return o;
            },
            [&](const Vd& d) {
                Vd dw(V * C), dp(T * C);
                K::encoder_backward(dw.data(), dp.data(), d.data(), tok.data(), B, T, C, V);
                return std::vector<Vd>{dw, dp};
            }}
        .run(rng);
}

static ModelConfig tiny_config(Pos pos) {
    ModelConfig c;
    c.pos = pos;
    c.L = 2, c.H = 2, c.C = 8, c.V = 13, c.maxT = 8;
    return c;
}

// Weights far from their small initial values, so every nonlinearity is exercised.
static std::vector<double> spread_params(const ModelConfig& c, Rng& rng) {
    auto p = init_params(c, 7);
    for (auto& x : p) x += 0.3 * rng.normal();
    return p;
}

// tile > 0: the classifier over vocabulary tiles (classifier_tiles, src/classifier.h) of V = 13 padded to 16:
// tiles of 6 leave a last tile [12, 16) of one class and three padded columns. mlp_hidden > 0: the
// MLP's hidden width instead of 4C = 32. scaling: the rotary tables' (RopeScaling). fused: the
// classifier without logits (classifier_fused), V = 13 padded to 16.
static void model_checks_with(const std::string& name, Pos pos, bool flash, Rng& rng, int tile = 0, int mlp_hidden = 0,
                              RopeScaling scaling = {}, bool fused = false) {
    ModelConfig c = tiny_config(pos);
    c.rope_scaling = scaling;
    c.flash = flash;
    c.mlp_hidden = mlp_hidden;
    if (tile > 0) c.vocab_pad = 4, c.classifier_tile = tile;
    if (fused) c.vocab_pad = 4, c.classifier_fused = true;
    const int B = 2, T = 6;
    GPT<CpuBackend<double>> model(c);
    model.set_params(spread_params(c, rng));
    std::vector<int> in(B * T), tg(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (int)rng.below(c.V), tg[i] = (int)rng.below(c.V);
    model.forward(in.data(), tg.data(), B, T, true);
    model.backward();
    auto analytic = model.get(model.grads);
    const auto params = model.get(model.params);
    // every parameter's central difference, spread over the cores: each thread has its own model and
    // copy of the weights, and the ops inside run on one thread, so any split gives the same numbers
    // (the ops' results do not depend on their thread count)
    Vd numeric(params.size());
#pragma omp parallel num_threads(g_cores)
    {
        GPT<CpuBackend<double>> mine(c);
        Vd p = params;
        auto loss = [&] {
            mine.set_params(p);
            return mine.forward(in.data(), tg.data(), B, T, false);
        };
#pragma omp for schedule(dynamic, 16)
        for (size_t i = 0; i < p.size(); i++) numeric[i] = central_difference(p[i], loss);
    }
    bool ok = true;
    std::string worst;
    for (const auto& t : model.layout) {
        Vd a(analytic.begin() + t.offset, analytic.begin() + t.offset + t.numel),
            num(numeric.begin() + t.offset, numeric.begin() + t.offset + t.numel);
        double e = rel_err(a, num);
        const char* check = flash        ? "model_flash_"
                            : tile       ? "model_tiles_"
                            : fused      ? "model_fused_"
                            : mlp_hidden ? "model_mlp_"
                                         : "model_";
        const std::string kind = (scaling.kind ? std::string("_") + kRopeScalingNames[scaling.kind] : "") +
                                 (scaling.partial != 1 ? "_partial" : "");
        table_row(check + std::string(pos_name(pos)) + kind, t.name, e, t.numel);
        if (!(e < kTol)) {
            ok = false;
            worst = t.name + " rel err " + fmt(e);
        }
    }
    check(name, ok, worst);
}

// The reference attention (probabilities stored), as --attention cublas does.
static void model_checks(const std::string& name, Pos pos, Rng& rng) {
    model_checks_with(name, pos, false, rng);
}

// The float model against the double model on the same weights and batch.
static void float_vs_double(const std::string& name, Pos pos, Rng& rng) {
    ModelConfig c = tiny_config(pos);
    c.C = 16, c.V = 50;
    const int B = 2, T = 8;
    auto p = spread_params(c, rng);
    GPT<CpuBackend<double>> md(c);
    GPT<CpuBackend<float>> mf(c);
    md.set_params(p);
    mf.set_params(std::vector<float>(p.begin(), p.end()));
    std::vector<int> in(B * T), tg(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (int)rng.below(c.V), tg[i] = (int)rng.below(c.V);
    double ld = md.forward(in.data(), tg.data(), B, T, true), lf = mf.forward(in.data(), tg.data(), B, T, true);
    md.backward();
    mf.backward();
    auto gd = md.get(md.grads);
    auto gf32 = mf.get(mf.grads);
    Vd gf(gf32.begin(), gf32.end());
    double eloss = std::fabs(ld - lf) / std::fabs(ld), egrad = rel_err(gd, gf);
    table_row(std::string("f32_vs_f64_") + pos_name(pos), "loss", eloss, 1);
    table_row(std::string("f32_vs_f64_") + pos_name(pos), "all grads", egrad, gd.size());
    check(name, eloss < 1e-6 && egrad < 1e-4, "loss rel " + fmt(eloss) + ", grads rel " + fmt(egrad));
}

// In double, the classifier over vocabulary tiles, and the one without logits, give the row
// chunks' loss, gradients and logits up to rounding: the same sums in another order.
static void heads_vs_rows(Rng& rng, bool fused) {
    ModelConfig rows = tiny_config(Pos::rope), tiles = rows;
    rows.vocab_pad = tiles.vocab_pad = 4;
    rows.classifier_chunk = 5;
    if (fused)
        tiles.classifier_fused = true;
    else
        tiles.classifier_tile = 6;
    const int B = 2, T = 6;
    auto p = spread_params(rows, rng);
    std::vector<int> in(B * T), tg(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (int)rng.below(rows.V), tg[i] = (int)rng.below(rows.V);
    double loss[2], val[2];
    Vd grads[2], logits[2];
    int k = 0;
    for (const ModelConfig& c : {rows, tiles}) {
        GPT<CpuBackend<double>> m(c);
        m.set_params(p);
        loss[k] = m.forward(in.data(), tg.data(), B, T, true);
        m.backward();
        grads[k] = m.get(m.grads);
        val[k] = m.forward(tg.data(), in.data(), B, T, false);
        logits[k] = m.logits(3, 7);
        k++;
    }
    double el = std::fabs(loss[0] - loss[1]) / loss[0], ev = std::fabs(val[0] - val[1]) / val[0];
    double eg = rel_err(grads[0], grads[1]), ez = rel_err(logits[0], logits[1]);
    const std::string what = fused ? "fused_vs_rows_rope" : "tiles_vs_rows_rope";
    table_row(what, "loss, val loss", std::max(el, ev), 2);
    table_row(what, "all grads", eg, grads[0].size());
    table_row(what, "logits rows 3-9", ez, logits[0].size());
    check(fused ? "classifier_fused_vs_rows" : "classifier_tiles_vs_rows",
          el < 1e-12 && ev < 1e-12 && eg < 1e-12 && ez < 1e-12,
          "loss " + fmt(el) + ", val " + fmt(ev) + ", grads " + fmt(eg) + ", logits " + fmt(ez));
}

// q.k scores after RoPE depend only on the distance: shifting every position by s leaves them unchanged.
static void rope_relative(Rng& rng) {
    const int T = 6, C = 8, H = 2, D = C / H, shift = 5;
    const PosBuffer rope = pos_buffer(pos_traits(Pos::rope), T + shift, C, H, 10000.0, kSinScale);
    const PosData<double> pos = rope.view(rope.data.data());
    PosData<double> shifted = pos;  // the tables from position `shift` on
    shifted.cos += shift * D / 2, shifted.sin += shift * D / 2;
    Vd in = randn<Vd>(T * 3 * C, rng), a(T * 3 * C), b(T * 3 * C), c(T * 3 * C);
    cpu::rope_forward(a.data(), in.data(), (const double*)nullptr, pos, 1, T, C, H);
    cpu::rope_forward(b.data(), in.data(), (const double*)nullptr, shifted, 1, T, C, H);
    auto score = [&](const Vd& x, int t, int t2, int h) {
        double s = 0;
        for (int d = 0; d < D; d++) s += x[t * 3 * C + h * D + d] * x[t2 * 3 * C + C + h * D + d];
        return s;
    };
    double diff = 0, moved = 0;
    for (int t = 0; t < T; t++)
        for (int t2 = 0; t2 < T; t2++)
            for (int h = 0; h < H; h++) diff = std::max(diff, std::fabs(score(a, t, t2, h) - score(b, t, t2, h)));
    for (int i = 0; i < T * 3 * C; i++) moved = std::max(moved, std::fabs(a[i] - b[i]));
    check("rope_scores_depend_on_relative_position", diff < 1e-12 && moved > 1e-3,
          "score change " + fmt(diff) + ", vector change " + fmt(moved));
}

// xPos: the score of q at position n and k at m is RoPE's score with pair j's part times
// zeta_j^((n-m)/512), zeta_j = (2j/D + 0.4) / 1.4 written out; q and k taken 1,900 positions apart.
static void xpos_by_hand(Rng& rng) {
    const int T = 4, C = 16, H = 2, D = C / H, n = 2100, pq = 2000, pk = 100;
    const PosBuffer rb = pos_buffer(pos_traits(Pos::rope), n, C, H, 10000.0, kSinScale);
    const PosBuffer xb = pos_buffer(pos_traits(Pos::xpos), n, C, H, 10000.0, kSinScale);
    const Vd in = randn<Vd>(T * 3 * C, rng);
    // x rotated by the scheme's tables from position p on
    auto rotate = [&](const PosBuffer& b, int p) {
        Vd out(T * 3 * C);
        cpu::rope_forward(out.data(), in.data(), (const double*)nullptr, b.view(b.data.data()).from(p, C, D), 1, T, C, H);
        return out;
    };
    const Vd rq = rotate(rb, pq), rk = rotate(rb, pk), xq = rotate(xb, pq), xk = rotate(xb, pk);
    double err = 0, decayed = 0;
    for (int t = 0; t < T; t++)
        for (int t2 = 0; t2 < T; t2++)
            for (int h = 0; h < H; h++) {
                double want = 0, got = 0, plain = 0;
                for (int j = 0; j < D / 2; j++) {
                    const int q = t * 3 * C + h * D + 2 * j, k = t2 * 3 * C + C + h * D + 2 * j;
                    const double pair = rq[q] * rk[k] + rq[q + 1] * rk[k + 1];
                    want += std::pow((2.0 * j / D + 0.4) / 1.4, (pq + t - pk - t2) / 512.0) * pair;
                    got += xq[q] * xk[k] + xq[q + 1] * xk[k + 1];
                    plain += pair;
                }
                err = std::max(err, std::fabs(got - want) / (std::fabs(want) + 1e-3));
                decayed = std::max(decayed, std::fabs(plain - want));
            }
    check("xpos_by_hand", err < 1e-12 && decayed > 1e-1,
          "score error " + fmt(err) + ", the decay changes a score by " + fmt(decayed));
}

// Each RoPE scaling's tables against MODEL.md's formulas (D = 8, base 100, s = 2): linear's row 2m is
// plain RoPE's row m; ntk is plain RoPE at base b s^(D/(D-2)); dynamic is plain RoPE up to the training
// length; yarn keeps the pairs of short wavelength (ramp 1), divides the angles of long ones by s
// (ramp 0), mixes the two between, and scales cos and sin by 0.1 ln s + 1; llama3 keeps the pairs of
// wavelength under L_train/4, divides the angles of those past L_train by s and mixes between.
static void rope_scaling_tables() {
    const int n = 64, D = 8, J = D / 2, Ltr = 40;
    const double b = 100, s = 2;
    Vd c0, s0, c, sn;
    rope_tables(c0, s0, n, D, b);
    double e = 0;
    auto near = [&](double x, double y) { e = std::max(e, std::fabs(x - y)); };
    rope_tables(c, sn, n, D, b, {RopeScaling::linear, s, Ltr}, s);
    for (int m = 0; 2 * m < n; m++)
        for (int j = 0; j < J; j++) near(c[2 * m * J + j], c0[m * J + j]), near(sn[2 * m * J + j], s0[m * J + j]);
    Vd cb, sb;
    rope_tables(cb, sb, n, D, b * std::pow(s, D / (D - 2.0)));
    rope_tables(c, sn, n, D, b, {RopeScaling::ntk, s, Ltr}, s);
    for (int i = 0; i < n * J; i++) near(c[i], cb[i]), near(sn[i], sb[i]);
    const RopeScaling dyn = {RopeScaling::dynamic, 3, Ltr};  // the factor does not count
    rope_tables(c, sn, n, D, b, dyn, dyn.s(Ltr));
    const bool same = c == c0 && sn == s0 && dyn.s(Ltr) == 1 && dyn.s(2 * Ltr) == 2;
    // yarn at base 10000, training length 256: r_j = 256 theta_j / 2pi = 40.7 (ramp 1), 4.07 (between),
    // 0.41, 0.041 (ramp 0)
    rope_tables(c, sn, n, D, 1e4, {RopeScaling::yarn, s, 256}, s);
    const double t = 0.1 * std::log(s) + 1, g1 = (256 * 0.1 / (2 * M_PI) - 1) / 31;
    const double keep[J] = {1, (1 - g1) / s + g1, 1 / s, 1 / s};
    for (int m = 0; m < n; m++)
        for (int j = 0; j < J; j++) {
            const double theta = std::pow(1e4, -2.0 * j / D) * keep[j];
            near(c[m * J + j], t * std::cos(m * theta)), near(sn[m * J + j], t * std::sin(m * theta));
        }
    // llama3 at base 10000, training length 1000: wavelengths 2pi 10^j = 6.3, 63 (kept: under 250),
    // 628 (smooth (1000/628 - 1)/3), 6283 (past 1000: divided by s)
    rope_tables(c, sn, n, D, 1e4, {RopeScaling::llama3, s, 1000}, s);
    const double sm = (1000 / (200 * M_PI) - 1) / 3, kept[J] = {1, 1, (1 - sm) / s + sm, 1 / s};
    for (int m = 0; m < n; m++)
        for (int j = 0; j < J; j++) {
            const double theta = std::pow(1e4, -2.0 * j / D) * kept[j];
            near(c[m * J + j], std::cos(m * theta)), near(sn[m * J + j], std::sin(m * theta));
        }
    check("rope_scaling_tables", e < 1e-12 && same,
          "max diff " + fmt(e) + (same ? "" : ", dynamic is not plain RoPE at the training length"));
}

// Partial rotary (D = 8, f = 0.5: R = 4): the first R/2 pairs hold the tables of head size R (theta_j =
// b^(-2j/R); under ntk at base b s^(R/(R-2))), the others cos 1 and sin 0 (yarn's temperature too only
// on the rotated pairs); xPos's factors are those of head size R there and 1 beyond; f = 1 is the full
// table bit for bit.
static void partial_rotary_tables() {
    const int n = 40, D = 8, J = D / 2, R = 4;
    const double b = 100, s = 2;
    double e = 0;
    bool rest = true;  // the unrotated pairs: cos 1, sin 0, q's and k's
    // the half-head tables wanted of each setting, for the first R/2 pairs
    auto compare = [&](const Vd& c, const Vd& sn, const Vd& want_c, const Vd& want_s) {
        for (int m = 0; m < n; m++)
            for (int j = 0; j < J; j++)
                if (j < R / 2)
                    e = std::max({e, std::fabs(c[m * J + j] - want_c[m * R / 2 + j]),
                                  std::fabs(sn[m * J + j] - want_s[m * R / 2 + j])});
                else
                    rest = rest && c[m * J + j] == 1 && sn[m * J + j] == 0;
    };
    Vd c, sn, wc, ws;
    RopeScaling half;
    half.partial = 0.5;
    rope_tables(c, sn, n, D, b, half);
    rope_tables(wc, ws, n, R, b);
    compare(c, sn, wc, ws);
    RopeScaling ntk = half;
    ntk.kind = RopeScaling::ntk;
    rope_tables(c, sn, n, D, b, ntk, s);
    rope_tables(wc, ws, n, R, b * std::pow(s, R / (R - 2.0)));
    compare(c, sn, wc, ws);
    RopeScaling yarn = half;
    yarn.kind = RopeScaling::yarn, yarn.train_len = 64;
    rope_tables(c, sn, n, D, b, yarn, s);
    rope_tables(wc, ws, n, R, b, {RopeScaling::yarn, 0, 64}, s);
    compare(c, sn, wc, ws);
    Vd kc, ks, wkc, wks;
    rope_tables(c, sn, n, D, b, half);
    xpos_tables(c, sn, kc, ks, n, D, R);
    rope_tables(wc, ws, n, R, b);
    xpos_tables(wc, ws, wkc, wks, n, R, R);
    compare(c, sn, wc, ws), compare(kc, ks, wkc, wks);
    Vd c0, s0;
    RopeScaling full;
    full.partial = 1;
    rope_tables(c, sn, n, D, b, full);
    rope_tables(c0, s0, n, D, b);
    const bool same = c == c0 && sn == s0 && half.rotary_dims(D) == R && full.rotary_dims(D) == D;
    check("partial_rotary_tables", e < 1e-14 && rest && same,
          "max diff " + fmt(e) + (rest ? "" : ", an unrotated pair is not the identity") +
              (same ? "" : ", f = 1 is not the full table"));
}

// ALiBi: the slopes of the paper's rule (H = 8, and H = 6, not a power of two), and both attention
// paths' outputs against softmax(q.k / sqrt(D) - m_h (t - t2)) v written out.
static void alibi_by_hand(Rng& rng) {
    const Vd want8 = {1. / 2, 1. / 4, 1. / 8, 1. / 16, 1. / 32, 1. / 64, 1. / 128, 1. / 256};
    const Vd want6 = {1. / 4, 1. / 16, 1. / 64, 1. / 256, 1. / 2, 1. / 8};
    const double eslope = std::max(rel_err(alibi_slopes(8), want8), rel_err(alibi_slopes(6), want6));
    const int B = 2, T = 7, C = 12, H = 3, D = C / H;
    const Vd qkv = randn<Vd>(B * T * 3 * C, rng), sl = {0.9, 0.3, 0.05};
    Vd want(B * T * C), o1(B * T * C), o2(B * T * C), att(B * H * T * T), lse(B * H * T), plain(B * T * C);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double* q = &qkv[(b * T + t) * 3 * C + h * D];
                Vd e(t + 1);
                double sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double* k = &qkv[(b * T + j) * 3 * C + C + h * D];
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += q[d] * k[d];
                    sum += e[j] = std::exp(dot / std::sqrt(double(D)) - sl[h] * (t - j));
                }
                for (int j = 0; j <= t; j++)
                    for (int d = 0; d < D; d++)
                        want[(b * T + t) * C + h * D + d] += e[j] / sum * qkv[(b * T + j) * 3 * C + 2 * C + h * D + d];
            }
    PosData<double> pos;
    pos.slopes = sl.data();
    cpu::attention_forward(o1.data(), att.data(), qkv.data(), B, T, C, H, pos);
    cpu::attention_forward_lse(o2.data(), lse.data(), qkv.data(), B, T, C, H, pos);
    cpu::attention_forward(plain.data(), att.data(), qkv.data(), B, T, C, H);
    const double e1 = rel_err(o1, want), e2 = rel_err(o2, want), moved = rel_err(plain, want);
    check("alibi_by_hand", eslope < 1e-15 && e1 < 1e-12 && e2 < 1e-12 && moved > 1e-2,
          "slopes " + fmt(eslope) + ", probabilities kept " + fmt(e1) + ", lse " + fmt(e2) +
              ", the bias changes the output by " + fmt(moved));
}

// CRoPE projection y~ = W~ x~ + b~ with std::complex, against expand + matmul.
static void crope_complex(Rng& rng) {
    const int N = 3, C = 8, h = C / 2;
    Vd A = randn<Vd>(3 * h * h, rng), Bm = randn<Vd>(3 * h * h, rng), x = randn<Vd>(N * C, rng),
       b = randn<Vd>(3 * C, rng);
    Vd W(3 * C * C), y(N * 3 * C);
    cpu::crope_expand(W.data(), A.data(), Bm.data(), C);
    cpu::matmul_forward(y.data(), x.data(), W.data(), b.data(), N, C, 3 * C);
    double diff = 0;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < h; i++) {
                std::complex<double> s(b[p * C + 2 * i], b[p * C + 2 * i + 1]);
                for (int j = 0; j < h; j++)
                    s += std::complex<double>(A[(p * h + i) * h + j], Bm[(p * h + i) * h + j]) *
                         std::complex<double>(x[n * C + 2 * j], x[n * C + 2 * j + 1]);
                diff = std::max(diff, std::fabs(s.real() - y[n * 3 * C + p * C + 2 * i]));
                diff = std::max(diff, std::fabs(s.imag() - y[n * 3 * C + p * C + 2 * i + 1]));
            }
    check("crope_equals_complex_matmul", diff < 1e-12, "max diff " + fmt(diff));
}

// Three AdamW steps against torch.optim.AdamW's update written out in its own order.
static void adamw_by_hand(Rng& rng) {
    const size_t n = 16;
    // hyperparameters travel as float: use the float-rounded values on both sides
    const double lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f, gscale = 0.5f;
    Vd p = randn<Vd>(n, rng), m(n), v(n), hp = p, hm(n), hv(n);
    std::vector<Vd> gs = {randn<Vd>(n, rng), randn<Vd>(n, rng), randn<Vd>(n, rng)};
    for (int t = 1; t <= 3; t++) {
        const StepScalars sc = adamw_scalars(lr, b1, b2, t, gscale);
        cpu::adamw_update(p.data(), gs[t - 1].data(), m.data(), v.data(), n, &sc, b1, b2, eps, wd);
        for (size_t i = 0; i < n; i++) {
            double g = gs[t - 1][i] * gscale;
            hp[i] *= 1 - lr * wd;
            hm[i] = hm[i] * b1 + g * (1 - b1);
            hv[i] = hv[i] * b2 + g * g * (1 - b2);
            double step_size = lr / (1 - std::pow(b1, t));
            double denom = std::sqrt(hv[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
            hp[i] -= step_size * hm[i] / denom;
        }
    }
    double e = rel_err(p, hp);
    check("adamw_three_steps_by_hand", e < 1e-12, "rel err " + fmt(e));

    // decay=matrices: with zero gradients only matrices shrink
    ModelConfig c = tiny_config(Pos::rope);
    GPT<CpuBackend<double>> model(c);
    model.init(3);
    auto before = model.get(model.params);
    adamw_step(model, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, false, 1, 1.0f);
    auto after = model.get(model.params);
    bool ok = true;
    for (const auto& t : model.layout)
        for (size_t i = 0; i < t.numel; i++) {
            double expect = before[t.offset + i] * (t.matrix ? 1 - (double)0.1f * (double)0.5f : 1.0);
            if (std::fabs(after[t.offset + i] - expect) > 1e-12) ok = false;
        }
    check("adamw_decay_matrices_only", ok, "a non-matrix tensor decayed, or a matrix did not");
}

// The checks every position scheme of pos.h gets, reported as PREFIX + scheme name.
static const std::pair<const char*, void (*)(const std::string&, Pos, Rng&)> kPerScheme[] = {
    {"gradcheck_model_", model_checks}, {"float_vs_double_", float_vs_double}};

int main(int argc, char** argv) {
    setup_process(argv);  // as the trainer: line-buffered output, OpenMP's short spin
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            printf(
                "usage: %s [--list] [NAME...]\n"
                "Finite differences in double precision against the analytic backward: the inputs of every op and\n"
                "every parameter tensor of a tiny model in each position scheme (also with flash attention, with\n"
                "vocabulary tiles, with another MLP width, under each RoPE scaling and with partial rotary), float\n"
                "against double, and the RoPE, CRoPE, ALiBi, xPos and AdamW checks. Prints the table of max\n"
                "relative errors, a PASS or FAIL line per check and the count, \"N passed, N failed\"; exits 1 if a\n"
                "check failed. --list prints the names of the checks and runs nothing; NAME... runs those whose\n"
                "name contains one of them.\n",
                argv[0]);
            return 0;
        }
        if (arg[0] == '-' && arg != "--list") {
            fprintf(stderr, "error: unknown argument '%s' (see --help)\n", argv[i]);
            return 1;
        }
    }
    g_cores = omp_get_max_threads();
    omp_set_num_threads(1);
    Rng rng(1234);
    // each check reports its own lines (test_group); they take their inputs from one stream in turn
    std::vector<TestCase> tests = {test_group("gradcheck_op", [&] { op_checks(rng); })};
    for (const auto& [prefix, scheme_check] : kPerScheme)
        for (const PosTraits& t : kPosSchemes) {
            const std::string name = prefix + std::string(t.name);
            tests.push_back(test_group(name, [&, f = scheme_check, name, pos = t.pos] { f(name, pos, rng); }));
        }
    // the trainer's default attention (flash: log-sum-exps kept, probabilities rebuilt in backward)
    for (Pos p : {Pos::rope, Pos::crope, Pos::alibi, Pos::xpos}) {
        const std::string name = std::string("gradcheck_model_flash_") + pos_name(p);
        tests.push_back(test_group(name, [&, name, p] { model_checks_with(name, p, true, rng); }));
    }
    tests.push_back(test_group("gradcheck_model_tiles_rope",
                               [&] { model_checks_with("gradcheck_model_tiles_rope", Pos::rope, false, rng, 6); }));
    tests.push_back(test_group("gradcheck_model_fused_rope", [&] {
        model_checks_with("gradcheck_model_fused_rope", Pos::rope, false, rng, 0, 0, {}, true);
    }));
    tests.push_back(test_group("gradcheck_model_mlp_hidden_crope", [&] {
        model_checks_with("gradcheck_model_mlp_hidden_crope", Pos::crope, false, rng, 0, 40);
    }));
    // each RoPE scaling at T = 6, twice the training length 3 (s = 2 from the length; yarn's temperature)
    for (Pos p : {Pos::rope, Pos::crope})
        for (int k = RopeScaling::linear; k < (int)std::size(kRopeScalingNames); k++) {
            const std::string name = std::string("gradcheck_model_") + pos_name(p) + "_" + kRopeScalingNames[k];
            const RopeScaling sc = {(RopeScaling::Kind)k, 0, 3};
            const bool flash = k % 2;  // both attention modes among the scalings
            tests.push_back(test_group(name, [&, name, p, sc, flash] { model_checks_with(name, p, flash, rng, 0, 0, sc); }));
        }
    // partial rotary: one of each head's two pairs rotates (f = 0.5), xpos's decay on it alone
    for (Pos p : {Pos::rope, Pos::crope, Pos::xpos}) {
        const std::string name = std::string("gradcheck_model_") + pos_name(p) + "_partial";
        RopeScaling sc;
        sc.partial = 0.5;
        const bool flash = p == Pos::crope;
        tests.push_back(test_group(name, [&, name, p, sc, flash] { model_checks_with(name, p, flash, rng, 0, 0, sc); }));
    }
    tests.push_back(test_group("classifier_tiles_vs_rows", [&] { heads_vs_rows(rng, false); }));
    tests.push_back(test_group("classifier_fused_vs_rows", [&] { heads_vs_rows(rng, true); }));
    tests.push_back(test_group("rope_scores_depend_on_relative_position", [&] { rope_relative(rng); }));
    tests.push_back(test_group("rope_scaling_tables", [&] { rope_scaling_tables(); }));
    tests.push_back(test_group("partial_rotary_tables", [&] { partial_rotary_tables(); }));
    tests.push_back(test_group("crope_equals_complex_matmul", [&] { crope_complex(rng); }));
    tests.push_back(test_group("alibi_by_hand", [&] { alibi_by_hand(rng); }));
    tests.push_back(test_group("adamw", [&] { adamw_by_hand(rng); }));
    tests.push_back(test_group("xpos_by_hand", [&] { xpos_by_hand(rng); }));
    const bool list = argc == 2 && std::string(argv[1]) == "--list";
    if (!list) {
        printf("| %-24s | %-20s | %8s | %9s |\n", "check", "tensor", "elements", "rel err");
        printf("|--------------------------|----------------------|----------|-----------|\n");
    }
    const int rc = run_test_list(tests, argc, argv);
    if (!list && rc != 2) printf("%d passed, %d failed\n", test_passes(), test_failures());
    return rc;
}
