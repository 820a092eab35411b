// Kernel execution of the CUDA emulation: blocks one after another; inside a block every CUDA
// thread is a fiber with its own small stack, all on the calling OS thread. A fiber runs
// until it reaches __syncthreads, a warp collective or its end; it then resumes the next
// runnable fiber of the pass itself (one switch, not two through the scheduler), and the
// scheduler starts each pass over the threads in the chosen order (CUDA_EMU_ORDER: forward,
// reverse, random).
// Code that forgets a barrier therefore reads stale or 0xFF-filled data in at least one order.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include "emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

// make emu-tsan: the kernels are built with -fsanitize=thread and this file without (its
// bookkeeping is shared by every fiber on purpose). Each CUDA thread is a ThreadSanitizer fiber
// and switching fibers orders nothing; only what orders CUDA threads on a GPU does (tsan_* below):
// a block's start (after the host's earlier work), __syncthreads, warp collectives, and the
// kernel's end (before the host's later work). An access to shared or global memory that none of
// these orders against another thread's write is then reported as a data race, in whatever order
// the fibers happened to run.
#if defined(CUDA_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
// the first race ends the program, with the report, as the emulator's own checks do
extern "C" const char* __tsan_default_options() {
    return "halt_on_error=1";
}
#define EMU_TSAN 1
#else
#define EMU_TSAN 0
#endif

