// bf16 activations on the CUDA backend (--precision bf16, CudaBackend<bf16_t>): every kernel that
// reads or writes bf16 against its fp32 CPU twin on the same inputs (bf16 values), forward and
// backward; the rounding (device = host round-to-nearest-even); AdamW's bf16 copy of the
// weights; the model's compute copy and padded vocabulary rows over 5 training steps; the
// memory a bf16 model allocates against the estimate (train --memory), with either attention, and
// what an fp32 or bf16 model holds against it in every scheme, to the byte. The kernels' fp32
// instantiations and GPT<CudaBackend<bf16_t>> against the CPU are in test_cuda; flash attention
// in bf16 in test_cuda_flash. Without CUDA (build or device) every test is reported SKIPPED.
//
// Tolerances (max |gpu - cpu| / max |cpu|): the inputs are the same, every sum is fp32, so
// the difference is the rounding of the stored bf16 result, at most 2^-9 = 1.95e-3 of each
// element: kOut = 4e-3 leaves room for fp32 summation order. A result rounded twice (a GEMM's
// bf16 output, then the bias added to it) gets 2 kOut. fp32 outputs (weight gradients, dbias,
// LayerNorm statistics, losses) keep the fp32 tolerances of test_cuda.
// Usage: test_cuda_bf16 [NAME...] (only the tests whose name contains one of the arguments).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "config.h"
#include "memory_estimate.h"
#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model.h"
#include "model_testlib.h"

