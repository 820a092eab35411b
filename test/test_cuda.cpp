// CUDA backend tests: every GPU op (forward and backward) against its CPU twin in float on
// random inputs, encoder-backward and sum-of-squares determinism, the out-of-memory error,
// and whole training steps GPT<CudaBackend<float>> vs GPT<CpuBackend<float>> for each pos mode (and
// CRoPE with another MLP width), in plain fp32 and with TF32 GEMMs (looser tolerances), and GPT<CudaBackend<bf16_t>> (bf16
// activations) with bf16 tolerances (its kernels: test_cuda_bf16). A smoke test takes one
// training step at the paper's shapes (V=50257). Without CUDA (build or device) every test is
// reported SKIPPED.
// TF32 is turned off so the GPU computes in plain fp32 unless a test turns it on.
// Usage: test_cuda [NAME...] (only the tests whose name contains one of the arguments).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model.h"
#include "model_testlib.h"

namespace {

// ---------------------------------------------------------------- encoder
std::string test_encoder_forward() {
    Rng r(1);
    const int B = 3, T = 37, C = 40, V = 53, maxT = 64;
    auto tok = randint((size_t)B * T, V, r);
    Vec wte = randn((size_t)V * C, r), wpe = randn((size_t)maxT * C, r);
    DInts dtok(tok);
    DBuf dwte(wte), dwpe(wpe), dout((size_t)B * T * C);
    std::string why;
    for (int with_pos = 0; with_pos < 2; with_pos++) {
        Vec ref((size_t)B * T * C);
        cpu::encoder_forward(ref.data(), tok.data(), wte.data(), with_pos ? wpe.data() : nullptr, B, T, C);
        gpu::encoder_forward(dout.p, dtok.p, dwte.p, with_pos ? dwpe.p : nullptr, B, T, C);
        expect_close(why, with_pos ? "out (wpe)" : "out (no wpe)", dout.get(), ref, 1e-6);
    }
    return why;
}

std::string test_encoder_backward() {
    Rng r(2);
    const int B = 4, T = 45, C = 72, V = 31;
    auto tok = randint((size_t)B * T, V, r);
    for (int i = 0; i < B * T; i += 2) tok[i] = 7;  // one long run of a single token
    Vec dout = randn((size_t)B * T * C, r), dwte0 = randn((size_t)V * C, r), dwpe0 = randn((size_t)T * C, r);
    std::string why;
    for (int with_pos = 0; with_pos < 2; with_pos++) {
        Vec rw = dwte0, rp = dwpe0;
        cpu::encoder_backward(rw.data(), with_pos ? rp.data() : nullptr, dout.data(), tok.data(), B, T, C, V);
        DInts dtok(tok);
        DBuf gw(dwte0), gp(dwpe0), gd(dout);
        gpu::encoder_backward(gw.p, with_pos ? gp.p : nullptr, gd.p, dtok.p, B, T, C, V);
        expect_close(why, "dwte", gw.get(), rw, 1e-5);
        if (with_pos)
            expect_close(why, "dwpe", gp.get(), rp, 1e-5);
        else
            expect_close(why, "dwpe untouched", gp.get(), dwpe0, 0.0);
    }
    return why;
}

// Skewed tokens against the CPU: runs of one token across many of the sorted segments (32 slots)
// that the kernel sums in pieces. One token at 5 % of the positions (real text's most frequent),
// at 40 %, at every position; runs of exactly 32 and 64 (ending on segment boundaries) and of 33.
// At 8 x 512 positions, and at 3 x 1001 (the last segment part full, runs going on into it) with
// C = 300 (a thread of the block's 256 sums two channels).
std::string test_encoder_backward_skewed() {
    Rng r(12);
    const int V = 1000;
    std::string why;
    for (auto [B, T, C] : std::vector<std::tuple<int, int, int>>{{8, 512, 64}, {3, 1001, 300}})
        for (const char* dist : {"5%", "40%", "one token", "runs of 32", "runs of 64", "runs of 33"}) {
            const int N = B * T;
            std::vector<int> tok = randint((size_t)N, V, r);
            const std::string d = dist;
            for (int i = 0; i < N; i++) {
                if (d == "5%" && r.below(100) < 5) tok[i] = 3;
                if (d == "40%" && r.below(100) < 40) tok[i] = 999;
                if (d == "one token") tok[i] = 17;
                if (d.rfind("runs of ", 0) == 0) tok[i] = (i / std::stoi(d.substr(8)) * 7) % V;
            }
            Vec dout = randn((size_t)N * C, r), dwte = randn((size_t)V * C, r), ref = dwte;
            cpu::encoder_backward<float>(ref.data(), nullptr, dout.data(), tok.data(), B, T, C, V);
            DInts dtok(tok);
            DBuf gw(dwte), gd(dout);
            gpu::encoder_backward(gw.p, nullptr, gd.p, dtok.p, B, T, C, V);
            expect_close(why, "dwte, " + std::to_string(N) + " positions, " + dist, gw.get(), ref, 1e-5);
        }
    return why;
}

// The sort by token on the bits V needs: tokens at both ends of the range, for V at the edges of a
// bit count (1, 2, 256, 257, 65536, 65537), summed as the CPU sums them.
std::string test_encoder_backward_vocab_bits() {
    Rng r(13);
    const int B = 2, T = 300, C = 8;
    std::string why;
    for (int V : {1, 2, 256, 257, 65536, 65537}) {
        std::vector<int> tok = randint((size_t)B * T, V, r);
        tok[5] = V - 1, tok[6] = 0, tok[B * T - 1] = V - 1;
        Vec dout = randn((size_t)B * T * C, r), ref((size_t)V * C, 0.0f);
        cpu::encoder_backward<float>(ref.data(), nullptr, dout.data(), tok.data(), B, T, C, V);
        DInts dtok(tok);
        DBuf gw(Vec((size_t)V * C, 0.0f)), gd(dout);
        gpu::encoder_backward(gw.p, nullptr, gd.p, dtok.p, B, T, C, V);
        expect_close(why, "dwte, V=" + std::to_string(V), gw.get(), ref, 1e-5);
    }
    return why;
}

std::string test_encoder_backward_deterministic() {
    Rng r(3);
    const int B = 8, T = 256, C = 96, V = 500;
    auto tok = randint((size_t)B * T, V, r);
    for (int i = 0; i < B * T; i += 3) tok[i] = 11;
    Vec dout = randn((size_t)B * T * C, r), dwte0 = randn((size_t)V * C, r), dwpe0 = randn((size_t)T * C, r);
    DInts dtok(tok);
    DBuf gd(dout);
    Vec w[2], p[2];
    for (int run = 0; run < 2; run++) {
        DBuf gw(dwte0), gp(dwpe0);
        gpu::encoder_backward(gw.p, gp.p, gd.p, dtok.p, B, T, C, V);
        w[run] = gw.get();
        p[run] = gp.get();
    }
    if (std::memcmp(w[0].data(), w[1].data(), w[0].size() * sizeof(float)) != 0) return "dwte differs between runs";
    if (std::memcmp(p[0].data(), p[1].data(), p[0].size() * sizeof(float)) != 0) return "dwpe differs between runs";
    return "";
}

// ---------------------------------------------------------------- layernorm
std::string test_layernorm_forward() {
    Rng r(4);
    std::string why;
    for (auto [N, C] : std::vector<std::pair<int, int>>{{37, 48}, {1100, 72}, {64, 768}}) {
        Vec x = randn((size_t)N * C, r, 2.0), w = randn(C, r), b = randn(C, r);
        for (auto& v : x) v += 0.5f;  // non-zero mean
        Vec out((size_t)N * C), mean(N), rstd(N);
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        DBuf gx(x), gw(w), gb(b), go((size_t)N * C), gm((size_t)N), gr((size_t)N);
        gpu::layernorm_forward(go.p, gm.p, gr.p, gx.p, gw.p, gb.p, N, C);
        expect_close(why, "out", go.get(), out, 1e-5);
        expect_close(why, "mean", gm.get(), mean, 1e-5);
        expect_close(why, "rstd", gr.get(), rstd, 1e-5);
    }
    return why;
}

// With and without dsum (the residual branch's bias gradient: the column sums of dinp as
// updated); N = 1100 spans many chunks of rows, the last one partial; C = 72: 16-byte loads; C = 50:
// one column at a time; N = 4096, C = 128: the paper's width, 512 chunks of 8 rows; N = 3001,
// C = 388: 4 blocks of columns (the last of 4 columns) over 76 chunks (the last of one row) in 9
// groups (the last of 4 chunks).
std::string test_layernorm_backward() {
    Rng r(5);
    std::string why;
    for (auto [N, C] :
         std::vector<std::pair<int, int>>{{37, 48}, {1100, 72}, {300, 50}, {64, 768}, {4096, 128}, {3001, 388}}) {
        Vec x = randn((size_t)N * C, r, 2.0), w = randn(C, r), b = randn(C, r), d = randn((size_t)N * C, r);
        Vec dx0 = randn((size_t)N * C, r), dw0 = randn(C, r), db0 = randn(C, r), ds0 = randn(C, r);
        Vec out((size_t)N * C), mean(N), rstd(N);
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        for (bool sum : {false, true}) {
            Vec dx = dx0, dw = dw0, db = db0, ds = ds0;
            cpu::layernorm_backward(dx.data(), dw.data(), db.data(), sum ? ds.data() : nullptr, d.data(), x.data(),
                                    w.data(), mean.data(), rstd.data(), N, C);
            DBuf gx(x), gw(w), gd(d), gm(mean), gr(rstd), gdx(dx0), gdw(dw0), gdb(db0), gds(ds0);
            gpu::layernorm_backward(gdx.p, gdw.p, gdb.p, sum ? gds.p : nullptr, gd.p, gx.p, gw.p, gm.p, gr.p, N, C);
            expect_close(why, "dinp", gdx.get(), dx, 1e-5);
            expect_close(why, "dw", gdw.get(), dw, 1e-4);
            expect_close(why, "db", gdb.get(), db, 1e-4);
            expect_close(why, sum ? "dsum" : "dsum (not asked for)", gds.get(), ds, sum ? 1e-4 : 0.0);
        }
    }
    return why;
}

// ---------------------------------------------------------------- matmul
std::string matmul_forward_case(int N, int IC, int OC, bool bias, double tol, uint64_t seed, double min_err = 0.0) {
    Rng r(seed);
    Vec x = randn((size_t)N * IC, r), w = randn((size_t)OC * IC, r), b = randn(OC, r);
    Vec ref((size_t)N * OC);
    cpu::matmul_forward(ref.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, IC, OC);
    DBuf gx(x), gw(w), gb(b), go(randn((size_t)N * OC, r));  // garbage in out: must be overwritten
    gpu::matmul_forward(go.p, gx.p, gw.p, bias ? gb.p : nullptr, N, IC, OC);
    std::string why;
    std::string what = "out N=" + std::to_string(N) + " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC) +
                       (bias ? " bias" : " no bias");
    expect_close(why, what.c_str(), go.get(), ref, tol, min_err);
    return why;
}

std::string test_matmul_forward() {
    std::string why;
    append(why, matmul_forward_case(70, 48, 100, true, 1e-5, 6));  // float4 bias path
    append(why, matmul_forward_case(70, 48, 50, true, 1e-5, 7));   // scalar bias path
    append(why, matmul_forward_case(33, 40, 97, false, 1e-5, 8));  // tied head shape, no bias
    return why;
}

std::string matmul_backward_cases(double tol) {
    Rng r(9);
    std::string why;
    for (auto [N, IC, OC] : std::vector<std::tuple<int, int, int>>{{70, 48, 50}, {1100, 64, 192}}) {
        Vec x = randn((size_t)N * IC, r), w = randn((size_t)OC * IC, r), d = randn((size_t)N * OC, r);
        Vec dx0 = randn((size_t)N * IC, r), dw0 = randn((size_t)OC * IC, r), db0 = randn(OC, r);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            Vec dx = dx0, dw = dw0, db = db0;
            cpu::matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, d.data(), x.data(), w.data(), N,
                                 IC, OC);
            DBuf gx(x), gw(w), gd(d), gdx(dx0), gdw(dw0), gdb(db0);
            gpu::matmul_backward(gdx.p, gdw.p, with_bias ? gdb.p : nullptr, gd.p, gx.p, gw.p, N, IC, OC);
            expect_close(why, "dinp", gdx.get(), dx, tol);
            expect_close(why, "dw", gdw.get(), dw, tol);
            expect_close(why, "dbias", gdb.get(), db, with_bias ? 1e-5 : 0.0);
        }
        // dinp added to (matmul_backward overwrites it: dx0 above is garbage to be overwritten)
        Vec dx = dx0;
        cpu::matmul_dinp_add(dx.data(), d.data(), w.data(), N, IC, OC);
        DBuf gw(w), gd(d), gdx(dx0);
        gpu::matmul_dinp_add(gdx.p, gd.p, gw.p, N, IC, OC);
        expect_close(why, "dinp added", gdx.get(), dx, tol);
    }
    return why;
}

