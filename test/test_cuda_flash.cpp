// Flash attention tests.
// CPU (always run): the log-sum-exp twin (cpu::attention_forward_lse / _backward_lse) against
// the reference attention (with ALiBi's bias too), whole training steps GPT<CpuBackend> flash vs
// reference, and the config check of the `attention` key.
// CUDA (SKIPPED without a device): the flash kernels (gpu::attention_forward_lse /
// _backward_lse) against the CPU reference for T in {1, 7, 64, 65, 1024}, head sizes 32 and
// 64 (and 8, 16, 128), several B*H, in fp32 (tight) and bf16 (bf16 tolerance); with ALiBi's
// bias at every head size, H = 3 and 4; bf16 buffers
// not 16-byte aligned (the fp32 kernels instead of the tensor-core ones); bitwise
// determinism; whole training steps flash vs cuBLAS attention for each pos mode (loss, grad
// norm, weights after 5 steps); evaluation above the training length; the memory saved.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "cuda_testlib.h"
#include "model.h"
#include "model_testlib.h"

namespace {

struct Shape {
    int B, T, C, H;
    std::string tag() const {
        return " (B=" + std::to_string(B) + " T=" + std::to_string(T) + " D=" + std::to_string(C / H) +
               " H=" + std::to_string(H) + ")";
    }
    size_t nqkv() const { return (size_t)B * T * 3 * C; }
    size_t nout() const { return (size_t)B * T * C; }
    size_t nlse() const { return (size_t)B * H * T; }
    size_t natt() const { return (size_t)B * H * T * T; }
};

// T in {1, 7, 64, 65, 1024}, head sizes 32 and 64, several B*H; T = 1024 with B*H small
// so the emulated run stays short.
const std::vector<Shape> kShapes = {
    {1, 1, 32, 1},  {2, 7, 64, 2},  {3, 64, 128, 4},  {2, 65, 64, 2},   {1, 65, 128, 2},
    {1, 7, 128, 4}, {2, 64, 64, 1}, {1, 1024, 32, 1}, {1, 1024, 64, 1},
};
// the other head sizes the kernels take (the model tests use D = 8)
const std::vector<Shape> kOtherD = {{2, 33, 32, 4}, {1, 40, 64, 4}, {1, 70, 256, 2}};
// ALiBi: every head size, H = 3 (not a power of two: the slopes' second rule) and 4; T = 65 and
// 70 (a partial last tile), and 300 with H = 2, where the bias reaches -19 (slope 2^-4).
const std::vector<Shape> kAlibiShapes = {{2, 65, 96, 3}, {1, 70, 256, 4}, {1, 40, 48, 3},
                                         {1, 33, 24, 3}, {1, 65, 384, 3}, {1, 300, 64, 2}};

// The CPU reference on random inputs: out, probabilities, lse, dqkv (+= onto dqkv0); with
// ALiBi's bias when pos has slopes.
struct Reference {
    Vec qkv, out, att, lse, dout, dqkv0, dqkv;
    TestPos pos;
};

// bf16: the inputs are values a bf16 buffer holds (the GPU gets the same ones), and dqkv0 is
// small (0.1 of the gradient's scale) so that rounding the accumulated dqkv to bf16 errs by
// about 2^-9 of the gradient, not of dqkv0.
Reference reference(const Shape& s, uint64_t seed, bool bf16 = false, bool alibi = false) {
    // the bf16 inputs are for the GPU tests only: a build without CUDA has no bf16 rounding
    auto inputs = [bf16](Vec v) {
#ifdef HAVE_CUDA
        if (bf16) return bf16_round(std::move(v));
#endif
        return v;
    };
    Rng r(seed);
    Reference ref{{}, {}, {}, {}, {}, {}, {}, TestPos(s.H, alibi)};
    const PosData<float> m = ref.pos.cpu();
    ref.qkv = inputs(randn(s.nqkv(), r));
    ref.out.resize(s.nout());
    ref.att.resize(s.natt());
    ref.lse.resize(s.nlse());
    cpu::attention_forward(ref.out.data(), ref.att.data(), ref.qkv.data(), s.B, s.T, s.C, s.H, m);
    Vec out2(s.nout());
    cpu::attention_forward_lse(out2.data(), ref.lse.data(), ref.qkv.data(), s.B, s.T, s.C, s.H, m);
    ref.dout = randn(s.nout(), r);
    ref.dqkv0 = randn(s.nqkv(), r, bf16 ? 0.1 : 1.0);
    ref.dout = inputs(ref.dout), ref.dqkv0 = inputs(ref.dqkv0);
    ref.dqkv = ref.dqkv0;
    Vec scratch(s.natt());
    cpu::attention_backward(ref.dqkv.data(), scratch.data(), ref.dout.data(), ref.qkv.data(), ref.att.data(), s.B, s.T,
                            s.C, s.H, m);
    return ref;
}

// ---------------------------------------------------------------- CPU twin
// Without ALiBi on kShapes, with it on kAlibiShapes.
std::string test_cpu_lse_forward() {
    std::string why;
    uint64_t seed = 1;
    for (bool alibi : {false, true})
        for (const auto& s : alibi ? kAlibiShapes : kShapes) {
            Reference ref = reference(s, seed++, false, alibi);
            Vec out(s.nout()), lse(s.nlse());
            cpu::attention_forward_lse(out.data(), lse.data(), ref.qkv.data(), s.B, s.T, s.C, s.H, ref.pos.cpu());
            const std::string tag = s.tag() + (alibi ? " alibi" : "");
            // the same per-row code: the output is bitwise the reference's
            if (std::memcmp(out.data(), ref.out.data(), out.size() * sizeof(float)) != 0)
                append(why, "out differs from the reference" + tag);
            // lse checked directly: log of the sum of exp of the scaled (and biased) scores, in double
            const int D = s.C / s.H;
            const std::vector<double> m = alibi_slopes(s.H);
            for (int bh = 0; bh < s.B * s.H; bh += std::max(1, s.B * s.H - 1))
                for (int t = 0; t < s.T; t += std::max(1, s.T / 5)) {
                    int b = bh / s.H, h = bh % s.H;
                    double sum = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double dot = 0;
                        for (int d = 0; d < D; d++)
                            dot += (double)ref.qkv[((size_t)b * s.T + t) * 3 * s.C + h * D + d] *
                                   ref.qkv[((size_t)b * s.T + t2) * 3 * s.C + s.C + h * D + d];
                        sum += std::exp(dot / std::sqrt((double)D) - (alibi ? m[h] * (t - t2) : 0.0));
                    }
                    double want = std::log(sum), got = lse[(size_t)bh * s.T + t];
                    if (!(std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want))))
                        append(why, "lse " + fmt(got) + " vs " + fmt(want) + tag);
                }
        }
    return why;
}

