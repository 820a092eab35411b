// The scalars of a training step that change from step to step, kept in backend memory (device
// memory on the GPU) so that the kernels read them when they run, not when they are launched: a
// step captured once in a CUDA graph stays valid as the learning rate and the step count move on.
// Plain C++, also compiled by nvcc (cuda/norm.cu, cuda/adamw.cu).
#pragma once
#include <cmath>

#ifdef __CUDACC__
#define STEP_HD __host__ __device__
#else
#define STEP_HD
#endif

struct StepScalars {
    // set by the host before the step
    float lr = 0;
    double bc1 = 1, bc2 = 1;  // AdamW's bias corrections 1 - beta1^t, 1 - beta2^t (t 1-based), in double as torch
    // computed by the step
    double sumsq = 0;  // the gradient's sum of squares (norm = sqrt(sumsq))
    float gscale = 1;  // the clip scale the gradient is multiplied by in AdamW
};

// AdamW's settings that stay fixed over a run (the learning rate and the step count are the
// step's). torch.optim.AdamW semantics; clipping as torch's clip_grad_norm_.
struct AdamWConfig {
    double beta1 = 0.9, beta2 = 0.999;
    float eps = 1e-8f, wd = 0.0f;
    bool decay_all = true;  // every tensor decays, else only weight matrices and embeddings
    double grad_clip = 0;   // clip the global gradient norm to this (0 = off)
    bool operator==(const AdamWConfig& o) const {
        return beta1 == o.beta1 && beta2 == o.beta2 && eps == o.eps && wd == o.wd && decay_all == o.decay_all &&
               grad_clip == o.grad_clip;
    }
};

// The host's part of step t (1-based).
inline StepScalars adamw_scalars(float lr, double beta1, double beta2, int t, float gscale = 1) {
    StepScalars s;
    s.lr = lr;
    s.bc1 = 1 - std::pow(beta1, t);
    s.bc2 = 1 - std::pow(beta2, t);
    s.gscale = gscale;
    return s;
}

// torch's clip_grad_norm_: the gradient is scaled by min(1, grad_clip / (norm + 1e-6)); grad_clip 0 = off.
// One formula for the host and the device (the GPU computes it from its own norm).
STEP_HD inline double clip_scale(double grad_clip, double norm) {
    if (grad_clip <= 0) return 1.0;
    double s = grad_clip / (norm + 1e-6);
    return s < 1.0 ? s : 1.0;
}
