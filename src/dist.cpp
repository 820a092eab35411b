#include "dist.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

namespace dist {

static Group g_group;
static double g_timeout_s = 0;
// the watched collective: its deadline (steady-clock ms, 0 = none) and name
static std::atomic<int64_t> g_deadline_ms{0};
static std::atomic<const char*> g_what{""};

const Group& group() {
    return g_group;
}

std::string rank_prefix() {
    return g_group.world > 1 ? "rank " + std::to_string(g_group.rank) + "/" + std::to_string(g_group.world) + ": " : "";
}

static int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

Watch::Watch(const char* what) {
    if (g_timeout_s <= 0 || g_group.world == 1) return;
    g_what = what;
    g_deadline_ms = now_ms() + (int64_t)(g_timeout_s * 1000);
}
Watch::~Watch() {
    g_deadline_ms = 0;
}

// Ends this process when a watched collective overruns; the launcher (mpirun, srun) then ends
// the other ranks. Makes no MPI call, so it works whatever state MPI is in.
static void watchdog() {
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        int64_t d = g_deadline_ms;
        if (d == 0 || now_ms() < d) continue;
        fflush(stdout);
        fprintf(stderr,
                "error: %s%s did not finish within %g s (dist_timeout): another rank died, hangs, or runs a different "
                "config\n",
                rank_prefix().c_str(), g_what.load(), g_timeout_s);
        fflush(stderr);
        _exit(1);
    }
}

void set_timeout(double seconds) {
    static bool started = false;
    g_timeout_s = seconds;
    if (seconds > 0 && g_group.world > 1 && !started) {
        started = true;
        std::thread(watchdog).detach();
    }
}

#ifdef HAVE_MPI

// MPI errors come back as return codes (MPI_ERRORS_RETURN) and become exceptions that name the call.
#define mpiCheck(call)                                                                                   \
    do {                                                                                                 \
        int rc_ = (call);                                                                                \
        if (rc_ != MPI_SUCCESS) {                                                                        \
            char s_[MPI_MAX_ERROR_STRING];                                                               \
            int n_ = 0;                                                                                  \
            MPI_Error_string(rc_, s_, &n_);                                                              \
            throw std::runtime_error(std::string("MPI error in ") + #call + ": " + std::string(s_, n_)); \
        }                                                                                                \
    } while (0)

template <class Real>
static MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() {
    return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
    return MPI_DOUBLE;
}

void init(int* argc, char*** argv) {
    // only under a launcher: a plain run needs no MPI at run time (and starts no MPI singleton)
    bool launched = false;
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
        launched |= getenv(v) != nullptr;
    if (!launched) return;
    // stdout is the launcher's pipe: when mpirun stops reading it (it is ending the job after a
    // SIGTERM), a write must fail rather than kill the rank before its checkpoint is written
    signal(SIGPIPE, SIG_IGN);
    int provided = 0;
    mpiCheck(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    g_group.mpi = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &g_group.rank));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &g_group.world));
    MPI_Comm local;
    mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_group.rank, MPI_INFO_NULL, &local));
    mpiCheck(MPI_Comm_rank(local, &g_group.local_rank));
    MPI_Comm_free(&local);
}

void finalize() {
    if (g_group.mpi) MPI_Finalize();
    g_group.mpi = false;
}