std::string test_matmul_backward() {
    return matmul_backward_cases(1e-5);
}

std::string test_matmul_tf32() {
    Tf32On on;
    return matmul_forward_case(256, 128, 96, true, 1e-2, 10);
}

// ---------------------------------------------------------------- reductions, bit for bit
// The sums over rows that cross blocks (LayerNorm's dw, db and dsum, a linear layer's dbias, at
// 16-byte and 4-byte packs; the embedding's long runs of one token) at sizes of many blocks,
// against the CPU, and a digest of their bits: test/test_emu_orders.sh runs this in every thread
// and block order of the emulation, which must give the same digest.
std::string test_reduction_bits() {
    Rng r(13);
    const int N = 4096, C = 128, V = 500;
    std::string why;
    std::vector<Vec> results;
    Vec x = randn((size_t)N * C, r), w = randn(C, r), b = randn(C, r), d = randn((size_t)N * C, r);
    Vec out((size_t)N * C), mean(N), rstd(N), dx((size_t)N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f), ds(C, 0.0f);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), ds.data(), d.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
    DBuf gx(x), gw(w), gd(d), gm(mean), gr(rstd), gdx(Vec((size_t)N * C, 0.0f)), gdw(Vec(C, 0.0f)), gdb(Vec(C, 0.0f)),
        gds(Vec(C, 0.0f));
    gpu::layernorm_backward(gdx.p, gdw.p, gdb.p, gds.p, gd.p, gx.p, gw.p, gm.p, gr.p, N, C);
    results = {gdw.get(), gdb.get(), gds.get()};
    expect_close(why, "layernorm dw", results[0], dw, 1e-4);
    expect_close(why, "layernorm dsum", results[2], ds, 1e-4);
    // 16-byte packs; one column at a time; many blocks of columns, the last one part full, and
    // chunks of rows in uneven groups, the last chunk part full: OC = 1000 in 8 column blocks of
    // 35 chunks (groups of 6, the last of 5), OC = 1001 one column at a time in 32 of 10 (groups of 4)
    for (auto [n, OC] : std::vector<std::pair<int, int>>{{N, 128}, {N, 50}, {5000, 1000}, {3001, 1001}}) {
        Vec dout = randn((size_t)n * OC, r), dbias(OC, 0.0f);
        cpu::matmul_backward<float>(nullptr, nullptr, dbias.data(), dout.data(), nullptr, nullptr, n, C, OC);
        DBuf go(dout), gb(Vec(OC, 0.0f));
        gpu::matmul_backward<float>(nullptr, nullptr, gb.p, go.p, nullptr, nullptr, n, C, OC);
        results.push_back(gb.get());
        expect_close(why, "dbias N=" + std::to_string(n) + " OC=" + std::to_string(OC), results.back(), dbias, 1e-4);
    }
    std::vector<int> tok = randint((size_t)N, V, r);
    for (auto& t : tok)
        if (r.below(100) < 30) t = 42;  // a run over 38 sorted segments
    Vec dwte(V * C, 0.0f);
    cpu::encoder_backward<float>(dwte.data(), nullptr, d.data(), tok.data(), 1, N, C, V);
    DInts dtok(tok);
    DBuf gwte(Vec(V * C, 0.0f));
    gpu::encoder_backward(gwte.p, nullptr, gd.p, dtok.p, 1, N, C, V);
    results.push_back(gwte.get());
    expect_close(why, "dwte", results.back(), dwte, 1e-5);
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the bits
    for (const Vec& v : results)
        for (float f : v) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            for (int k = 0; k < 4; k++) h = (h ^ ((u >> (8 * k)) & 0xffu)) * 1099511628211ull;
        }
    std::printf("# cuda_reduction_bits digest %016llx\n", (unsigned long long)h);
    return why;
}

