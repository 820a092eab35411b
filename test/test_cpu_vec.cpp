// The CPU ops' vector paths (src/ops/vec.h and the ops that use it) against the scalar ones:
// - float's vectorised exp (SLEEF's u10, or libm lane by lane in a build without SLEEF) within
//   its stated ULPs (vec.h) of the exact result, over a dense sweep; double's lanes are libm's
//   own, bit for bit (the gradient check's backend keeps exact math);
// - partial vectors (a row's tail): every element gets the same bits wherever it sits;
// - the ops in float (vectors of 16 or 8, SLEEF) against the same ops in double (libm, exact):
//   the fused softmax + loss by row chunks and by vocabulary tiles, the LM head fused by tiles
//   (against the unfused head in double, and in double too), both attentions forward and
//   backward, GELU (and in double against the tanh form it stands for), LayerNorm (and its
//   residual form), the linear layer's bias gradient, the gradient's sum of squares; each within
//   a stated number of float ULPs of the output's scale;
// - bit-reproducibility: the same bits on 1 and 3 threads.
// Header-only in src/ops, so test/test_no_sleef.sh builds this file again without SLEEF and BLAS.
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/vec.h"
#include "rng.h"
#include "testlib.h"

using Vf = std::vector<float>;
using Vd = std::vector<double>;
static const double kUlp = std::ldexp(1.0, -23);  // float's ULP at 1

static Vf to_float(const Vd& v) {
    return Vf(v.begin(), v.end());
}

// The error of got (float) against exact (double) in ULPs of the exact value (as a float).
static double ulp_error(float got, double exact) {
    const double a = std::fabs(exact);
    if (a < FLT_MIN) return std::fabs(got - exact) / std::ldexp(1.0, -149);  // subnormal: their spacing
    const double ulp = std::ldexp(1.0, std::ilogb((float)a) - 23);
    return std::fabs(got - exact) / ulp;
}

// "" if max |f - d| <= ulps float ULPs of the largest |d| (the output's scale), else why.
static std::string close(const char* what, const Vf& f, const Vd& d, double ulps) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < d.size(); i++) {
        err = std::max(err, std::fabs(f[i] - d[i]));
        scale = std::max(scale, std::fabs(d[i]));
    }
    const double e = err / (scale * kUlp);
    if (!(e <= ulps)) return std::string(what) + ": " + fmt(e) + " ULPs of its scale (allowed " + fmt(ulps) + ")";
    return "";
}

// ---- the functions themselves -----------------------------------------------------------

// f over xs, a vector at a time; the worst error in ULPs against ref (in double).
static double worst_ulps(cpu::vec<float> (*f)(cpu::vec<float>), double (*ref)(double), const Vf& xs, float* at) {
    constexpr int W = cpu::kLanes<float>;
    double worst = 0;
    for (size_t i = 0; i + W <= xs.size(); i += W) {
        const cpu::vec<float> y = f(cpu::load(xs.data() + i));
        for (int l = 0; l < W; l++) {
            const double e = ulp_error(y[l], ref(xs[i + l]));
            if (!(e <= worst)) worst = e, *at = xs[i + l];
        }
    }
    return worst;
}

// n points evenly over [lo, hi], then n random ones in it
static Vf sweep(float lo, float hi, size_t n, Rng& r) {
    Vf xs;
    for (size_t i = 0; i < n; i++) xs.push_back(lo + (hi - lo) * (float)((double)i / (n - 1)));
    for (size_t i = 0; i < n; i++) xs.push_back(lo + (hi - lo) * (float)r.uniform());
    return xs;
}