namespace emu {

ThreadHead* g_thread = nullptr;
uint3 g_block_idx;
dim3 g_block_dim, g_grid_dim;
unsigned long long g_block_serial = 0;

namespace {

enum State : unsigned char { kRunnable, kBarrier, kWarp, kDone };

struct ThreadState : ThreadHead {
    int linear = 0;
    State state = kDone;
    void* sp = nullptr;  // saved stack pointer while suspended
    char* stack = nullptr;
    void* asan_fake = nullptr;
    const char* file = "";  // where it waits
    int line = 0;
    int barrier_result = 0;
    // the warp collective it waits in
    const char* what = "";
    unsigned mask = 0;
    uint64_t in = 0, param = 0, out = 0;
    WarpCombine combine = nullptr;
    // make emu-tsan: this thread's fiber, its release at a collective's arrival, the collective's
    // slot (Warp::tsan_done) and the barrier object (Launch::tsan_bar) it leaves through
    void* tsan_fiber = nullptr;
    char tsan_arrive = 0;
    unsigned tsan_slot = 0, tsan_bar = 0;
};

// make emu-tsan: each __syncwarp gets its own slot, which its last lane releases into and every
// lane acquires on leaving; a slot is reused 16 __syncwarps later (by then the lanes of the first
// have left, unless a mask left one waiting, which can only hide a race, never invent one).
constexpr unsigned kTsanSlots = 16;
struct Warp {
    unsigned exists = 0, arrived = 0, done = 0;
    unsigned tsan_next = 0;
    char tsan_done[kTsanSlots] = {};
};

constexpr int kMaxThreads = 1024;
constexpr size_t kStaticSmemLimit = 48 * 1024;  // static __shared__ per block
constexpr size_t kDynSmemDefault = 48 * 1024;   // dynamic, without cudaFuncSetAttribute
constexpr size_t kSmemOptin = 232448;           // sm_90: 227 KB per block
constexpr size_t kStackBytes = EMU_ASAN ? 256 * 1024 : 64 * 1024;
constexpr size_t kGuardBytes = 4096;

struct LaunchRejected {};

// The launch in progress.
struct Launch {
    const LaunchCfg* cfg = nullptr;
    void (*run)(void*) = nullptr;
    void* ctx = nullptr;
    int nthreads = 0, done = 0, at_barrier = 0, bar_count = 0;
    const char* bar_file = "";
    int bar_line = 0;
    bool rejected = false;
    ThreadState threads[kMaxThreads];
    Warp warps[kMaxThreads / 32];
    std::vector<int> order;
    int pos = 0;  // the index into `order` of the thread running in this pass
    // shared memory: [0, dyn) dynamic, then static slots; bytes below `dirty` may have been
    // written by the previous block and are refilled
    size_t dyn = 0, top = 0, dirty = 0;
    const char* coll_file = "";  // the warp collective being combined (for reports)
    int coll_line = 0;
    // make emu-tsan: __syncthreads' two objects, used in turn, so that a thread already at the
    // next barrier cannot order the threads still leaving this one; the barrier count picks one
    char tsan_bar[2] = {};
    unsigned bar_serial = 0;
};
Launch L;
bool g_in_kernel = false;
void* g_sched_sp = nullptr;
#if EMU_ASAN
void* g_sched_fake = nullptr;  // ASan's bookkeeping of the scheduler's stack
bool g_from_sched = false;     // the running fiber was entered from the scheduler, not a fiber
const void* g_main_stack_bottom = nullptr;
size_t g_main_stack_size = 0;
#endif
alignas(64) unsigned char g_smem[kSmemOptin + 4096];
std::unordered_map<const void*, int> g_max_dyn_smem;  // cudaFuncSetAttribute

enum Order { kForward, kReverse, kRandom };
struct Options {
    Order order = kForward;
    uint64_t seed = 1;
};

const Options& options() {
    static const Options o = [] {
        Options r;
        if (const char* e = std::getenv("CUDA_EMU_ORDER")) {
            if (!std::strcmp(e, "forward"))
                r.order = kForward;
            else if (!std::strcmp(e, "reverse"))
                r.order = kReverse;
            else if (!std::strcmp(e, "random"))
                r.order = kRandom;
            else {
                std::fprintf(stderr, "error: CUDA_EMU_ORDER=%s: expected forward, reverse or random\n", e);
                std::exit(1);
            }
        }
        if (const char* e = std::getenv("CUDA_EMU_SEED")) r.seed = parse_env_u64("CUDA_EMU_SEED", e);
        return r;
    }();
    return o;
}

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
uint64_t g_rng = 0;

void shuffle(std::vector<int>& v) {
    for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[splitmix(g_rng) % i]);
}

ThreadState& cur() {
    return *static_cast<ThreadState*>(g_thread);
}

// ---- make emu-tsan: what orders CUDA threads, told to ThreadSanitizer (no-ops otherwise) ---
char g_tsan_block = 0, g_tsan_thread_end = 0;  // released by the host at a block's start; by each thread at its end
void* g_tsan_host = nullptr;                   // the OS thread's own context: the host's code
#if EMU_TSAN
void tsan_acquire(const void* a) {
    __tsan_acquire(const_cast<void*>(a));
}
void tsan_release(const void* a) {
    __tsan_release(const_cast<void*>(a));
}
void tsan_switch(void* fiber) {
    __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
}
void tsan_new_fiber(ThreadState& t) {
    static char names[kMaxThreads][24];
    if (t.tsan_fiber) return;  // kept for the thread of the same index in the next block
    t.tsan_fiber = __tsan_create_fiber(0);
    std::snprintf(names[t.linear], sizeof names[0], "CUDA thread %d", t.linear);
    __tsan_set_fiber_name(t.tsan_fiber, names[t.linear]);
}
// A block starts after the host's work and the blocks before it (the host acquires what their
// threads released at their end, refills the shared memory, then releases to the new block's
// threads): blocks, which the emulator runs one after another, are not checked against each other.
void tsan_block_begin() {
    if (!g_tsan_host) g_tsan_host = __tsan_get_current_fiber();
    tsan_acquire(&g_tsan_thread_end);
}
void tsan_block_ready() {
    tsan_release(&g_tsan_block);
}
#else
void tsan_acquire(const void*) {}
void tsan_release(const void*) {}
void tsan_switch(void*) {}
void tsan_new_fiber(ThreadState&) {}
void tsan_block_begin() {}
void tsan_block_ready() {}
#endif

std::string thread_name(const ThreadState& t) {
    char b[64];
    std::snprintf(b, sizeof b, "(%u,%u,%u)", t.idx.x, t.idx.y, t.idx.z);
    return b;
}

// ---- context switch ---------------------------------------------------------------------
// emu_switch(save, to): saves the callee-saved registers and the stack pointer into *save,
// then continues on the stack `to` (x86-64 System V; ucontext elsewhere would do the same).
extern "C" void emu_switch(void** save, void* to);
extern "C" void emu_trampoline();
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch,.-emu_switch
.globl emu_trampoline
.type emu_trampoline,@function
emu_trampoline:
    .cfi_startproc
    .cfi_undefined rip
    movq %rbx, %rdi
    call emu_fiber_main
    ud2
    .cfi_endproc
.size emu_trampoline,.-emu_trampoline
)");
#if !defined(__x86_64__)
#error "cuda_emu: the fiber switch is written for x86-64"
#endif