// ---------------------------------------------------------------- rope / crope
// C = 48: rows of 3C = 144 go in 16-byte packs; C = 22 (H = 1): 66 do not, one pair per access.
// xpos: k's tables are not q's.
struct RopeSetup {
    int B = 2, T = 37, C = 48, H = 4, maxT = 64;
    Pos p;
    TestPos pos;
    explicit RopeSetup(int C_ = 48, int H_ = 4, Pos p_ = Pos::rope) : C(C_), H(H_), p(p_), pos(p, maxT, C, H) {}
    std::string tag() const { return " (" + std::string(pos_name(p)) + ", C=" + std::to_string(C); }
};
// Made on first use, so freed at exit before the CUDA runtime's own statics (a namespace-scope
// array's device buffers outlived the emulator's memory table).
static const std::array<RopeSetup, 4>& rope_setups() {
    static const std::array<RopeSetup, 4> s = {RopeSetup(), RopeSetup(22, 1), RopeSetup(48, 4, Pos::xpos),
                                               RopeSetup(22, 1, Pos::xpos)};
    return s;
}

std::string test_rope_forward() {
    Rng r(11);
    std::string why;
    for (const RopeSetup& s : rope_setups()) {
        size_t n = (size_t)s.B * s.T * 3 * s.C;
        Vec x = randn(n, r), bias = randn((size_t)3 * s.C, r);
        DBuf gx(x), go(randn(n, r)), gb(bias);
        for (bool with_bias : {false, true}) {  // the qkv bias added before the rotation, or none
            const std::string tag = s.tag() + (with_bias ? ", bias)" : ")");
            Vec ref(n);
            cpu::rope_forward(ref.data(), x.data(), with_bias ? bias.data() : nullptr, s.pos.cpu(), s.B, s.T, s.C, s.H);
            gpu::rope_forward(go.p, gx.p, with_bias ? gb.p : nullptr, s.pos.gpu(), s.B, s.T, s.C, s.H);
            expect_close(why, "out" + tag, go.get(), ref, 1e-6);
        }
    }
    return why;
}

