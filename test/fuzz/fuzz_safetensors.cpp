// Fuzz target: safetensors_read (src/safetensors.cpp) on any bytes: the header length, the header
// JSON, dtypes, shapes and data_offsets; then what the trainer and the sampler do with a file that
// reads: each tensor taken by name (StFile::get), the config in its metadata (stored_config,
// model_config) and the weights of a small model (layout_from_file).
#include "fuzz.h"

#include "config.h"
#include "model_io.h"
#include "safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz_file("model.safetensors", std::string((const char*)data, size));
    refusal_ok([&] {
        const StFile f = safetensors_read(path);
        for (const auto& t : f.tensors) {
            const StEntry& e = t.second;
            fuzz_require(e.bytes.size() == e.numel() * st_dtype_size(e.dtype), "a tensor's bytes differ from its shape");
            refusal_ok([&] { f.get(t.first, "F32", e.shape); });
        }
        if (f.metadata.count("config")) refusal_ok([&] { model_config(stored_config(f.metadata.at("config"), path)); });
        // the seeds' model (test/fuzz/corpus/: n_layer 1, n_head 2, n_embd 8, vocab_size 32, max_seq_len 16)
        ModelConfig m;
        m.L = 1, m.H = 2, m.C = 8, m.V = 32, m.maxT = 16;
        layout_from_file<float>(param_layout(m), f, "");
    });
    return 0;
}
