// The CUDA backend as build/train and build/sample reach it, without a header of cuda/: the device
// check, what the options must know of the kernels, and the runs on the GPU (the trainer's and the
// sampler's loops instantiated for it), all defined by cuda/programs.cpp. Declared through
// src/backend.h in a build with the backend; one without it calls none of them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

struct Config;
struct ModelConfig;
struct GenOptions;
struct GenStats;
class GPT2Decoder;

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
// train_with (trainer.h) on this process's GPU (mpi: local_rank's), in cfg's precision; then the
// peak device memory
int cuda_train(const Config& cfg, bool resume, const nlohmann::json& changes, bool mpi, int local_rank);
// sample_with (sampler.h) on the GPU, bf16 or fp32 activations
GenStats cuda_sample(const ModelConfig& mc, std::vector<float> weights, const std::vector<int>& prompt,
                     const GenOptions& go, int samples, uint64_t seed, const GPT2Decoder* decoder, bool bf16);