std::string test_rope_backward() {
    Rng r(12);
    std::string why;
    for (const RopeSetup& s : rope_setups()) {
        size_t n = (size_t)s.B * s.T * 3 * s.C;
        Vec d = randn(n, r), dx0 = randn(n, r), dx = dx0;  // dx0: what the backward must overwrite
        cpu::rope_backward(dx.data(), d.data(), s.pos.cpu(), s.B, s.T, s.C, s.H);
        DBuf gd(d), gdx(dx0);
        gpu::rope_backward(gdx.p, gd.p, s.pos.gpu(), s.B, s.T, s.C, s.H);
        expect_close(why, "dinp" + s.tag() + ")", gdx.get(), dx, 1e-6);
    }
    return why;
}

std::string test_crope_expand() {
    Rng r(13);
    const int C = 48, h = C / 2;
    Vec A = randn((size_t)3 * h * h, r), Bm = randn((size_t)3 * h * h, r), ref((size_t)3 * C * C);
    cpu::crope_expand(ref.data(), A.data(), Bm.data(), C);
    DBuf gA(A), gB(Bm), gw(randn((size_t)3 * C * C, r));
    gpu::crope_expand(gw.p, gA.p, gB.p, C);
    std::string why;
    expect_close(why, "w", gw.get(), ref, 0.0);
    return why;
}

std::string test_crope_fold() {
    Rng r(14);
    const int C = 48, h = C / 2;
    Vec dw = randn((size_t)3 * C * C, r), dA0 = randn((size_t)3 * h * h, r), dB0 = randn((size_t)3 * h * h, r);
    Vec dA = dA0, dB = dB0;
    cpu::crope_fold(dA.data(), dB.data(), dw.data(), C);
    DBuf gdw(dw), gdA(dA0), gdB(dB0);
    gpu::crope_fold(gdA.p, gdB.p, gdw.p, C);
    std::string why;
    expect_close(why, "dA", gdA.get(), dA, 1e-6);
    expect_close(why, "dB", gdB.get(), dB, 1e-6);
    return why;
}

// ---------------------------------------------------------------- attention
struct AttShape {
    int B, T, C, H;
};
const AttShape kAttShapes[] = {{2, 70, 48, 4}, {3, 33, 64, 2}, {1, 1, 16, 2}};
// ALiBi: a head count that is a power of two and one that is not (the slopes' two rules)
const AttShape kAlibiShapes[] = {{2, 70, 48, 4}, {2, 45, 48, 3}};

std::string att_tag(const AttShape& s, bool alibi) {
    return " (B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
           " H=" + std::to_string(s.H) + (alibi ? " alibi" : "") + ")";
}

std::string attention_forward_case(const AttShape& s, uint64_t seed, bool alibi = false, double tol = 1e-5,
                                   double min_err = 0.0) {
    Rng r(seed);
    size_t nqkv = (size_t)s.B * s.T * 3 * s.C, natt = (size_t)s.B * s.H * s.T * s.T, nout = (size_t)s.B * s.T * s.C;
    Vec qkv = randn(nqkv, r), out(nout), att(natt);
    const TestPos m(s.H, alibi);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.H, m.cpu());
    DBuf gq(qkv), go(randn(nout, r)), ga(randn(natt, r));
    gpu::attention_forward(go.p, ga.p, gq.p, s.B, s.T, s.C, s.H, m.gpu());
    std::string why;
    expect_close(why, "out" + att_tag(s, alibi), go.get(), out, tol, min_err);
    expect_close(why, "att" + att_tag(s, alibi), ga.get(), att, tol);
    return why;
}

