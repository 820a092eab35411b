// How GPT<BK> (model.h) queues its work without waiting for the device, and reads the results
// back: the training step's losses and scalars come through pinned memory by asynchronous copies
// (two readbacks used in turn, so step k+1 is queued before step k is read), evaluation batches'
// losses likewise; the CUDA graphs that replay the training step and evaluation's forward pass;
// and the profiling mode's phase marks. On the CPU backend all of it is plain memory and memcpy.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <vector>

#include "step.h"

// Phases of a training step in the profiling mode: the LM head and loss (src/classifier.h,
// forward and backward), attention (forward and backward), AdamW, and the rest.
enum class Phase { head, attention, rest, adamw };
constexpr int kPhases = 4;
constexpr const char* kPhaseNames[kPhases] = {"head_loss", "attention", "rest", "adamw"};

// What a training step gives back (GPT::read_step).
struct StepResult {
    double loss = 0;     // mean cross-entropy of this rank's tokens
    double norm = 0;     // global gradient norm (before clipping)
    double comm_ms = 0;  // data parallel: time of the gradient sum and the norm
};

// The mean of n per-token losses, summed in order in double (the same on every backend).
template <class Real>
double mean_loss(const Real* losses, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += losses[i];
    return sum / n;
}

// Whether the training step replays a CUDA graph: a backend with graphs, use_graph on, one
// process (data parallel keeps its host waits), outside the profiling mode.
template <class BK>
bool graph_step(bool use_graph, bool profile, bool mpi) {
    return BK::graphs && use_graph && !profile && !mpi;
}

template <class BK>
struct StepQueue {
    using Real = typename BK::real;

    // Per-token losses on their way to the host: pinned memory, grown as needed, filled by an
    // asynchronous copy; read only once an event recorded after the copy has passed.
    struct HostLosses {
        Real* p = nullptr;
        size_t n = 0, cap = 0;
        // Queues the copy of count losses from backend memory into [at, at + count) of `total`
        // (at 0 starts them: the last copy into it has been read).
        void fetch(const Real* src, size_t count, size_t at = 0, size_t total = 0) {
            if (at == 0) {
                n = std::max(count, total);
                if (n > cap) {
                    BK::free_pinned(p);
                    p = static_cast<Real*>(BK::alloc_pinned(n * sizeof(Real)));
                    cap = n;
                }
            }
            BK::copy_to_host_async(p + at, src, count * sizeof(Real));
        }
        double mean() const { return mean_loss(p, n); }
        void release() { BK::free_pinned(p), p = nullptr, n = cap = 0; }
    };
    // A training step's results on their way to the host, and an event when they are there.
    struct Readback {
        HostLosses losses;  // (B*T) per-token losses
        StepScalars* scalars = nullptr;
        double comm_ms = 0;
        typename BK::Event done{};
    };
    Readback readback[2];
    std::deque<Readback*> unread;  // queued steps not read yet, oldest first
    int next_readback = 0;

    // With use_graph (and graph_step), the step after an eager one is captured as a CUDA graph
    // (the eager one sized every grow-only scratch buffer) and every later step replays it.
    bool use_graph = false;
    bool mpi = false;  // data parallel: the step runs eagerly
    // What a graph reads that may be replaced between its replays (GPT::graph_key: the buffers'
    // addresses and sizes, the shapes): a replay under another key drops the graph and runs eagerly.
    using Key = std::vector<size_t>;
    typename BK::Graph graph{};
    AdamWConfig graph_opt;   // the settings of the graph (its kernel arguments: it is dropped when they change)
    Key graph_key, eval_key;
    size_t graph_nodes = 0;  // nodes of the last graph captured (kernels, GEMMs, memsets, copies)
    int eager_steps = 0;     // train steps run eagerly since the graph was last dropped

    // Evaluation batches queued without waiting: each batch's per-token losses copied into its own
    // pinned buffer, an event after the last copy; eval_read() waits once. With use_graph the
    // evaluation forward replays its own graph, captured at the second batch of a shape.
    std::vector<HostLosses> eval_losses;
    size_t eval_queued = 0;  // batches queued since the last eval_read
    typename BK::Event eval_done{};
    typename BK::Graph eval_graph{};
    bool eval_eager = false;  // an eager batch ran at the evaluation's shape since eval_graph was dropped

    // Profiling mode: the training step marks its phases (BK::profile_mark: the time from one mark
    // to the next counts to the first one's phase).
    bool profile = false;

