// The memory estimate (memory_estimate.h): the sums of activations.h's two tables in double, an
// absurd config giving a large number, not an overflowed one.
#include "memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <type_traits>

#include "activations.h"
#include "ops/loss.h"

// The CPU head's per-tile statistics and shares of d lnf (src/ops/loss.h); none on the GPU.
static ClassifierHead estimated_head(bool cpu) {
    return {kCpuClassifierChunk, cpu ? cpu::classifier_head_scratch<float> : nullptr};
}

// The bytes of n elements of the buffer that a table's member (`E* Set::*`) points to.
template <class Set, class E>
static double buffer_bytes(E* Set::*, double n) {
    return n * sizeof(E);
}

// The bytes of a set of activations (activation_buffers) with elements of type Act.
// train: every layer's slot; backward: and the backward's buffers.
template <class Act>
static double activation_bytes(const ModelConfig& m, int B, int T, bool train, bool backward, bool cpu) {
    using Set = Acts<float, Act>;
    double bytes = 0;
    activation_buffers<double, Set>(m, act_sizes<double>(m, estimated_head(cpu), B, T), train, backward,
                                    [&](auto member, double n) { bytes += buffer_bytes(member, n); });
    return bytes;
}

// The parts with Act elements (uint16_t stands for the CUDA backend's bf16_t).
template <class Act>
static MemoryParts parts_of(const ModelConfig& m, int B, int T, bool train, bool cpu, int accum, int positions, int kv,
                            bool every_layer) {
    using Bufs = ModelBuffers<float, Act>;
    double P = 0, wpe = 0;  // a parameter buffer's elements (wte with its padded rows), and wpe's
    for (const ParamTensor& p : param_layout(m, true)) {
        double n = 1;
        for (int64_t d : p.shape) n *= (double)d;
        P += n;
        if (p.name == "wpe") wpe = n;
    }
    // the model's buffers (model_buffers), the position data's part: pos_buf, and wpe's share of
    // each parameter buffer
    double model = 0, pos = 0;
    ModelSizes<double> s;
    s.P = P, s.positions = std::max({m.maxT, T, positions}), s.train = train;
    s.step_tokens = (double)accum * B * T;
    model_buffers<double, Bufs>(m, s, ModelPart::own, [&](auto member, double k) {
        const double b = buffer_bytes(member, k);
        model += b;
        if constexpr (std::is_same<decltype(member), decltype(&Bufs::pos_buf)>::value)
            if (member == &Bufs::pos_buf) return void(pos += b);
        if (k == P) pos += buffer_bytes(member, wpe);  // a parameter buffer: wpe's rows of it
    });
    double acts = activation_bytes<Act>(m, B, T, train || every_layer, train, cpu), cache = 0;
    if (train && accum > 1)  // the step's ids and losses, of every micro-step's tokens
        model_buffers<double, Bufs>(m, s, ModelPart::steps,
                                    [&](auto member, double k) { acts += buffer_bytes(member, k); });
    if (kv > 0)
        kv_buffers<double, KVBuffers<Act>>(m, B, kv, [&](auto member, double k) { cache += buffer_bytes(member, k); });
    return {model - pos, pos, acts, cache};
}

MemoryParts model_memory_parts(const ModelConfig& m, int B, int T, bool train, int act_bytes, bool cpu, int accum,
                               int positions, int kv, bool every_layer) {
    return act_bytes == 2 ? parts_of<uint16_t>(m, B, T, train, cpu, accum, positions, kv, every_layer)
                          : parts_of<float>(m, B, T, train, cpu, accum, positions, kv, every_layer);
}

double model_memory_bytes(const ModelConfig& m, int B, int T, bool train, int act_bytes, bool cpu, int accum,
                          int positions) {
    return model_memory_parts(m, B, T, train, act_bytes, cpu, accum, positions).total();
}

double eval_memory_bytes(const ModelConfig& m, int B, int T, const std::vector<int>& lengths, int act_bytes, bool cpu,
                         int* largest, bool train) {
    const ClassifierHead head = estimated_head(cpu);
    const ActSizes<double> tokens = act_sizes<double>(m, head, B, T);  // the training set's, which groups the rows
    const bool borrow = train;
    double most = 0;
    for (int Te : lengths) {
        const int rows = eval_group_rows(B, Te, tokens.N);
        if (borrow && eval_fits<double, Acts<float, float>>(m, act_sizes<double>(m, head, rows, Te), tokens)) continue;
        const double bytes = act_bytes == 2 ? activation_bytes<uint16_t>(m, rows, Te, false, false, cpu)
                                            : activation_bytes<float>(m, rows, Te, false, false, cpu);
        if (bytes > most && largest) *largest = Te;
        most = std::max(most, bytes);
    }
    return most;
}

void check_host_memory(const ModelConfig& m, int B, int T, bool train, const std::string& tokens, double eval_bytes,
                       int accum, int positions) {
    MemoryParts parts = model_memory_parts(m, B, T, train, 4, true, accum, positions);
    parts.activations += eval_bytes;
    check_host_memory(m, parts, train, tokens);
}

void check_host_memory(const ModelConfig& m, const MemoryParts& parts, bool train, const std::string& tokens) {
    double need = parts.total();
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    if (have > 0 && need > have) {
        // name the setting behind the largest part, so the message says what to make smaller
        const std::string mlp = m.F() != 4 * m.C ? ", mlp_hidden " + std::to_string(m.F()) : "";
        std::string key =
            "n_layer " + std::to_string(m.L) + ", n_embd " + std::to_string(m.C) + mlp + " and vocab_size " +
            std::to_string(m.V) +
            (train ? ": the weights with their gradients and AdamW moments alone need" : ": the weights alone need");
        double part = parts.weights;
        if (parts.positions > part)
            key = "max_seq_len " + std::to_string(m.maxT) + ": the position table alone needs", part = parts.positions;
        if (parts.activations > part) key = tokens + ": the activations alone need", part = parts.activations;
        if (parts.kv_cache > part) key = tokens + ": the KV cache alone needs", part = parts.kv_cache;
        char msg[128];
        std::snprintf(msg, sizeof msg, "this model needs about %.1f GiB but the machine has %.1f GiB; ",
                      need / (1 << 30), have / (1 << 30));
        char size[64];
        std::snprintf(size, sizeof size, " about %.1f GiB: make it smaller", part / (1 << 30));
        throw std::runtime_error(msg + key + size);
    }
}