// The backward takes the forward's probabilities: ALiBi's bias is in them (the slopes go along
// unread).
std::string attention_backward_case(const AttShape& s, uint64_t seed, bool alibi = false, double tol = 1e-5) {
    Rng r(seed);
    size_t nqkv = (size_t)s.B * s.T * 3 * s.C, natt = (size_t)s.B * s.H * s.T * s.T, nout = (size_t)s.B * s.T * s.C;
    Vec qkv = randn(nqkv, r), out(nout), att(natt), scratch(natt);
    const TestPos m(s.H, alibi);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.H, m.cpu());
    Vec d = randn(nout, r), dqkv0 = randn(nqkv, r), dqkv = dqkv0;
    cpu::attention_backward(dqkv.data(), scratch.data(), d.data(), qkv.data(), att.data(), s.B, s.T, s.C, s.H, m.cpu());
    DBuf gq(qkv), ga(att), gd(d), gdq(dqkv0), gs(randn(natt, r));
    gpu::attention_backward(gdq.p, gs.p, gd.p, gq.p, ga.p, s.B, s.T, s.C, s.H, m.gpu());
    std::string why;
    expect_close(why, "dqkv" + att_tag(s, alibi), gdq.get(), dqkv, tol);
    return why;
}

std::string test_attention_forward() {
    std::string why;
    uint64_t seed = 20;
    for (const auto& s : kAttShapes) append(why, attention_forward_case(s, seed++));
    return why;
}

std::string test_attention_backward() {
    std::string why;
    uint64_t seed = 30;
    for (const auto& s : kAttShapes) append(why, attention_backward_case(s, seed++));
    return why;
}

std::string test_attention_alibi() {
    std::string why;
    uint64_t seed = 50;
    for (const auto& s : kAlibiShapes) {
        append(why, attention_forward_case(s, seed++, true));
        append(why, attention_backward_case(s, seed++, true));
    }
    return why;
}

// the paper's sequence length: long rows in the softmax kernels, big GEMMs; with ALiBi, whose
// bias there reaches -64 (slope 2^-4 at distance 1023)
std::string test_attention_long() {
    AttShape s{1, 1024, 32, 2};
    // sums over up to 1024 terms in a different order than the CPU: a looser tolerance
    std::string why;
    for (bool alibi : {false, true}) {
        append(why, attention_forward_case(s, 40, alibi, 1e-4));
        append(why, attention_backward_case(s, 41, alibi, 1e-4));
    }
    return why;
}

// ---------------------------------------------------------------- elementwise
// Rows of kEwC channels (an odd count: the bias index wraps mid-vector, one element per access)
// or kEwCPacked (16-byte packs of 4 floats), with the bias of the linear layer before the op
// (fp32, broadcast over rows) or none.
constexpr int kEwN = 303, kEwC = 33, kEwCPacked = 40;

std::string test_gelu_forward() {
    Rng r(50);
    std::string why;
    for (int C : {kEwC, kEwCPacked}) {
        const size_t n = (size_t)kEwN * C;
        Vec x = randn(n, r, 2.0), bias = randn(C, r);
        DBuf gx(x), go(n), gb(bias);
        for (bool with_bias : {false, true}) {
            const std::string tag = " (C=" + std::to_string(C) + (with_bias ? ", bias)" : ")");
            Vec ref(n);
            cpu::gelu_forward(ref.data(), x.data(), with_bias ? bias.data() : nullptr, kEwN, C);
            gpu::gelu_forward(go.p, gx.p, with_bias ? gb.p : nullptr, kEwN, C);
            expect_close(why, "out" + tag, go.get(), ref, 1e-6);
        }
    }
    return why;
}

std::string test_gelu_backward() {
    Rng r(51);
    std::string why;
    for (int C : {kEwC, kEwCPacked}) {
        const size_t n = (size_t)kEwN * C;
        Vec x = randn(n, r, 2.0), d = randn(n, r), dx0 = randn(n, r), bias = randn(C, r);  // dx0: overwritten
        DBuf gx(x), gd(d), gb(bias);
        for (bool with_bias : {false, true}) {
            const std::string tag = " (C=" + std::to_string(C) + (with_bias ? ", bias)" : ")");
            Vec dx = dx0;
            cpu::gelu_backward(dx.data(), x.data(), with_bias ? bias.data() : nullptr, d.data(), kEwN, C);
            DBuf gdx(dx0);
            gpu::gelu_backward(gdx.p, gx.p, with_bias ? gb.p : nullptr, gd.p, kEwN, C);
            expect_close(why, "dinp" + tag, gdx.get(), dx, 1e-6);
        }
    }
    return why;
}

// The residual add (with the branch's bias, or none) and the LayerNorm after it, in one kernel:
// the sum as stored, the LayerNorm's output and statistics; in place (res = x) as well.
std::string test_residual_layernorm_forward() {
    Rng r(52);
    const size_t n = (size_t)kEwN * kEwC;
    Vec x = randn(n, r), y = randn(n, r), bias = randn(kEwC, r), w = randn(kEwC, r), b = randn(kEwC, r);
    DBuf gy(y), gbias(bias), gw(w), gb(b);
    std::string why;
    for (bool with_bias : {false, true})
        for (bool in_place : {false, true}) {
            const std::string tag = std::string(with_bias ? " (bias" : " (no bias") + (in_place ? ", in place)" : ")");
            Vec res(n), out(n), mean(kEwN), rstd(kEwN);
            cpu::residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), x.data(), y.data(),
                                            with_bias ? bias.data() : nullptr, w.data(), b.data(), kEwN, kEwC);
            DBuf gx(x), gres(n), go(n), gm((size_t)kEwN), gr((size_t)kEwN);
            float* dres = in_place ? gx.p : gres.p;
            gpu::residual_layernorm_forward(dres, go.p, gm.p, gr.p, gx.p, gy.p, with_bias ? gbias.p : nullptr, gw.p,
                                            gb.p, kEwN, kEwC);
            expect_close(why, "res" + tag, in_place ? gx.get() : gres.get(), res, 0.0);
            expect_close(why, "out" + tag, go.get(), out, 1e-5);
            expect_close(why, "mean" + tag, gm.get(), mean, 1e-5);
            expect_close(why, "rstd" + tag, gr.get(), rstd, 1e-5);
        }
    return why;
}

