// The training step's classifier (src/classifier.h: LM head GEMM, loss, the head's backward
// GEMMs, chunk by chunk over the rows) and the padded vocabulary, on the CUDA backend:
//   - the loss kernel (gpu::classifier_loss) against its CPU twin at padded and unpadded row
//     strides, vector and scalar loads, with garbage in the padded columns;
//   - five training steps per position scheme with chunks of 7 rows (B*T = 66: nine chunks and
//     a remainder of 3) against one chunk of all rows (the unfused path) on the GPU, and against
//     the CPU: first loss, every gradient, grad norm, the losses and the weights after 5 AdamW
//     steps; and chunked vs one chunk with bf16 activations (rope);
//   - the vocabulary-tile kernels (gpu::classifier_tile_*) against their CPU twins, fp32 and bf16,
//     and the twins against the row kernel's; training steps with tiles (classifier_tiles, src/classifier.h)
//     against row chunks, on the GPU, the CPU and across, and in bf16;
//   - the fused head's kernels (gpu::classifier_fused) and its CPU twin against the head in
//     double; training steps with it against row chunks, on the CPU, the GPU (TF32, bf16) and
//     across, in one step and two micro-steps;
//   - the padded rows of wte (and of its gradient and AdamW moments) stay exactly zero;
//   - a checkpoint of a padded GPU run loads into an unpadded CPU model (vocab_pad 1) and gives
//     the same validation loss and logits;
//   - the profiling mode's per-phase times (CUDA events) cover the training step, and an
//     evaluation forward adds nothing to them;
//   - token ids uploaded through the pinned staging buffers arrive intact when the host reuses
//     its source at once, the buffers grow, and uploads alternate.
// Without CUDA (build or device) every test is reported SKIPPED.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model.h"
#include "model_testlib.h"
#include "model_io.h"
#include "safetensors.h"

