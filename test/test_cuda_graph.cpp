// The training step without the host (GPT::train_step) and its CUDA graph, on the CUDA backend:
//   - graph vs eager, per position scheme (and RoPE scalings whose tables change with the length,
//     rewritten in place between replays): six steps (three at one shape, three at another, so
//     the graph is dropped and captured again), a changing learning rate, clipping on, an
//     evaluation at a longer length between steps (the scratch buffers grow while the graph
//     exists): identical losses, norms, weights and AdamW moments, bit for bit; the same with
//     bf16 activations (GPT<CudaBackend<bf16_t>>: AdamW writes the weights' bf16 copy in the graph);
//   - the queued step against the synchronous one (forward, backward, grad_norm, update with the
//     host's clip scale), on the GPU and on the CPU: identical losses, norms and weights;
//   - the device-side ops against their CPU twins: the sum of squares into device memory and
//     the clip scale computed from it;
//   - a capture that would synchronise fails with an error and leaves the stream usable (under
//     the emulation as on a GPU: a capture that succeeds made no host-synchronising call);
//   - evaluation during training borrows the training activations: no allocation, the losses of
//     a model with its own evaluation buffers and unchanged training after it (GPU and CPU);
//   - a scratch buffer outgrown after a capture stays alive for the graph, which replays right,
//     and is freed with the last graph; the column sums replay right any number of times.
// Without CUDA (build or device) every test is reported SKIPPED.
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model.h"
#include "model_testlib.h"

