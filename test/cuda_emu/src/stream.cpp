// Streams, events, stream capture and CUDA graphs of the CUDA emulation. Work runs at the call
// (so streams and events only keep order and time), except on a stream that captures: there
// every asynchronous call is recorded as a node (a closure owning what it read at the call),
// and cudaGraphLaunch runs the nodes in capture order, with the checks of the eager path
// against the memory as it is at the replay. What CUDA refuses during a capture is refused
// here with CUDA's error, a report, and the capture invalidated.
// With CUDA_EMU_DEFER=1 the work of created streams is queued instead and runs only when the
// host waits for it (a synchronisation, a blocking call) or other work that runs waits for it:
// the latest a GPU may run it. A host that reads or reuses a buffer of queued work without
// waiting, or a stream that uses another's results without waiting on its event, goes wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cuda_runtime.h"
#include "emu_internal.h"

namespace emu {
namespace {

struct Node {
    const char* what;  // "kernel launch", "cudaMemcpyAsync", ...
    const char* file;  // where it was captured
    int line;
    std::function<void()> run;
};
using Nodes = std::vector<Node>;
struct Queued {  // CUDA_EMU_DEFER: work of a stream that has not run yet
    unsigned long long number;
    Node node;
};

struct Capture {
    unsigned long long id;
    cudaStream_t origin;
    cudaStreamCaptureMode mode;
    std::thread::id thread;
    const char* file;  // cudaStreamBeginCapture
    int line;
    bool invalidated = false;
    std::shared_ptr<Nodes> nodes = std::make_shared<Nodes>();
    std::vector<CUstream_st*> forks;  // streams that joined it by waiting on one of its events
};

std::set<const void*>& live_handles() {
    static std::set<const void*> s;
    return s;
}

// Captures in progress, in the order they began.
std::vector<std::unique_ptr<Capture>>& captures() {
    static std::vector<std::unique_ptr<Capture>> c;
    return c;
}

Capture* active(unsigned long long id) {
    for (auto& c : captures())
        if (c->id == id) return c.get();
    return nullptr;
}

}  // namespace
}  // namespace emu

struct CUstream_st {
    bool blocking = true;           // synchronises with the legacy stream (no cudaStreamNonBlocking)
    std::deque<emu::Queued> queue;  // CUDA_EMU_DEFER: its work not run yet, oldest first
    emu::Capture* capture = nullptr;
    size_t last_node = 0;    // its last node in the capture (1-based; 0: none)
    size_t joined_upto = 0;  // the capture's origin waited on its work up to this node
};
struct CUevent_st {
    std::chrono::steady_clock::time_point t;
    bool recorded = false;
    unsigned long long capture = 0;    // the capture that recorded it last, or 0
    CUstream_st* stream = nullptr;     // ... on this stream,
    size_t node = 0;                   // ... after this many nodes
    unsigned long long queued = 0;     // CUDA_EMU_DEFER: the number of its last record, if queued,
    CUstream_st* queued_on = nullptr;  // ... on this stream
};
struct CUgraph_st {
    std::shared_ptr<const emu::Nodes> nodes;
    const char* file;  // cudaStreamBeginCapture
    int line;
};
struct CUgraphExec_st : CUgraph_st {};