static void test_functions() {
    Rng r(1);
    std::printf("vec.h: %d floats per vector, exp from %s (within %g ULP)\n", cpu::kLanes<float>,
                cpu::kSleef ? "SLEEF (u10)" : "libm, lane by lane", cpu::kExpUlps);
    float at = 0;
    // exp over every argument whose result is a normal float, and some that go subnormal
    double e = worst_ulps(
        cpu::vexp, [](double x) { return std::exp(x); }, sweep(-103.0f, 88.7f, 1 << 21, r), &at);
    report("vexp_float_within_ulps", e <= cpu::kExpUlps ? "" : "exp(" + fmt(at) + ") is " + fmt(e) + " ULPs off");

    // double: libm's exp, bit for bit
    std::string why;
    constexpr int Wd = cpu::kLanes<double>;
    for (int i = 0; i < 4096; i += Wd) {
        double x[Wd];
        for (int l = 0; l < Wd; l++) x[l] = -30.0 + 60.0 * r.uniform();
        const cpu::vec<double> y = cpu::vexp(cpu::load(x));
        for (int l = 0; l < Wd; l++)
            if (y[l] != std::exp(x[l])) why = "differs from libm at " + fmt(x[l]);
    }
    report("double_lanes_are_libm", why);
}

// Partial vectors: exp_sum_n's element i of a row is vexp of x[i] - shift whatever the row's
// length and where i sits in it; max_n and dot_n see exactly the row.
static void test_partial_vectors() {
    constexpr int W = cpu::kLanes<float>;
    Rng r(2);
    const Vf x = to_float(randn<Vd>(4 * W + 3, r, 3.0));
    std::string why;
    for (int start = 0; start < W; start++)
        for (int n = 1; start + n <= (int)x.size(); n++) {
            Vf y(n + 1, 7.0f);
            const float sum = cpu::exp_sum_n(y.data(), x.data() + start, 0.5f, n);
            double ref_sum = 0, ref_max = -INFINITY, ref_dot = 0;
            for (int i = 0; i < n; i++) {
                float one[W] = {};
                one[0] = x[start + i];
                const float want = cpu::vexp(cpu::load(one) - 0.5f)[0];
                if (std::memcmp(&y[i], &want, sizeof want) != 0) why = "exp_sum_n element depends on its place";
                ref_sum += want, ref_max = std::max(ref_max, (double)x[start + i]);
                ref_dot += (double)x[start + i] * y[i];
            }
            if (y[n] != 7.0f) why = "exp_sum_n wrote past n";
            if (std::fabs(sum - ref_sum) > 4 * n * kUlp * ref_sum) why = "exp_sum_n's sum is off";
            if (cpu::max_n(x.data() + start, n) != ref_max) why = "max_n is off";
            const float dot = cpu::dot_n(x.data() + start, y.data(), n);
            if (std::fabs(dot - ref_dot) > 1e-5 * (1 + std::fabs(ref_dot)) * n) why = "dot_n is off";
        }
    report("partial_vectors", why);
}

// ---- the ops, float against double ----------------------------------------------------

// Runs f on 1 thread and on 3; "" if the outputs are the same bits.
static std::string same_on_1_and_3_threads(const std::function<Vf()>& f) {
    omp_set_num_threads(1);
    const Vf a = f();
    omp_set_num_threads(3);
    const Vf b = f();
    omp_set_num_threads(omp_get_num_procs());
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0
               ? ""
               : "1 and 3 threads give different bits";
}