namespace {

constexpr int kB = 2, kT = 33, kT2 = 17, kEvalT = 48, kSteps = 6;

// A position scheme, and for the scaled cases its rotary tables' scaling: s from the length over a
// training length of kT2, so that the steps at kT and the evaluation at kEvalT rewrite the tables
// in place between the graphs' replays.
struct Scheme {
    Pos pos;
    RopeScaling scaling;
    Scheme(Pos p, RopeScaling::Kind k = RopeScaling::none, double partial = 1) : pos(p), scaling{k, 0, kT2, partial} {}
};

ModelConfig small_model(Scheme scheme) {
    ModelConfig mc;
    mc.pos = scheme.pos, mc.rope_scaling = scheme.scaling;
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
    size_t nodes = 0;   // of the last graph captured
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
bool same_bits(const Vec& a, const Vec& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// kSteps queued steps, read one step late (step k+1 is queued before step k is read), with an
// evaluation at kEvalT after the second step. tile > 0: the classifier over vocabulary tiles;
// fused: the fused classifier.
template <class BK>
Run queued_steps(Scheme pos, bool use_graph, int tile = 0, bool fused = false) {
    ModelConfig mc = small_model(pos);
    mc.flash = std::is_same<BK, CudaBackend<bf16_t>>::value;  // fp32: the cublas attention; bf16: flash
    mc.classifier_tile = tile;
    mc.classifier_fused = fused;
    GPT<BK> g(mc);
    g.init(7);
    g.queue.use_graph = use_graph;
    Run r;
    auto read = [&] {
        StepResult s = g.read_step();
        r.losses.push_back(s.loss), r.norms.push_back(s.norm);
    };
    for (int t = 1; t <= kSteps; t++) {
        int Tn = t <= kSteps / 2 ? kT : kT2;
        std::vector<int> in = tokens(kB * Tn, 100 + t), tg = tokens(kB * Tn, 200 + t);
        g.train_step(in.data(), tg.data(), kB, Tn, kOpt, lr_of(t), t);
        if (g.queue.unread.size() == 2) read();  // the step before this one
        if (t == 2) {
            read();
            std::vector<int> ein = tokens(kB * kEvalT, 300), etg = tokens(kB * kEvalT, 301);
            r.losses.push_back(g.forward(ein.data(), etg.data(), kB, kEvalT, false));
        }
    }
    read();
    if constexpr (BK::graphs) r.graphs = graphs_alive();
    r.nodes = g.queue.graph_nodes;
    r.params = g.get(g.params), r.m = g.get(g.m), r.v = g.get(g.v);
    return r;
}

// The same steps the synchronous way: forward (returns the loss), backward, the norm and clip
// scale on the host, update.
template <class BK>
Run sync_steps(Scheme pos) {
    GPT<BK> g(small_model(pos));
    g.init(7);
    Run r;
    for (int t = 1; t <= kSteps; t++) {
        int Tn = t <= kSteps / 2 ? kT : kT2;
        std::vector<int> in = tokens(kB * Tn, 100 + t), tg = tokens(kB * Tn, 200 + t);
        r.losses.push_back(g.forward(in.data(), tg.data(), kB, Tn, true));
        g.backward();
        double norm = gradient_norm(g);
        r.norms.push_back(norm);
        adamw_step(g, lr_of(t), kOpt.beta1, kOpt.beta2, kOpt.eps, kOpt.wd, kOpt.decay_all, t,
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

std::string test_graph_vs_eager(Scheme pos) {
    Run graph = queued_steps<CB>(pos, true);
    size_t after = graphs_alive();  // the model and its graph are gone
    Run eager = queued_steps<CB>(pos, false);
    std::string why = identical("graph vs eager", graph, eager);
    if (graph.graphs != 1) append(why, "graph run: " + std::to_string(graph.graphs) + " graphs alive, want 1");
    // at least every layer's forward and backward kernels and AdamW's launch
    if (graph.nodes < 50) append(why, "graph run: " + std::to_string(graph.nodes) + " nodes, want 50 or more");
    if (eager.nodes != 0) append(why, "eager run: a graph of " + std::to_string(eager.nodes) + " nodes");
    if (eager.graphs != 0) append(why, "eager run: " + std::to_string(eager.graphs) + " graphs alive, want 0");
    if (after != 0) append(why, "the model's destructor left " + std::to_string(after) + " graphs");
    return why;
}

std::string test_graph_vs_eager_bf16(Scheme pos) {
    using BB = CudaBackend<bf16_t>;
    return identical("bf16 graph vs eager", queued_steps<BB>(pos, true), queued_steps<BB>(pos, false));
}

// The classifier over vocabulary tiles (32 columns: four tiles of V = 97 padded to 128) in the
// graph, in fp32 and bf16.
std::string test_graph_vs_eager_tiles() {
    std::string why = identical("tiles graph vs eager", queued_steps<CB>(Pos::rope, true, 32),
                                queued_steps<CB>(Pos::rope, false, 32));
    using BB = CudaBackend<bf16_t>;
    append(why, identical("bf16 tiles graph vs eager", queued_steps<BB>(Pos::rope, true, 32),
                          queued_steps<BB>(Pos::rope, false, 32)));
    return why;
}

// The fused classifier in the graph, in bf16 and in fp32 on TF32 (its tensor cores).
std::string test_graph_vs_eager_fused() {
    using BB = CudaBackend<bf16_t>;
    std::string why = identical("bf16 fused graph vs eager", queued_steps<BB>(Pos::rope, true, 0, true),
                                queued_steps<BB>(Pos::rope, false, 0, true));
    Tf32On on;
    append(why, identical("tf32 fused graph vs eager", queued_steps<CB>(Pos::rope, true, 0, true),
                          queued_steps<CB>(Pos::rope, false, 0, true)));
    return why;
}

std::string test_queued_vs_sync(Scheme pos) {
    std::string why = identical("gpu queued vs synchronous", queued_steps<CB>(pos, false), sync_steps<CB>(pos));
    append(why, identical("cpu queued vs synchronous", queued_steps<K>(pos, false), sync_steps<K>(pos)));
    return why;
}

// Evaluation during training borrows the training activations (Activations::resize): it allocates
// nothing (GPU), gives the losses of a model that has its own evaluation buffers, bit for bit
// (at kEvalT, longer than training's kT, in groups of one row: the same up to rounding), and the
// training steps after it are those of a run without the evaluation.
template <class BK>
std::string eval_borrows(Scheme pos, bool use_graph) {
    std::string why;
    GPT<BK> g(small_model(pos)), plain(small_model(pos));
    auto step = [&](GPT<BK>& m, int t) {
        std::vector<int> in = tokens(kB * kT, 100 + t), tg = tokens(kB * kT, 200 + t);
        m.train_step(in.data(), tg.data(), kB, kT, kOpt, lr_of(t), t);
        return m.read_step().loss;
    };
    g.init(7), plain.init(7);
    g.queue.use_graph = plain.queue.use_graph = use_graph;
    for (int t = 1; t <= 2; t++) step(g, t), step(plain, t);
    GPT<BK> fresh(small_model(pos));  // the same weights, no training buffers: its own evaluation set
    fresh.set_params(g.get(g.params));
    for (int Tn : {kT, kT2, kEvalT}) {
        std::vector<int> in = tokens(kB * Tn, 300 + Tn), tg = tokens(kB * Tn, 400 + Tn);
        size_t before = 0;
        if constexpr (std::is_same<BK, CB>::value) before = device_bytes();
        double borrowed = g.forward(in.data(), tg.data(), kB, Tn, false);
        if constexpr (std::is_same<BK, CB>::value)
            if (device_bytes() != before)
                append(why, "T=" + std::to_string(Tn) + ": the evaluation allocated " +
                                std::to_string((long long)device_bytes() - (long long)before) + " bytes");
        if (!g.acts.eval.borrowed) append(why, "T=" + std::to_string(Tn) + ": the evaluation did not borrow");
        double own = fresh.forward(in.data(), tg.data(), kB, Tn, false);
        if (fresh.acts.eval.borrowed) append(why, "a model that never trained borrowed");
        if (Tn == kEvalT)
            expect_near(why, "T=" + std::to_string(Tn) + ": in groups vs own", borrowed, own, 1e-6);
        else if (!same_bits(std::vector<double>{borrowed}, std::vector<double>{own}))
            append(why, "T=" + std::to_string(Tn) + ": borrowed " + fmt(borrowed) + " vs own " + fmt(own));
    }
    double after = step(g, 3), without = step(plain, 3);
    if (!same_bits(std::vector<double>{after}, std::vector<double>{without}))
        append(why, "the step after the evaluation: loss " + fmt(after) + " vs " + fmt(without) + " without it");
    if (!same_bits(g.get(g.params), plain.get(plain.params))) append(why, "weights differ after the evaluation");
    return why;
}

std::string test_eval_borrows(Scheme pos) {
    std::string why;
    append(why, eval_borrows<CB>(pos, true));
    append(why, eval_borrows<CB>(pos, false));
    append(why, eval_borrows<K>(pos, false));
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
        gpu::sum_squares_to(&ds->sumsq, gx.p, n);
        StepScalars got;
        CB::copy_to_host_async(&got, ds, sizeof got);
        CB::synchronize();
        double host = gpu::sum_squares(gx.p, n);  // the synchronous form: same bits
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
            gpu::clip_grad(ds, clip);
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
            gpu::capture(gpu::main_stream(), [&] { gpu::sum_squares(gx.p, x.size()); });
        gpu::graph_free(g);
        append(why, "the capture of a synchronising call succeeded");
    } catch (const std::exception&) {  // refused, as it must be
    }
    if (graphs_alive() != 0) append(why, "a refused capture left a graph");
    double after = gpu::sum_squares(gx.p, x.size());
    expect_near(why, "sum of squares after the refused capture", after, cpu::sum_squares(x.data(), x.size()), 1e-10);
    return why;
}

// matmul_backward's dbias (deterministic column sums) keeps its partial sums in a grow-only
// scratch buffer, one row per chunk of 512 rows: a graph captured at one size, then an eager
// call at a larger size (the buffer grows), then the replay, which still reads the buffer it was
// captured with; it is freed with the graph.
std::string test_scratch_growth() {
    Rng r(11);
    const int N = 8, IC = 4, OC = 8, big = 2000;  // one chunk, then four
    Vec d = randn((size_t)N * OC, r), bigd = randn((size_t)big * OC, r);
    DBuf gd(d), gdb((size_t)OC), gbigd(bigd), gbigdb((size_t)OC);
    float* none = nullptr;  // no dinp, dw, inp, w: the column sums alone
    auto dbias = [&](DBuf& db, const DBuf& dout, int n) {
        gpu::matmul_backward(none, none, db.p, dout.p, none, none, n, IC, OC);
    };
    std::string why;
    dbias(gdb, gd, N);
    Vec eager = gdb.get();
    CB::zero(gdb.p, gdb.n);
    cudaGraphExec_t g = gpu::capture(gpu::main_stream(), [&] { dbias(gdb, gd, N); });
    dbias(gbigdb, gbigd, big);  // the scratch grows
    size_t with_retired = device_bytes();
    gpu::graph_launch(g, gpu::main_stream());
    Vec replayed = gdb.get();
    gpu::graph_free(g);
    if (!same_bits(replayed, eager)) append(why, "the replay after the scratch grew differs from the eager call");
    if (!(device_bytes() < with_retired)) append(why, "the outgrown scratch was not freed with the graph");
    return why;
}

// The column sums' ticket counters are back at zero after every launch, so a graph replays them
// any number of times: dbias at 5000 x 1000 (8 blocks of columns, 35 chunks of rows in 6 groups)
// captured and replayed four times, with the same launcher eager at other shapes between the
// replays (700 x 200: other counters in the same buffer; 9000 x 2000: the buffers grow, the graph
// keeps the old ones); every replay and every eager call gives its first eager call's bits.
std::string test_column_sums_replays() {
    Rng r(12);
    const int IC = 4;
    const std::vector<std::pair<int, int>> shapes = {{5000, 1000}, {700, 200}, {9000, 2000}};  // N, OC
    std::vector<std::unique_ptr<DBuf>> dout, db;
    std::vector<Vec> first;
    float* none = nullptr;  // no dinp, dw, inp, w: the column sums alone
    auto dbias = [&](size_t k) {
        CB::zero(db[k]->p, db[k]->n);
        gpu::matmul_backward(none, none, db[k]->p, dout[k]->p, none, none, shapes[k].first, IC, shapes[k].second);
    };
    for (size_t k = 0; k < 2; k++) {  // the largest shape first runs after the capture
        dout.push_back(std::make_unique<DBuf>(randn((size_t)shapes[k].first * shapes[k].second, r)));
        db.push_back(std::make_unique<DBuf>((size_t)shapes[k].second));
        dbias(k);
        first.push_back(db[k]->get());
    }
    cudaGraphExec_t g = gpu::capture(gpu::main_stream(), [&] { dbias(0); });
    dout.push_back(std::make_unique<DBuf>(randn((size_t)shapes[2].first * shapes[2].second, r)));
    db.push_back(std::make_unique<DBuf>((size_t)shapes[2].second));
    std::string why;
    for (int replay = 1; replay <= 4; replay++) {
        gpu::graph_launch(g, gpu::main_stream());
        if (!same_bits(db[0]->get(), first[0]))
            append(why, "replay " + std::to_string(replay) + " differs from the eager call");
        const size_t k = replay % 2 ? 1 : 2;
        dbias(k);
        if (first.size() == k) first.push_back(db[k]->get());  // the first call at the largest shape
        if (!same_bits(db[k]->get(), first[k]))
            append(why, "the eager call at " + std::to_string(shapes[k].first) + " x " +
                            std::to_string(shapes[k].second) + " after replay " + std::to_string(replay) +
                            " differs from the first");
    }
    gpu::graph_free(g);
    return why;
}

// Evaluation batches queued and read at once (GPT::eval_queue, eval_read), after two training
// steps: three batches at kT, three at kT2, three at kT again. With use_graph the evaluation
// forward replays its own CUDA graph from the second batch of each shape. Returns the batches'
// losses; *graphed: whether a graph existed after every shape's batches.
template <class BK>
std::vector<double> eval_batches(Scheme pos, bool use_graph, bool* graphed) {
    GPT<BK> g(small_model(pos));
    g.init(7);
    g.queue.use_graph = use_graph;
    for (int t = 1; t <= 2; t++) {
        std::vector<int> in = tokens(kB * kT, 100 + t), tg = tokens(kB * kT, 200 + t);
        g.train_step(in.data(), tg.data(), kB, kT, kOpt, lr_of(t), t);
        g.read_step();
    }
    std::vector<double> losses;
    *graphed = true;
    int seed = 500;
    for (int Tn : {kT, kT2, kT}) {
        for (int i = 0; i < 3; i++, seed++) {
            std::vector<int> in = tokens(kB * Tn, seed), tg = tokens(kB * Tn, seed + 1000);
            g.eval_queue(in.data(), tg.data(), kB, Tn);
        }
        std::vector<double> m = g.eval_read();
        if (m.size() != 3) throw std::runtime_error("eval_read returned " + std::to_string(m.size()) + " losses for 3");
        losses.insert(losses.end(), m.begin(), m.end());
        if constexpr (BK::graphs)
            *graphed = *graphed && g.queue.eval_graph;
        else
            *graphed = false;
    }
    return losses;
}

std::string test_eval_graph(Scheme pos) {
    bool graphed = false, eager_graphed = true, cpu_graphed = true;
    std::vector<double> graph = eval_batches<CB>(pos, true, &graphed);
    std::vector<double> eager = eval_batches<CB>(pos, false, &eager_graphed);
    std::vector<double> cpu = eval_batches<K>(pos, true, &cpu_graphed);
    std::string why;
    if (!graphed) append(why, "no evaluation graph after a shape's batches with use_graph");
    if (eager_graphed) append(why, "an evaluation graph without use_graph");
    if (!same_bits(graph, eager)) append(why, "graph losses differ from the eager ones");
    for (size_t i = 0; i < cpu.size(); i++)
        expect_near(why, "batch " + std::to_string(i) + " gpu vs cpu", graph[i], cpu[i], 1e-5);
    return why;
}

// Calls out of order are refused with a logic_error naming the call (GPU and CPU): a third
// training step while two are unread, a read with none queued, and a synchronous evaluation
// while evaluation batches are queued.
template <class BK>
std::string call_order(const char* what) {
    GPT<BK> g(small_model(Pos::rope));
    g.init(7);
    std::vector<int> in = tokens(kB * kT, 1), tg = tokens(kB * kT, 2);
    std::string why;
    auto expect_refused = [&](const char* call, const std::string& message, const std::function<void()>& f) {
        try {
            f();
            append(why, std::string(what) + ": " + call + " was not refused");
        } catch (const std::logic_error& e) {
            if (std::string(e.what()).find(message) == std::string::npos)
                append(why, std::string(what) + ": " + call + " refused with '" + e.what() + "'");
        }
    };
    auto step = [&](int t) { g.train_step(in.data(), tg.data(), kB, kT, kOpt, lr_of(t), t); };
    step(1), step(2);
    expect_refused("a third unread step", "two steps are unread", [&] { step(3); });
    g.read_step(), g.read_step();
    expect_refused("read_step with none queued", "no step queued", [&] { g.read_step(); });
    g.eval_queue(in.data(), tg.data(), kB, kT);
    expect_refused("forward while evaluation batches are queued", "evaluation batches are queued",
                   [&] { g.forward(in.data(), tg.data(), kB, kT, false); });
    if (g.eval_read().size() != 1) append(why, std::string(what) + ": the queued batch was lost");
    return why;
}

std::string test_call_order() {
    std::string why = call_order<CB>("gpu");
    append(why, call_order<K>("cpu"));
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

static std::vector<TestCase> all_tests() {
    std::vector<TestCase> t = {{"cuda_sum_squares_to", CUDA_FN(test_sum_squares_to)},
                               {"cuda_clip_grad", CUDA_FN(test_clip_grad)},
                               {"cuda_graph_capture_refuses_sync", CUDA_FN(test_capture_refuses_sync)},
                               {"cuda_graph_scratch_growth", CUDA_FN(test_scratch_growth)},
                               {"cuda_graph_column_sums_replays", CUDA_FN(test_column_sums_replays)},
                               {"cuda_graph_vs_eager_tiles_rope", CUDA_FN(test_graph_vs_eager_tiles)},
                               {"cuda_graph_vs_eager_fused_rope", CUDA_FN(test_graph_vs_eager_fused)},
                               {"cuda_step_call_order_refused", CUDA_FN(test_call_order)}};
    for (const PosTraits& scheme : kPosSchemes) {
        [[maybe_unused]] Pos p = scheme.pos;  // unused without CUDA
        std::string n = scheme.name;
        t.push_back({"cuda_graph_vs_eager_" + n, CUDA_FN([p] { return test_graph_vs_eager(p); })});
        t.push_back({"cuda_graph_vs_eager_bf16_" + n, CUDA_FN([p] { return test_graph_vs_eager_bf16(p); })});
        t.push_back({"cuda_step_queued_vs_sync_" + n, CUDA_FN([p] { return test_queued_vs_sync(p); })});
        t.push_back({"cuda_eval_borrows_training_buffers_" + n, CUDA_FN([p] { return test_eval_borrows(p); })});
        t.push_back({"cuda_eval_graph_vs_eager_" + n, CUDA_FN([p] { return test_eval_graph(p); })});
    }
    // RoPE scalings whose s follows the length (fp32: cublas attention; bf16: flash); llama3 with
    // partial rotary (f = 0.5)
    for (Pos p : {Pos::rope, Pos::crope})
        for (RopeScaling::Kind k : {RopeScaling::yarn, RopeScaling::dynamic, RopeScaling::llama3}) {
            [[maybe_unused]] const Scheme sc(p, k, k == RopeScaling::llama3 ? 0.5 : 1);  // unused without CUDA
            const std::string n = std::string(pos_name(p)) + "_" + kRopeScalingNames[k];
            t.push_back({"cuda_graph_vs_eager_" + n, CUDA_FN([sc] { return test_graph_vs_eager(sc); })});
            t.push_back({"cuda_graph_vs_eager_bf16_" + n, CUDA_FN([sc] { return test_graph_vs_eager_bf16(sc); })});
            t.push_back({"cuda_eval_graph_vs_eager_" + n, CUDA_FN([sc] { return test_eval_graph(sc); })});
        }
    return t;
}

// test_cuda_graph [NAME...]: only the tests whose name contains one of the arguments.
int main(int argc, char** argv) {
    return run_tests(all_tests(), argc, argv);
}
