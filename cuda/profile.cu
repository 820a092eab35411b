// The profiling mode's timeline (CudaDevice::profile_mark / profile_read): one CUDA event per
// mark, recorded on the stream the step runs on, so the phases are timed on the GPU's clock
// without waiting for the GPU until the step ends. The events are created once and reused.
#include <vector>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {
namespace {
struct Timeline {
    std::vector<cudaEvent_t> events;  // the pool; the first `used` are this step's marks
    std::vector<int> phases;
    size_t used = 0;
    ~Timeline() {  // at exit; errors ignored (the CUDA runtime may already be shutting down)
        for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
    }
};
Timeline& timeline() {
    static Timeline t;
    return t;
}
}  // namespace
}  // namespace gpu

void CudaDevice::profile_mark(int phase) {
    gpu::Timeline& t = gpu::timeline();
    if (t.used == t.events.size()) {
        cudaEvent_t e;
        cudaCheck(cudaEventCreate(&e));
        t.events.push_back(e);
        t.phases.push_back(0);
    }
    cudaCheck(cudaEventRecord(t.events[t.used], gpu::main_stream()));
    t.phases[t.used++] = phase;
}

std::vector<double> CudaDevice::profile_read(int nphases) {
    gpu::Timeline& t = gpu::timeline();
    std::vector<double> ms(nphases, 0.0);
    if (t.used) cudaCheck(cudaEventSynchronize(t.events[t.used - 1]));
    for (size_t i = 0; i + 1 < t.used; i++) {
        float dt = 0;
        cudaCheck(cudaEventElapsedTime(&dt, t.events[i], t.events[i + 1]));
        ms[t.phases[i]] += dt;
    }
    t.used = 0;
    return ms;
}