namespace emu {

bool stream_valid(cudaStream_t s);

namespace {

bool is_legacy(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy;
}

// The state of a stream that can capture (not the legacy stream).
CUstream_st* state(cudaStream_t s) {
    static CUstream_st per_thread;
    return s == cudaStreamPerThread ? &per_thread : is_legacy(s) ? nullptr : s;
}

}  // namespace

bool stream_capturing(cudaStream_t s) {
    const CUstream_st* st = stream_valid(s) ? state(s) : nullptr;
    return st && st->capture;
}

namespace {

std::string stream_name(cudaStream_t s) {
    if (is_legacy(s)) return "the legacy stream";
    if (s == cudaStreamPerThread) return "cudaStreamPerThread";
    char b[64];
    std::snprintf(b, sizeof b, "stream %p", (void*)s);
    return b;
}

void end(Capture* c) {
    for (auto it = captures().begin(); it != captures().end(); ++it)
        if (it->get() == c) {
            captures().erase(it);
            return;
        }
}

void detach(CUstream_st* st) {
    st->capture = nullptr;
    st->last_node = st->joined_upto = 0;
}

// The replays in progress (a graph launched by a node of another graph nests).
struct Replay {
    const CUgraph_st* graph;
    size_t node;
    const char* file;  // cudaGraphLaunch
    int line;
};
std::vector<Replay> g_replays;

void replay(const CUgraph_st& g, const char* file, int line) {
    g_replays.push_back({&g, 0, file, line});
    for (size_t i = 0; i < g.nodes->size(); i++) {
        g_replays.back().node = i;
        (*g.nodes)[i].run();
    }
    g_replays.pop_back();
}

// ---- CUDA_EMU_DEFER=1: queued work -------------------------------------------------------------
// Each created stream queues its own work, numbered from 1 across all streams. A stream that
// waits on an event queues the wait, which runs the event's stream up to the record; the legacy
// stream's work waits for every blocking stream. So a stream's work runs only when the host or
// other running work needs it, and never before what it waits on.
bool defer_enabled() {
    static const bool on = emu::env_switch("CUDA_EMU_DEFER", "0", "1");
    return on;
}
unsigned long long g_last_queued = 0;
std::unordered_set<unsigned long long> g_pending;  // the numbers of the work not run yet
std::set<CUstream_st*> g_busy;                     // the streams with queued work
// The queued work running now, and the call that waited for it (for reports).
struct Running {
    const Node* node;
    const char* file;
    int line;
};
std::vector<Running> g_running;

bool pending(unsigned long long number) {
    return g_pending.count(number) != 0;
}

// Runs st's queued work up to `number` (the work it waits on first, through its wait nodes).
void run_stream_through(CUstream_st* st, unsigned long long number, const char* file, int line) {
    while (!st->queue.empty() && st->queue.front().number <= number) {
        Queued q = std::move(st->queue.front());
        st->queue.pop_front();
        g_pending.erase(q.number);
        g_running.push_back({&q.node, file, line});
        q.node.run();
        g_running.pop_back();
    }
    if (st->queue.empty()) g_busy.erase(st);
}

}  // namespace

void run_all_queued(const char* file, int line, bool blocking_only) {
    std::vector<CUstream_st*> streams(g_busy.begin(), g_busy.end());
    for (CUstream_st* st : streams)
        if (g_busy.count(st) && (st->blocking || !blocking_only)) run_stream_through(st, g_last_queued, file, line);
}

void run_queued(cudaStream_t s, const char* file, int line) {
    if (CUstream_st* st = state(s)) run_stream_through(st, g_last_queued, file, line);
}

bool defers(cudaStream_t s) {
    return defer_enabled() && !is_legacy(s) && !stream_capturing(s);
}

std::string replay_context() {
    std::string out;
    char b[512];
    if (!g_replays.empty()) {
        const Replay& r = g_replays.back();
        const Node& n = (*r.graph->nodes)[r.node];
        std::snprintf(b, sizeof b,
                      "  in node %zu (%s captured at %s:%d) of the graph captured from %s:%d, replayed by "
                      "cudaGraphLaunch at %s:%d\n",
                      r.node, n.what, n.file, n.line, r.graph->file, r.graph->line, r.file, r.line);
        out += b;
    }
    if (!g_running.empty()) {
        const Running& r = g_running.back();
        std::snprintf(b, sizeof b, "  %s queued at %s:%d, run when the host waited at %s:%d (CUDA_EMU_DEFER=1)\n",
                      r.node->what, r.node->file, r.node->line, r.file, r.line);
        out += b;
    }
    return out;
}

bool in_replay() {
    return !g_replays.empty();
}

bool stream_valid(cudaStream_t s) {
    return is_legacy(s) || s == cudaStreamPerThread || live_handles().count(s);
}

void invalidate_capture(cudaStream_t s) {
    if (stream_capturing(s)) state(s)->capture->invalidated = true;
}

cudaError_t legacy_stream_use(const char* file, int line, const char* call) {
    for (auto& c : captures())
        if (state(c->origin)->blocking) {
            for (auto& d : captures())
                if (state(d->origin)->blocking) d->invalidated = true;
            return refuse(file, line, cudaErrorStreamCaptureImplicit,
                          "%s on the legacy stream while blocking %s captures (cudaStreamBeginCapture at %s:%d): the "
                          "legacy stream would wait on the capture; the capture is invalidated",
                          call, stream_name(c->origin).c_str(), c->file, c->line);
        }
    run_all_queued(file, line, true);  // the legacy stream waits for the blocking streams' work
    return cudaSuccess;
}

cudaError_t unsafe_call(const char* file, int line, const char* call) {
    const std::thread::id me = std::this_thread::get_id();
    Capture* first = nullptr;
    for (auto& c : captures()) {
        const bool prohibits =
            c->thread == me ? c->mode != cudaStreamCaptureModeRelaxed : c->mode == cudaStreamCaptureModeGlobal;
        if (!prohibits) continue;
        c->invalidated = true;
        if (!first) first = c.get();
    }
    if (!first) return cudaSuccess;
    return refuse(
        file, line, cudaErrorStreamCaptureUnsupported,
        "%s while %s captures in %s mode (cudaStreamBeginCapture at %s:%d): not permitted during the "
        "capture (allocate before it, or capture in cudaStreamCaptureModeRelaxed); the capture is invalidated",
        call, stream_name(first->origin).c_str(),
        first->mode == cudaStreamCaptureModeGlobal ? "cudaStreamCaptureModeGlobal" : "cudaStreamCaptureModeThreadLocal",
        first->file, first->line);
}

cudaError_t enqueue(cudaStream_t s, const char* file, int line, const char* what, std::function<void()> work) {
    if (!stream_valid(s)) return cudaErrorInvalidResourceHandle;
    if (is_legacy(s)) {
        if (cudaError_t e = legacy_stream_use(file, line, what)) return e;
    }
    const bool defer = defer_enabled();  // read at the first work (a bad value ends the program)
    CUstream_st* st = state(s);
    if (!st || !st->capture) {
        if (!st || !defer) {
            work();
            return cudaSuccess;
        }
        st->queue.push_back({++g_last_queued, {what, file, line, std::move(work)}});
        g_pending.insert(g_last_queued);
        g_busy.insert(st);
        return cudaSuccess;
    }
    Capture* c = st->capture;
    if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
    c->nodes->push_back({what, file, line, std::move(work)});
    st->last_node = c->nodes->size();
    return cudaSuccess;
}

}  // namespace emu