// ---------------------------------------------------------------- loss
std::string loss_case(int N, int V, float dscale, uint64_t seed) {
    Rng r(seed);
    Vec z = randn((size_t)N * V, r, 3.0), losses(N);
    auto tgt = randint(N, V, r);
    tgt[0] = V - 1;  // the last column
    Vec zref = z;
    cpu::classifier_loss(zref.data(), losses.data(), tgt.data(), N, V, V, dscale);
    DBuf gz(z), gl((size_t)N);
    DInts gt(tgt);
    gpu::classifier_loss(gz.p, gl.p, gt.p, N, V, V, dscale);
    std::string why;
    std::string tag = " (N=" + std::to_string(N) + " V=" + std::to_string(V) + ")";
    expect_close(why, ("losses" + tag).c_str(), gl.get(), losses, 1e-5);
    if (dscale == 0.0f)
        expect_close(why, ("logits unchanged" + tag).c_str(), gz.get(), z, 0.0);
    else
        expect_close(why, ("dlogits" + tag).c_str(), gz.get(), zref, 1e-5);
    return why;
}

std::string test_softmax_crossentropy_loss() {
    std::string why;
    append(why, loss_case(37, 97, 0.0f, 60));
    append(why, loss_case(5, 50257, 0.0f, 61));
    return why;
}

std::string test_softmax_crossentropy_grad() {
    std::string why;
    append(why, loss_case(37, 97, 1.0f / 37, 62));
    append(why, loss_case(5, 50257, 1.0f / 5, 63));
    append(why, loss_case(3, 20, -2.5f, 64));
    return why;
}

// ---------------------------------------------------------------- optimiser, norm
std::string test_adamw_update() {
    Rng r(70);
    const size_t n = 10007;
    Vec p = randn(n, r), g = randn(n, r), m = randn(n, r, 0.1), v = randn(n, r, 0.1);
    for (auto& x : v) x = x * x;  // second moments are non-negative
    DBuf gp(p), gg(g), gm(m), gv(v);
    Vec rp = p, rm = m, rv = v;
    StepScalars* ds = CB::alloc_scalars();  // the GPU reads lr, bias corrections and clip scale from device memory
    for (int t = 1; t <= 3; t++) {
        const StepScalars sc = adamw_scalars(1e-3f, 0.9f, 0.999f, t, 0.7f);
        cpu::adamw_update(rp.data(), g.data(), rm.data(), rv.data(), n, &sc, 0.9f, 0.999f, 1e-8f, 0.01f);
        CB::copy_scalars_from_host(ds, sc);
        gpu::adamw_update(gp.p, gg.p, gm.p, gv.p, n, ds, 0.9f, 0.999f, 1e-8f, 0.01f);
    }
    CB::free_scalars(ds);
    std::string why;
    expect_close(why, "p", gp.get(), rp, 1e-6);
    expect_close(why, "m", gm.get(), rm, 1e-6);
    expect_close(why, "v", gv.get(), rv, 1e-6);
    return why;
}

std::string test_sum_squares() {
    Rng r(71);
    std::string why;
    for (size_t n : {(size_t)1, (size_t)1000, (size_t)1000003}) {
        Vec x = randn(n, r);
        DBuf gx(x);
        double ref = cpu::sum_squares(x.data(), n);
        double a = gpu::sum_squares(gx.p, n), b = gpu::sum_squares(gx.p, n);
        if (!(std::fabs(a - ref) <= 1e-10 * std::fabs(ref)))  // both sum exact squares in double
            why += "n=" + std::to_string(n) + ": " + fmt(a) + " vs cpu " + fmt(ref) + "; ";
        if (std::memcmp(&a, &b, sizeof a) != 0) why += "n=" + std::to_string(n) + ": two calls differ; ";
    }
    if (gpu::sum_squares(nullptr, 0) != 0.0) why += "n=0 is not 0";
    return why;
}

std::string test_oom_message() {
    try {
        float* p = CB::alloc((size_t)1 << 44);  // 64 TiB
        CB::free(p);
        return "allocating 64 TiB did not fail";
    } catch (const std::runtime_error& e) {
        std::string w = e.what();
        if (w.find("out of memory") == std::string::npos) return "message without 'out of memory': " + w;
    }
    DBuf ok((size_t)1000);  // the context still works afterwards
    if (ok.get().size() != 1000) return "allocation after the failure broke";
    return "";
}

// ---------------------------------------------------------------- whole model
struct ModelResult {
    std::string loss, grads, adamw;
};

// Relative L2 distance ||a - b|| / ||b - base||: how far the GPU's parameter change is from
// the CPU's. (Per element, Adam can flip the sign of a step whose gradient is ~0 in both.)
double rel_l2_change(const Vec& a, const Vec& b, const Vec& base) {
    double num = 0, den = 1e-300;
    for (size_t i = 0; i < a.size(); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += ((double)b[i] - base[i]) * ((double)b[i] - base[i]);
    }
    return std::sqrt(num / den);
}