std::string test_cpu_lse_backward() {
    std::string why;
    uint64_t seed = 11;
    for (bool alibi : {false, true})
        for (const auto& s : alibi ? kAlibiShapes : kShapes) {
            Reference ref = reference(s, seed++, false, alibi);
            Vec dqkv = ref.dqkv0;
            cpu::attention_backward_lse(dqkv.data(), ref.dout.data(), ref.qkv.data(), ref.out.data(), ref.lse.data(),
                                        s.B, s.T, s.C, s.H, ref.pos.cpu());
            expect_close(why, "dqkv" + s.tag() + (alibi ? " alibi" : ""), dqkv, ref.dqkv, s.T > 100 ? 1e-4 : 1e-5);
        }
    return why;
}

// ---------------------------------------------------------------- whole model, flash vs reference
struct ModelRun {
    std::vector<double> losses;  // before each of the 6 forward passes
    double grad_norm = 0;
    Vec grads, p0, params;
};

// Five AdamW steps of a small model on fixed random tokens, then one more forward.
template <class BK>
ModelRun run_model(Pos pos, bool flash, int C = 32) {
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = C, mc.V = 97, mc.maxT = 48;
    mc.flash = flash;
    const int B = 2, T = 33;
    Rng r(80 + (int)pos);
    auto in = randint((size_t)B * T, mc.V, r), tg = randint((size_t)B * T, mc.V, r);
    GPT<BK> g(mc);
    g.init(1234);
    ModelRun run;
    run.p0 = g.get(g.params);
    for (int step = 1; step <= 6; step++) {
        run.losses.push_back(g.forward(in.data(), tg.data(), B, T, true));
        if (step == 6) break;
        g.backward();
        if (step == 1) {
            run.grad_norm = gradient_norm(g);
            run.grads = g.get(g.grads);
        }
        adamw_step(g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, step, 1.0f);
    }
    run.params = g.get(g.params);
    return run;
}

