// Fuzz target: GPT-2's tokenizer files and the C++ BPE encoder of build/sample --prompt
// (src/gpt2_encoder.cpp, src/gpt2_decoder.cpp) on any text, valid UTF-8 or not, and on any
// encoder.json and vocab.bpe. Text that encodes must decode back to itself (byte-level BPE loses
// nothing).
// Input: the text; then kFileSep, encoder.json, kFileSep, vocab.bpe. Text alone is encoded with the
// small vocabulary of test/fuzz/gpt2_small (GPT-2's bytes and its first merges).
#include "fuzz.h"

#include <memory>

#include "gpt2_encoder.h"

#ifndef FUZZ_GPT2_SMALL
#error "the Makefile gives FUZZ_GPT2_SMALL, the folder of the small vocabulary"
#endif

static void round_trip(const GPT2Encoder& enc, const std::string& text) {
    const std::vector<int> ids = enc.encode(text);
    for (int id : ids) fuzz_require(id >= 0 && (size_t)id < enc.vocab().size(), "an id outside the vocabulary");
    fuzz_require(enc.vocab().decode(ids) == text, "the text does not decode back to itself");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const GPT2Encoder small(FUZZ_GPT2_SMALL "/encoder.json");
    const std::vector<std::string> parts = fuzz_parts(data, size, 3);
    const std::string& text = parts[0];
    refusal_ok([&] { gpt2_pretokenize(text); });
    if (size == text.size()) {
        refusal_ok([&] { round_trip(small, text); });
        return 0;
    }
    const std::string json = fuzz_file("gpt2/encoder.json", parts[1]);
    fuzz_file("gpt2/vocab.bpe", parts[2]);
    refusal_ok([&] { round_trip(GPT2Encoder(json), text); });
    refusal_ok([&] { open_decoder(json, 50257); });
    return 0;
}
