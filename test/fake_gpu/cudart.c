// A fake CUDA runtime, libcudart.so (test/test_gpu_check.sh): the calls of gpu_check.sh's probe,
// answered as the real runtime answers on the machine the FAKE_* variables describe (README.md
// here): the driver's state first (no GPU, NVSwitch fabric manager down, a libcuda that does not
// fit the kernel module, a driver too old), then the devices CUDA shows (MIG instances,
// CUDA_VISIBLE_DEVICES).
#include "cuda_runtime_api.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* env(const char* name, const char* dflt) {
    const char* v = getenv(name);
    return v && *v ? v : dflt;
}

// FAKE_GPU "NAME, MEMORY, DRIVER, CC", as nvidia-smi prints it
static void gpu(char name[256], int* driver, int* major, int* minor) {
    *driver = *major = *minor = 0;
    strcpy(name, "?");
    sscanf(env("FAKE_GPU", ""), "%255[^,], %*[^,], %d.%*[^,], %d.%d", name, driver, major, minor);
}

// The major version of the libcuda.so.1 the runtime would load from LD_LIBRARY_PATH, else from a
// folder registered with ldconfig ahead of the driver's (FAKE_LDCONFIG) (cuda-compat's: a link to
// libcuda.so.VERSION), 0 if none is there (then the driver's own is loaded).
static int libcuda_on_path(void) {
    char dirs[4096], path[4352], target[256];
    snprintf(dirs, sizeof dirs, "%s:%s", env("LD_LIBRARY_PATH", ""), env("FAKE_LDCONFIG", ""));
    for (char* d = strtok(dirs, ":"); d; d = strtok(NULL, ":")) {
        snprintf(path, sizeof path, "%s/libcuda.so.1", d);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        const char* v = strstr(target, "libcuda.so.");
        if (v) return atoi(v + strlen("libcuda.so."));
    }
    return 0;
}

// The devices CUDA shows: each GPU, or with MIG on, each MIG instance (none created: none); then
// CUDA_VISIBLE_DEVICES's indices up to the first that names no device (UUIDs not modelled).
static int visible(void) {
    int n = atoi(env("FAKE_GPUS", "1"));
    if (!strcmp(env("FAKE_MIG", "Disabled"), "Enabled")) n = atoi(env("FAKE_MIG_INSTANCES", "0"));
    const char* p = getenv("CUDA_VISIBLE_DEVICES");
    if (!p) return n;
    int k = 0;
    while (*p) {
        char* end;
        long i = strtol(p, &end, 10);
        if (end == p || i < 0 || i >= n || (*end && *end != ',')) break;
        k++;
        p = *end ? end + 1 : end;
    }
    return k;
}

// cudaGetDeviceCount's answer, which every other call of the runtime starts with
static cudaError_t init(int* count) {
    char name[256];
    int driver, major, minor;
    *count = 0;
    if (getenv("FAKE_CUDA_HANG"))
        for (;;) pause();  // a driver call that never returns
    if (!strcmp(env("FAKE_SMI", "ok"), "nodev")) return cudaErrorNoDevice;
    if (!strcmp(env("FAKE_FABRIC_MANAGER", "running"), "stopped")) return cudaErrorSystemNotReady;
    gpu(name, &driver, &major, &minor);
    const int lib = libcuda_on_path(), cuda = atoi(env("FAKE_CUDA", "13.0"));
    if (lib && lib < driver) return cudaErrorSystemDriverMismatch;  // older than the kernel module
    const int need = cuda >= 13 ? 580 : cuda == 12 ? 525 : 450;   // the oldest driver of each CUDA
    if ((lib ? lib : driver) < need) return cudaErrorInsufficientDriver;
    *count = visible();
    return *count ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceCount(int* count) { return init(count); }

static cudaError_t device(int dev) {
    int n;
    cudaError_t e = init(&n);
    return e ? e : dev >= 0 && dev < n ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int dev) {
    int driver;
    cudaError_t e = device(dev);
    if (!e) gpu(prop->name, &driver, &prop->major, &prop->minor);
    return e;
}

cudaError_t cudaSetDevice(int dev) { return device(dev); }

cudaError_t cudaFree(void* p) {  // only cudaFree(0), which creates the context, is modelled
    int n;
    cudaError_t e = init(&n);
    return e ? e : p ? cudaErrorInvalidValue : cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorSystemNotReady: return "cudaErrorSystemNotReady";
        case cudaErrorSystemDriverMismatch: return "cudaErrorSystemDriverMismatch";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorSystemNotReady: return "system not yet initialized";
        case cudaErrorSystemDriverMismatch: return "system has unsupported display driver / cuda driver combination";
    }
    return "unknown error";
}