namespace {

constexpr double kOut = 4e-3;
using CB16 = CudaBackend<bf16_t>;

// ---------------------------------------------------------------- rounding
// gpu::to_bf16 and the host's float_to_bf16 agree bit for bit: ties to even, NaN, infinities,
// subnormals, values past the largest bf16.
std::string test_round() {
    const float inf = std::numeric_limits<float>::infinity();
    Vec x = {0.0f,    -0.0f,   1.0f, 1.00390625f, 1.01171875f,   -1.00390625f, 3.1415927f,        1e-40f,
             -1e-39f, 3.4e38f, inf,  -inf,        std::nanf(""), 65504.0f,     1.0f + 1.0f / 512, 1.0f + 3.0f / 512};
    Rng r(1);
    for (float v : randn(1000, r, 100.0)) x.push_back(v);
    DBuf gx(x);
    DBf16 gy(x.size());
    gpu::to_bf16(gy.p, gx.p, x.size());
    std::vector<bf16_t> got(x.size());
    CB::copy_to_host(got.data(), gy.p, x.size());
    std::string why;
    for (size_t i = 0; i < x.size(); i++) {
        bf16_t want = float_to_bf16(x[i]);
        if (got[i].bits != want.bits && why.size() < 200)
            why += "x=" + fmt(x[i]) + ": device " + std::to_string(got[i].bits) + ", host " +
                   std::to_string(want.bits) + "; ";
    }
    if (bf16_to_float(float_to_bf16(1.00390625f)) != 1.0f) why += "1 + 2^-8 does not round to even (1); ";
    if (bf16_to_float(float_to_bf16(1.01171875f)) != 1.015625f) why += "1 + 3*2^-8 does not round to even; ";
    return why;
}

// ---------------------------------------------------------------- encoder
std::string test_encoder() {
    Rng r(2);
    const int B = 3, T = 37, C = 40, V = 53;
    auto tok = randint((size_t)B * T, V, r);
    for (int i = 0; i < B * T; i += 2) tok[i] = 7;  // a long run of one token in the backward's sort
    Vec wte = randn((size_t)V * C, r), wpe = randn((size_t)T * C, r);
    DInts dtok(tok);
    DBuf dwte(wte), dwpe(wpe);
    std::string why;
    Vec ref((size_t)B * T * C);
    cpu::encoder_forward(ref.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    DBf16 out(ref.size());
    gpu::encoder_forward(out.p, dtok.p, dwte.p, dwpe.p, B, T, C);
    expect_close(why, "out", out.get(), ref, kOut);

    Vec dout = bf16_round(randn((size_t)B * T * C, r)), gw0 = randn((size_t)V * C, r), gp0 = randn((size_t)T * C, r);
    Vec rw = gw0, rp = gp0;
    cpu::encoder_backward(rw.data(), rp.data(), dout.data(), tok.data(), B, T, C, V);
    DBf16 gd(dout);
    DBuf gw(gw0), gp(gp0);
    gpu::encoder_backward(gw.p, gp.p, gd.p, dtok.p, B, T, C, V);
    expect_close(why, "dwte", gw.get(), rw, 1e-5);
    expect_close(why, "dwpe", gp.get(), rp, 1e-5);
    return why;
}

// ---------------------------------------------------------------- layernorm
// C = 96: one block of columns; N = 2000, C = 776: 4 blocks of columns (the last of 8 columns) over 84
// chunks of rows in 9 groups; the 3 sums of a full block's 256 columns are added by one thread per
// 4 columns, every chunk in order (the column sums, cuda/common.cuh)
std::string test_layernorm() {
    Rng r(3);
    std::string why;
    for (auto [N, C] : std::vector<std::pair<int, int>>{{67, 96}, {2000, 776}}) {
        const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C);
        Vec x = bf16_round(randn((size_t)N * C, r, 2.0)), w = randn(C, r), b = randn(C, r);
        Vec out((size_t)N * C), mean(N), rstd(N);
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        DBf16 gx(x), go((size_t)N * C);
        DBuf gw(w), gb(b), gm((size_t)N), gr((size_t)N);
        gpu::layernorm_forward(go.p, gm.p, gr.p, gx.p, gw.p, gb.p, N, C);
        expect_close(why, "out" + tag, go.get(), out, kOut);
        expect_close(why, "mean" + tag, gm.get(), mean, 1e-5);
        expect_close(why, "rstd" + tag, gr.get(), rstd, 1e-5);

        Vec dout = bf16_round(randn((size_t)N * C, r)), dx0 = bf16_round(randn((size_t)N * C, r));
        Vec dw0 = randn(C, r), db0 = randn(C, r), ds0 = randn(C, r), dx = dx0, dw = dw0, db = db0;
        cpu::layernorm_backward<float>(dx.data(), dw.data(), db.data(), nullptr, dout.data(), x.data(), w.data(),
                                       mean.data(), rstd.data(), N, C);
        DBf16 gd(dout), gdx(dx0);
        DBuf gdw(dw0), gdb(db0), gds(ds0);
        gpu::layernorm_backward(gdx.p, gdw.p, gdb.p, gds.p, gd.p, gx.p, gw.p, gm.p, gr.p, N, C);
        expect_close(why, "dinp" + tag, gdx.get(), dx, kOut);
        expect_close(why, "dw" + tag, gdw.get(), dw, 1e-4);
        expect_close(why, "db" + tag, gdb.get(), db, 1e-4);
        // dsum: the column sums of dinp as stored, in bf16
        Vec ds = ds0, gdx_host = gdx.get();
        for (int i = 0; i < N; i++)
            for (int c = 0; c < C; c++) ds[c] += gdx_host[(size_t)i * C + c];
        expect_close(why, "dsum" + tag, gds.get(), ds, 1e-5);
    }
    return why;
}

// ---------------------------------------------------------------- matmul
// OC = 96: the bias add's 8-wide path; OC = 50: its scalar path; no bias: the LM head's.
std::string test_matmul() {
    Rng r(4);
    std::string why;
    for (auto [N, IC, OC, bias] : std::vector<std::tuple<int, int, int, bool>>{
             {70, 48, 96, true}, {70, 48, 50, true}, {33, 40, 97, false}, {600, 64, 192, true}}) {
        std::string tag = " N=" + std::to_string(N) + " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC);
        Vec x = bf16_round(randn((size_t)N * IC, r)), w = bf16_round(randn((size_t)OC * IC, r)), b = randn(OC, r);
        Vec out((size_t)N * OC);
        cpu::matmul_forward(out.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, IC, OC);
        DBf16 gx(x), gw(w), go(randn((size_t)N * OC, r));  // garbage in out: must be overwritten
        DBuf gb(b);
        gpu::matmul_forward(go.p, gx.p, gw.p, bias ? gb.p : nullptr, N, IC, OC);
        expect_close(why, "out" + tag, go.get(), out, bias ? 2 * kOut : kOut);

        Vec d = bf16_round(randn((size_t)N * OC, r)), dx0 = bf16_round(randn((size_t)N * IC, r));
        Vec dw0 = randn((size_t)OC * IC, r), db0 = randn(OC, r), dx = dx0, dw = dw0, db = db0;
        cpu::matmul_backward(dx.data(), dw.data(), db.data(), d.data(), x.data(), w.data(), N, IC, OC);
        DBf16 gd(d), gdx(dx0);
        DBuf gdw(dw0), gdb(db0);
        gpu::matmul_backward(gdx.p, gdw.p, gdb.p, gd.p, gx.p, gw.p, N, IC, OC);
        expect_close(why, "dinp" + tag, gdx.get(), dx, kOut);
        expect_close(why, "dw" + tag, gdw.get(), dw, 1e-5);
        expect_close(why, "dbias" + tag, gdb.get(), db, 1e-5);
        // dinp added to in fp32 (the classifier's tiles under bf16): no rounding of the sum
        Vec dx32 = randn((size_t)N * IC, r), dx_add = dx32;
        cpu::matmul_dinp_add(dx_add.data(), d.data(), w.data(), N, IC, OC);
        DBuf gdx32(dx32);
        gpu::matmul_dinp_add(gdx32.p, gd.p, gw.p, N, IC, OC);
        expect_close(why, "dinp added in fp32" + tag, gdx32.get(), dx_add, 1e-5);
    }
    return why;
}

// The classifier's input gradient: dinp (N, C) = dlogits (N, 50304) . wte, a bf16 output over a
// long K, which cuBLAS may split, summing the parts in bf16 (the emulator's cuBLAS does, unless
// reduced-precision reductions are disallowed: cuda/common.cuh). The sum, 8192 x 2^-13 + 16000 x 1
// - 16000 x 1 times w = 1 or 2, is exact in fp32 in any order; summed in bf16 it is lost.
std::string test_matmul_long_k() {
    const int N = 4, IC = 64, OC = 50304;
    Vec d((size_t)N * OC, 0.0f), w((size_t)OC * IC);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < 8192 + 32000; k++)
            d[(size_t)n * OC + (k + 1000 * n) % OC] = k < 8192 ? 1.0f / 8192 : k < 8192 + 16000 ? 1.0f : -1.0f;
    for (int k = 0; k < OC; k++)
        for (int i = 0; i < IC; i++) w[(size_t)k * IC + i] = 1.0f + (float)(i % 2);
    DBf16 gd(d), gw(w), gdx(Vec((size_t)N * IC, 0.0f));
    gpu::matmul_backward<bf16_t>(gdx.p, nullptr, nullptr, gd.p, nullptr, gw.p, N, IC, OC);
    const Vec got = gdx.get();
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++)
            if (got[(size_t)n * IC + i] != 1.0f + (float)(i % 2))
                return "dinp[" + std::to_string(n) + "][" + std::to_string(i) + "] = " + fmt(got[(size_t)n * IC + i]) +
                       ", want " + fmt(1.0f + (float)(i % 2)) + " (partial sums of K rounded to bf16?)";
    return "";
}