void abort_all(const std::string& msg, int code) {
    fflush(stdout);
    fprintf(stderr, "error: %s%s\n", rank_prefix().c_str(), msg.c_str());
    fflush(stderr);
    if (g_group.mpi) MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

// large buffers in pieces: MPI counts are int
template <class Real>
void allreduce_sum(Real* x, size_t n) {
    if (!g_group.mpi) return;
    Watch w("MPI all-reduce");
    const size_t piece = 1 << 28;
    for (size_t i = 0; i < n; i += piece)
        mpiCheck(
            MPI_Allreduce(MPI_IN_PLACE, x + i, (int)std::min(piece, n - i), mpi_type<Real>(), MPI_SUM, MPI_COMM_WORLD));
}

template <class Real>
void reduce_scatter_sum(Real* x, size_t block) {
    if (!g_group.mpi) return;
    Watch w("MPI reduce-scatter");
    std::vector<Real> mine(block);
    mpiCheck(MPI_Reduce_scatter_block(x, mine.data(), (int)block, mpi_type<Real>(), MPI_SUM, MPI_COMM_WORLD));
    std::memcpy(x + g_group.rank * block, mine.data(), block * sizeof(Real));
}

template <class Real>
void allgather(Real* x, size_t block) {
    if (!g_group.mpi) return;
    Watch w("MPI all-gather");
    mpiCheck(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, (int)block, mpi_type<Real>(), MPI_COMM_WORLD));
}

template <class Real>
void gather(const Real* mine, Real* all, size_t block) {
    if (!g_group.mpi) return (void)std::memcpy(all, mine, block * sizeof(Real));
    Watch w("MPI gather");
    mpiCheck(MPI_Gather(mine, (int)block, mpi_type<Real>(), all, (int)block, mpi_type<Real>(), 0, MPI_COMM_WORLD));
}

double sum(double x) {
    allreduce_sum(&x, 1);
    return x;
}

long long sum(long long x) {
    if (!g_group.mpi) return x;
    Watch w("MPI all-reduce");
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    return x;
}

int max(int x) {
    if (!g_group.mpi) return x;
    Watch w("MPI all-reduce");
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return x;
}

void broadcast(void* bytes, size_t n) {
    if (!g_group.mpi) return;
    Watch w("MPI broadcast");
    mpiCheck(MPI_Bcast(bytes, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD));
}

void barrier() {
    if (!g_group.mpi) return;
    Watch w("MPI barrier");
    mpiCheck(MPI_Barrier(MPI_COMM_WORLD));
}

static uint64_t fnv1a(const void* data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void check_same(const std::string& what, const std::string& value) {
    if (!g_group.mpi) return;
    uint64_t mine = fnv1a(value.data(), value.size());
    std::vector<uint64_t> all(g_group.world);
    {
        Watch w("MPI all-gather");
        mpiCheck(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD));
    }
    std::string differ;
    for (int r = 1; r < g_group.world; r++)
        if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    if (!differ.empty())
        throw std::runtime_error("the " + what + " of rank(s) " + differ +
                                 " differs from rank 0's (every rank must run" + " the same config on the same data)");
}

#else  // no MPI in this build: one rank

void init(int*, char***) {
    const char* n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (n && atoi(n) > 1) {  // every rank would train alone on the whole batch: refuse
        fprintf(stderr,
                "error: started by an MPI launcher with %s ranks, but this build has no MPI (install"
                " libopenmpi-dev and rebuild)\n",
                n);
        exit(1);
    }
}
void finalize() {}
void abort_all(const std::string& msg, int code) {
    fflush(stdout);
    fprintf(stderr, "error: %s\n", msg.c_str());
    exit(code);
}
template <class Real>
void allreduce_sum(Real*, size_t) {}
template <class Real>
void reduce_scatter_sum(Real*, size_t) {}
template <class Real>
void allgather(Real*, size_t) {}
template <class Real>
void gather(const Real* mine, Real* all, size_t block) {
    std::memcpy(all, mine, block * sizeof(Real));
}
double sum(double x) {
    return x;
}
long long sum(long long x) {
    return x;
}
int max(int x) {
    return x;
}
void broadcast(void*, size_t) {}
void barrier() {}
void check_same(const std::string&, const std::string&) {}

#endif

// the parameters' types of the backends (CpuBackend<float>, <double>; the CUDA backend's float)
#define INSTANTIATE(Real)                                         \
    template void allreduce_sum(Real*, size_t);                   \
    template void reduce_scatter_sum(Real*, size_t);              \
    template void allgather(Real*, size_t);                       \
    template void gather(const Real*, Real*, size_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace dist