    StepQueue() {
        for (Readback& r : readback) {
            r.scalars = static_cast<StepScalars*>(BK::alloc_pinned(sizeof(StepScalars)));
            r.done = BK::event_create();
        }
        eval_done = BK::event_create();
    }
    ~StepQueue() {
        drop_graph();
        BK::synchronize();  // no copy into the readback buffers is still on its way
        for (Readback& r : readback) {
            r.losses.release();
            BK::free_pinned(r.scalars);
            BK::event_destroy(r.done);
        }
        for (HostLosses& e : eval_losses) e.release();
        BK::event_destroy(eval_done);
    }
    StepQueue(const StepQueue&) = delete;
    StepQueue& operator=(const StepQueue&) = delete;

    // --- the training step
    // Runs a step's work (opt: its AdamW settings; key: what it reads) as the graph's replay, or
    // eagerly.
    template <class F>
    void run_step(const AdamWConfig& opt, const Key& key, const F& work) {
        if (graph && !(opt == graph_opt && key == graph_key)) drop_graph();  // its kernels hold the old ones
        graph_opt = opt, graph_key = key;
        if (!replay(graph, eager_steps > 0, work, &graph_nodes)) work(), eager_steps++;
    }
    // The readback of the step being queued (its last step was read).
    Readback& next() {
        Readback& r = readback[next_readback];
        next_readback ^= 1;
        return r;
    }
    // Queues the copies of the step's n losses and its scalars into r's pinned memory.
    void fetch(Readback& r, const Real* losses, size_t n, const StepScalars* scalars) {
        r.losses.fetch(losses, n);
        BK::copy_to_host_async(r.scalars, scalars, sizeof(StepScalars));
        BK::event_record(r.done);
        unread.push_back(&r);
    }
    // The oldest unread step's mean loss (this rank's tokens) and gradient norm; waits for it.
    StepResult read_step() {
        if (unread.empty()) throw std::logic_error("read_step: no step queued");
        Readback& r = *unread.front();
        unread.pop_front();
        BK::event_wait(r.done);
        return {r.losses.mean(), std::sqrt(r.scalars->sumsq), r.comm_ms};
    }

    // --- evaluation
    template <class F>
    void run_eval(const Key& key, const F& work) {
        if (eval_graph && key != eval_key) drop_eval_graph();
        eval_key = key;
        if (!replay(eval_graph, eval_eager, work)) work(), eval_eager = true;
    }
    // Queues the copy of n losses of a batch of `total` into its [at, at + n) (read at the next
    // eval_read); at 0 starts the batch.
    void fetch_eval(const Real* losses, size_t at, size_t n, size_t total) {
        if (at == 0 && eval_queued++ == eval_losses.size()) eval_losses.emplace_back();
        eval_losses[eval_queued - 1].fetch(losses, n, at, total);
        BK::event_record(eval_done);
    }
    // The mean loss of each batch queued since the last call, in order; waits for them.
    std::vector<double> eval_read() {
        std::vector<double> means;
        if (eval_queued) BK::event_wait(eval_done);
        for (size_t i = 0; i < eval_queued; i++) means.push_back(eval_losses[i].mean());
        eval_queued = 0;
        return means;
    }

    // --- graphs
    // Runs `work` as the replay of graph g (captured now if there is none; *nodes: its size); false
    // when the work is to run eagerly: not graph_step, or not warm (no eager run since g was
    // dropped: the first sizes the grow-only scratch buffers).
    template <class F>
    bool replay(typename BK::Graph& g, bool warm, const F& work, size_t* nodes = nullptr) {
        if constexpr (BK::graphs) {
            if (!graph_step<BK>(use_graph, profile, mpi) || !warm) return false;
            if (!g) g = BK::capture(work, nodes);
            BK::graph_launch(g);
            return true;
        }
        return false;
    }
    // Frees the graphs (a replay under another key, the model's end).
    void drop_graph() {
        if constexpr (BK::graphs)
            if (graph) BK::graph_free(graph), graph = {};
        eager_steps = 0;
        drop_eval_graph();
    }
    void drop_eval_graph() {
        if constexpr (BK::graphs)
            if (eval_graph) BK::graph_free(eval_graph), eval_graph = {};
        eval_eager = false;
    }

    // --- profiling
    void mark(Phase p, bool training = true) {
        if (profile && training) BK::profile_mark((int)p);
    }
    // Milliseconds per phase (kPhaseNames order) since the step's first mark; waits for the step.
    std::vector<double> profile_read() {
        BK::profile_mark((int)Phase::rest);  // the end of the last phase
        return BK::profile_read(kPhases);
    }
};