// ---------------------------------------------------------------- rope, crope
// 3C = 144: 16-byte packs; C = 22 (H = 1), 3C = 66: one pair per access; xpos: k's own tables.
std::string test_rope() {
    Rng r(5);
    std::string why;
    for (auto [C, H, p] : std::vector<std::tuple<int, int, Pos>>{{48, 4, Pos::rope}, {22, 1, Pos::rope}, {48, 4, Pos::xpos}}) {
        const int B = 2, T = 37;
        const std::string tag = " (" + std::string(pos_name(p)) + ", C=" + std::to_string(C) + ")";
        const TestPos pos(p, T, C, H);
        size_t n = (size_t)B * T * 3 * C;
        Vec x = bf16_round(randn(n, r)), out(n), d0 = bf16_round(randn(n, r)), d = d0, bias = randn((size_t)3 * C, r);
        cpu::rope_forward(out.data(), x.data(), bias.data(), pos.cpu(), B, T, C, H);  // with the qkv bias
        cpu::rope_backward(d.data(), x.data(), pos.cpu(), B, T, C, H);                // x as the gradient
        DBf16 gx(x), go(n), gd(d0);
        DBuf gb(bias);
        gpu::rope_forward(go.p, gx.p, gb.p, pos.gpu(), B, T, C, H);
        gpu::rope_backward(gd.p, gx.p, pos.gpu(), B, T, C, H);
        expect_close(why, "out" + tag, go.get(), out, kOut);
        expect_close(why, "dinp" + tag, gd.get(), d, kOut);
    }
    return why;
}