void to_fiber(ThreadState& t) {
    g_thread = &t;
    tsan_switch(t.tsan_fiber);
#if EMU_ASAN
    g_from_sched = true;
    __sanitizer_start_switch_fiber(&g_sched_fake, t.stack + kGuardBytes, kStackBytes);
#endif
    emu_switch(&g_sched_sp, t.sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(g_sched_fake, nullptr, nullptr);
#endif
}

void to_scheduler(ThreadState& t, bool finished) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &t.asan_fake, g_main_stack_bottom, g_main_stack_size);
#else
    (void)finished;
#endif
    tsan_switch(g_tsan_host);
    emu_switch(&t.sp, g_sched_sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(t.asan_fake, nullptr, nullptr);
#endif
}

// From fiber `from` (its thread finished or waiting) straight to fiber `to`.
void fiber_to_fiber(ThreadState& from, ThreadState& to, bool finished) {
    g_thread = &to;
    tsan_switch(to.tsan_fiber);
#if EMU_ASAN
    g_from_sched = false;
    __sanitizer_start_switch_fiber(finished ? nullptr : &from.asan_fake, to.stack + kGuardBytes, kStackBytes);
#else
    (void)finished;
#endif
    emu_switch(&from.sp, to.sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(from.asan_fake, nullptr, nullptr);
#endif
}

// The next runnable thread after the running one in this pass, or null at the pass's end.
ThreadState* next_in_pass() {
    const int n = (int)L.order.size();
    while (++L.pos < n) {
        ThreadState& u = L.threads[L.order[L.pos]];
        if (u.state == kRunnable) return &u;
    }
    return nullptr;
}

// The running thread stops (it waits, or `finished`): the pass goes on, or back to the scheduler.
void leave(ThreadState& t, bool finished) {
    if (ThreadState* next = L.rejected ? nullptr : next_in_pass())
        fiber_to_fiber(t, *next, finished);
    else
        to_scheduler(t, finished);
}

void fiber_start(ThreadState& t) {
    if (!t.stack) {
        void* m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            std::fprintf(stderr, "cuda-emu: error: cannot map a fiber stack\n");
            std::abort();
        }
        mprotect(m, kGuardBytes, PROT_NONE);  // overflow faults instead of corrupting
        t.stack = static_cast<char*>(m);
    }
    // initial frame, as emu_switch pops it: r15 r14 r13 r12 rbx(=&t) rbp, return to the
    // trampoline; the top is 16-byte aligned so the trampoline's call is ABI-aligned. Each
    // thread's top is a cache line lower than the last's: at the same page offset every fiber's
    // frames fell in the same cache sets and evicted each other at each switch (5 % of the time).
    uintptr_t top = reinterpret_cast<uintptr_t>(t.stack) + kGuardBytes + kStackBytes - (t.linear & 63) * 64;
    void** sp = reinterpret_cast<void**>(top - 7 * sizeof(void*));
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[4] = &t;
    sp[6] = reinterpret_cast<void*>(&emu_trampoline);
    t.sp = sp;
    t.asan_fake = nullptr;
    tsan_new_fiber(t);
}

void thread_exit(ThreadState& t);

}  // namespace

extern "C" void emu_fiber_main(ThreadState* t) {
#if EMU_ASAN
    // the scheduler's stack, to switch back to (entered from a fiber: that fiber's, not wanted)
    if (g_from_sched)
        __sanitizer_finish_switch_fiber(nullptr, &g_main_stack_bottom, &g_main_stack_size);
    else
        __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    tsan_acquire(&g_tsan_block);  // the host's work and the blocks before this one
    try {
        L.run(L.ctx);
    } catch (const LaunchRejected&) {
        L.rejected = true;
    }
    tsan_release(&g_tsan_thread_end);  // before the next block and the host's work after the kernel
    if (!L.rejected) thread_exit(*t);
    leave(*t, true);
    __builtin_unreachable();
}