// flash vs reference: loss, first gradient and its norm, weights and loss after 5 steps
std::string compare_runs(const ModelRun& f, const ModelRun& ref, double tol) {
    std::string why;
    if (!(std::fabs(f.losses[0] - ref.losses[0]) <= tol * std::fabs(ref.losses[0])))
        append(why, "loss " + fmt(f.losses[0]) + " vs " + fmt(ref.losses[0]));
    if (!(std::fabs(f.grad_norm - ref.grad_norm) <= 10 * tol * ref.grad_norm))
        append(why, "grad norm " + fmt(f.grad_norm) + " vs " + fmt(ref.grad_norm));
    expect_close(why, "grads", f.grads, ref.grads, 100 * tol);
    // relative L2 distance of the weight changes (per element, Adam can flip the sign of a
    // step whose gradient is ~0 in both)
    double num = 0, den = 1e-300;
    for (size_t i = 0; i < f.params.size(); i++) {
        num += ((double)f.params[i] - ref.params[i]) * ((double)f.params[i] - ref.params[i]);
        den += ((double)ref.params[i] - ref.p0[i]) * ((double)ref.params[i] - ref.p0[i]);
    }
    if (!(std::sqrt(num / den) <= 1e4 * tol))
        append(why, "weights after 5 steps: rel L2 err " + fmt(std::sqrt(num / den)));
    if (!(std::fabs(f.losses[5] - ref.losses[5]) <= 10 * tol * std::fabs(ref.losses[5])))
        append(why, "loss after 5 steps " + fmt(f.losses[5]) + " vs " + fmt(ref.losses[5]));
    return why;
}

std::string test_cpu_model(Pos pos) {
    ModelRun f = run_model<K>(pos, true), ref = run_model<K>(pos, false);
    std::string why = compare_runs(f, ref, 1e-6);
    // the forward pass is the same arithmetic: the first loss is bitwise equal
    if (f.losses[0] != ref.losses[0]) append(why, "first loss not bitwise equal");
    return why;
}

// ---------------------------------------------------------------- config
std::string test_config_attention() {
    std::string why;
    try {  // an unknown attention is refused where it is read
        std::vector<std::string> args = {"train", "--attention", "tiled"};
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        parse_args((int)argv.size(), argv.data());
        append(why, "no error for --attention tiled");
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()) != "attention must be one of flash | cublas, got 'tiled'")
            append(why, std::string("--attention tiled: ") + e.what());
    }
    Config c;
    c.train_data = "x";
    c.n_embd = 96;  // D = 24: the CPU's flash takes any head size; the trainer checks the GPU's
    try {
        validate(c);
    } catch (const std::exception& e) {
        append(why, std::string("attention=flash D=24 rejected by the config: ") + e.what());
    }
#ifdef HAVE_CUDA
    if (gpu::flash_supports_head_size(24) || !gpu::flash_supports_head_size(32))
        append(why, "flash_supports_head_size is wrong for 24 or 32");
#endif
    c.n_embd = 128;
    if (!model_config(c).flash) append(why, "model_config ignores attention=flash");
    return why;
}

#ifdef HAVE_CUDA
// The precisions the kernels run in. fp32: TF32 off, the fp32 kernels, exact arithmetic.
// tf32: fp32 activations with TF32 on; the tensor-core kernels (head sizes 16, 32, 64) round
// q, k, v, dO, P and dS to tf32 as operands (2^-11 relative each), the others stay exact.
// bf16: bf16 activations, on the same (bf16) inputs as the CPU: out and dqkv are rounded to
// bf16 once (2^-9 relative); the tensor-core kernels also round P and dS to bf16 as GEMM
// operands, a few 1e-3 of the scale in all. The log-sum-exps are fp32 sums of the same inputs
// (1e-5; 1e-4 at T = 1024) except in tf32, whose scores are products of rounded operands.
enum class Prec { fp32, tf32, bf16 };
constexpr double kBf16Tol = 2e-2, kTf32Tol = 2e-3;

