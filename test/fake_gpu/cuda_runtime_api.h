// A fake CUDA runtime's header (test/test_gpu_check.sh): the declarations of the calls
// scripts/gpu_check.sh's probe makes, as the toolkit's cuda_runtime_api.h declares them, and only
// those (a probe calling anything else does not compile against it).
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorSystemNotReady = 802,
    cudaErrorSystemDriverMismatch = 803,
} cudaError_t;
struct cudaDeviceProp {  // the real one has many more fields after these
    char name[256];
    int major, minor;
};
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaFree(void* devPtr);
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
#ifdef __cplusplus
}
#endif