// the expanded weights are copies of A and B entries: each one rounded, exactly
std::string test_crope_expand() {
    Rng r(6);
    const int C = 48, h = C / 2;
    Vec A = randn((size_t)3 * h * h, r), Bm = randn((size_t)3 * h * h, r), w((size_t)3 * C * C);
    cpu::crope_expand(w.data(), A.data(), Bm.data(), C);
    DBuf gA(A), gB(Bm);
    DBf16 gw(w.size());
    gpu::crope_expand(gw.p, gA.p, gB.p, C);
    std::string why;
    expect_close(why, "w", gw.get(), bf16_round(w), 0.0);
    return why;
}

// ---------------------------------------------------------------- elementwise
// with the fp32 bias of the linear layer before each op, as the model calls them (rows of an odd
// channel count: the bias index wraps mid-vector, one element per access; GELU also at C = 40:
// 16-byte packs)
std::string test_gelu_residual() {
    Rng r(7);
    const int N = 303;
    std::string why;
    for (int C : {40, 33}) {
        const std::string tag = " (C=" + std::to_string(C) + ")";
        const size_t n = (size_t)N * C;
        Vec x = bf16_round(randn(n, r, 2.0)), out(n), bias = randn(C, r);
        Vec d = bf16_round(randn(n, r)), dx0 = bf16_round(randn(n, r)), dx = dx0;
        cpu::gelu_forward(out.data(), x.data(), bias.data(), N, C);
        cpu::gelu_backward(dx.data(), x.data(), bias.data(), d.data(), N, C);
        DBf16 gx(x), go(n), gd(d), gdx(dx0);
        DBuf gb(bias);
        gpu::gelu_forward(go.p, gx.p, gb.p, N, C);
        gpu::gelu_backward(gdx.p, gx.p, gb.p, gd.p, N, C);
        expect_close(why, "gelu out" + tag, go.get(), out, kOut);
        expect_close(why, "gelu dinp" + tag, gdx.get(), dx, kOut);
    }

    const int C = 33;
    const size_t n = (size_t)N * C;
    Vec x = bf16_round(randn(n, r, 2.0)), y = bf16_round(randn(n, r)), bias = randn(C, r);
    DBf16 gx(x), gy(y);
    DBuf gb(bias);
    // the residual add, stored in bf16, and the LayerNorm after it, of the sum as stored: the
    // CPU's LayerNorm takes the GPU's sum, so that both see the same rounded input
    Vec w = randn(C, r), lb = randn(C, r), sum(n), ln(n), mean(N), rstd(N);
    cpu::residual_layernorm_forward(sum.data(), ln.data(), mean.data(), rstd.data(), x.data(), y.data(), bias.data(),
                                    w.data(), lb.data(), N, C);
    DBf16 gs(n), gln(n);
    DBuf gw(w), glb(lb), gm((size_t)N), gr((size_t)N);
    for (bool in_place : {false, true}) {
        const std::string tag = in_place ? " (in place)" : "";
        bf16_t* dres = in_place ? gx.p : gs.p;
        gpu::residual_layernorm_forward(dres, gln.p, gm.p, gr.p, gx.p, gy.p, gb.p, gw.p, glb.p, N, C);
        const Vec got = in_place ? gx.get() : gs.get();
        expect_close(why, "residual out" + tag, got, sum, kOut);
        cpu::layernorm_forward(ln.data(), mean.data(), rstd.data(), got.data(), w.data(), lb.data(), N, C);
        expect_close(why, "layernorm out" + tag, gln.get(), ln, kOut);
        expect_close(why, "mean" + tag, gm.get(), mean, 1e-5);
        expect_close(why, "rstd" + tag, gr.get(), rstd, 1e-5);
    }
    return why;
}