namespace {

// ---- the loss kernel ----------------------------------------------------------------------

// N rows of ld floats, the first V of them logits, the rest garbage the kernel must ignore.
std::string classifier_loss_case(int N, int V, int ld, float dscale, uint64_t seed) {
    Rng r(seed);
    Vec z((size_t)N * ld);
    for (int i = 0; i < N; i++)
        for (int v = 0; v < ld; v++) z[(size_t)i * ld + v] = v < V ? (float)(3 * r.normal()) : 1e4f;
    std::vector<int> tg(N);
    for (auto& t : tg) t = (int)r.below(V);
    Vec ref = z, losses(N);
    cpu::classifier_loss(ref.data(), losses.data(), tg.data(), N, V, ld, dscale);

    float *dz = CB::alloc(z.size()), *dl = CB::alloc(N);
    int* dt = CB::alloc_int(N);
    CB::copy_from_host(dz, z.data(), z.size());
    CB::copy_ints_from_host(dt, tg.data(), N);
    gpu::classifier_loss(dz, dl, dt, N, V, ld, dscale);
    Vec gz(z.size()), gl(N);
    CB::copy_to_host(gz.data(), dz, gz.size());
    CB::copy_to_host(gl.data(), dl, N);
    CB::free(dz), CB::free(dl), CB::free_int(dt);

    std::string why, tag = "N=" + std::to_string(N) + " V=" + std::to_string(V) + " ld=" + std::to_string(ld);
    expect_close(why, tag + " losses", gl, losses, 1e-5);
    expect_close(why, tag + (dscale != 0 ? " dlogits" : " logits (untouched)"), gz, ref, 1e-5);
    for (int i = 0; i < N; i++)
        for (int v = V; v < ld; v++) {
            float want = dscale != 0 ? 0.0f : 1e4f;  // zero gradient, or left alone in evaluation
            if (gz[(size_t)i * ld + v] != want) {
                append(why, tag + ": padded column " + std::to_string(v) + " of row " + std::to_string(i) + " is " +
                                fmt(gz[(size_t)i * ld + v]) + ", want " + fmt(want));
                return why;
            }
        }
    return why;
}

std::string test_classifier_loss() {
    std::string why;
    for (float dscale : {1.0f / 13, 0.0f}) {
        append(why, classifier_loss_case(13, 97, 97, dscale, 1));     // unpadded, odd V: scalar loads
        append(why, classifier_loss_case(13, 97, 128, dscale, 2));    // padded to 128: float4 loads
        append(why, classifier_loss_case(5, 100, 100, dscale, 3));    // unpadded, V % 4 == 0: float4
        append(why, classifier_loss_case(7, 97, 101, dscale, 4));     // padded, odd stride: scalar
        append(why, classifier_loss_case(3, 1100, 1152, dscale, 5));  // more columns than threads
    }
    return why;
}

// ---- the vocabulary-tile kernels ----------------------------------------------------------

// N rows of Vp logits (columns >= V garbage the kernels must ignore) in tiles of `tile` columns,
// through gpu::classifier_tile_* with elements E and through their CPU twins on the same values
// (rounded to bf16 for E = bf16): losses, log-sum-exps, dlogits, and dlogits exactly 0 in the
// padded columns. The CPU twins together also against the row kernel's twin (classifier_loss).
template <class E>
std::string tile_case(int N, int V, int Vp, int tile, float dscale, uint64_t seed) {
    const bool bf16 = !std::is_same<E, float>::value;
    Rng r(seed);
    Vec z((size_t)N * Vp);
    for (int i = 0; i < N; i++)
        for (int v = 0; v < Vp; v++) z[(size_t)i * Vp + v] = v < V ? (float)(3 * r.normal()) : 1e4f;
    if (bf16) z = bf16_round(z);
    std::vector<int> tg(N);
    for (auto& t : tg) t = (int)r.below(V);
    tg[0] = V - 1;  // the last real column, in the last tile with classes

    Vec m(N), sum(N), losses(N), gm, glosses, dz((size_t)N * Vp), gdz((size_t)N * Vp);
    DBuf dm((size_t)N), ds((size_t)N), dl((size_t)N);
    DInts dt(tg);
    auto each_tile = [&](const std::function<void(int v0, int w, Vec& t, DevBuf<E>& gt)>& f) {
        for (int v0 = 0; v0 < Vp; v0 += tile) {
            const int w = std::min(tile, Vp - v0);
            Vec t((size_t)N * w);
            for (int i = 0; i < N; i++) std::copy_n(z.begin() + (size_t)i * Vp + v0, w, t.begin() + (size_t)i * w);
            DevBuf<E> gt(t);
            f(v0, w, t, gt);
        }
    };
    each_tile([&](int v0, int w, Vec& t, DevBuf<E>& gt) {
        cpu::classifier_tile_lse(t.data(), m.data(), sum.data(), losses.data(), tg.data(), N, w, v0, V);
        gpu::classifier_tile_lse(gt.p, dm.p, ds.p, dl.p, dt.p, N, w, v0, V);
    });
    cpu::classifier_tile_loss(losses.data(), m.data(), sum.data(), N);
    gpu::classifier_tile_loss(dl.p, dm.p, ds.p, N);
    gm = dm.get(), glosses = dl.get();
    if (dscale != 0)
        each_tile([&](int v0, int w, Vec& t, DevBuf<E>& gt) {
            cpu::classifier_tile_dlogits(t.data(), m.data(), tg.data(), N, w, v0, V, dscale);
            gpu::classifier_tile_dlogits(gt.p, dm.p, dt.p, N, w, v0, V, dscale);
            Vec g = gt.get();
            for (int i = 0; i < N; i++) {
                std::copy_n(t.begin() + (size_t)i * w, w, dz.begin() + (size_t)i * Vp + v0);
                std::copy_n(g.begin() + (size_t)i * w, w, gdz.begin() + (size_t)i * Vp + v0);
            }
        });

    std::string why, tag = std::string(bf16 ? "bf16" : "fp32") + " N=" + std::to_string(N) + " V=" + std::to_string(V) +
                           " Vp=" + std::to_string(Vp) + " tile=" + std::to_string(tile);
    expect_close(why, tag + " losses", glosses, losses, 1e-5);
    expect_close(why, tag + " log-sum-exps", gm, m, 1e-5);
    Vec rows = z, row_losses(N);  // the row kernel's twin on the whole rows
    cpu::classifier_loss(rows.data(), row_losses.data(), tg.data(), N, V, Vp, dscale);
    expect_close(why, tag + " cpu tiles vs cpu rows: losses", losses, row_losses, 1e-6);
    if (dscale == 0) return why;
    expect_close(why, tag + " dlogits", gdz, dz, bf16 ? 8e-3 : 1e-5);  // bf16: rounded at the store
    expect_close(why, tag + " cpu tiles vs cpu rows: dlogits", dz, rows, 1e-6);
    for (int i = 0; i < N; i++)
        for (int v = V; v < Vp; v++)
            if (gdz[(size_t)i * Vp + v] != 0.0f) {
                append(why, tag + ": padded column " + std::to_string(v) + " of row " + std::to_string(i) + " is " +
                                fmt(gdz[(size_t)i * Vp + v]));
                return why;
            }
    return why;
}

template <class E>
std::string test_classifier_tiles() {
    std::string why;
    for (float dscale : {1.0f / 13, 0.0f}) {
        append(why, tile_case<E>(13, 300, 384, 128, dscale, 1));    // 3 tiles, padding in the last: vector loads
        append(why, tile_case<E>(13, 300, 300, 100, dscale, 2));    // unpadded; bf16: 100 % 8 != 0, scalar
        append(why, tile_case<E>(5, 97, 97, 33, dscale, 3));        // odd width: scalar, partial last tile
        append(why, tile_case<E>(7, 97, 128, 16, dscale, 4));       // the last tile is all padding
        append(why, tile_case<E>(3, 1100, 1152, 1152, dscale, 5));  // one tile, more columns than a warp's loads
    }
    return why;
}

// ---- the fused head (classifier_fused) -----------------------------------------------------

// The head of rows x (N, C) and wte rows w (Vp, C) in double, materialised by the CPU ops (the
// logits GEMM, classifier_loss, the backward GEMMs): losses, log-sum-exps (a loss plus its
// target's logit), dx = d w and dw = dw0 + d^T x, d = (softmax - onehot) * dscale over the first
// V classes.
struct HeadRef {
    Vec loss, lse, dx, dw;
};
HeadRef head_reference(const Vec& x, const Vec& w, const std::vector<int>& tg, const Vec& dw0, int N, int C, int V,
                       int Vp, double dscale) {
    using Vd = std::vector<double>;
    const Vd xd(x.begin(), x.end()), wd(w.begin(), w.end());
    Vd z((size_t)N * Vp), loss(N), lse(N), dx((size_t)N * C), dw(dw0.begin(), dw0.end());
    cpu::matmul_forward(z.data(), xd.data(), wd.data(), (double*)nullptr, N, C, Vp);
    for (int i = 0; i < N; i++) lse[i] = z[(size_t)i * Vp + tg[i]];  // the target's logit (tg < Vp)
    cpu::classifier_loss(z.data(), loss.data(), tg.data(), N, V, Vp, dscale);
    for (int i = 0; i < N; i++) lse[i] += loss[i];
    if (dscale != 0) cpu::matmul_backward(dx.data(), dw.data(), (double*)nullptr, z.data(), xd.data(), wd.data(), N, C, Vp);
    auto f = [](const Vd& v) { return Vec(v.begin(), v.end()); };
    return {f(loss), f(lse), f(dx), f(dw)};
}

// gpu::classifier_fused with elements E (fp32 on TF32, or bf16) and its CPU twin against the
// double reference on the same values: N rows (not a multiple of the kernels' 64), V classes
// padded to Vp (rows >= V of w garbage the kernels must leave out), a target at V - 1 and one
// outside [0, V) (its loss NaN); dx overwritten, dw added to, its padded rows untouched; with
// dscale 0 neither written.
template <class E>
std::string fused_case(int N, int C, int V, int Vp, float dscale, uint64_t seed) {
    const bool bf16 = !std::is_same<E, float>::value;
    Rng r(seed);
    Vec x((size_t)N * C), w((size_t)Vp * C), dw0((size_t)Vp * C), dx0((size_t)N * C, 7.0f);
    for (auto& v : x) v = (float)r.normal();
    for (size_t i = 0; i < w.size(); i++) w[i] = i < (size_t)V * C ? (float)(2 * r.normal() / std::sqrt(C)) : 1e3f;
    for (size_t i = 0; i < dw0.size(); i++) dw0[i] = i < (size_t)V * C ? (float)(0.1 * r.normal()) : 0.25f;
    if (bf16) x = bf16_round(x), w = bf16_round(w);
    std::vector<int> tg(N);
    for (auto& t : tg) t = (int)r.below(V);
    tg[0] = V - 1, tg[1] = V;
    const HeadRef ref = head_reference(x, w, tg, dw0, N, C, V, Vp, dscale);

    Vec loss(N), lse(N), dx = dx0, dw = dw0;
    cpu::classifier_fused(loss.data(), lse.data(), tg.data(), x.data(), w.data(), dx.data(), dw.data(), N, C, V, Vp,
                          dscale);
    DBuf gl((size_t)N), ge((size_t)N), gdw(dw0);
    DevBuf<E> gx(x), gw(w), gdx(dx0);
    DInts gt(tg);
    {
        std::unique_ptr<Tf32On> tf32(bf16 ? nullptr : new Tf32On);
        gpu::classifier_fused(gl.p, ge.p, gt.p, gx.p, gw.p, gdx.p, gdw.p, N, C, V, Vp, dscale);
        CudaDevice::synchronize();
    }
    const Vec gloss = gl.get(), glse = ge.get(), gdxh = gdx.get(), gdwh = gdw.get();

    std::string why, tag = std::string(bf16 ? "bf16" : "tf32") + " N=" + std::to_string(N) + " C=" + std::to_string(C) +
                           " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp) + (dscale == 0 ? " forward" : "");
    auto real_losses = [&](Vec l) {  // row 1's target is not a class: NaN, then left out
        if (!std::isnan(l[1])) append(why, tag + ": the loss of a target outside [0, V) is " + fmt(l[1]));
        l[1] = 0;
        return l;
    };
    Vec want_loss = ref.loss;
    want_loss[1] = 0;
    const double tol = bf16 ? 1e-2 : 3e-3;  // the products' operands: bf16, or tf32 (10 bits)
    expect_close(why, tag + " cpu losses", real_losses(loss), want_loss, 1e-5);
    expect_close(why, tag + " cpu log-sum-exps", lse, ref.lse, 1e-5);
    expect_close(why, tag + " gpu losses", real_losses(gloss), want_loss, tol / 4);
    expect_close(why, tag + " gpu log-sum-exps", glse, ref.lse, tol / 4);
    if (dscale == 0) {
        if (dx != dx0 || gdxh != dx0 || dw != dw0 || gdwh != dw0) append(why, tag + ": the forward wrote dx or dw");
        return why;
    }
    auto added = [&](const Vec& d) {  // what the head added to dw
        Vec a(d.size());
        for (size_t i = 0; i < d.size(); i++) a[i] = d[i] - dw0[i];
        return a;
    };
    expect_close(why, tag + " cpu dx", dx, ref.dx, 1e-4);
    expect_close(why, tag + " cpu dw", added(dw), added(ref.dw), 1e-4);
    expect_close(why, tag + " gpu dx", gdxh, ref.dx, tol);
    expect_close(why, tag + " gpu dw", added(gdwh), added(ref.dw), tol);
    for (size_t i = (size_t)V * C; i < dw0.size(); i++)
        if (dw[i] != 0.25f || gdwh[i] != 0.25f) {
            append(why, tag + ": padded row " + std::to_string(i / C) + " of dw written");
            break;
        }
    return why;
}

template <class E>
std::string test_classifier_fused() {
    std::string why;
    for (float dscale : {1.0f / 100, 0.0f}) {
        append(why, fused_case<E>(100, 32, 300, 384, dscale, 1));  // the last tile of classes partial, one all padding
        append(why, fused_case<E>(13, 64, 97, 128, dscale, 2));    // one partial block of rows
        append(why, fused_case<E>(70, 128, 200, 256, dscale, 3));  // the paper's width
    }
    return why;
}

// ---- training steps ------------------------------------------------------------------------

constexpr int kB = 2, kT = 33, kSteps = 5;  // B*T = 66 rows
constexpr int kChunk = 7;                   // 9 chunks of 7 and one of 3
constexpr int kTile = 48;                   // vocabulary tiles [0,48) [48,96) [96,128): V = 97, one class in the last

ModelConfig small_model(Pos pos, int vocab_pad, int chunk) {
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = 32, mc.V = 97, mc.maxT = 48;
    mc.vocab_pad = vocab_pad;
    mc.classifier_chunk = chunk;
    return mc;
}

struct Batch {
    std::vector<int> in, tg, val_in, val_tg;
};

Batch batch(Pos pos) {
    Rng r(300 + (int)pos);
    Batch b;
    for (auto* v : {&b.in, &b.tg, &b.val_in, &b.val_tg}) {
        v->resize(kB * kT);
        for (auto& x : *v) x = (int)r.below(97);
    }
    return b;
}

struct StepRun {
    std::vector<double> losses;  // the loss of each step
    double norm = 0, val = 0;    // grad norm of the first step; validation loss after training
    Vec grads, params, logits;   // first step's gradients; weights and 2 logits rows after training
    std::string pad_leak;        // a padded row that is not zero after training
    Vec checkpoint;              // the weights back from a safetensors file written after training
};

template <class BK>
StepRun train(const ModelConfig& mc, const Batch& b) {
    GPT<BK> g(mc);
    g.init(1234);
    StepRun r;
    for (int t = 1; t <= kSteps; t++) {
        r.losses.push_back(g.forward(b.in.data(), b.tg.data(), kB, kT, true));
        g.backward();
        if (t == 1) r.norm = gradient_norm(g), r.grads = g.get(g.grads);
        adamw_step(g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, t, 1.0f);
    }
    r.params = g.get(g.params);
    r.val = g.forward(b.val_in.data(), b.val_tg.data(), kB, kT, false);
    r.logits = g.logits(5, 2);
    // wte's rows [V, Vp) in every buffer
    const size_t lo = (size_t)mc.V * mc.C, hi = (size_t)mc.Vp() * mc.C;
    for (auto [name, buf] :
         {std::pair<const char*, float*>{"params", g.params}, {"grads", g.grads}, {"m", g.m}, {"v", g.v}}) {
        Vec h = g.get_buffer(buf);
        for (size_t i = lo; i < hi && r.pad_leak.empty(); i++)
            if (h[i] != 0.0f) r.pad_leak = std::string(name) + "[" + std::to_string(i) + "] = " + fmt(h[i]);
    }
    char path[] = "/tmp/test_cuda_step_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    close(fd);
    safetensors_write(path, layout_tensors(g.layout, r.params, ""), {});
    r.checkpoint = layout_from_file<float>(g.layout, safetensors_read(path), "");
    std::remove(path);
    return r;
}

// GPU tolerances against the CPU and between the GPU's own paths (plain fp32 GEMMs).
struct Tol {
    double loss, grads, norm, params;
};
constexpr Tol kVsCpu{1e-5, 1e-3, 1e-4, 1e-3}, kChunked{1e-5, 1e-4, 1e-5, 1e-4};

std::string compare(const char* what, const StepRun& a, const StepRun& b, const Tol& tol) {
    std::string why, w = what;
    for (int t = 0; t < kSteps; t++)
        expect_near(why, w + " loss at step " + std::to_string(t + 1), a.losses[t], b.losses[t], tol.loss);
    expect_close(why, w + " grads", a.grads, b.grads, tol.grads);
    expect_near(why, w + " grad norm", a.norm, b.norm, tol.norm);
    expect_close(why, w + " weights after " + std::to_string(kSteps) + " AdamW steps", a.params, b.params, tol.params);
    return why;
}

// Runs per scheme: the GPU chunked and in one chunk, the CPU in one chunk (padded vocabulary),
// and the CPU unpadded (for the checkpoint test).
struct SchemeRuns {
    StepRun gpu_chunked, gpu_whole, cpu_whole, cpu_chunked, gpu_tiled, cpu_tiled;
};

ModelConfig tiled_model(Pos pos) {
    ModelConfig mc = small_model(pos, 128, 0);
    mc.classifier_tile = kTile;
    return mc;
}

SchemeRuns& runs(Pos pos) {
    static std::map<int, SchemeRuns> cache;
    auto it = cache.find((int)pos);
    if (it != cache.end()) return it->second;
    Batch b = batch(pos);
    SchemeRuns s;
    s.gpu_chunked = train<CB>(small_model(pos, 128, kChunk), b);
    s.gpu_whole = train<CB>(small_model(pos, 128, kB * kT), b);
    s.cpu_whole = train<K>(small_model(pos, 128, kB * kT), b);
    s.cpu_chunked = train<K>(small_model(pos, 128, kChunk), b);
    s.gpu_tiled = train<CB>(tiled_model(pos), b);
    s.cpu_tiled = train<K>(tiled_model(pos), b);
    return cache.emplace((int)pos, std::move(s)).first->second;
}

std::string test_chunked_vs_whole(Pos pos) {
    SchemeRuns& s = runs(pos);
    std::string why = compare("gpu chunked vs gpu one chunk:", s.gpu_chunked, s.gpu_whole, kChunked);
    append(why, compare("cpu chunked vs cpu one chunk:", s.cpu_chunked, s.cpu_whole, kChunked));
    return why;
}

// The fused head (classifier_fused) against row chunks, fp32 and bf16: the same model on the CPU
// (its twin: the same sums in another order), and on the GPU, whose products run on TF32 or bf16
// (fp32: the whole step on TF32, the rows too). In one step and in two micro-steps (d wte summed
// over them).
ModelConfig fused_model(Pos pos) {
    ModelConfig mc = small_model(pos, 128, 0);
    mc.classifier_fused = true;
    return mc;
}

template <class BK>
Vec accum_grads(const ModelConfig& mc, const Batch& b, int accum) {
    GPT<BK> g(mc);
    g.init(1234);
    g.train_step(b.in.data(), b.tg.data(), kB, kT, AdamWConfig(), 1e-3f, 1, accum);
    g.read_step();
    return g.get(g.grads);
}

std::string test_fused_vs_rows(Pos pos) {
    Batch b = batch(pos);
    const ModelConfig fused = fused_model(pos), rows = small_model(pos, 128, kChunk);
    const Tol tf32{2e-3, 2e-2, 2e-3, 2e-2};
    std::string why = compare("cpu fused vs cpu rows:", train<K>(fused, b), runs(pos).cpu_whole, kChunked);
    Tf32On on;
    const StepRun gpu_fused = train<CB>(fused, b);
    append(why, compare("gpu fused vs gpu rows (tf32):", gpu_fused, train<CB>(rows, b), tf32));
    append(why, compare("gpu fused (tf32) vs cpu rows:", gpu_fused, runs(pos).cpu_whole, tf32));
    expect_near(why, "gpu fused: validation loss", gpu_fused.val, runs(pos).cpu_whole.val, 2e-3);
    expect_close(why, "gpu fused: logits rows 5-6", gpu_fused.logits, runs(pos).cpu_whole.logits, 1e-2);
    if (!gpu_fused.pad_leak.empty()) append(why, "gpu fused: padded row not zero: " + gpu_fused.pad_leak);
    expect_close(why, "gpu fused: 2 micro-steps vs 1", accum_grads<CB>(fused, b, 2), accum_grads<CB>(fused, b, 1),
                 2e-2);
    return why;
}

std::string test_bf16_fused_vs_rows() {
    Batch b = batch(Pos::rope);
    ModelConfig fused = fused_model(Pos::rope), rows = small_model(Pos::rope, 128, kChunk);
    fused.flash = rows.flash = true;
    using BB = CudaBackend<bf16_t>;
    std::string why =
        compare("bf16 gpu fused vs rows:", train<BB>(fused, b), train<BB>(rows, b), Tol{1e-2, 5e-2, 1e-2, 1e-2});
    expect_close(why, "bf16 gpu fused: 2 micro-steps vs 1", accum_grads<BB>(fused, b, 2), accum_grads<BB>(fused, b, 1),
                 5e-2);
    return why;
}

// bf16 activations (--precision bf16, flash attention): chunks change only the order of fp32
// accumulation, but a value a rounding apart can round to another bf16 value, and the next
// steps carry it on: TOL_BF16 below.
std::string test_bf16_chunked_vs_whole() {
    Batch b = batch(Pos::rope);
    ModelConfig chunked = small_model(Pos::rope, 128, kChunk), whole = small_model(Pos::rope, 128, kB * kT);
    chunked.flash = whole.flash = true;
    return compare("bf16 gpu chunked vs one chunk:", train<CudaBackend<bf16_t>>(chunked, b),
                   train<CudaBackend<bf16_t>>(whole, b), Tol{1e-5, 1e-4, 1e-5, 1e-3});
}

// Vocabulary tiles (classifier_tiles, src/classifier.h) against row chunks: the same sums in another order.
std::string test_tiles_vs_rows(Pos pos) {
    SchemeRuns& s = runs(pos);
    std::string why = compare("gpu tiles vs gpu rows:", s.gpu_tiled, s.gpu_chunked, kChunked);
    append(why, compare("cpu tiles vs cpu rows:", s.cpu_tiled, s.cpu_whole, kChunked));
    append(why, compare("gpu tiles vs cpu rows:", s.gpu_tiled, s.cpu_whole, kVsCpu));
    for (auto [name, run] : {std::pair<const char*, StepRun*>{"gpu", &s.gpu_tiled}, {"cpu", &s.cpu_tiled}}) {
        expect_near(why, std::string(name) + " tiles: validation loss", run->val, s.cpu_whole.val, 1e-5);
        expect_close(why, std::string(name) + " tiles: logits rows 5-6", run->logits, s.cpu_whole.logits, 1e-4);
        if (!run->pad_leak.empty()) append(why, std::string(name) + " tiles: padded row not zero: " + run->pad_leak);
    }
    return why;
}

// The same with bf16 activations: d lnf is summed over the tiles in fp32 and rounded once.
std::string test_bf16_tiles_vs_rows() {
    Batch b = batch(Pos::rope);
    ModelConfig tiled = tiled_model(Pos::rope), rows = small_model(Pos::rope, 128, kChunk);
    tiled.flash = rows.flash = true;
    return compare("bf16 gpu tiles vs rows:", train<CudaBackend<bf16_t>>(tiled, b), train<CudaBackend<bf16_t>>(rows, b),
                   Tol{1e-5, 1e-4, 1e-5, 1e-3});
}

std::string test_vs_cpu(Pos pos) {
    return compare("gpu chunked vs cpu:", runs(pos).gpu_chunked, runs(pos).cpu_whole, kVsCpu);
}

std::string test_padding_stays_zero(Pos pos) {
    SchemeRuns& s = runs(pos);
    std::string why;
    for (auto [name, run] : {std::pair<const char*, StepRun*>{"gpu", &s.gpu_chunked}, {"cpu", &s.cpu_chunked}})
        if (!run->pad_leak.empty()) append(why, std::string(name) + ": padded row not zero: " + run->pad_leak);
    return why;
}

// The padded GPU run's checkpoint in an unpadded CPU model: same validation loss and logits.
std::string test_checkpoint_unpadded(Pos pos) {
    const StepRun& gpu = runs(pos).gpu_chunked;
    Batch b = batch(pos);
    ModelConfig mc = small_model(pos, 1, 0);
    if (mc.Vp() != mc.V) return "vocab_pad 1 pads";
    GPT<K> cpu(mc);
    cpu.set_params(gpu.checkpoint);
    double val = cpu.forward(b.val_in.data(), b.val_tg.data(), kB, kT, false);
    std::string why;
    if (gpu.checkpoint != gpu.params) append(why, "the checkpoint file does not hold the trained weights");
    expect_near(why, "validation loss, unpadded cpu vs padded gpu", val, gpu.val, 1e-5);
    expect_close(why, "logits rows 5-6", cpu.logits(5, 2), gpu.logits, 1e-4);
    if (gpu.logits.size() != 2 * (size_t)mc.V)
        append(why, "logits() returned " + std::to_string(gpu.logits.size()) + " values for 2 rows of V = 97");
    return why;
}

// The profiling mode: a training step marks its phases, every phase takes time, they add up to
// no more than the step's wall time, and an evaluation forward in between marks nothing.
template <class BK>
std::string profile_case(const char* what) {
    Batch b = batch(Pos::rope);
    GPT<BK> g(small_model(Pos::rope, 128, kChunk));
    g.init(1);
    g.queue.profile = true;
    std::string why;
    for (int step = 0; step < 2; step++) {
        BK::synchronize();
        auto t0 = std::chrono::steady_clock::now();
        g.forward(b.in.data(), b.tg.data(), kB, kT, true);
        g.backward();
        adamw_step(g, 1e-3f, 0.9, 0.999, 1e-8f, 0.0f, true, step + 1, 1.0f);
        std::vector<double> ms = g.queue.profile_read();
        double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double sum = 0;
        for (int i = 0; i < kPhases; i++) {
            sum += ms[i];
            if (!(ms[i] > 0))
                append(why, std::string(what) + ": phase " + kPhaseNames[i] + " took " + fmt(ms[i]) + " ms");
        }
        if (!(sum <= wall * 1.01 + 0.01))
            append(why, std::string(what) + ": phases sum to " + fmt(sum) + " ms, the step took " + fmt(wall));
        g.forward(b.val_in.data(), b.val_tg.data(), kB, kT, false);  // evaluation: no marks
        std::vector<double> none = g.queue.profile_read();
        for (int i = 0; i < kPhases; i++)
            if (none[i] != 0)
                append(why, std::string(what) + ": evaluation added " + fmt(none[i]) + " ms to " + kPhaseNames[i]);
    }
    return why;
}

std::string test_profile() {
    std::string why = profile_case<CB>("gpu");
    append(why, profile_case<K>("cpu"));
    return why;
}

// CudaDevice::copy_ints_from_host stages through pinned memory and returns before the copy
// runs; the caller may overwrite its source at once. Read back through the embedding: with
// C = 1 and wte[v] = v, encoder_forward writes each id as a float.
std::string test_copy_ints_staged() {
    const int V = 50, cap = 9;
    Vec table(V);
    for (int v = 0; v < V; v++) table[v] = (float)v;
    float *wte = CB::alloc(V), *out = CB::alloc(cap);
    int *a = CB::alloc_int(cap), *b = CB::alloc_int(cap);
    CB::copy_from_host(wte, table.data(), V);
    std::string why;
    auto expect = [&](const char* what, const int* dev, const std::vector<int>& want) {
        gpu::encoder_forward(out, dev, wte, nullptr, 1, (int)want.size(), 1);
        Vec got(want.size());
        CB::copy_to_host(got.data(), out, got.size());
        for (size_t i = 0; i < want.size(); i++)
            if (got[i] != (float)want[i]) {
                append(why, std::string(what) + " n=" + std::to_string(want.size()) + ": id " + std::to_string(i) +
                                " is " + fmt(got[i]) + ", want " + std::to_string(want[i]));
                return;
            }
    };
    for (int n : {5, 9, 3, 9}) {  // the staging buffers grow, then serve smaller copies
        std::vector<int> h(n);
        for (int i = 0; i < n; i++) h[i] = (i * 7 + n) % V;
        std::vector<int> want_a = h;
        CB::copy_ints_from_host(a, h.data(), n);
        for (int& x : h) x = (x + 1) % V;  // the source reused at once
        std::vector<int> want_b = h;
        CB::copy_ints_from_host(b, h.data(), n);
        std::fill(h.begin(), h.end(), -1);
        expect("first buffer", a, want_a);
        expect("second buffer", b, want_b);
    }
    CB::free(wte), CB::free(out), CB::free_int(a), CB::free_int(b);
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

static std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {
        {"cuda_classifier_loss", CUDA_FN(test_classifier_loss)},
        {"cuda_step_profile_phases", CUDA_FN(test_profile)},
        {"cuda_copy_ints_staged", CUDA_FN(test_copy_ints_staged)},
        {"cuda_step_bf16_chunked_vs_whole_rope", CUDA_FN(test_bf16_chunked_vs_whole)},
        {"cuda_classifier_tiles", CUDA_FN(test_classifier_tiles<float>)},
        {"cuda_classifier_tiles_bf16", CUDA_FN(test_classifier_tiles<bf16_t>)},
        {"cuda_step_bf16_tiles_vs_rows_rope", CUDA_FN(test_bf16_tiles_vs_rows)},
        {"cuda_classifier_fused", CUDA_FN(test_classifier_fused<float>)},
        {"cuda_classifier_fused_bf16", CUDA_FN(test_classifier_fused<bf16_t>)},
        {"cuda_step_fused_vs_rows_learned", CUDA_FN([] { return test_fused_vs_rows(Pos::learned); })},
        {"cuda_step_fused_vs_rows_crope", CUDA_FN([] { return test_fused_vs_rows(Pos::crope); })},
        {"cuda_step_bf16_fused_vs_rows_rope", CUDA_FN(test_bf16_fused_vs_rows)}};
    for (const PosTraits& scheme : kPosSchemes) {
        [[maybe_unused]] Pos p = scheme.pos;  // unused without CUDA
        std::string n = scheme.name;
        t.push_back({"cuda_step_chunked_vs_whole_" + n, CUDA_FN([p] { return test_chunked_vs_whole(p); })});
        t.push_back({"cuda_step_vs_cpu_" + n, CUDA_FN([p] { return test_vs_cpu(p); })});
        t.push_back({"cuda_step_tiles_vs_rows_" + n, CUDA_FN([p] { return test_tiles_vs_rows(p); })});
        t.push_back({"cuda_step_padding_zero_" + n, CUDA_FN([p] { return test_padding_stays_zero(p); })});
        t.push_back({"cuda_step_checkpoint_unpadded_" + n, CUDA_FN([p] { return test_checkpoint_unpadded(p); })});
    }
    return t;
}

// test_cuda_step [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
