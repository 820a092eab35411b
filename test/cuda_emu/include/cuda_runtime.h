// CUDA runtime API of the CPU emulation (runtime.cpp): device memory is host memory from
// malloc, tracked allocation by allocation so that every copy, memset, library operand and
// kernel pointer argument can be checked against it; work runs synchronously at the call, or
// is recorded while its stream captures a CUDA graph and runs at each cudaGraphLaunch.
#pragma once

#include "cuda_emu.h"

enum cudaError_t : int {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorNotSupported = 801,
    cudaErrorSystemNotReady = 802,
    cudaErrorSystemDriverMismatch = 803,
    cudaErrorCompatNotSupportedOnDevice = 804,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    size_t totalConstMem;
    int major, minor;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    size_t sharedMemPerBlockOptin;
    int memoryBusWidth;
};
struct cudaFuncAttributes {
    int binaryVersion, ptxVersion;  // the architecture of the code the device runs (90: sm_90)
    int maxThreadsPerBlock, numRegs;
    size_t sharedSizeBytes;
};

typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUgraphNode_st* cudaGraphNode_t;
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2

// The call site (file, line) of the calls that take device ranges, for the reports.
#define EMU_SITE const char *emu_file = __builtin_FILE(), int emu_line = __builtin_LINE()

const char* cudaGetErrorString(cudaError_t err);
const char* cudaGetErrorName(cudaError_t err);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

// A machine whose GPU cannot run the program, pretended for the tests (README.md here):
// CUDA_EMU_DRIVER=X.Y a driver older than the runtime (13.0), or `none` (no driver installed),
// fails these, the device and memory calls, with cudaErrorInsufficientDriver, as CUDA's runtime
// does; CUDA_EMU_INIT_ERROR=N fails them with error N (100: no device, 802: an NVSwitch system
// whose fabric manager is not running, 803: a driver upgraded without a reboot, ...);
// CUDA_VISIBLE_DEVICES, read as CUDA reads it, can hide the one device (cudaErrorNoDevice);
// CUDA_EMU_CC=X.Y is the device's compute capability (default 9.0); below 8.0, or with
// CUDA_EMU_NO_IMAGE=1, the program holds no code for the device: cudaFuncGetAttributes and every
// launch fail with cudaErrorNoKernelImageForDevice.
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev);
cudaError_t cudaDeviceSynchronize(EMU_SITE);
cudaError_t cudaDeviceReset();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

// cudaMalloc, cudaFree, cudaGraphInstantiate and cudaGraphExecDestroy have C linkage, as CUDA's:
// the CUDA test programs wrap them by name (ld --wrap, test/cuda_testlib.cu) to count the device
// memory and the graphs the backend holds.
extern "C" cudaError_t cudaMalloc(void** p, size_t bytes, EMU_SITE);
template <class T>
cudaError_t cudaMalloc(T** p, size_t bytes, EMU_SITE) {
    return cudaMalloc(reinterpret_cast<void**>(p), bytes, emu_file, emu_line);
}
extern "C" cudaError_t cudaFree(void* p, EMU_SITE);
cudaError_t cudaMallocHost(void** p, size_t bytes, EMU_SITE);
template <class T>
cudaError_t cudaMallocHost(T** p, size_t bytes, EMU_SITE) {
    return cudaMallocHost(reinterpret_cast<void**>(p), bytes, emu_file, emu_line);
}
cudaError_t cudaFreeHost(void* p, EMU_SITE);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, EMU_SITE);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr,
                            EMU_SITE);
cudaError_t cudaMemset(void* p, int value, size_t bytes, EMU_SITE);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr, EMU_SITE);

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* kernel);
template <class... P>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, void (*kernel)(P...)) {
    return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(kernel));
}
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// Streams and events (stream.cpp): work runs at the call, so they keep order and time, except
// while a stream captures a graph: then its work is recorded (see test/cuda_emu/README.md).
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s, EMU_SITE);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0, EMU_SITE);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr, EMU_SITE);
cudaError_t cudaEventSynchronize(cudaEvent_t e, EMU_SITE);
cudaError_t cudaEventQuery(cudaEvent_t e, EMU_SITE);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Stream capture and graphs (stream.cpp), CUDA 12's forms.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode, EMU_SITE);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph, EMU_SITE);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0,
                                            EMU_SITE);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s, EMU_SITE);
extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
// With nodes null, *numNodes = the graph's node count (one per kernel, GEMM, memset, copy, event,
// cub or NCCL call recorded); else up to *numNodes opaque handles (not usable with other calls).
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes);

#undef EMU_SITE