using emu::live_handles;
using emu::refuse;

static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) emu::set_last_error(e);
    return e;
}

// ---- streams ------------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) {
    return cudaStreamCreateWithFlags(s, 0);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    *s = new CUstream_st;
    (*s)->blocking = !(flags & cudaStreamNonBlocking);
    live_handles().insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !live_handles().count(s)) return ret(cudaErrorInvalidResourceHandle);
    if (s->capture) {
        s->capture->invalidated = true;
        return refuse(__FILE__, __LINE__, cudaErrorStreamCaptureUnsupported,
                      "cudaStreamDestroy of %s, which captures (cudaStreamBeginCapture at %s:%d); the capture is "
                      "invalidated",
                      emu::stream_name(s).c_str(), s->capture->file, s->capture->line);
    }
    emu::run_queued(s, __FILE__, __LINE__);  // its work goes on after the call, as on a GPU
    emu::g_busy.erase(s);
    live_handles().erase(s);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s, const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    if (emu::is_legacy(s)) return emu::legacy_stream_use(file, line, "cudaStreamSynchronize");
    if (emu::Capture* c = emu::state(s)->capture) {
        c->invalidated = true;
        return refuse(file, line, cudaErrorStreamCaptureUnsupported,
                      "cudaStreamSynchronize of %s, which captures (cudaStreamBeginCapture at %s:%d): its work is "
                      "recorded, not run; the capture is invalidated",
                      emu::stream_name(s).c_str(), c->file, c->line);
    }
    emu::run_queued(s, file, line);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(const char* file, int line) {
    if (emu::captures().empty()) {
        emu::run_all_queued(file, line);
        return cudaSuccess;
    }
    const emu::Capture& c = *emu::captures().front();
    for (auto& d : emu::captures()) d->invalidated = true;
    return refuse(file, line, cudaErrorStreamCaptureUnsupported,
                  "cudaDeviceSynchronize while %s captures (cudaStreamBeginCapture at %s:%d); every capture is "
                  "invalidated",
                  emu::stream_name(c.origin).c_str(), c.file, c.line);
}

