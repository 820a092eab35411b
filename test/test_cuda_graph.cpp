// The training step without the host (GPT::train_step) and its CUDA graph, on the CUDA backend:
//   - graph vs eager, per position scheme and with bf16 GEMM operands (rope): six steps (three
//     at one shape, three at another, so the graph is dropped and captured again), a changing
//     learning rate, clipping on, an evaluation at a longer length between steps (the scratch
//     buffers grow while the graph exists): identical losses, norms, weights and AdamW moments,
//     bit for bit;
//   - the queued step against the synchronous one (forward, backward, grad_norm, update with the
//     host's clip scale), on the GPU and on the CPU: identical losses, norms and weights;
//   - the device-side ops against their CPU twins: the sum of squares into device memory and
//     the clip scale computed from it;
//   - a capture that would synchronise fails with an error and leaves the stream usable (under
//     the emulation as on a GPU: a capture that succeeds made no host-synchronising call);
//   - a scratch buffer outgrown after a capture stays alive for the graph, which replays right,
//     and is freed with the last graph.
// Without CUDA (build or device) every test is reported SKIPPED.
#include <cstring>
#include <string>
#include <vector>

#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model.h"

namespace {

constexpr int kB = 2, kT = 33, kT2 = 17, kEvalT = 48, kSteps = 6;

ModelConfig small_model(Pos pos) {
    ModelConfig mc;
    mc.pos = pos;
    mc.L = 2, mc.H = 4, mc.C = 32, mc.V = 97, mc.maxT = 48;
    mc.classifier_chunk = 7;
    return mc;
}

const AdamWConfig kOpt{0.9, 0.999, 1e-8f, 0.01f, true, 0.5};  // clipping on (the norm is ~1-4)

float lr_of(int t) {
    return 1e-3f * (float)t;  // changes every step: a graph that froze it would drift
}

std::vector<int> tokens(int n, uint64_t seed) {
    Rng r(seed);
    return randint((size_t)n, 97, r);
}

struct Run {
    std::vector<double> losses, norms;
    Vec params, m, v;
    size_t graphs = 0;  // graphs alive after the steps
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// kSteps queued steps, read one step late (step k+1 is queued before step k is read), with an
// evaluation at kEvalT after the second step.
template <class BK>
Run queued_steps(Pos pos, bool use_graph) {
    GPT<BK> g(small_model(pos));
    g.init(7);
    g.use_graph = use_graph;
    Run r;
    auto read = [&] {
        StepResult s = g.read_step();
        r.losses.push_back(s.loss), r.norms.push_back(s.norm);
    };
    for (int t = 1; t <= kSteps; t++) {
        int Tn = t <= kSteps / 2 ? kT : kT2;
        std::vector<int> in = tokens(kB * Tn, 100 + t), tg = tokens(kB * Tn, 200 + t);
        g.train_step(in.data(), tg.data(), kB, Tn, kOpt, lr_of(t), t);
        if (g.unread.size() == 2) read();  // the step before this one
        if (t == 2) {
            read();
            std::vector<int> ein = tokens(kB * kEvalT, 300), etg = tokens(kB * kEvalT, 301);
            r.losses.push_back(g.forward(ein.data(), etg.data(), kB, kEvalT, false));
        }
    }
    read();
    if constexpr (BK::graphs) r.graphs = gpu::graph_count();
    r.params = g.get(g.params), r.m = g.get(g.m), r.v = g.get(g.v);
    return r;
}

// The same steps the synchronous way: forward (returns the loss), backward, the norm and clip
// scale on the host, update.
template <class BK>
Run sync_steps(Pos pos) {
    GPT<BK> g(small_model(pos));
    g.init(7);
    Run r;
    for (int t = 1; t <= kSteps; t++) {
        int Tn = t <= kSteps / 2 ? kT : kT2;
        std::vector<int> in = tokens(kB * Tn, 100 + t), tg = tokens(kB * Tn, 200 + t);
        r.losses.push_back(g.forward(in.data(), tg.data(), kB, Tn, true));
        g.backward();
        double norm = g.grad_norm();
        r.norms.push_back(norm);
        g.update(lr_of(t), kOpt.beta1, kOpt.beta2, kOpt.eps, kOpt.wd, kOpt.decay_all, t,
                 (float)clip_scale(kOpt.grad_clip, norm));
        if (t == 2) {
            std::vector<int> ein = tokens(kB * kEvalT, 300), etg = tokens(kB * kEvalT, 301);
            r.losses.push_back(g.forward(ein.data(), etg.data(), kB, kEvalT, false));
        }
    }
    r.params = g.get(g.params), r.m = g.get(g.m), r.v = g.get(g.v);
    return r;
}

std::string identical(const std::string& what, const Run& a, const Run& b) {
    std::string why;
    if (!same_bits(a.losses, b.losses)) append(why, what + ": losses differ");
    if (!same_bits(a.norms, b.norms)) append(why, what + ": norms differ");
    if (!same_bits(a.params, b.params)) append(why, what + ": weights differ");
    if (!same_bits(a.m, b.m) || !same_bits(a.v, b.v)) append(why, what + ": AdamW moments differ");
    return why;
}

std::string test_graph_vs_eager(Pos pos) {
    Run graph = queued_steps<CB>(pos, true);
    size_t after = gpu::graph_count();  // the model and its graph are gone
    Run eager = queued_steps<CB>(pos, false);
    std::string why = identical("graph vs eager", graph, eager);
    if (graph.graphs != 1) append(why, "graph run: " + std::to_string(graph.graphs) + " graphs alive, want 1");
    if (eager.graphs != 0) append(why, "eager run: " + std::to_string(eager.graphs) + " graphs alive, want 0");
    if (after != 0) append(why, "the model's destructor left " + std::to_string(after) + " graphs");
    return why;
}

// bf16 GEMM operands: their bf16 copies live in grow-only scratch slots the graph reads.
std::string test_graph_vs_eager_bf16() {
    Bf16On bf16;
    return test_graph_vs_eager(Pos::rope);
}

std::string test_queued_vs_sync(Pos pos) {
    std::string why = identical("gpu queued vs synchronous", queued_steps<CB>(pos, false), sync_steps<CB>(pos));
    append(why, identical("cpu queued vs synchronous", queued_steps<K>(pos, false), sync_steps<K>(pos)));
    return why;
}

// ---- the device-side ops ------------------------------------------------------------------

std::string test_sum_squares_to() {
    Rng r(5);
    std::string why;
    StepScalars* ds = CB::alloc_scalars();
    for (size_t n : {(size_t)0, (size_t)1, (size_t)1000, (size_t)300001}) {
        Vec x = randn(n, r);
        DBuf gx(n ? x : Vec{0.0f});
        StepScalars h;
        cpu::sum_squares_to(&h.sumsq, x.data(), n);
        gpu::sum_squares_to(&ds->sumsq, gx.p, n, gpu::main_stream());
        StepScalars got;
        CB::copy_to_host_async(&got, ds, sizeof got);
        CB::synchronize();
        double host = gpu::sum_squares(gx.p, n, gpu::main_stream());  // the synchronous form: same bits
        if (!(std::fabs(got.sumsq - h.sumsq) <= 1e-10 * h.sumsq))
            append(why, "n=" + std::to_string(n) + ": " + fmt(got.sumsq) + " vs cpu " + fmt(h.sumsq));
        if (std::memcmp(&host, &got.sumsq, sizeof host) != 0)
            append(why, "n=" + std::to_string(n) + ": sum_squares and sum_squares_to differ");
    }
    CB::free_scalars(ds);
    return why;
}

// The clip scale from a device sum of squares, bit for bit the CPU twin's (torch's formula).
std::string test_clip_grad() {
    std::string why;
    StepScalars* ds = CB::alloc_scalars();
    for (double sumsq : {0.0, 0.09, 4.0, 1e6})
        for (double clip : {0.0, 0.5, 1.0, 1e9}) {
            StepScalars h = adamw_scalars(1e-3f, 0.9, 0.999, 3);
            h.sumsq = sumsq;
            CB::copy_scalars_from_host(ds, h);
            cpu::clip_grad(&h, clip);
            gpu::clip_grad(ds, clip, gpu::main_stream());
            StepScalars got;
            CB::copy_to_host_async(&got, ds, sizeof got);
            CB::synchronize();
            std::string tag = "sumsq " + fmt(sumsq) + " clip " + fmt(clip);
            if (std::memcmp(&got.gscale, &h.gscale, sizeof h.gscale) != 0)
                append(why, tag + ": gscale " + fmt(got.gscale) + " vs cpu " + fmt(h.gscale));
            if (got.lr != h.lr || got.bc1 != h.bc1 || got.bc2 != h.bc2) append(why, tag + ": other scalars changed");
            if (h.gscale != (float)clip_scale(clip, std::sqrt(sumsq)))
                append(why, tag + ": cpu twin is not clip_scale");
        }
    CB::free_scalars(ds);
    return why;
}

// ---- capture --------------------------------------------------------------------------------

// gpu::sum_squares waits for its result: a capture must refuse it, end, and leave the stream
// working for what comes next.
std::string test_capture_refuses_sync() {
    Rng r(9);
    Vec x = randn(1000, r);
    DBuf gx(x);
    std::string why;
    try {
        cudaGraphExec_t g =
            gpu::capture(gpu::main_stream(), [&] { gpu::sum_squares(gx.p, x.size(), gpu::main_stream()); });
        gpu::graph_free(g);
        append(why, "the capture of a synchronising call succeeded");
    } catch (const std::exception&) {  // refused, as it must be
    }
    if (gpu::graph_count() != 0) append(why, "a refused capture left a graph");
    double after = gpu::sum_squares(gx.p, x.size(), gpu::main_stream());
    expect_near(why, "sum of squares after the refused capture", after, cpu::sum_squares(x.data(), x.size()), 1e-10);
    return why;
}

// bf16 GEMMs read bf16 copies of their operands from grow-only scratch slots: a graph captured
// at one size, then an eager GEMM at a larger size (the slots grow), then the replay, which
// still reads the slots it was captured with; they are freed with the graph.
std::string test_scratch_growth() {
    Bf16On bf16;
    Rng r(11);
    const int N = 8, IC = 16, OC = 8, big = 64;
    Vec inp = randn((size_t)N * IC, r), w = randn((size_t)OC * IC, r), bigin = randn((size_t)big * IC * 4, r);
    DBuf ginp(inp), gw(w), gout((size_t)N * OC), gbigin(bigin), gbigw((size_t)OC * IC * 4), gbigout((size_t)big * OC);
    std::string why;
    gpu::matmul_forward(gout.p, ginp.p, gw.p, nullptr, N, IC, OC, gpu::main_stream());
    Vec eager = gout.get();
    CB::zero(gout.p, gout.n);
    cudaGraphExec_t g = gpu::capture(
        gpu::main_stream(), [&] { gpu::matmul_forward(gout.p, ginp.p, gw.p, nullptr, N, IC, OC, gpu::main_stream()); });
    gpu::matmul_forward(gbigout.p, gbigin.p, gbigw.p, nullptr, big, IC * 4, OC, gpu::main_stream());  // slots grow
    size_t with_retired = CB::current_memory();
    gpu::graph_launch(g, gpu::main_stream());
    Vec replayed = gout.get();
    gpu::graph_free(g);
    if (!same_bits(replayed, eager)) append(why, "the replay after the scratch grew differs from the eager GEMM");
    if (!(CB::current_memory() < with_retired)) append(why, "the outgrown slots were not freed with the graph");
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

static std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {{"cuda_sum_squares_to", CUDA_FN(test_sum_squares_to)},
                               {"cuda_clip_grad", CUDA_FN(test_clip_grad)},
                               {"cuda_graph_capture_refuses_sync", CUDA_FN(test_capture_refuses_sync)},
                               {"cuda_graph_scratch_growth", CUDA_FN(test_scratch_growth)},
                               {"cuda_graph_vs_eager_bf16_rope", CUDA_FN(test_graph_vs_eager_bf16)}};
    for (const PosTraits& scheme : kPosSchemes) {
        [[maybe_unused]] Pos p = scheme.pos;  // unused without CUDA
        std::string n = scheme.name;
        t.push_back({"cuda_graph_vs_eager_" + n, CUDA_FN([p] { return test_graph_vs_eager(p); })});
        t.push_back({"cuda_step_queued_vs_sync_" + n, CUDA_FN([p] { return test_queued_vs_sync(p); })});
    }
    return t;
}

// test_cuda_graph [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