namespace {

void yield() {
    leave(cur(), false);
}

std::string waiting_report() {
    std::string s;
    int shown = 0;
    for (int i = 0; i < L.nthreads && shown < 6; i++) {
        const ThreadState& t = L.threads[i];
        if (t.state != kBarrier && t.state != kWarp) continue;
        char b[256];
        if (t.state == kBarrier)
            std::snprintf(b, sizeof b, "\n  thread %s waits at __syncthreads %s:%d", thread_name(t).c_str(), t.file,
                          t.line);
        else
            std::snprintf(b, sizeof b, "\n  thread %s waits at %s (mask 0x%08x) %s:%d", thread_name(t).c_str(), t.what,
                          t.mask, t.file, t.line);
        s += b;
        shown++;
    }
    return s;
}

void run_block() {
    const int n = L.nthreads;
    const dim3 bd = g_block_dim;
    for (int w = 0; w < (n + 31) / 32; w++) {
        int lanes = std::min(32, n - 32 * w);
        L.warps[w] = Warp{lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u, 0, 0};
    }
    for (int i = 0; i < n; i++) {
        ThreadState& t = L.threads[i];
        t.idx = {i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
        t.linear = i;
        t.state = kRunnable;
        fiber_start(t);
    }
    L.done = L.at_barrier = 0;
    g_block_serial++;
    // shared memory reads as 0xFF (NaN / -1) until written in this block
#if EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(g_smem, sizeof g_smem);
#endif
    tsan_block_begin();
    static const bool filled = (std::memset(g_smem, 0xFF, sizeof g_smem), true);  // once; then what was used
    (void)filled;
    std::memset(g_smem, 0xFF, L.dirty);
    tsan_block_ready();
    L.top = L.dirty = L.dyn;
#if EMU_ASAN
    ASAN_POISON_MEMORY_REGION(g_smem + L.dyn, sizeof g_smem - L.dyn);
#endif
    if (options().order == kRandom) shuffle(L.order);
    while (L.done < n) {
        // a pass: the fibers hand over to each other in order; the last comes back here
        L.pos = -1;
        ThreadState* first = next_in_pass();
        if (!first) {
            g_thread = nullptr;
            fail(L.cfg->file, L.cfg->line, "deadlock in block (%u,%u,%u): no thread can continue%s", g_block_idx.x,
                 g_block_idx.y, g_block_idx.z, waiting_report().c_str());
        }
        to_fiber(*first);
        if (L.rejected) return;
        if (options().order == kRandom) shuffle(L.order);
    }
    g_thread = nullptr;
}

void thread_exit(ThreadState& t) {
    if (L.at_barrier > 0)
        fail(L.bar_file, L.bar_line, "thread %s exits while %d thread(s) wait at this __syncthreads",
             thread_name(t).c_str(), L.at_barrier);
    Warp& w = L.warps[t.linear >> 5];
    const int lane = t.linear & 31;
    for (int l = 0; l < 32; l++) {
        const ThreadState& u = L.threads[(t.linear & ~31) + l];
        if ((w.arrived >> l & 1) && (u.mask >> lane & 1))
            fail(u.file, u.line, "%s: mask 0x%08x names lane %d, which exits without joining (thread %s)", u.what,
                 u.mask, lane, thread_name(u).c_str());
    }
    w.done |= 1u << lane;
    t.state = kDone;
    L.done++;
}

const char* order_name() {
    switch (options().order) {
        case kReverse:
            return "reverse";
        case kRandom:
            return "random";
        default:
            return "forward";
    }
}

}  // namespace

// ---- reports ----------------------------------------------------------------------------
void report_line(const char* file, int line, const char* suffix, const char* fmt, va_list ap) {
    std::fflush(stdout);
    char msg[4096];
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    std::fprintf(stderr, "cuda-emu: error: %s:%d: %s%s\n", file, line, msg, suffix);
}

void fail(const char* file, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report_line(file, line, "", fmt, ap);
    va_end(ap);
    if (g_in_kernel) {
        std::fprintf(stderr, "  in the kernel launched at %s:%d <<<(%u,%u,%u), (%u,%u,%u)>>>, block (%u,%u,%u)",
                     L.cfg->file, L.cfg->line, g_grid_dim.x, g_grid_dim.y, g_grid_dim.z, g_block_dim.x, g_block_dim.y,
                     g_block_dim.z, g_block_idx.x, g_block_idx.y, g_block_idx.z);
        if (g_thread) std::fprintf(stderr, ", thread %s", thread_name(cur()).c_str());
        std::fprintf(stderr, ", thread order %s\n", order_name());
    }
    std::fputs(replay_context().c_str(), stderr);
    std::fflush(stderr);
    std::abort();
}

// ---- barriers ---------------------------------------------------------------------------
int block_barrier(const char* file, int line, int pred) {
    ThreadState& t = cur();
    if (L.done > 0) {
        for (int i = 0; i < L.nthreads; i++)
            if (L.threads[i].state == kDone)
                fail(file, line, "__syncthreads reached after thread %s has exited (it never arrives)",
                     thread_name(L.threads[i]).c_str());
    }
    if (L.at_barrier == 0) {
        L.bar_file = file, L.bar_line = line, L.bar_count = 0;
    } else if (L.bar_line != line || std::strcmp(L.bar_file, file) != 0) {
        fail(file, line, "divergent __syncthreads: other threads wait at %s:%d", L.bar_file, L.bar_line);
    }
    L.bar_count += pred;
    t.state = kBarrier;
    t.file = file, t.line = line;
    t.tsan_bar = L.bar_serial & 1;
    tsan_release(&L.tsan_bar[t.tsan_bar]);
    if (++L.at_barrier == L.nthreads) {
        for (int i = 0; i < L.nthreads; i++) {
            L.threads[i].state = kRunnable;
            L.threads[i].barrier_result = L.bar_count;
        }
        L.at_barrier = 0;
        L.bar_serial++;
    } else {
        yield();
    }
    tsan_acquire(&L.tsan_bar[t.tsan_bar]);  // every thread's work before the barrier
    return t.barrier_result;
}

// ---- warp collectives -------------------------------------------------------------------
int lane_id() {
    return cur().linear & 31;
}

unsigned active_lanes() {
    const Warp& w = L.warps[cur().linear >> 5];
    return w.exists & ~w.done;
}

uint64_t warp_collective(const char* file, int line, const char* what, unsigned mask, uint64_t in, uint64_t param,
                         WarpCombine combine) {
    ThreadState& t = cur();
    const int lane = t.linear & 31, base = t.linear & ~31;
    Warp& w = L.warps[t.linear >> 5];
    if (!(mask >> lane & 1)) fail(file, line, "%s: mask 0x%08x leaves out the calling lane %d", what, mask, lane);
    if (unsigned missing = mask & ~w.exists)
        fail(file, line, "%s: mask 0x%08x names lane %d, which does not exist (%d threads per block)", what, mask,
             __builtin_ctz(missing), L.nthreads);
    if (unsigned exited = mask & w.done)
        fail(file, line, "%s: mask 0x%08x names lane %d, which has exited", what, mask, __builtin_ctz(exited));
    t.state = kWarp;
    t.file = file, t.line = line, t.what = what;
    t.mask = mask, t.in = in, t.param = param, t.combine = combine;
    w.arrived |= 1u << lane;
    // Of the warp collectives only __syncwarp orders the lanes' memory accesses (the one CUDA's
    // programming guide promises memory ordering for); shuffles, votes, ldmatrix and mma.sync
    // exchange registers.
    const bool orders = combine == sync_combine;
    if (orders) tsan_release(&t.tsan_arrive);
    if ((w.arrived & mask) != mask) {
        yield();
        if (orders) tsan_acquire(&w.tsan_done[t.tsan_slot]);  // the other lanes' work before it
        return t.out;
    }
    // every named lane has arrived: they must all be in this same collective
    uint64_t ins[32] = {}, params[32] = {}, outs[32] = {};
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        const ThreadState& u = L.threads[base + l];
        if (u.mask != mask || u.combine != combine)
            fail(file, line, "%s (mask 0x%08x) meets lane %d in %s (mask 0x%08x) at %s:%d", what, mask, l, u.what,
                 u.mask, u.file, u.line);
        ins[l] = u.in;
        params[l] = u.param;
        if (orders) tsan_acquire(&u.tsan_arrive);
    }
    if (orders) {
        const unsigned slot = w.tsan_next++ % kTsanSlots;
        tsan_release(&w.tsan_done[slot]);
        for (int l = 0; l < 32; l++)
            if (mask >> l & 1) L.threads[base + l].tsan_slot = slot;
    }
    L.coll_file = file, L.coll_line = line;
    combine(ins, params, outs, mask);
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        ThreadState& u = L.threads[base + l];
        u.out = outs[l];
        u.state = kRunnable;
    }
    w.arrived &= ~mask;
    return t.out;
}