bool tensor_cores(const Shape& s, Prec p) {
    const int D = s.C / s.H;
    return p != Prec::fp32 && (D == 16 || D == 32 || D == 64);
}

struct GpuResult {
    Vec out, lse, dqkv;
};

// Buf: DBuf (fp32 activations) or DBf16 (bf16); the activations start `off` elements into
// their buffers (off = 1: not 16-byte aligned)
template <class Buf>
GpuResult gpu_flash(const Shape& s, const Reference& ref, size_t off = 0) {
    auto shifted = [off](const Vec& v) {
        Vec x(off, 0.0f);
        x.insert(x.end(), v.begin(), v.end());
        return x;
    };
    auto unshifted = [off](const Vec& v) { return Vec(v.begin() + (long)off, v.end()); };
    Buf q(shifted(ref.qkv)), out(off + s.nout()), dout(shifted(ref.dout)), dq(shifted(ref.dqkv0));
    DBuf lse(s.nlse());
    const PosData<float> m = ref.pos.gpu();
    gpu::attention_forward_lse(out.p + off, lse.p, q.p + off, s.B, s.T, s.C, s.H, m);
    gpu::attention_backward_lse(dq.p + off, dout.p + off, q.p + off, out.p + off, lse.p, s.B, s.T, s.C, s.H, m);
    return {unshifted(out.get()), lse.get(), unshifted(dq.get())};
}

GpuResult gpu_flash(const Shape& s, const Reference& ref, Prec p, size_t off = 0) {
    if (p == Prec::bf16) return gpu_flash<DBf16>(s, ref, off);
    if (p == Prec::tf32) {
        Tf32On on;
        return gpu_flash<DBuf>(s, ref, off);
    }
    return gpu_flash<DBuf>(s, ref, off);
}

// g against the CPU: out, lse and the gradient. The tf32 tensor-core path must also show its
// rounding (errors above the exact kernels' 1e-6), or it did not run.
std::string expect_reference(const Shape& s, const Reference& ref, const GpuResult& g, Prec p) {
    std::string why;
    const double tol = s.T > 100 ? 1e-4 : 1e-5;
    const bool tf32 = p == Prec::tf32 && tensor_cores(s, p), exact = p == Prec::fp32 || (p == Prec::tf32 && !tf32);
    const double out_tol = p == Prec::bf16 ? kBf16Tol : tf32 ? kTf32Tol : tol, min_err = tf32 ? 1e-5 : 0;
    expect_close(why, "out" + s.tag(), g.out, ref.out, out_tol, min_err);
    expect_close(why, "lse" + s.tag(), g.lse, ref.lse, tf32 ? kTf32Tol : tol);
    // dqkv accumulates onto dqkv0: compare the gradient itself
    Vec got(g.dqkv.size()), want(g.dqkv.size());
    for (size_t i = 0; i < got.size(); i++) {
        got[i] = g.dqkv[i] - ref.dqkv0[i];
        want[i] = ref.dqkv[i] - ref.dqkv0[i];
    }
    expect_close(why, "dqkv" + s.tag(), got, want, exact ? 10 * tol : 2 * out_tol, min_err);
    return why;
}

std::string flash_case(const Shape& s, uint64_t seed, Prec p, bool alibi) {
    Reference ref = reference(s, seed, p == Prec::bf16, alibi);
    std::string why = expect_reference(s, ref, gpu_flash(s, ref, p), p);
    return why.empty() || !alibi ? why : "alibi: " + why;
}