// ---------------------------------------------------------------- classifier loss
// bf16 logits in, fp32 losses out (the max and the sums fp32), bf16 dlogits in place. ld > V
// (padded vocabulary): ld % 8 == 0 takes the 16-byte loads, the others one column at a time.
std::string loss_case(int N, int V, int ld, float dscale, uint64_t seed) {
    Rng r(seed);
    Vec z = bf16_round(randn((size_t)N * ld, r, 3.0)), losses(N);
    for (int i = 0; i < N; i++)
        for (int c = V; c < ld; c++) z[(size_t)i * ld + c] = 0.0f;
    auto tgt = randint(N, V, r);
    tgt[0] = V - 1;
    Vec zref = z;
    cpu::classifier_loss(zref.data(), losses.data(), tgt.data(), N, V, ld, dscale);
    DBf16 gz(z);
    DBuf gl((size_t)N);
    DInts gt(tgt);
    gpu::classifier_loss(gz.p, gl.p, gt.p, N, V, ld, dscale);
    std::string why, tag = " (N=" + std::to_string(N) + " V=" + std::to_string(V) + " ld=" + std::to_string(ld) + ")";
    expect_close(why, "losses" + tag, gl.get(), losses, 1e-5);
    expect_close(why, "dlogits" + tag, gz.get(), zref, kOut);
    return why;
}

std::string test_classifier_loss() {
    std::string why;
    append(why, loss_case(37, 97, 128, 1.0f / 37, 8));
    append(why, loss_case(5, 50257, 50304, 1.0f / 5, 9));
    append(why, loss_case(6, 97, 97, 1.0f / 6, 10));
    append(why, loss_case(3, 20, 21, -2.5f, 11));
    return why;
}

// ---------------------------------------------------------------- attention
// The cuBLAS attention in bf16 against the fp32 CPU twin on the same (bf16) inputs. S, P, dP and
// dS are stored in bf16 between its GEMMs: each result is rounded twice or more (2.4e-3 to
// 4.7e-3 seen), so 2 kOut for P and out, 1e-2 for dqkv, and at least 5e-4 (bf16 really used).
// Head sizes 16 and 24 (no flash kernel has 24), T = 37 (rows past a warp's 32 columns); and
// with ALiBi's bias, H = 4 and 3.
std::string test_cublas_attention() {
    Rng r(7);
    std::string why;
    for (auto [B, T, C, H, alibi] : std::vector<std::tuple<int, int, int, int, bool>>{
             {2, 37, 64, 4, false}, {1, 37, 48, 2, false}, {2, 37, 64, 4, true}, {1, 37, 48, 3, true}}) {
        const size_t natt = (size_t)B * H * T * T, n = (size_t)B * T * C;
        Vec qkv = bf16_round(randn(3 * n, r)), dout = bf16_round(randn(n, r));
        Vec out(n), att(natt), dqkv(3 * n, 0.0f), scratch(natt);
        const TestPos m(H, alibi);
        cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, m.cpu());
        cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, H, m.cpu());
        DBf16 gq(qkv), gout(n), gatt(natt), gd(dout), gdq(3 * n), gs(natt);
        gpu::attention_forward(gout.p, gatt.p, gq.p, B, T, C, H, m.gpu());
        gpu::attention_backward(gdq.p, gs.p, gd.p, gq.p, gatt.p, B, T, C, H, m.gpu());
        const std::string at = " (D=" + std::to_string(C / H) + " H=" + std::to_string(H) + (alibi ? " alibi" : "") + ")";
        expect_close(why, "probabilities" + at, gatt.get(), att, 2 * kOut, 5e-4);
        expect_close(why, "out" + at, gout.get(), out, 2 * kOut, 5e-4);
        expect_close(why, "dqkv" + at, gdq.get(), dqkv, 1e-2, 5e-4);
    }
    return why;
}