// What run_model checks: AdamW steps taken, and tolerances. Plain fp32 GEMMs agree with the
// CPU to rounding; TF32 GEMMs (10-bit mantissas, as the trainer runs by default) to about 1e-2.
// bf16 activations (8-bit mantissas: each stored activation and activation gradient is off by
// up to 2^-9 relative, and the layers carry the errors on; measured under the emulation: loss
// 1e-4, gradient tensors 9e-3 of their largest element, weights' change after 5 steps 4e-2):
// the loss within 1e-3, every gradient tensor within 3e-2, the grad norm within 1e-2; the
// change of the weights after 5 AdamW steps within 0.1 of the CPU's in L2 (Adam's step is
// sign-like where a gradient is near 0, so a small error there flips a whole step), the loss
// after them within 2e-3.
struct ModelCheck {
    int steps;
    double loss, grads, norm, change, loss_after;
};
constexpr ModelCheck kFp32Check{5, 1e-5, 1e-3, 1e-4, 1e-2, 1e-4}, kTf32Check{1, 1e-2, 1e-2, 1e-2, 5e-2, 1e-2};
constexpr ModelCheck kBf16Check{5, 1e-3, 3e-2, 1e-2, 1e-1, 2e-3};

// A full training step GPT<GB> (GB: CudaBackend<float> or CudaBackend<bf16_t>) vs GPT<CpuBackend<float>>
// (loss, every gradient tensor, grad norm), then the AdamW updates (parameter change and the
// loss after them). mlp_hidden: the MLP's width (0: 4C = 128).
template <class GB>
ModelResult run_model(Pos pos, const ModelCheck& tol, int mlp_hidden = 0) {
    ModelResult res;
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = 32, mc.V = 97, mc.maxT = 48;
    mc.mlp_hidden = mlp_hidden;
    const int B = 2, T = 33;
    Rng r(80 + (int)pos);
    auto in = randint((size_t)B * T, mc.V, r), tg = randint((size_t)B * T, mc.V, r);
    // fp32: the cublas attention; bf16: flash (bf16 cublas: test_cuda_bf16, test_emu_train)
    mc.flash = !std::is_same<GB, CudaBackend<float>>::value;
    GPT<GB> gg(mc);
    GPT<K> gc(mc);
    gg.init(1234);
    gc.init(1234);
    const Vec p0 = gc.get(gc.params);

    double lg = gg.forward(in.data(), tg.data(), B, T, true), lc = gc.forward(in.data(), tg.data(), B, T, true);
    if (!(std::fabs(lg - lc) <= tol.loss * std::fabs(lc))) res.loss = "loss " + fmt(lg) + " vs cpu " + fmt(lc);

    gg.backward();
    gc.backward();
    Vec dg = gg.get(gg.grads), dc = gc.get(gc.grads);
    for (const auto& t : gc.layout) {
        Vec a(dg.begin() + t.offset, dg.begin() + t.offset + t.numel);
        Vec b(dc.begin() + t.offset, dc.begin() + t.offset + t.numel);
        double e = rel_max_err(a, b);
        if (!(e <= tol.grads)) res.grads += t.name + " rel err " + fmt(e) + "; ";
    }
    double ng = gradient_norm(gg), nc = gradient_norm(gc);
    if (!(std::fabs(ng - nc) <= tol.norm * nc)) res.grads += "grad norm " + fmt(ng) + " vs cpu " + fmt(nc);

    for (int t = 1; t <= tol.steps; t++) {
        adamw_step(gg, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, t, 1.0f);
        adamw_step(gc, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, t, 1.0f);
        lg = gg.forward(in.data(), tg.data(), B, T, true);
        lc = gc.forward(in.data(), tg.data(), B, T, true);
        if (t == tol.steps) break;
        gg.backward();
        gc.backward();
    }
    Vec pg = gg.get(gg.params), pc = gc.get(gc.params);
    double e = rel_l2_change(pg, pc, p0);
    if (!(e <= tol.change)) res.adamw += "parameter change rel L2 err " + fmt(e) + "; ";
    if (!(std::fabs(lg - lc) <= tol.loss_after * std::fabs(lc)))
        res.adamw += "loss after " + std::to_string(tol.steps) + " steps " + fmt(lg) + " vs cpu " + fmt(lc);
    return res;
}

ModelResult& model_result(Pos pos, bool tf32) {
    static std::map<std::pair<int, bool>, ModelResult> cache;
    auto key = std::make_pair((int)pos, tf32);
    auto it = cache.find(key);
    if (it == cache.end()) {
        if (tf32) {
            Tf32On on;
            it = cache.emplace(key, run_model<CudaBackend<float>>(pos, kTf32Check)).first;
        } else {
            it = cache.emplace(key, run_model<CudaBackend<float>>(pos, kFp32Check)).first;
        }
    }
    return it->second;
}

ModelResult& model_bf16_result(Pos pos) {
    static std::map<int, ModelResult> cache;
    auto it = cache.find((int)pos);
    if (it == cache.end()) it = cache.emplace((int)pos, run_model<CudaBackend<bf16_t>>(pos, kBf16Check)).first;
    return it->second;
}

// Another MLP width (40, not 4C = 128), in fp32 and bf16: the loss, the gradients and one AdamW
// step (elementwise over the flat buffers: more steps test nothing the width changes).
template <class GB>
std::string test_model_mlp_hidden(ModelCheck tol) {
    tol.steps = 1;
    const ModelResult r = run_model<GB>(Pos::crope, tol, 40);
    return r.loss + r.grads + r.adamw;
}

// ---------------------------------------------------------------- paper shape
// The CPU execution layer (test/cuda_emu/) names its device as an emulation.
bool emulated_device() {
    return CB::device_name().find("emulat") != std::string::npos;
}