// Rows of V = 2500 classes (3 blocks of kLossBlock, the last partial) padded to ld = 2560.
static void test_loss() {
    const int N = 7, V = 2500, ld = 2560, w = 1024;
    Rng r(3);
    Vd zd = randn<Vd>((size_t)N * ld, r, 3.0);
    std::vector<int> tg(N);
    for (int& t : tg) t = (int)r.below(V);
    tg[0] = V - 1, tg[1] = 0;  // the last class (the tail), the first
    const Vf z0 = to_float(zd);
    Vd ld_(N);
    Vf lf(N), zf = z0;
    cpu::classifier_loss(zd.data(), ld_.data(), tg.data(), N, V, ld, 1.0 / N);
    cpu::classifier_loss(zf.data(), lf.data(), tg.data(), N, V, ld, 1.0f / N);
    std::string why = close("losses", lf, ld_, 2);
    append(why, close("dlogits", zf, zd, 4));
    for (int i = 0; i < N; i++)
        for (int v = V; v < ld; v++)
            if (zf[(size_t)i * ld + v] != 0.0f) why = "a padded column's gradient is not 0";
    Vf le(N), ze = z0;  // evaluation: the same losses, the logits untouched
    cpu::classifier_loss(ze.data(), le.data(), tg.data(), N, V, ld, 0.0f);
    if (le != lf || ze != z0) append(why, "evaluation differs from training or changed the logits");
    append(why, same_on_1_and_3_threads([&] {
               Vf z = z0, l(N);
               cpu::classifier_loss(z.data(), l.data(), tg.data(), N, V, ld, 1.0f / N);
               z.insert(z.end(), l.begin(), l.end());
               return z;
           }));
    report("classifier_loss_float_vs_double", why);

    // vocabulary tiles of w columns (the last one 452 classes and 60 padded columns), two passes
    Vf m(N), s(N), lt(N), zt((size_t)N * ld);
    for (int v0 = 0; v0 < ld; v0 += w) {
        const int cols = std::min(w, ld - v0);
        Vf tile((size_t)N * cols);
        for (int i = 0; i < N; i++)
            std::copy_n(z0.begin() + (size_t)i * ld + v0, cols, tile.begin() + (size_t)i * cols);
        cpu::classifier_tile_lse(tile.data(), m.data(), s.data(), lt.data(), tg.data(), N, cols, v0, V);
    }
    cpu::classifier_tile_loss(lt.data(), m.data(), s.data(), N);
    for (int v0 = 0; v0 < ld; v0 += w) {
        const int cols = std::min(w, ld - v0);
        Vf tile((size_t)N * cols);
        for (int i = 0; i < N; i++)
            std::copy_n(z0.begin() + (size_t)i * ld + v0, cols, tile.begin() + (size_t)i * cols);
        cpu::classifier_tile_dlogits(tile.data(), m.data(), tg.data(), N, cols, v0, V, 1.0f / N);
        for (int i = 0; i < N; i++)
            std::copy_n(tile.begin() + (size_t)i * cols, cols, zt.begin() + (size_t)i * ld + v0);
    }
    why = close("losses", lt, ld_, 2);
    append(why, close("dlogits", zt, zd, 4));
    report("classifier_tiles_float_vs_double", why);
}

// Elements [from, from + n) of v.
template <class V>
static V slice(const V& v, size_t from, size_t n) {
    return V(v.begin() + from, v.begin() + from + n);
}