// ---------------------------------------------------------------- AdamW
// With the copy: p, m, v bit for bit those of the fp32 update, and the copy is exactly p
// rounded to nearest even, after each of 3 steps.
std::string test_adamw_copy() {
    Rng r(12);
    const size_t n = 10007;
    Vec p = randn(n, r), g = randn(n, r), m = randn(n, r, 0.1), v = randn(n, r, 0.1);
    for (auto& x : v) x = x * x;
    DBuf gp(p), gg(g), gm(m), gv(v), rp(p), rm(m), rv(v);
    DBf16 copy(n);
    StepScalars* ds = CB::alloc_scalars();  // lr, bias corrections, clip scale: read from device memory
    std::string why;
    for (int t = 1; t <= 3; t++) {
        CB::copy_scalars_from_host(ds, adamw_scalars(1e-3f, 0.9, 0.999, t, 0.7f));
        gpu::adamw_update_bf16(gp.p, gg.p, gm.p, gv.p, copy.p, n, ds, 0.9, 0.999, 1e-8f, 0.01f);
        gpu::adamw_update(rp.p, gg.p, rm.p, rv.p, n, ds, 0.9, 0.999, 1e-8f, 0.01f);
        Vec pt = gp.get();
        expect_close(why, "p", pt, rp.get(), 0.0);
        expect_close(why, "m", gm.get(), rm.get(), 0.0);
        expect_close(why, "v", gv.get(), rv.get(), 0.0);
        expect_close(why, "copy at step " + std::to_string(t), copy.get(), bf16_round(pt), 0.0);
    }
    CB::free_scalars(ds);
    return why;
}

// ---------------------------------------------------------------- model
// GPT<CudaBackend<bf16_t>>, 5 training steps: the compute copy wc equals the fp32 weights rounded
// to nearest even after init and after every update, and the padded vocabulary rows (V..Vp)
// stay zero in the weights, their copy and the gradients.
std::string test_model_copy(Pos pos) {
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = 32, mc.V = 97, mc.maxT = 48, mc.flash = true;
    const int B = 2, T = 33;
    Rng r(13);
    auto in = randint((size_t)B * T, mc.V, r), tg = randint((size_t)B * T, mc.V, r);
    GPT<CB16> g(mc);
    g.init(7);
    std::string why;
    const size_t pad0 = (size_t)mc.V * mc.C, pad1 = (size_t)mc.Vp() * mc.C;
    auto check = [&](const std::string& when) {
        Vec p = g.get_buffer(g.params), gr = g.get_buffer(g.grads), c(g.num_params);
        CB::copy_to_host(c.data(), g.wc, g.num_params);
        expect_close(why, "copy " + when, c, bf16_round(p), 0.0);
        for (size_t i = pad0; i < pad1; i++)
            if (p[i] != 0.0f || c[i] != 0.0f || gr[i] != 0.0f) {
                append(why, "padded vocabulary row " + std::to_string(i / mc.C) + " not zero " + when);
                break;
            }
    };
    check("after init");
    for (int t = 1; t <= 5; t++) {
        g.forward(in.data(), tg.data(), B, T, true);
        g.backward();
        adamw_step(g, 1e-2f, 0.9, 0.999, 1e-8f, 0.1f, true, t, 1.0f);
        check("after step " + std::to_string(t));
    }
    return why;
}

// What a training step of GPT<BK> allocates: the model and its activations (the kernels'
// scratch buffers have grown to this shape in an earlier run: step_difference).
template <class BK>
size_t step_bytes(const ModelConfig& mc, int B, int T) {
    Rng r(14);
    auto in = randint((size_t)B * T, mc.V, r);
    size_t before = device_bytes();
    GPT<BK> g(mc);
    g.init(1);
    g.forward(in.data(), in.data(), B, T, true);
    g.backward();
    CB::synchronize();
    return device_bytes() - before;
}

// What a training step of config b on backend BB allocates minus one of config a on BA, and
// what the estimate (train --memory: model_memory_bytes) says the difference is, with each
// backend's activation bytes. Each step runs once first: the kernels' scratch buffers grow to
// its shape before it is measured.
struct Difference {
    double got, want;
};
template <class BA, class BB>
Difference step_difference(const ModelConfig& a, const ModelConfig& b) {
    const int B = 2, T = 33;
    auto act_bytes = [](auto backend) { return (int)sizeof(typename decltype(backend)::act); };
    step_bytes<BA>(a, B, T), step_bytes<BB>(b, B, T);
    return {(double)step_bytes<BB>(b, B, T) - (double)step_bytes<BA>(a, B, T),
            model_memory_bytes(b, B, T, true, act_bytes(BB{}), false) -
                model_memory_bytes(a, B, T, true, act_bytes(BA{}), false)};
}