// Buffers that are not 16-byte aligned (one element in) cannot take the tensor-core kernels'
// 16-byte loads: they run the fp32 kernels, as close to the CPU as fp32 activations with TF32
// off (bf16: on bf16), and not bit for bit the tensor-core result, so the other path ran.
std::string test_flash_unaligned(Prec p) {
    std::string why;
    for (const Shape& s : {Shape{2, 65, 64, 2}, Shape{1, 40, 64, 4}}) {  // D = 32, 16
        Reference ref = reference(s, 500, p == Prec::bf16);
        GpuResult g = gpu_flash(s, ref, p, 1);
        append(why, expect_reference(s, ref, g, p == Prec::tf32 ? Prec::fp32 : p));
        if (g.out == gpu_flash(s, ref, p).out)
            append(why, "unaligned buffers gave the tensor-core kernels' output bit for bit" + s.tag());
    }
    return why;
}

std::string test_flash(const std::vector<Shape>& shapes, uint64_t seed, Prec p, bool alibi = false) {
    std::string why;
    for (const auto& s : shapes) append(why, flash_case(s, seed++, p, alibi));
    return why;
}

// Two runs give bitwise identical outputs and gradients.
std::string test_flash_deterministic(Prec p) {
    std::string why;
    for (const Shape& s : {Shape{2, 65, 64, 2}, Shape{1, 1024, 64, 1}}) {
        Reference ref = reference(s, 77, p == Prec::bf16);
        GpuResult a = gpu_flash(s, ref, p), b = gpu_flash(s, ref, p);
        if (a.out != b.out || a.lse != b.lse) append(why, "forward differs between runs" + s.tag());
        if (std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)) != 0)
            append(why, "backward differs between runs" + s.tag());
    }
    return why;
}

std::string test_flash_bad_head_size() {
    DBuf q((size_t)3 * 24), out((size_t)24), lse((size_t)1);
    try {
        gpu::attention_forward_lse(out.p, lse.p, q.p, 1, 1, 24, 1, {});
        return "head size 24 accepted";
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()).find("head sizes") == std::string::npos) return std::string("message: ") + e.what();
    }
    return "";
}

// tf32: TF32 on for the whole run (the GEMMs and, with flash, the tensor-core attention
// kernels: the model's D = 8 has none, so its C = 64, D = 16)
ModelRun& gpu_model(Pos pos, bool flash, bool tf32 = false) {
    static std::map<int, ModelRun> cache;
    int key = 4 * (int)pos + 2 * tf32 + flash;
    auto it = cache.find(key);
    if (it == cache.end()) {
        if (tf32) {
            Tf32On on;
            it = cache.emplace(key, run_model<CB>(pos, flash, 64)).first;
        } else {
            it = cache.emplace(key, run_model<CB>(pos, flash)).first;
        }
    }
    return it->second;
}

// Evaluation at twice the training length (length extrapolation): flash vs cuBLAS.
std::string test_gpu_eval_longer(Pos pos) {
    std::string why;
    double loss[2];
    for (int flash = 0; flash < 2; flash++) {
        ModelConfig mc;
        mc.pos = pos;
        mc.L = 2, mc.H = 2, mc.C = 64, mc.V = 97, mc.maxT = 160;
        mc.flash = flash;
        GPT<CB> g(mc);
        g.init(99);
        Rng r(5);
        auto in = randint(2 * 64, mc.V, r), tg = randint(2 * 64, mc.V, r);
        g.forward(in.data(), tg.data(), 2, 64, true);  // a training-length pass first, as in a run
        g.backward();
        auto in2 = randint(150, mc.V, r), tg2 = randint(150, mc.V, r);
        loss[flash] = g.forward(in2.data(), tg2.data(), 1, 150, false);
    }
    if (!(std::fabs(loss[1] - loss[0]) <= 1e-5 * std::fabs(loss[0])))
        append(why, "loss at T=150: flash " + fmt(loss[1]) + " vs cublas " + fmt(loss[0]));
    return why;
}

