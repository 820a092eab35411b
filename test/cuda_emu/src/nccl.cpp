// NCCL stand-in (include/nccl.h): one process per rank, collectives over MPI on the emulated
// device memory (host memory), run at once, or recorded while their stream captures a graph.
// Without MPI in the build only a communicator of one rank exists.
#include "nccl.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda_emu.h"
#include "emu_internal.h"
#ifdef HAVE_MPI
#include <mpi.h>
#endif

struct ncclComm {
    int rank = 0, nranks = 1;
#ifdef HAVE_MPI
    MPI_Comm mpi = MPI_COMM_NULL;
#endif
};

namespace {

int mpi_world(int* rank) {
    *rank = 0;
#ifdef HAVE_MPI
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
        int n = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        return n;
    }
#endif
    return 1;
}

// The buffers must be device memory of the collective's size, as NCCL needs on a GPU.
void check_buffers(const char* file, int line, const char* what, const void* send, size_t send_n, const void* recv,
                   size_t recv_n) {
    emu::check_device_range(file, line, what, send, send_n * sizeof(float));
    emu::check_device_range(file, line, what, recv, recv_n * sizeof(float));
}

// A collective is stream work: it runs now, or at each replay of the graph capturing the stream
// (buffers checked then). An MPI failure is ncclSystemError at the call, a report in a replay.
// With CUDA_EMU_DEFER=1 it still runs at the call, after the stream's queued work: a collective
// left queued while the host makes its own MPI calls could wait for a rank that waits for it.
ncclResult_t g_result = ncclSuccess;
ncclResult_t submit(cudaStream_t stream, const char* file, int line, const char* what,
                    std::function<ncclResult_t()> work) {
    g_result = ncclSuccess;
    cudaError_t e = emu::enqueue(stream, file, line, what, [work, what, file, line] {
        g_result = work();
        if (g_result && emu::in_replay()) emu::fail(file, line, "%s: %s", what, ncclGetErrorString(g_result));
    });
    if (!e && emu::defers(stream)) emu::run_queued(stream, file, line);
    return e ? ncclUnhandledCudaError : g_result;
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess:
            return "no error";
        case ncclInvalidArgument:
            return "invalid argument (emulated NCCL)";
        case ncclInvalidUsage:
            return "invalid usage (emulated NCCL)";
        case ncclSystemError:
            return "system error (emulated NCCL: an MPI call failed)";
        default:
            return "unhandled error (emulated NCCL)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (!id) return ncclInvalidArgument;
    std::memset(id, 0, sizeof *id);
    uint64_t tag = (uint64_t)getpid() ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
    std::memcpy(id->internal, &tag, sizeof tag);
    return ncclSuccess;
}

// Every rank must pass the id rank 0 made, its own MPI rank and the MPI world size.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    int mpi_rank;
    int world = mpi_world(&mpi_rank);
    if (!comm || nranks != world || rank != mpi_rank) return ncclInvalidArgument;
    auto* c = new ncclComm;
    c->rank = rank, c->nranks = nranks;
#ifdef HAVE_MPI
    if (world > 1) {
        uint64_t mine, first;
        std::memcpy(&mine, id.internal, sizeof mine);
        first = mine;
        if (MPI_Bcast(&first, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) return ncclSystemError;
        int same = first == mine, all = 0;
        if (MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD) != MPI_SUCCESS) return ncclSystemError;
        if (!all) return delete c, ncclInvalidUsage;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) return delete c, ncclSystemError;
    }
#else
    (void)id;
#endif
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
#ifdef HAVE_MPI
    if (comm && comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
#endif
    delete comm;
    return ncclSuccess;
}

static int g_group_depth = 0;
ncclResult_t ncclGroupStart() {
    g_group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
    return g_group_depth-- > 0 ? ncclSuccess : (g_group_depth = 0, ncclInvalidUsage);
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream, const char* file, int line) {
    if (!comm || type != ncclFloat || op != ncclSum) return ncclInvalidArgument;
    return submit(stream, file, line, "ncclAllReduce", [=]() -> ncclResult_t {
        check_buffers(file, line, "ncclAllReduce", send, count, recv, count);
        if (send != recv) std::memcpy(recv, send, count * sizeof(float));
#ifdef HAVE_MPI
        if (comm->nranks > 1 &&
            MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, comm->mpi) != MPI_SUCCESS)
            return ncclSystemError;
#endif
        return ncclSuccess;
    });
}

// send holds nranks blocks of recvcount; recv gets the sum of every rank's block `rank`
// (in place when recv == send + rank * recvcount, NCCL's rule).
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream, const char* file, int line) {
    if (!comm || type != ncclFloat || op != ncclSum) return ncclInvalidArgument;
    return submit(stream, file, line, "ncclReduceScatter", [=]() -> ncclResult_t {
        check_buffers(file, line, "ncclReduceScatter", send, recvcount * comm->nranks, recv, recvcount);
        std::vector<float> mine(recvcount);
        std::memcpy(mine.data(), (const float*)send + (size_t)comm->rank * recvcount, recvcount * sizeof(float));
#ifdef HAVE_MPI
        if (comm->nranks > 1 &&
            MPI_Reduce_scatter_block(send, mine.data(), (int)recvcount, MPI_FLOAT, MPI_SUM, comm->mpi) != MPI_SUCCESS)
            return ncclSystemError;
#endif
        std::memcpy(recv, mine.data(), recvcount * sizeof(float));
        return ncclSuccess;
    });
}

// recv gets nranks blocks of sendcount, block r from rank r (in place when send == recv + rank * sendcount).
ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream, const char* file, int line) {
    if (!comm || type != ncclFloat) return ncclInvalidArgument;
    return submit(stream, file, line, "ncclAllGather", [=]() -> ncclResult_t {
        check_buffers(file, line, "ncclAllGather", send, sendcount, recv, sendcount * comm->nranks);
        float* mine = (float*)recv + (size_t)comm->rank * sendcount;
        if (send != mine) std::memmove(mine, send, sendcount * sizeof(float));
#ifdef HAVE_MPI
        if (comm->nranks > 1 && MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)sendcount, MPI_FLOAT,
                                              comm->mpi) != MPI_SUCCESS)
            return ncclSystemError;
#endif
        return ncclSuccess;
    });
}
