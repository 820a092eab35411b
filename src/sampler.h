// build/sample's loop on backend BK (sample.cpp runs it on the CPU, cuda/programs.cpp on the GPU):
// the memory line, then the samples printed as they come.
#pragma once
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "backend_cpu.h"
#include "generate.h"
#include "gpt2_decoder.h"
#include "memory_estimate.h"

// What sampling on backend BK allocates (generate.h: gen_memory_parts), for the memory line and
// the host's check.
template <class BK>
MemoryParts sample_memory(const ModelConfig& mc, const std::vector<int>& prompt, const GenOptions& go) {
    return gen_memory_parts(mc, (int)prompt.size(), go, (int)sizeof(typename BK::act),
                            std::is_same<BK, CpuBackend<float>>::value, BK::classifier_chunk);
}

// Samples `samples` texts after the prompt on backend BK, each printed as it comes (decoded with
// decoder, or ids), one after another from one RNG; returns the speed over all of them. First a
// line (stderr) of the memory the model holds: an inference model's, without the optimiser's.
template <class BK>
GenStats sample_with(const ModelConfig& mc, std::vector<float> weights, const std::vector<int>& prompt,
                     const GenOptions& go, int samples, uint64_t seed, const GPT2Decoder* decoder) {
    const MemoryParts mem = sample_memory<BK>(mc, prompt, go);
    const int longest = gen_longest_pass(mc, (int)prompt.size(), go);
    const double mib = 1048576.0;
    fprintf(stderr,
            "memory: %.0f bytes (%.1f MiB): weights %.1f MiB | position data %.1f MiB | activations %.1f MiB "
            "(forward passes of up to %d token%s) | KV cache %.1f MiB\n",
            mem.total(), mem.total() / mib, mem.weights / mib, mem.positions / mib, mem.activations / mib, longest,
            longest == 1 ? "" : "s", mem.kv_cache / mib);
    GPT<BK> model(mc, ModelUse::inference);
    model.set_params(weights);
    weights = std::vector<float>();  // the model holds them
    auto print = [&](const std::vector<int>& ids, bool first) {
        if (decoder) {
            const std::string s = decoder->decode(ids);
            fwrite(s.data(), 1, s.size(), stdout);
        } else {
            for (size_t i = 0; i < ids.size(); i++) printf(first && i == 0 ? "%d" : " %d", ids[i]);
        }
        fflush(stdout);
    };
    Rng rng(seed);
    GenStats st;
    bool said = false;
    const int window = gen_window(mc, go);
    for (int s = 0; s < samples; s++) {
        if (samples > 1) printf("--- sample %d of %d ---\n", s + 1, samples);
        print(prompt, true);
        generate(
            model, prompt, go, rng, [&](int id, const auto&) { print({id}, false); },
            [&] {
                if (said) return;
                said = true;
                fflush(stdout);
                fprintf(stderr,
                        "note: the text is longer than the context of %d tokens: the window slides, each further "
                        "token from a forward pass over the last %d\n",
                        window, window);
            },
            st);
        printf("\n");
    }
    fflush(stdout);
    return st;
}

// sample_with on the GPU, bf16 or fp32 activations: cuda/programs.cpp, in a build with the CUDA
// backend (src/device.h).
GenStats cuda_sample(const ModelConfig& mc, std::vector<float> weights, const std::vector<int>& prompt,
                     const GenOptions& go, int samples, uint64_t seed, const GPT2Decoder* decoder, bool bf16);
