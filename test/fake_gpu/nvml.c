// A fake NVML, libnvidia-ml.so.1 (test/test_emu_train.sh): the calls the trainer makes to tell a
// GPU in MIG mode without an instance from no GPU, answered as the real library answers on the
// machine the FAKE_* variables describe (README.md here), and refused as it refuses them: any
// call before nvmlInit_v2 or after the last nvmlShutdown (NVML_ERROR_UNINITIALIZED), a null
// pointer or a device index past the count (NVML_ERROR_INVALID_ARGUMENT), a name buffer too small
// (NVML_ERROR_INSUFFICIENT_SIZE).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, INSUFFICIENT_SIZE = 7 };
typedef struct nvmlDevice_st* nvmlDevice_t;
static struct nvmlDevice_st {
    int index;
} devices[64];
static int initialized;  // nvmlInit_v2 calls not yet shut down

static const char* env(const char* name, const char* dflt) {
    const char* v = getenv(name);
    return v && *v ? v : dflt;
}
static unsigned gpus(void) {
    if (!strcmp(env("FAKE_SMI", "ok"), "nodev")) return 0;
    int n = atoi(env("FAKE_GPUS", "1"));
    return n < 0 ? 0 : n > 64 ? 64 : (unsigned)n;
}

int nvmlInit_v2(void) { return initialized++, SUCCESS; }
int nvmlShutdown(void) { return initialized ? (initialized--, SUCCESS) : UNINITIALIZED; }

int nvmlDeviceGetCount_v2(unsigned* count) {
    if (!initialized) return UNINITIALIZED;
    if (!count) return INVALID_ARGUMENT;
    *count = gpus();
    return SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
    if (!initialized) return UNINITIALIZED;
    if (!device || index >= gpus()) return INVALID_ARGUMENT;
    devices[index].index = (int)index;
    *device = &devices[index];
    return SUCCESS;
}

static int valid(nvmlDevice_t d) { return d >= devices && d < devices + gpus(); }

// MIG mode (current, pending): 1 enabled, 0 disabled; FAKE_MIG for every GPU
int nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned* current, unsigned* pending) {
    if (!initialized) return UNINITIALIZED;
    if (!valid(device) || !current || !pending) return INVALID_ARGUMENT;
    *current = *pending = !strcmp(env("FAKE_MIG", "Disabled"), "Enabled");
    return SUCCESS;
}

// the name of FAKE_GPU ("NAME, MEMORY, DRIVER, CC", as nvidia-smi prints it)
int nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
    char n[256] = "";
    if (!initialized) return UNINITIALIZED;
    if (!valid(device) || !name) return INVALID_ARGUMENT;
    sscanf(env("FAKE_GPU", ""), "%255[^,]", n);
    if (strlen(n) + 1 > length) return INSUFFICIENT_SIZE;
    strcpy(name, n);
    return SUCCESS;
}
