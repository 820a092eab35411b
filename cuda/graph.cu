// CUDA graphs of the training step (GPT::train_step): capture, replay, and the lifetime of the
// scratch buffers a graph reads.
#include <vector>

#include "backend_cuda.h"
#include "common.cuh"

namespace gpu {

namespace {
size_t g_graphs = 0;           // instantiated, not freed
std::vector<void*> g_retired;  // outgrown scratch buffers a graph may still read
}  // namespace

// A captured kernel keeps the scratch pointers it was launched with; freeing one that a later,
// larger request replaced would leave the graph reading freed memory.
void scratch_retire(void* p) {
    if (!p) return;
    if (g_graphs)
        g_retired.push_back(p);
    else
        device_free(p);
}

cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& work, size_t* nodes) {
    if (debug_sync())
        throw std::runtime_error(
            "LLM_CUDA_SYNC=1 synchronises after every launch, which a CUDA graph capture refuses: use --cuda_graph 0");
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    cudaGraph_t graph = nullptr;
    try {
        work();
    } catch (...) {
        (void)cudaStreamEndCapture(stream, &graph);  // the stream must not stay in capture mode
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        throw;
    }
    cudaCheck(cudaStreamEndCapture(stream, &graph));
    if (nodes) {
        *nodes = 0;
        cudaError_t e = cudaGraphGetNodes(graph, nullptr, nodes);
        if (e != cudaSuccess) {
            (void)cudaGraphDestroy(graph);
            cudaCheck(e);
        }
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);  // the executable graph is independent of it
    cudaCheck(err);
    g_graphs++;
    return exec;
}

void graph_launch(cudaGraphExec_t graph, cudaStream_t stream) {
    cudaCheck(cudaGraphLaunch(graph, stream));
    if (debug_sync()) cudaCheck(cudaDeviceSynchronize());
}

// Waits for the device: the graph and the retired buffers may be in use by a replay.
void graph_free(cudaGraphExec_t graph) {
    if (!graph) return;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGraphExecDestroy(graph) != cudaSuccess)
        (void)cudaGetLastError();  // runs in destructors: never throws
    if (--g_graphs) return;
    for (void* p : g_retired) device_free(p);
    g_retired.clear();
}

}  // namespace gpu