// The flash model allocates no (B,H,T,T) buffers: its activations are smaller by the
// probabilities and d(scores) buffers, minus the log-sum-exps.
std::string test_gpu_memory() {
    size_t used[2];
    const int B = 2, T = 128;
    ModelConfig mc;
    mc.L = 2, mc.H = 4, mc.C = 64, mc.V = 97, mc.maxT = T;
    for (int flash = 0; flash < 2; flash++) {
        mc.flash = flash;
        size_t before = device_bytes();
        GPT<CB> g(mc);
        Rng r(6);
        auto in = randint((size_t)B * T, mc.V, r);
        g.forward(in.data(), in.data(), B, T, true);
        g.backward();
        used[flash] = device_bytes() - before;
    }
    // saved: L probability buffers and d(scores); flash adds L log-sum-exps and its
    // (B,H,T) delta scratch (the first flash call allocates it)
    size_t att = (size_t)B * mc.H * T * T * sizeof(float), rows = (size_t)B * mc.H * T * sizeof(float);
    size_t want = (mc.L + 1) * att - (mc.L + 1) * rows;
    if (used[1] + want > used[0])
        return "flash saves " + std::to_string(used[0] - used[1]) + " bytes, expected at least " + std::to_string(want);
    return "";
}
#endif

std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {
        {"flash_cpu_lse_forward", test_cpu_lse_forward, false},
        {"flash_cpu_lse_backward", test_cpu_lse_backward, false},
        {"flash_config_attention", test_config_attention, false},
    };
    for (const PosTraits& scheme : kPosSchemes) {
        const Pos p = scheme.pos;
        t.push_back({std::string("flash_cpu_model_") + scheme.name, [p] { return test_cpu_model(p); }, false});
    }
    std::vector<std::pair<std::string, std::function<std::string()>>> gpu = {
        {"forward_backward_fp32", CUDA_FN([] { return test_flash(kShapes, 100, Prec::fp32); })},
        {"head_sizes_fp32", CUDA_FN([] { return test_flash(kOtherD, 200, Prec::fp32); })},
        {"forward_backward_tf32", CUDA_FN([] { return test_flash(kShapes, 100, Prec::tf32); })},
        {"head_sizes_tf32", CUDA_FN([] { return test_flash(kOtherD, 200, Prec::tf32); })},
        {"forward_backward_bf16", CUDA_FN([] { return test_flash(kShapes, 300, Prec::bf16); })},
        {"head_sizes_bf16", CUDA_FN([] { return test_flash(kOtherD, 400, Prec::bf16); })},
        {"alibi_fp32", CUDA_FN([] { return test_flash(kAlibiShapes, 600, Prec::fp32, true); })},
        {"alibi_tf32", CUDA_FN([] { return test_flash(kAlibiShapes, 600, Prec::tf32, true); })},
        {"alibi_bf16", CUDA_FN([] { return test_flash(kAlibiShapes, 700, Prec::bf16, true); })},
        {"deterministic_fp32", CUDA_FN([] { return test_flash_deterministic(Prec::fp32); })},
        {"deterministic_tf32", CUDA_FN([] { return test_flash_deterministic(Prec::tf32); })},
        {"deterministic_bf16", CUDA_FN([] { return test_flash_deterministic(Prec::bf16); })},
        {"unaligned_tf32", CUDA_FN([] { return test_flash_unaligned(Prec::tf32); })},
        {"unaligned_bf16", CUDA_FN([] { return test_flash_unaligned(Prec::bf16); })},
        {"bad_head_size", CUDA_FN(test_flash_bad_head_size)},
        {"memory", CUDA_FN(test_gpu_memory)},
    };
    for (const PosTraits& scheme : kPosSchemes) {
        [[maybe_unused]] const Pos p = scheme.pos;  // unused without CUDA
        std::string n = std::string("model_") + scheme.name;
        gpu.push_back({n, CUDA_FN([p] { return compare_runs(gpu_model(p, true), gpu_model(p, false), 1e-5); })});
        gpu.push_back({n + "_tf32", CUDA_FN([p] {
                           return compare_runs(gpu_model(p, true, true), gpu_model(p, false, true), 1e-5);
                       })});
    }
    for (const PosTraits& scheme : kPosSchemes) {  // a learned table does not extrapolate
        [[maybe_unused]] const Pos p = scheme.pos;
        if (!scheme.learned_table)
            gpu.push_back({std::string("eval_longer_") + scheme.name, CUDA_FN([p] { return test_gpu_eval_longer(p); })});
    }
    for (auto& g : gpu) t.push_back({"cuda_flash_" + g.first, g.second, true});
    return t;
}

}  // namespace

// test_cuda_flash [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