// One training step at the CRoPE paper's shapes (V=50257, C=128, L=4, H=4, maxT=1024) with the
// trainer's TF32 GEMMs, on random tokens: the initial logits are small, so the loss starts close
// to ln V, and one AdamW step on the same batch must lower it. B*T = 16 x 1024 on a GPU; under the
// CPU execution layer, which runs every CUDA thread in turn, 1 x 128 keeps it to a few seconds.
std::string test_paper_shape_step(Pos pos) {
    Tf32On on;
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 4, mc.H = 4, mc.C = 128, mc.V = 50257, mc.maxT = 1024;
    const bool emu = emulated_device();
    const int B = emu ? 1 : 16, T = emu ? 128 : 1024;
    Rng r(200 + (int)pos);
    auto in = randint((size_t)B * T, mc.V, r), tg = randint((size_t)B * T, mc.V, r);
    GPT<CudaBackend<float>> g(mc);
    g.init(42);
    double l0 = g.forward(in.data(), tg.data(), B, T, true);
    g.backward();
    double norm = gradient_norm(g);
    adamw_step(g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 1, 1.0f);
    double l1 = g.forward(in.data(), tg.data(), B, T, false);
    std::printf("# paper shape %s: B=%d T=%d loss %.4f -> %.4f (ln V = %.4f), grad norm %.3f\n", pos_name(pos), B, T,
                l0, l1, std::log((double)mc.V), norm);
    std::string why;
    if (!std::isfinite(l0) || std::fabs(l0 - std::log((double)mc.V)) > 0.1)
        append(why, "initial loss " + fmt(l0) + " not within 0.1 of ln V = " + fmt(std::log((double)mc.V)));
    if (!std::isfinite(norm) || norm <= 0) append(why, "grad norm " + fmt(norm));
    if (!std::isfinite(l1) || !(l1 < l0)) append(why, "loss after one step " + fmt(l1) + ", before " + fmt(l0));
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

static std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {
        {"cuda_encoder_forward", CUDA_FN(test_encoder_forward)},
        {"cuda_encoder_backward", CUDA_FN(test_encoder_backward)},
        {"cuda_encoder_backward_skewed", CUDA_FN(test_encoder_backward_skewed)},
        {"cuda_encoder_backward_deterministic", CUDA_FN(test_encoder_backward_deterministic)},
        {"cuda_encoder_backward_vocab_bits", CUDA_FN(test_encoder_backward_vocab_bits)},
        {"cuda_reduction_bits", CUDA_FN(test_reduction_bits)},
        {"cuda_layernorm_forward", CUDA_FN(test_layernorm_forward)},
        {"cuda_layernorm_backward", CUDA_FN(test_layernorm_backward)},
        {"cuda_matmul_forward", CUDA_FN(test_matmul_forward)},
        {"cuda_matmul_backward", CUDA_FN(test_matmul_backward)},
        {"cuda_matmul_tf32", CUDA_FN(test_matmul_tf32)},
        {"cuda_rope_forward", CUDA_FN(test_rope_forward)},
        {"cuda_rope_backward", CUDA_FN(test_rope_backward)},
        {"cuda_crope_expand", CUDA_FN(test_crope_expand)},
        {"cuda_crope_fold", CUDA_FN(test_crope_fold)},
        {"cuda_attention_forward", CUDA_FN(test_attention_forward)},
        {"cuda_attention_backward", CUDA_FN(test_attention_backward)},
        {"cuda_attention_alibi", CUDA_FN(test_attention_alibi)},
        {"cuda_attention_long", CUDA_FN(test_attention_long)},
        {"cuda_gelu_forward", CUDA_FN(test_gelu_forward)},
        {"cuda_gelu_backward", CUDA_FN(test_gelu_backward)},
        {"cuda_residual_layernorm_forward", CUDA_FN(test_residual_layernorm_forward)},
        {"cuda_softmax_crossentropy_loss", CUDA_FN(test_softmax_crossentropy_loss)},
        {"cuda_softmax_crossentropy_grad", CUDA_FN(test_softmax_crossentropy_grad)},
        {"cuda_adamw_update", CUDA_FN(test_adamw_update)},
        {"cuda_sum_squares", CUDA_FN(test_sum_squares)},
        {"cuda_oom_message", CUDA_FN(test_oom_message)},
    };
    for (const PosTraits& scheme : kPosSchemes) {  // every position scheme
        [[maybe_unused]] Pos p = scheme.pos;       // unused without CUDA
        for (bool tf32 : {false, true}) {
            std::string n = std::string(tf32 ? "cuda_tf32_model_" : "cuda_model_") + scheme.name;
            t.push_back({n + "_loss", CUDA_FN([p, tf32] { return model_result(p, tf32).loss; })});
            t.push_back({n + "_grads", CUDA_FN([p, tf32] { return model_result(p, tf32).grads; })});
            t.push_back(
                {n + (tf32 ? "_adamw1" : "_adamw5"), CUDA_FN([p, tf32] { return model_result(p, tf32).adamw; })});
        }
        std::string n = std::string("cuda_bf16_model_") + scheme.name;
        t.push_back({n + "_loss", CUDA_FN([p] { return model_bf16_result(p).loss; })});
        t.push_back({n + "_grads", CUDA_FN([p] { return model_bf16_result(p).grads; })});
        t.push_back({n + "_adamw5", CUDA_FN([p] { return model_bf16_result(p).adamw; })});
    }
    t.push_back({"cuda_model_mlp_hidden_crope", CUDA_FN([] { return test_model_mlp_hidden<CB>(kFp32Check); })});
    t.push_back({"cuda_bf16_model_mlp_hidden_crope",
                 CUDA_FN([] { return test_model_mlp_hidden<CudaBackend<bf16_t>>(kBf16Check); })});
    for (Pos p : {Pos::learned, Pos::rope, Pos::crope})  // the benchmark's schemes
        t.push_back(
            {std::string("cuda_paper_shape_") + pos_name(p), CUDA_FN([p] { return test_paper_shape_step(p); })});
    return t;
}

// test_cuda [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
