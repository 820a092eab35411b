// The CUDA backend as build/train and build/sample reach it, without a header of cuda/: whether
// the GPU is usable and what the options must know of its kernels, defined by cuda/programs.cpp
// (with the runs on the GPU, declared beside their loops: cuda_train in trainer.h, cuda_sample in
// sampler.h). Declared through src/backend.h in a build with the backend; one without it calls
// none of them. Light: every file of cuda/ includes it (through backend_cuda.h).
#pragma once
#include <string>

// Whether this process can compute on its GPU (local_rank modulo the GPUs, as use_device):
// Absent (no driver or no GPU: nothing is wrong), Unusable (a GPU that the driver, its age or
// this build cannot run, or CUDA_VISIBLE_DEVICES hides; `why`: the CUDA error and what to do,
// in one line) or Usable.
struct DeviceCheck {
    enum State { Absent, Unusable, Usable } state;
    std::string why;
};
DeviceCheck cuda_check_device(int local_rank = 0);
int cuda_classifier_chunk();                // the LM head's rows per chunk on the GPU (--memory's)
bool cuda_flash_supports_head_size(int D);  // the flash kernels' head sizes
void cuda_check_flash_head_size(int D);     // throws for one they do not take
// why the fused LM head's kernels cannot run at n_embd C with these activations and TF32 asked
// for or not (empty: they can)
std::string cuda_classifier_fused_unsupported(int C, bool bf16, bool tf32);