ModelConfig memory_model(Pos pos, bool flash, int V) {
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = 32, mc.V = V, mc.maxT = 48, mc.flash = flash, mc.classifier_chunk = 40;
    return mc;
}

// bf16 saves what the estimate says it saves, to the byte: 2 bytes of each activation (with the
// cublas attention, of its probabilities and their gradient too), less the bf16 copy of the
// weights.
std::string test_memory(Pos pos, bool flash) {
    const ModelConfig mc = memory_model(pos, flash, 97);
    const Difference d = step_difference<CudaBackend<float>, CB16>(mc, mc);
    if (d.got != d.want)
        return "bf16 saves " + std::to_string((long long)-d.got) + " bytes, the estimate says " +
               std::to_string((long long)-d.want);
    if (!(d.want < 0)) return "the estimate saves nothing: " + fmt(-d.want);
    return "";
}

// The classifier's vocabulary tiles (classifier_tile) change the memory by what the estimate
// says, to the byte, in fp32 and bf16: the logits of one (N, tile) tile instead of one chunk of
// rows, each row's max and sum, and in bf16 d lnf summed in fp32.
std::string test_memory_tiles() {
    const ModelConfig rows = memory_model(Pos::rope, true, 300);
    ModelConfig tiles = rows;
    tiles.classifier_tile = 128;
    std::string why;
    auto check = [&](const char* what, const Difference& d) {
        if (d.got != d.want)
            append(why, std::string(what) + " activations: tiles change the memory by " +
                            std::to_string((long long)d.got) + " bytes, the estimate by " +
                            std::to_string((long long)d.want));
    };
    check("fp32", step_difference<CudaBackend<float>, CudaBackend<float>>(rows, tiles));
    check("bf16", step_difference<CB16, CB16>(rows, tiles));
    return why;
}

// The fused classifier (classifier_fused) drops the logits chunk (all but the one row logits()
// reads) and the CPU head's scratch, and adds each row's log-sum-exp: by what the estimate says,
// to the byte, in fp32 and bf16.
std::string test_memory_fused() {
    const ModelConfig rows = memory_model(Pos::rope, true, 300);
    ModelConfig fused = rows;
    fused.classifier_fused = true;
    std::string why;
    auto check = [&](const char* what, const Difference& d) {
        if (d.got != d.want || !(d.want < 0))
            append(why, std::string(what) + " activations: the fused head changes the memory by " +
                            std::to_string((long long)d.got) + " bytes, the estimate by " +
                            std::to_string((long long)d.want));
    };
    check("bf16", step_difference<CB16, CB16>(rows, fused));
    Tf32On on;  // the fused kernels' fp32 products
    check("fp32", step_difference<CudaBackend<float>, CudaBackend<float>>(rows, fused));
    return why;
}

// CudaBackend<Act> counting the bytes it holds: alloc, alloc_act and alloc_int, less what is freed.
template <class Act>
struct CountingCuda : CudaBackend<Act> {
    static inline HeldBytes held;
    static float* alloc(size_t n) { return held.add(CudaBackend<Act>::alloc(n), n); }
    static Act* alloc_act(size_t n) { return held.add(CudaBackend<Act>::alloc_act(n), n); }
    static int* alloc_int(size_t n) { return held.add(CudaBackend<Act>::alloc_int(n), n); }
    template <class E>
    static void free(E* p) {
        held.remove(p), CudaBackend<Act>::free(p);
    }
    static void free_int(int* p) { held.remove(p), CudaBackend<Act>::free_int(p); }
};