// A stream that waits on an event recorded in a capture joins that capture (fork); the origin
// waiting on an event of a joined stream joins that stream's work back.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned, const char* file, int line) {
    if (!emu::stream_valid(s) || !live_handles().count(e)) return ret(cudaErrorInvalidResourceHandle);
    CUstream_st* st = emu::state(s);
    emu::Capture* from = emu::active(e->capture);
    emu::Capture* into = st ? st->capture : nullptr;
    if (!from && !into) {
        if (!st) return emu::legacy_stream_use(file, line, "cudaStreamWaitEvent");
        if (!emu::defer_enabled() || !emu::pending(e->queued)) return cudaSuccess;
        // queued: s's later work runs after the event's stream has run up to the record
        return ret(emu::enqueue(s, file, line, "cudaStreamWaitEvent", [on = e->queued_on, n = e->queued, file, line] {
            if (emu::pending(n)) emu::run_stream_through(on, n, file, line);
        }));
    }
    if (!st) {  // the legacy stream waits on captured work
        from->invalidated = true;
        return refuse(file, line, cudaErrorStreamCaptureImplicit,
                      "cudaStreamWaitEvent: the legacy stream waits on an event recorded in the capture begun at "
                      "%s:%d; the capture is invalidated",
                      from->file, from->line);
    }
    if (into && !from) {
        if (!e->recorded) return cudaSuccess;  // never recorded: nothing to wait for, as outside a capture
        into->invalidated = true;
        return refuse(file, line, cudaErrorStreamCaptureIsolation,
                      "cudaStreamWaitEvent: capturing %s waits on an event not recorded in its capture (begun at "
                      "%s:%d); the capture is invalidated",
                      emu::stream_name(s).c_str(), into->file, into->line);
    }
    if (into && into != from) {
        into->invalidated = from->invalidated = true;
        return refuse(file, line, cudaErrorStreamCaptureMerge,
                      "cudaStreamWaitEvent would merge the captures begun at %s:%d and %s:%d; both are invalidated",
                      into->file, into->line, from->file, from->line);
    }
    if (!into) {  // fork
        st->capture = from;
        from->forks.push_back(st);
    }
    if (from->origin == s) e->stream->joined_upto = std::max(e->stream->joined_upto, e->node);
    return cudaSuccess;
}