// The LM head fused by vocabulary tiles (classifier_head) against the same head unfused in
// double: the logits GEMM, classifier_loss, the two backward GEMMs. N = 37 rows take tiles of
// 1024 columns, N = 1000 tiles of 384 (the tile width follows the rows); the last tile holds
// classes and padded columns. d wte starts non-zero (the head adds into it). The same for the
// head without logits (classifier_fused): blocks of 64 rows, tiles of 1024 classes.
static void test_classifier_head() {
    const int C = 24, V = 2500, Vp = 2560;
    for (auto [fused, N] : {std::pair{false, 37}, {false, 1000}, {true, 37}, {true, 1000}}) {
        Rng r(5 + N);
        const Vd xd = randn<Vd>((size_t)N * C, r), wd = randn<Vd>((size_t)Vp * C, r, 0.5), dw0 = randn<Vd>((size_t)Vp * C, r, 0.1);
        std::vector<int> tg(N);
        for (int& t : tg) t = (int)r.below(V);
        tg[0] = V - 1, tg[1] = 0;
        const double dscale = 1.0 / N;
        // the reference, unfused, in double
        Vd z((size_t)N * Vp), loss(N), dx((size_t)N * C), dw = dw0;
        cpu::matmul_forward(z.data(), xd.data(), wd.data(), (double*)nullptr, N, C, Vp);
        cpu::classifier_loss(z.data(), loss.data(), tg.data(), N, V, Vp, dscale);
        cpu::matmul_backward(dx.data(), dw.data(), (double*)nullptr, z.data(), xd.data(), wd.data(), N, C, Vp);
        // fused, in T; the outputs in one vector (losses, d x, d wte)
        auto head = [&](auto real, double ds) {
            using T = decltype(real);
            std::vector<T> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), out(N + (size_t)N * C);
            std::vector<T> logits((size_t)N * Vp), dwt(dw0.begin(), dw0.end());
            std::vector<T> scratch(cpu::classifier_head_scratch<T>(N, C, Vp)), lse(N);
            if (fused)
                cpu::classifier_fused(out.data(), lse.data(), tg.data(), x.data(), w.data(), out.data() + N, dwt.data(),
                                      N, C, V, Vp, (T)ds);
            else
                cpu::classifier_head(logits.data(), out.data(), tg.data(), x.data(), w.data(), out.data() + N,
                                     dwt.data(), scratch.data(), N, C, V, Vp, (T)ds);
            out.insert(out.end(), dwt.begin(), dwt.end());
            return out;
        };
        Vd ref = loss;
        ref.insert(ref.end(), dx.begin(), dx.end());
        ref.insert(ref.end(), dw.begin(), dw.end());
        const size_t nx = (size_t)N * C, nw = (size_t)Vp * C;
        const Vf f = head(0.0f, dscale);
        std::string why = close("losses", slice(f, 0, N), slice(ref, 0, N), 2);
        append(why, close("d x", slice(f, N, nx), slice(ref, N, nx), 16));
        append(why, close("d wte", slice(f, N + nx, nw), slice(ref, N + nx, nw), 4));
        const Vd d = head(0.0, dscale);  // double: the same math as the reference up to the order of its sums
        for (size_t i = 0; i < d.size(); i++)
            if (!(std::fabs(d[i] - ref[i]) <= 1e-12 * (1 + std::fabs(ref[i])))) {
                append(why, "double differs from the unfused head at " + std::to_string(i));
                break;
            }
        const Vf e = head(0.0f, 0.0);  // evaluation: the same losses, d x and d wte untouched
        if (!std::equal(e.begin(), e.begin() + N, f.begin())) append(why, "evaluation's losses differ from training's");
        if (!std::equal(dw0.begin(), dw0.end(), e.begin() + N + nx, [](double a, float b) { return (float)a == b; }))
            append(why, "evaluation changed d wte");
        append(why, same_on_1_and_3_threads([&] { return head(0.0f, dscale); }));
        report(std::string(fused ? "classifier_fused" : "classifier_head") + "_vs_unfused_N" + std::to_string(N), why);
    }
}

struct AttShape {
    int B, T, C, H;
};

static void test_attention() {
    // head sizes 16 and 8 (vectors of 16: a partial one), T across a block of kAttRows query rows
    const AttShape shapes[] = {{2, 70, 32, 2}, {1, 5, 24, 3}, {1, 130, 64, 1}};
    Rng r(4);
    for (const AttShape& s : shapes) {
        const size_t nqkv = (size_t)s.B * s.T * 3 * s.C, nout = (size_t)s.B * s.T * s.C,
                     natt = (size_t)s.B * s.H * s.T * s.T, nlse = (size_t)s.B * s.H * s.T;
        const Vd qkv = randn<Vd>(nqkv, r), dout = randn<Vd>(nout, r);
        Vd outd(nout), attd(natt), lsed(nlse), dqd(nqkv, 5.0), dqd2(nqkv, 5.0), scd(natt);
        cpu::attention_forward(outd.data(), attd.data(), qkv.data(), s.B, s.T, s.C, s.H);
        cpu::attention_forward_lse(outd.data(), lsed.data(), qkv.data(), s.B, s.T, s.C, s.H);
        cpu::attention_backward(dqd.data(), scd.data(), dout.data(), qkv.data(), attd.data(), s.B, s.T, s.C, s.H);
        const Vf qkvf = to_float(qkv), doutf = to_float(dout);
        Vf outf(nout), out2(nout), attf(natt), lsef(nlse), dqf(nqkv, 5.0f), dq2(nqkv, 5.0f), scf(natt);
        cpu::attention_forward(outf.data(), attf.data(), qkvf.data(), s.B, s.T, s.C, s.H);
        cpu::attention_forward_lse(out2.data(), lsef.data(), qkvf.data(), s.B, s.T, s.C, s.H);
        cpu::attention_backward(dqf.data(), scf.data(), doutf.data(), qkvf.data(), attf.data(), s.B, s.T, s.C, s.H);
        cpu::attention_backward_lse(dq2.data(), doutf.data(), qkvf.data(), out2.data(), lsef.data(), s.B, s.T, s.C,
                                    s.H);
        std::string why = close("out", outf, outd, 8);
        append(why, close("att", attf, attd, 8));
        append(why, close("lse", lsef, lsed, 4));
        append(why, close("dqkv", dqf, dqd, 16));
        append(why, close("dqkv (lse)", dq2, dqd, 16));
        if (outf != out2) append(why, "the two forwards' outputs differ");
        // the probabilities past the diagonal are 0
        for (size_t row = 0; row < (size_t)s.B * s.H * s.T; row++)
            for (int t2 = row % s.T + 1; t2 < s.T; t2++)
                if (attf[row * s.T + t2] != 0.0f) why = "a probability past the diagonal is not 0";
        append(why, same_on_1_and_3_threads([&] {
                   Vf dq(nqkv);
                   cpu::attention_backward_lse(dq.data(), doutf.data(), qkvf.data(), out2.data(), lsef.data(), s.B, s.T,
                                               s.C, s.H);
                   return dq;
               }));
        report("attention_float_vs_double_B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_C" +
                   std::to_string(s.C) + "_H" + std::to_string(s.H),
               why);
    }
}