// The estimate (train --memory) is what GPT<CudaBackend<Act>> holds, to the byte: constructed,
// one training step taken, with and without gradient accumulation (the step's ids and losses),
// all of it freed with the model; and an inference model's sampling (build/sample's memory line).
// test_io's memory_table and memory_inference check the CPU's in more shapes.
template <class Act>
std::string test_memory_table(Pos pos) {
    using BK = CountingCuda<Act>;
    const ModelConfig mc = memory_model(pos, true, 97);
    const int B = 4, T = 9;
    Rng r(15);
    const std::vector<int> in = randint((size_t)B * T, mc.V, r);
    std::string why;
    for (int accum : {1, 2}) {
        {
            GPT<BK> g(mc);
            g.init(1);
            g.train_step(in.data(), in.data(), B, T, AdamWConfig(), 1e-3f, 1, accum);
            g.read_step();
            const double want = model_memory_bytes(mc, B / accum, T, true, (int)sizeof(Act), false, accum);
            if ((double)BK::held.total() != want)
                append(why, "accum " + std::to_string(accum) + ": it holds " + std::to_string(BK::held.total()) +
                                " bytes, the estimate says " + std::to_string((long long)want));
        }
        if (!BK::held.sizes.empty())
            append(why, "accum " + std::to_string(accum) + ": the model did not free all it allocated");
    }
    {  // an inference model sampling through a window that slides: no gradient or moment, and at
       // its peak what gen_memory_parts says (its weights, the longest pass's activations, the KV cache)
        BK::held.peak = 0;
        GPT<BK> g(mc, ModelUse::inference);
        g.init(1);
        GenOptions o;
        o.tokens = 12, o.window = 8;
        gen_run(g, std::vector<int>(in.begin(), in.begin() + 3), o, 1);
        const double want = gen_memory_parts(mc, 3, o, (int)sizeof(Act), false, BK::classifier_chunk).total();
        if (g.grads || g.m || g.v) append(why, "sampling: the model holds gradients or moments");
        if ((double)BK::held.peak != want)
            append(why, "sampling held at most " + std::to_string(BK::held.peak) + " bytes, the estimate says " +
                            std::to_string((long long)want));
    }
    if (!BK::held.sizes.empty()) append(why, "sampling: the model did not free all it allocated");
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

static std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {
        {"cuda_bf16_round", CUDA_FN(test_round)},
        {"cuda_bf16_encoder", CUDA_FN(test_encoder)},
        {"cuda_bf16_layernorm", CUDA_FN(test_layernorm)},
        {"cuda_bf16_matmul", CUDA_FN(test_matmul)},
        {"cuda_bf16_matmul_long_k", CUDA_FN(test_matmul_long_k)},
        {"cuda_bf16_rope", CUDA_FN(test_rope)},
        {"cuda_bf16_crope_expand", CUDA_FN(test_crope_expand)},
        {"cuda_bf16_gelu_residual", CUDA_FN(test_gelu_residual)},
        {"cuda_bf16_classifier_loss", CUDA_FN(test_classifier_loss)},
        {"cuda_bf16_cublas_attention", CUDA_FN(test_cublas_attention)},
        {"cuda_bf16_adamw_copy", CUDA_FN(test_adamw_copy)},
        {"cuda_bf16_memory_tiles", CUDA_FN(test_memory_tiles)},
        {"cuda_bf16_memory_fused", CUDA_FN(test_memory_fused)},
    };
    for (const PosTraits& scheme : kPosSchemes) {
        [[maybe_unused]] Pos p = scheme.pos;  // unused without CUDA
        t.push_back({std::string("cuda_bf16_model_copy_") + scheme.name, CUDA_FN([p] { return test_model_copy(p); })});
        t.push_back({std::string("cuda_bf16_memory_table_fp32_") + scheme.name,
                     CUDA_FN([p] { return test_memory_table<float>(p); })});
        t.push_back({std::string("cuda_bf16_memory_table_bf16_") + scheme.name,
                     CUDA_FN([p] { return test_memory_table<bf16_t>(p); })});
    }
    for (Pos p : {Pos::learned, Pos::crope})  // crope: the expanded weights are activations too
        for (bool flash : {true, false})
            t.push_back({std::string("cuda_bf16_memory_") + (flash ? "" : "cublas_") + pos_name(p),
                         CUDA_FN([p, flash] { return test_memory(p, flash); })});
    return t;
}

// test_cuda_bf16 [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