void shfl_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask) {
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        const int kind = (int)(param[l] & 0xff), op = (int)(unsigned)(param[l] >> 8), width = (int)(param[l] >> 40);
        const int seg = l & ~(width - 1);
        int src = l;
        switch (kind) {
            case kShflIdx:
                src = seg + (op & (width - 1));
                break;
            case kShflUp:
                src = l - op < seg ? l : l - op;
                break;
            case kShflDown:
                src = l + op >= seg + width ? l : l + op;
                break;
            default:
                src = (l ^ op) >= seg + width ? l : (l ^ op);
                break;
        }
        if (!(mask >> src & 1))
            fail(L.coll_file, L.coll_line, "shuffle: lane %d reads lane %d, which is not in the mask 0x%08x", l, src,
                 mask);
        out[l] = in[src];
    }
}

void ballot_combine(const uint64_t* in, const uint64_t*, uint64_t* out, unsigned mask) {
    uint64_t b = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1) && in[l]) b |= 1ull << l;
    for (int l = 0; l < 32; l++) out[l] = b;
}

void sync_combine(const uint64_t*, const uint64_t*, uint64_t*, unsigned) {}

void reduce_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned mask) {
    const int lead = __builtin_ctz(mask);
    uint32_t r = (uint32_t)in[lead];
    for (int l = lead + 1; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        uint32_t v = (uint32_t)in[l];
        r = param[lead] == 0 ? r + v : param[lead] == 1 ? std::min(r, v) : std::max(r, v);
    }
    for (int l = 0; l < 32; l++) out[l] = r;
}