// GELU as the ops compute it, x / (1 + exp(-2u)), is MODEL.md's 0.5 x (1 + tanh u), and its
// backward that one's derivative (in double, over the range the activations span)
static void test_gelu_is_tanh_form() {
    const int N = 1, C = 4001;
    Vd x(C), out(C), d(C), ones(C, 1.0);
    for (int c = 0; c < C; c++) x[c] = -12.0 + 24.0 * c / (C - 1);
    cpu::gelu_forward(out.data(), x.data(), (const double*)nullptr, N, C);
    cpu::gelu_backward(d.data(), x.data(), (const double*)nullptr, ones.data(), N, C);
    double err = 0;
    for (int c = 0; c < C; c++) {
        const double k = 0.7978845608028654, u = k * (x[c] + 0.044715 * x[c] * x[c] * x[c]), th = std::tanh(u);
        const double gelu = 0.5 * x[c] * (1 + th);
        const double dgelu = 0.5 * (1 + th) + 0.5 * x[c] * (1 - th * th) * k * (1 + 3 * 0.044715 * x[c] * x[c]);
        err = std::max({err, std::fabs(out[c] - gelu) / (1 + std::fabs(gelu)), std::fabs(d[c] - dgelu)});
    }
    report("gelu_is_the_tanh_approximation", err <= 1e-14 ? "" : "differs by " + fmt(err));
}

