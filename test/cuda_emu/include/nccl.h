// NCCL stand-in for the CPU emulation of CUDA (test/cuda_emu/src/nccl.cpp): the calls the CUDA
// backend's data-parallel path makes (cuda/nccl.cu), with NCCL's signatures and in-place rules.
// One process per rank as with NCCL; the collectives run over MPI (MPI_COMM_WORLD of the
// launcher) on the emulated device memory, which is host memory. Every buffer is checked to be
// device memory large enough for the collective, as on a GPU.
#pragma once
#include <stddef.h>

#include "cuda_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_UNIQUE_ID_BYTES 128

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
} ncclResult_t;

typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct ncclComm* ncclComm_t;
typedef enum { ncclFloat32 = 7, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

const char* ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
// Groups batch collectives into one launch on a GPU; here each runs when called (or is recorded
// when its stream captures a graph), and the calls only check that groups are balanced.
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
#define EMU_SITE const char *emu_file = __builtin_FILE(), int emu_line = __builtin_LINE()
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream, EMU_SITE);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, EMU_SITE);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream, EMU_SITE);
#undef EMU_SITE