void match_combine(const uint64_t* in, const uint64_t*, uint64_t* out, unsigned mask) {
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        uint64_t m = 0;
        for (int k = 0; k < 32; k++)
            if ((mask >> k & 1) && in[k] == in[l]) m |= 1ull << k;
        out[l] = m;
    }
}

// d = a b + c for the fragments the lanes posted (MmaOperands), a and b already gathered:
// the C and D layouts are the same for every shape (c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..));
// products exact in fp32, summed in k order onto C.
template <int K>
void mma_accumulate(const uint64_t* in, uint64_t* out, const float (&a)[16][K], const float (&b)[K][8]) {
    float c[16][8];
    for (int l = 0; l < 32; l++) {
        const MmaOperands& o = *reinterpret_cast<const MmaOperands*>(in[l]);
        for (int i = 0; i < 4; i++) c[l / 4 + 8 * (i >> 1)][2 * (l % 4) + (i & 1)] = o.d[i];
    }
    for (int l = 0; l < 32; l++) {
        const MmaOperands& o = *reinterpret_cast<const MmaOperands*>(in[l]);
        for (int i = 0; i < 4; i++) {
            const int r = l / 4 + 8 * (i >> 1), n = 2 * (l % 4) + (i & 1);
            float s = c[r][n];
            for (int k = 0; k < K; k++) s += a[r][k] * b[k][n];
            o.d[i] = s;
        }
        out[l] = 0;
    }
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: each lane posts a pointer to its
// fragments (MmaOperands); the matrices are gathered with the PTX ISA's layouts
// ("Matrix Fragments for mma.m16n8k16 with floating point type"; g = lane / 4, t = lane % 4):
//   A 16x16: a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..)
//   B 16x8:  b[0] = (2t..2t+1, g), b[1] = (2t+8.., g)
//   C 16x8:  c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..)
// each 32-bit register holding the lower column (A) or row (B) in its low half.
void mma_combine(const uint64_t* in, const uint64_t*, uint64_t* out, unsigned) {
    float a[16][16], b[16][8];
    auto half = [](uint32_t r, int hi) { return bf2f((unsigned short)(hi ? r >> 16 : r & 0xffffu)); };
    for (int l = 0; l < 32; l++) {
        const MmaOperands& o = *reinterpret_cast<const MmaOperands*>(in[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; i++)
            for (int h = 0; h < 2; h++) a[g + 8 * (i & 1)][2 * t + h + 8 * (i >> 1)] = half(o.a[i], h);
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < 2; h++) b[2 * t + h + 8 * i][g] = half(o.b[i], h);
    }
    mma_accumulate(in, out, a, b);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, the layouts of the PTX ISA's "Matrix
// Fragments for mma.m16n8k8" for .tf32 (g = lane / 4, t = lane % 4):
//   A 16x8: a[0] = (g, t), a[1] = (g+8, t), a[2] = (g, t+4), a[3] = (g+8, t+4)
//   B 8x8:  b[0] = (t, g), b[1] = (t+4, g)
//   C 16x8: as m16n8k16's
// Only an operand's tf32 bits count (its 13 low mantissa bits are ignored). The kernels round
// their operands with cvt.rna.tf32 first, so what a GPU does with the low bits is no matter.
void mma_tf32_combine(const uint64_t* in, const uint64_t*, uint64_t* out, unsigned) {
    float a[16][8], b[8][8];
    auto tf32 = [](uint32_t r) {
        r &= 0xffffe000u;
        float f;
        std::memcpy(&f, &r, 4);
        return f;
    };
    for (int l = 0; l < 32; l++) {
        const MmaOperands& o = *reinterpret_cast<const MmaOperands*>(in[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; i++) a[g + 8 * (i & 1)][t + 4 * (i >> 1)] = tf32(o.a[i]);
        for (int i = 0; i < 2; i++) b[t + 4 * i][g] = tf32(o.b[i]);
    }
    mma_accumulate(in, out, a, b);
}

// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 (the PTX ISA's "Warp-level matrix load
// instruction: ldmatrix"): each lane posts its row address and its four destination registers
// (LdmatrixOperands); the rows are read here, once every lane has arrived.
void ldmatrix_combine(const uint64_t* in, const uint64_t* param, uint64_t* out, unsigned) {
    uint16_t m[4][8][8];  // matrix, row, column
    for (int l = 0; l < 32; l++) {
        const auto* row = static_cast<const unsigned char*>(reinterpret_cast<const LdmatrixOperands*>(in[l])->row);
        if (param[l] != param[0]) fail(L.coll_file, L.coll_line, "ldmatrix: lane %d and lane 0 disagree on .trans", l);
        if (row < g_smem || row + 16 > g_smem + L.top)
            fail(L.coll_file, L.coll_line, "ldmatrix: lane %d's row address %p is not in the block's shared memory", l,
                 (const void*)row);
        if ((row - g_smem) % 16)
            fail(L.coll_file, L.coll_line, "ldmatrix: lane %d's row address %p is not 16-byte aligned", l,
                 (const void*)row);
        std::memcpy(m[l / 8][l % 8], row, 16);
    }
    const bool trans = param[0] != 0;
    for (int l = 0; l < 32; l++) {
        const LdmatrixOperands& o = *reinterpret_cast<const LdmatrixOperands*>(in[l]);
        const int g = l / 4, c = 2 * (l % 4);
        for (int j = 0; j < 4; j++) {
            const uint16_t lo = trans ? m[j][c][g] : m[j][g][c], hi = trans ? m[j][c + 1][g] : m[j][g][c + 1];
            o.r[j] = (uint32_t)hi << 16 | lo;
        }
        out[l] = 0;
    }
}

// ---- shared memory ----------------------------------------------------------------------
void* dynamic_shared() {
    return g_smem;
}

void* shared_alloc(size_t bytes, size_t align, const char* file, int line) {
    align = std::max<size_t>(align, 16);
    size_t off = (L.top + (EMU_ASAN ? 32 : 0) + align - 1) & ~(align - 1);  // ASan: a redzone between slots
    if (off + bytes - L.dyn > kStaticSmemLimit)
        fail(file, line, "static __shared__ memory of the kernel exceeds %zu bytes", kStaticSmemLimit);
    if (off + bytes > kSmemOptin) fail(file, line, "static + dynamic shared memory exceeds %zu bytes", kSmemOptin);
#if EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(g_smem + off, bytes);
#endif
    L.top = off + bytes;
    L.dirty = std::max(L.dirty, L.top);
    return g_smem + off;
}

void launch_bounds(const char* file, int line, int max_threads, int) {
    if (L.nthreads <= max_threads) return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "cuda-emu: error: %s:%d: launch of %d threads per block exceeds __launch_bounds__(%d) of the kernel "
                 "at %s:%d (cudaErrorLaunchOutOfResources)\n",
                 L.cfg->file, L.cfg->line, L.nthreads, max_threads, file, line);
    throw LaunchRejected{};
}

// ---- launch -----------------------------------------------------------------------------
namespace {
cudaError_t reject(const LaunchCfg& cfg, cudaError_t err, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
cudaError_t reject(const LaunchCfg& cfg, cudaError_t err, const char* fmt, ...) {
    std::fflush(stdout);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "cuda-emu: error: %s:%d: launch rejected: %s (%s)\n", cfg.file, cfg.line, msg,
                 cudaGetErrorName(err));
    std::fputs(replay_context().c_str(), stderr);
    set_last_error(err);
    return err;
}
}  // namespace

cudaError_t set_max_dynamic_smem(const void* kernel, int bytes) {
    if (bytes < 0 || (size_t)bytes > kSmemOptin) return cudaErrorInvalidValue;
    g_max_dyn_smem[kernel] = bytes;
    return cudaSuccess;
}

namespace {

// The launch configuration as CUDA checks it at the launch: a report and the error, or cudaSuccess.
cudaError_t launch_error(const LaunchCfg& cfg, const void* kernel) {
    if (!has_kernel_image())
        return reject(cfg, cudaErrorNoKernelImageForDevice, "the program holds no code for this device's architecture");
    const dim3 g = cfg.grid, b = cfg.block;
    const unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    if (nthreads == 0 || nthreads > kMaxThreads || b.x > 1024 || b.y > 1024 || b.z > 64)
        return reject(cfg, cudaErrorInvalidConfiguration,
                      "block (%u,%u,%u) = %llu threads (at most 1024; z at most 64)", b.x, b.y, b.z, nthreads);
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
        return reject(cfg, cudaErrorInvalidConfiguration, "grid (%u,%u,%u) (each at least 1; y, z at most 65535)", g.x,
                      g.y, g.z);
    if (cfg.smem > kDynSmemDefault) {
        auto it = g_max_dyn_smem.find(kernel);
        size_t allowed = it == g_max_dyn_smem.end() ? kDynSmemDefault : (size_t)it->second;
        if (cfg.smem > allowed)
            return reject(cfg, cudaErrorInvalidValue,
                          "%zu bytes of dynamic shared memory; above 48 KB needs cudaFuncSetAttribute(kernel, "
                          "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (allowed now: %zu)",
                          cfg.smem, allowed);
    }
    return cudaSuccess;
}

// Runs `run(ctx)` as every thread of every block; the configuration was checked.
void run_kernel(const LaunchCfg& cfg, void (*run)(void*), void* ctx) {
    if (g_in_kernel) fail(cfg.file, cfg.line, "kernel launch from inside a kernel (not emulated)");
    const dim3 g = cfg.grid, b = cfg.block;
    const unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    const Options& opt = options();
    if (g_rng == 0) g_rng = opt.seed * 0x2545F4914F6CDD1Dull + 1;
    L.cfg = &cfg, L.run = run, L.ctx = ctx;
    L.nthreads = (int)nthreads;
    L.rejected = false;
    L.dyn = (cfg.smem + 15) & ~size_t(15);
    L.order.resize(nthreads);
    for (int i = 0; i < (int)nthreads; i++) L.order[i] = opt.order == kReverse ? (int)nthreads - 1 - i : i;
    g_block_dim = b;
    g_grid_dim = g;
    g_in_kernel = true;
    const unsigned long long nblocks = (unsigned long long)g.x * g.y * g.z;
    std::vector<unsigned> perm;
    if (opt.order == kRandom) {
        perm.resize(nblocks);
        for (unsigned long long i = 0; i < nblocks; i++) perm[i] = (unsigned)i;
        for (size_t i = perm.size(); i > 1; i--) std::swap(perm[i - 1], perm[splitmix(g_rng) % i]);
    }
    for (unsigned long long k = 0; k < nblocks; k++) {
        unsigned long long bl = opt.order == kForward ? k : opt.order == kReverse ? nblocks - 1 - k : perm[k];
        g_block_idx = {(unsigned)(bl % g.x), (unsigned)((bl / g.x) % g.y),
                       (unsigned)(bl / ((unsigned long long)g.x * g.y))};
        run_block();
        if (L.rejected) {
            set_last_error(cudaErrorLaunchOutOfResources);
            break;
        }
    }
    g_in_kernel = false;
    g_thread = nullptr;
    tsan_acquire(&g_tsan_thread_end);  // every thread's work, before the host goes on
}

}  // namespace

void launch(const LaunchCfg& cfg, const void* kernel, std::shared_ptr<void> ctx, void (*check)(const LaunchCfg&, void*),
            void (*run)(void*)) {
    if (!stream_valid(cfg.stream)) {
        reject(cfg, cudaErrorInvalidResourceHandle, "unknown or destroyed stream");
        return;
    }
    if (launch_error(cfg, kernel)) {
        invalidate_capture(cfg.stream);
        return;
    }
    // the node's configuration is checked again at each replay (cudaFuncSetAttribute may change)
    cudaError_t e = enqueue(cfg.stream, cfg.file, cfg.line, "kernel launch", [cfg, kernel, ctx, check, run] {
        if (in_replay() && launch_error(cfg, kernel)) return;
        check(cfg, ctx.get());
        run_kernel(cfg, run, ctx.get());
    });
    if (e) set_last_error(e);
}

void bad_kernel_pointer(const LaunchCfg& cfg, int index, const void* p) {
    fail(cfg.file, cfg.line, "kernel argument %d is %p, which is not device memory (a host pointer, or freed)",
         index + 1, p);
}

}  // namespace emu

long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