// ---- events -------------------------------------------------------------------------------
cudaError_t cudaEventCreate(cudaEvent_t* e) {
    return cudaEventCreateWithFlags(e, 0);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    *e = new CUevent_st;
    live_handles().insert(*e);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e || !live_handles().count(e)) return ret(cudaErrorInvalidResourceHandle);
    if (emu::pending(e->queued))  // a queued record completes, as on a GPU
        emu::run_stream_through(e->queued_on, e->queued, __FILE__, __LINE__);
    live_handles().erase(e);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s, const char* file, int line) {
    if (!live_handles().count(e) || !emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    cudaError_t err = emu::enqueue(s, file, line, "cudaEventRecord", [e, file, line] {
        if (!live_handles().count(e))
            emu::fail(file, line, "captured cudaEventRecord: event %p was destroyed after the capture", (void*)e);
        e->t = std::chrono::steady_clock::now();
        e->recorded = true;
        e->capture = 0;
    });
    if (err) return ret(err);
    const bool queued = emu::defers(s);
    e->queued = queued ? emu::state(s)->queue.back().number : 0;
    e->queued_on = queued ? emu::state(s) : nullptr;
    if (emu::stream_capturing(s)) {
        CUstream_st* st = emu::state(s);
        e->capture = st->capture->id, e->stream = st, e->node = st->capture->nodes->size();
    }
    return cudaSuccess;
}

namespace {
// Waiting on an event of a capture in progress: CUDA refuses it (the event is not recorded yet).
cudaError_t captured_event(cudaEvent_t e, const char* file, int line, const char* call) {
    emu::Capture* c = emu::active(e->capture);
    if (!c) return cudaSuccess;
    c->invalidated = true;
    return refuse(file, line, cudaErrorCapturedEvent,
                  "%s of an event recorded in the capture begun at %s:%d (it runs only when the graph is launched); "
                  "the capture is invalidated",
                  call, c->file, c->line);
}
}  // namespace

cudaError_t cudaEventSynchronize(cudaEvent_t e, const char* file, int line) {
    if (!live_handles().count(e)) return ret(cudaErrorInvalidResourceHandle);
    if (cudaError_t err = captured_event(e, file, line, "cudaEventSynchronize")) return err;
    if (emu::pending(e->queued)) emu::run_stream_through(e->queued_on, e->queued, file, line);
    return cudaSuccess;
}
// A queued record is not ready yet; the query lets it run, so that polling ends.
cudaError_t cudaEventQuery(cudaEvent_t e, const char* file, int line) {
    if (!live_handles().count(e)) return ret(cudaErrorInvalidResourceHandle);
    if (cudaError_t err = captured_event(e, file, line, "cudaEventQuery")) return err;
    if (!emu::pending(e->queued)) return cudaSuccess;
    emu::run_stream_through(e->queued_on, e->queued, file, line);
    return cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!live_handles().count(a) || !live_handles().count(b)) return ret(cudaErrorInvalidResourceHandle);
    if (emu::pending(a->queued) || emu::pending(b->queued)) return cudaErrorNotReady;
    if (!a->recorded || !b->recorded) return ret(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}

// ---- capture ------------------------------------------------------------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode, const char* file, int line) {
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) return ret(cudaErrorInvalidValue);
    if (emu::is_legacy(s))
        return refuse(file, line, cudaErrorStreamCaptureUnsupported,
                      "cudaStreamBeginCapture on the legacy stream: capture needs a created stream");
    CUstream_st* st = emu::state(s);
    if (st->capture)
        return refuse(file, line, cudaErrorIllegalState,
                      "cudaStreamBeginCapture: %s already captures (cudaStreamBeginCapture at %s:%d)",
                      emu::stream_name(s).c_str(), st->capture->file, st->capture->line);
    static unsigned long long next_id = 1;
    auto c = std::make_unique<emu::Capture>();
    c->id = next_id++, c->origin = s, c->mode = mode, c->thread = std::this_thread::get_id();
    c->file = file, c->line = line;
    st->capture = c.get();
    st->last_node = st->joined_upto = 0;
    emu::captures().push_back(std::move(c));
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph, const char* file, int line) {
    if (!emu::stream_valid(s) || !graph) return ret(cudaErrorInvalidValue);
    *graph = nullptr;
    CUstream_st* st = emu::state(s);
    emu::Capture* c = st ? st->capture : nullptr;
    if (!c)
        return refuse(file, line, cudaErrorIllegalState, "cudaStreamEndCapture: %s does not capture",
                      emu::stream_name(s).c_str());
    if (c->origin != s)
        return refuse(file, line, cudaErrorStreamCaptureUnmatched,
                      "cudaStreamEndCapture on %s, which joined the capture begun on %s at %s:%d: end it there",
                      emu::stream_name(s).c_str(), emu::stream_name(c->origin).c_str(), c->file, c->line);
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
        return refuse(file, line, cudaErrorStreamCaptureWrongThread,
                      "cudaStreamEndCapture from another thread than cudaStreamBeginCapture (%s:%d)", c->file, c->line);
    cudaError_t err = c->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    for (CUstream_st* f : c->forks) {
        if (!err && f->last_node > f->joined_upto)
            err = refuse(file, line, cudaErrorStreamCaptureUnjoined,
                         "cudaStreamEndCapture: %s forked from the capture begun at %s:%d and its work after node %zu "
                         "was never joined back (record an event on it and make %s wait on it)",
                         emu::stream_name(f).c_str(), c->file, c->line, f->joined_upto, emu::stream_name(s).c_str());
        emu::detach(f);
    }
    if (!err) *graph = new CUgraph_st{c->nodes, c->file, c->line};
    if (*graph) live_handles().insert(*graph);
    emu::detach(st);
    emu::end(c);
    return ret(err);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
    if (!emu::stream_valid(s) || !status) return ret(cudaErrorInvalidValue);
    if (emu::is_legacy(s)) {
        for (auto& c : emu::captures())
            if (emu::state(c->origin)->blocking) return ret(cudaErrorStreamCaptureImplicit);  // not invalidated
        *status = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    const emu::Capture* c = emu::state(s)->capture;
    *status = !c               ? cudaStreamCaptureStatusNone
              : c->invalidated ? cudaStreamCaptureStatusInvalidated
                               : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

// ---- graphs -------------------------------------------------------------------------------
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags, const char* file,
                                 int line) {
    if (!exec || !graph || !live_handles().count(graph)) return ret(cudaErrorInvalidValue);
    if (flags != 0)
        return refuse(file, line, cudaErrorInvalidValue, "cudaGraphInstantiate: flags %llu (only 0 is emulated)",
                      flags);
    // the executable graph keeps the nodes: the graph may be destroyed after this
    *exec = new CUgraphExec_st{{graph->nodes, graph->file, graph->line}};
    live_handles().insert(*exec);
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
    if (!graph || !numNodes || !live_handles().count(graph)) return ret(cudaErrorInvalidValue);
    size_t n = graph->nodes->size();
    if (nodes) {
        n = std::min(n, *numNodes);
        for (size_t i = 0; i < n; i++) nodes[i] = reinterpret_cast<cudaGraphNode_t>(i + 1);
    }
    *numNodes = n;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s, const char* file, int line) {
    if (!exec || !live_handles().count(exec))
        return refuse(file, line, cudaErrorInvalidValue, "cudaGraphLaunch: %p is not a live cudaGraphExec_t",
                      (void*)exec);
    if (!emu::stream_valid(s)) return ret(cudaErrorInvalidResourceHandle);
    // a copy: the exec may be destroyed while a capture holds this launch as a node
    return ret(emu::enqueue(s, file, line, "cudaGraphLaunch",
                            [g = CUgraph_st(*exec), file, line] { emu::replay(g, file, line); }));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (!exec || !live_handles().erase(exec)) return ret(cudaErrorInvalidValue);
    // a queued launch holds a copy of the graph's nodes: it may run after this, as on a GPU
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (!graph || !live_handles().erase(graph)) return ret(cudaErrorInvalidValue);
    delete graph;
    return cudaSuccess;
}
