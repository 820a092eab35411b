// Data-parallel collectives of the CUDA backend: NCCL over every rank of src/dist.h's process
// group (rank 0 makes the NCCL id, MPI broadcasts it). Each collective runs on the backend's
// stream and is waited for under dist::Watch, so a rank that never joins ends the others with
// the timeout's message instead of a hang. A build without NCCL (no nccl.h, or no MPI)
// trains on one GPU and says so if started under a launcher.
#include "backend_cuda.h"
#include "common.cuh"
#include "dist.h"

#ifdef HAVE_NCCL
#include <nccl.h>

#define ncclCheck(call)                                                                                      \
    do {                                                                                                     \
        ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess)                                                                               \
            throw std::runtime_error(std::string("NCCL error in ") + #call + ": " + ncclGetErrorString(r_)); \
    } while (0)

namespace {
ncclComm_t comm() {
    static ncclComm_t c = [] {
        const dist::Group& g = dist::group();
        ncclUniqueId id;
        if (g.rank == 0) ncclCheck(ncclGetUniqueId(&id));
        dist::broadcast(&id, sizeof id);
        ncclComm_t made;
        dist::Watch w("NCCL communicator setup");
        ncclCheck(ncclCommInitRank(&made, g.world, id, g.rank));
        return made;
    }();
    return c;
}

// Waits for the collective under the watchdog: NCCL calls return before the work is done.
void finish(const char* what) {
    dist::Watch w(what);
    cudaCheck(cudaStreamSynchronize(gpu::main_stream()));
}

// The communication stream: non-blocking, so it never waits for the backend's compute stream
// (gpu::main_stream) except where an event says so.
struct CommStream {
    cudaStream_t stream;
    cudaEvent_t ready;  // recorded on the compute stream after a layer's gradients
    CommStream() {
        cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    }
};
CommStream& comm_stream() {
    static CommStream s;
    return s;
}
}  // namespace

void CudaDevice::allreduce_sum_async(const std::vector<std::pair<float*, size_t>>& parts) {
    if (!dist::group().mpi) return;
    CommStream& s = comm_stream();
    ncclComm_t c = comm();  // made before the group: a communicator's setup cannot be inside one
    cudaCheck(cudaEventRecord(s.ready, gpu::main_stream()));
    cudaCheck(cudaStreamWaitEvent(s.stream, s.ready, 0));
    ncclCheck(ncclGroupStart());
    for (const auto& [p, n] : parts) ncclCheck(ncclAllReduce(p, p, n, ncclFloat, ncclSum, c, s.stream));
    ncclCheck(ncclGroupEnd());
}

void CudaDevice::allreduce_wait() {
    if (!dist::group().mpi) return;
    dist::Watch w("NCCL all-reduce");
    cudaCheck(cudaStreamSynchronize(comm_stream().stream));
}

void CudaDevice::allreduce_sum(float* x, size_t n) {
    if (!dist::group().mpi) return;
    ncclCheck(ncclAllReduce(x, x, n, ncclFloat, ncclSum, comm(), gpu::main_stream()));
    finish("NCCL all-reduce");
}

// in place: rank r's result lands in its own block of x (NCCL's in-place reduce-scatter layout)
void CudaDevice::reduce_scatter_sum(float* x, size_t block) {
    if (!dist::group().mpi) return;
    ncclCheck(
        ncclReduceScatter(x, x + dist::group().rank * block, block, ncclFloat, ncclSum, comm(), gpu::main_stream()));
    finish("NCCL reduce-scatter");
}

void CudaDevice::allgather(float* x, size_t block) {
    if (!dist::group().mpi) return;
    ncclCheck(ncclAllGather(x + dist::group().rank * block, x, block, ncclFloat, comm(), gpu::main_stream()));
    finish("NCCL all-gather");
}

#else

static void no_nccl() {
    throw std::runtime_error(
        "this build has no NCCL (nccl.h and MPI are needed at build time): the CUDA backend "
        "trains on one rank only");
}
void CudaDevice::allreduce_sum(float*, size_t) {
    if (dist::group().mpi) no_nccl();
}
void CudaDevice::reduce_scatter_sum(float*, size_t) {
    if (dist::group().mpi) no_nccl();
}
void CudaDevice::allgather(float*, size_t) {
    if (dist::group().mpi) no_nccl();
}
void CudaDevice::allreduce_sum_async(const std::vector<std::pair<float*, size_t>>&) {
    if (dist::group().mpi) no_nccl();
}
void CudaDevice::allreduce_wait() {}

#endif

void CudaDevice::use_device(int local_rank) {
    int n = 0;
    cudaCheck(cudaGetDeviceCount(&n));
    if (n > 0) cudaCheck(cudaSetDevice(local_rank % n));
}
