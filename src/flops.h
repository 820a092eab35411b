// The work of a training step, for the progress line's FLOP/s and MFU (MODEL.md, "FLOPs").
#pragma once
#include <cstring>
#include <string>

#include "params.h"

// FLOPs of one training step over `tokens` tokens in rows of T: every matrix product of the
// forward pass at 2 FLOPs per multiply-add, and twice that backward (the input's gradient and the
// weight's). Causal attention is counted in full (T x T scores), as nanoGPT and PaLM count it;
// the LM head over the V real columns, not the padded ones. Element-wise work is not counted.
inline double train_step_flops(const ModelConfig& m, double tokens, int T) {
    const double C = m.C, F = m.F();
    // per token and layer: qkv (C -> 3C), attention's projection (C -> C), MLP (C -> F -> C)
    const double layer = 2 * (3 * C * C + C * C + 2 * F * C);
    const double attention = 2 * 2 * (double)T * C;  // scores Q K^T and the weighted sum P V
    const double head = 2 * C * m.V;
    return 3 * tokens * (m.L * (layer + attention) + head);
}

// Dense peak TFLOP/s of the GPUs the progress line knows (NVIDIA's data sheets, SXM unless the
// name says otherwise), for the run's arithmetic: bf16 and TF32 on tensor cores, plain fp32.
// Matched by the start of the CUDA device name, the more specific names first; 0 = not known,
// and for a MIG instance ("NVIDIA H200 MIG 1g.18gb"): it holds a share of the GPU's units.
struct GpuPeak {
    const char* name;
    double bf16, tf32, fp32;
};
inline constexpr GpuPeak kGpuPeaks[] = {
    {"NVIDIA H200 NVL", 835.0, 417.5, 60.0}, {"NVIDIA H200", 989.4, 494.7, 66.9},
    {"NVIDIA H100 PCIe", 756.0, 378.0, 51.2}, {"NVIDIA H100 NVL", 835.0, 417.5, 60.0},
    {"NVIDIA H100", 989.4, 494.7, 66.9},     {"NVIDIA GH200", 989.4, 494.7, 66.9},
    {"NVIDIA A100", 312.0, 156.0, 19.5},     {"NVIDIA A800", 312.0, 156.0, 19.5},
};
// arithmetic: "bf16", "tf32" or "fp32"
inline double gpu_peak_tflops(const std::string& device_name, const std::string& arithmetic) {
    if (device_name.find(" MIG ") != std::string::npos) return 0;
    for (const GpuPeak& g : kGpuPeaks)
        if (device_name.compare(0, std::strlen(g.name), g.name) == 0)
            return arithmetic == "bf16" ? g.bf16 : arithmetic == "tf32" ? g.tf32 : g.fp32;
    return 0;
}