static void test_gelu_layernorm_bias() {
    test_gelu_is_tanh_form();
    Rng r(5);
    for (int C : {37, 128}) {  // 37: every row ends in a partial vector
        const int N = 9;
        const Vd x = randn<Vd>((size_t)N * C, r, 2.0), y = randn<Vd>((size_t)N * C, r), bias = randn<Vd>(C, r), w = randn<Vd>(C, r),
                 b = randn<Vd>(C, r), dout = randn<Vd>((size_t)N * C, r);
        const Vf xf = to_float(x), yf = to_float(y), biasf = to_float(bias), wf = to_float(w), bf = to_float(b),
                 doutf = to_float(dout);
        const std::string tag = "_C" + std::to_string(C);
        for (bool with_bias : {false, true}) {
            Vd od(x.size()), dd(x.size());
            Vf of(x.size()), df(x.size());
            cpu::gelu_forward(od.data(), x.data(), with_bias ? bias.data() : nullptr, N, C);
            cpu::gelu_backward(dd.data(), x.data(), with_bias ? bias.data() : nullptr, dout.data(), N, C);
            cpu::gelu_forward(of.data(), xf.data(), with_bias ? biasf.data() : nullptr, N, C);
            cpu::gelu_backward(df.data(), xf.data(), with_bias ? biasf.data() : nullptr, doutf.data(), N, C);
            std::string why = close("out", of, od, 2);
            append(why, close("dinp", df, dd, 8));
            report(std::string("gelu_float_vs_double") + (with_bias ? "_bias" : "") + tag, why);
        }
        // residual + LayerNorm forward, backward with dsum
        Vd resd(x.size()), outd(x.size()), md(N), sd(N), dxd(x.size(), 0.5), dwd(C, 0.25), dbd(C), dsd(C);
        Vf resf(x.size()), outf(x.size()), mf(N), sf(N), dxf(x.size(), 0.5f), dwf(C, 0.25f), dbf(C), dsf(C);
        cpu::residual_layernorm_forward(resd.data(), outd.data(), md.data(), sd.data(), x.data(), y.data(), bias.data(),
                                        w.data(), b.data(), N, C);
        cpu::layernorm_backward(dxd.data(), dwd.data(), dbd.data(), dsd.data(), dout.data(), resd.data(), w.data(),
                                md.data(), sd.data(), N, C);
        cpu::residual_layernorm_forward(resf.data(), outf.data(), mf.data(), sf.data(), xf.data(), yf.data(),
                                        biasf.data(), wf.data(), bf.data(), N, C);
        cpu::layernorm_backward(dxf.data(), dwf.data(), dbf.data(), dsf.data(), doutf.data(), resf.data(), wf.data(),
                                mf.data(), sf.data(), N, C);
        std::string why = close("res", resf, resd, 1);
        append(why, close("out", outf, outd, 8));
        append(why, close("mean", mf, md, 4));
        append(why, close("rstd", sf, sd, 4));
        append(why, close("dinp", dxf, dxd, 8));
        append(why, close("dw", dwf, dwd, 8));
        append(why, close("db", dbf, dbd, 8));
        append(why, close("dsum", dsf, dsd, 8));
        append(why, same_on_1_and_3_threads([&] {
                   Vf dx(x.size(), 0.5f), dw(C, 0.25f), db(C), ds(C);
                   cpu::layernorm_backward(dx.data(), dw.data(), db.data(), ds.data(), doutf.data(), resf.data(),
                                           wf.data(), mf.data(), sf.data(), N, C);
                   for (const Vf* v : {&dw, &db, &ds}) dx.insert(dx.end(), v->begin(), v->end());
                   return dx;
               }));
        report("layernorm_float_vs_double" + tag, why);

        // the linear layer's bias gradient: column sums of dout (N, C), added to dbias
        Vd dbiasd(C, 1.0);
        Vf dbiasf(C, 1.0f);
        cpu::matmul_backward((double*)nullptr, (double*)nullptr, dbiasd.data(), dout.data(), x.data(), x.data(), N, C,
                             C);
        cpu::matmul_backward((float*)nullptr, (float*)nullptr, dbiasf.data(), doutf.data(), xf.data(), xf.data(), N, C,
                             C);
        report("matmul_bias_grad_float_vs_double" + tag, close("dbias", dbiasf, dbiasd, 4));
    }
    // the sum of squares of the gradient, in double over float elements, chunks and lanes
    const Vf g = to_float(randn<Vd>((1 << 17) + 5, r));
    double exact = 0;
    for (float x : g) exact += (double)x * x;
    const double got = cpu::sum_squares(g.data(), g.size());
    report("sum_squares", std::fabs(got - exact) <= 1e-12 * exact ? "" : fmt(got) + " against " + fmt(exact));
}

// test_cpu_vec [GROUP...] runs the groups whose name contains one of them; --list names them.
int main(int argc, char** argv) {
    return run_test_list({test_group("functions", test_functions), test_group("partial_vectors", test_partial_vectors),
                          test_group("loss", test_loss), test_group("classifier_head", test_classifier_head),
                          test_group("attention", test_attention),
                          test_group("gelu_layernorm_bias", test_gelu_layernorm_bias)},
                         argc, argv);
}
