// Data-parallel training: one process per device, launched by mpirun (or srun --mpi=pmix).
// MPI gives the process group and the CPU backend's collectives; the CUDA backend sums its
// gradients with NCCL (cuda/nccl.cu). A binary built without MPI, or started without a
// launcher, is a world of one rank and every collective here is a no-op. Under a launcher
// the collectives run at any world size, one rank included (a 1-GPU check of the NCCL path).
//
// Every rank runs the same steps and calls the same collectives in the same order. Each
// collective is watched: one that has not finished after the timeout (set_timeout) ends its
// process with a message naming it, and the launcher then ends the other ranks, so a dead or
// stuck rank never leaves the others hanging.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dist {

struct Group {
    int rank = 0, world = 1;
    int local_rank = 0;  // rank among the processes of this machine: picks the GPU
    bool mpi = false;    // MPI_Init was called
};
const Group& group();
// Joins the launcher's process group when there is one (mpirun, srun --mpi=pmix), else world 1.
void init(int* argc, char*** argv);
// Seconds a collective may take before its process ends with an error (0 = wait forever).
void set_timeout(double seconds);
void finalize();
// Ends every rank: "error: rank r/N: msg" on stderr, then MPI_Abort (world > 1).
[[noreturn]] void abort_all(const std::string& msg, int code);
// "rank r/N: " in a multi-rank run, "" otherwise (a prefix for messages).
std::string rank_prefix();

// Host collectives over Real = float or double (dist.cpp instantiates both; no-ops without a
// launcher).
template <class Real>
void allreduce_sum(Real* x, size_t n);
double sum(double x);
long long sum(long long x);
int max(int x);
// In place over a buffer of block*world elements: rank r's block gets the sum of everyone's.
template <class Real>
void reduce_scatter_sum(Real* x, size_t block);
// In place: every rank's block of x (block*world elements) is copied to every rank.
template <class Real>
void allgather(Real* x, size_t block);
// Rank 0 gets every rank's `block` elements of mine, in rank order, in all (block*world).
template <class Real>
void gather(const Real* mine, Real* all, size_t block);
void broadcast(void* bytes, size_t n);  // rank 0's bytes to every rank
void barrier();
// Throws, on every rank, when ranks hold different values of `what` (a config, a dataset).
void check_same(const std::string& what, const std::string& value);

// Marks a collective for the timeout watchdog while it runs (the NCCL path uses it too).
struct Watch {
    explicit Watch(const char* what);
    ~Watch();
};

}  // namespace dist
