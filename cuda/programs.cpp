// build/train's and build/sample's side of the CUDA backend: the device check and the kernels'
// head sizes for the options (src/device.h), and the trainer's and the sampler's loops
// instantiated on CudaBackend (cuda_train, src/trainer.h; cuda_sample, src/sampler.h), so that
// src/ includes no header of cuda/. Host code (g++), built into the programs only.
#include "backend_cuda.h"
#include "device.h"
#include "sampler.h"
#include "trainer.h"

DeviceCheck cuda_check_device(int local_rank) {
    return CudaDevice::check_device(local_rank);
}
int cuda_classifier_chunk() {
    return CudaBackend<float>::classifier_chunk;
}
bool cuda_flash_supports_head_size(int D) {
    return gpu::flash_supports_head_size(D);
}
void cuda_check_flash_head_size(int D) {
    gpu::check_flash_head_size(D);
}
std::string cuda_classifier_fused_unsupported(int C, bool bf16, bool tf32) {
    gpu::set_tf32(tf32);  // as cuda_train sets it: NVIDIA_TF32_OVERRIDE=0 still turns it off
    return gpu::classifier_fused_unsupported(C, bf16);
}

int cuda_train(const Config& cfg, bool resume, const nlohmann::json& changes, bool mpi, int local_rank) {
    if (mpi) CudaDevice::use_device(local_rank);
    gpu::set_tf32(cfg.tf32 == 1);
    // the arithmetic: bf16 (bf16 activations and GEMMs; fp32 master weights, gradients and AdamW
    // moments), or fp32 with the GEMMs and flash attention on TF32 tensor cores or not (--tf32,
    // and not NVIDIA_TF32_OVERRIDE=0)
    std::string arith = choice_name(cfg.precision);
    if (cfg.precision == Precision::fp32)
        arith += gpu::tf32_enabled() ? " (TF32 tensor cores)" : " (TF32 off: plain fp32)";
    const std::string device = "cuda (" + CudaDevice::device_name() + ")";
    const int rc = cfg.precision == Precision::bf16
                       ? train_with<CudaBackend<bf16_t>>(cfg, resume, changes, device, arith)
                       : train_with<CudaBackend<float>>(cfg, resume, changes, device, arith);
    // ours (weights, activations, kernel scratch, the cuBLAS workspace), then the device's own count
    printf("peak device memory: %.1f MiB | device used at the end: %.1f MiB\n", CudaDevice::peak_memory() / 1048576.0,
           CudaDevice::device_used_memory() / 1048576.0);
    return rc;
}

GenStats cuda_sample(const ModelConfig& mc, std::vector<float> weights, const std::vector<int>& prompt,
                     const GenOptions& go, int samples, uint64_t seed, const GPT2Decoder* decoder, bool bf16) {
    return bf16 ? sample_with<CudaBackend<bf16_t>>(mc, std::move(weights), prompt, go, samples, seed, decoder)
                : sample_with<CudaBackend<float>>(mc, std::move(weights), prompt, go, samples, seed, decoder);
}
