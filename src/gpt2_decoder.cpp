// GPT-2 ids back to text from OpenAI's encoder.json (gpt2_decoder.h).
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fileio.h"
#include "gpt2_decoder.h"

using json = nlohmann::json;

std::string gpt2_symbols_to_bytes(const std::string& symbols) {
    // GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
    // others were moved to code points 256, 257, ... in byte order.
    static const std::map<int, int> cp_to_byte = [] {
        std::map<int, int> m;
        int shifted = 0;
        for (int b = 0; b < 256; b++) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            m[printable ? b : 256 + shifted++] = b;
        }
        return m;
    }();
    std::string bytes;
    for (size_t p = 0; p < symbols.size();) {  // UTF-8 decode one code point
        unsigned char c = symbols[p];
        int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        int cp = len == 1 ? c : c & (0x7F >> len);
        for (int q = 1; q < len && p + q < symbols.size(); q++) cp = (cp << 6) | (symbols[p + q] & 0x3F);
        p += len;
        auto it = cp_to_byte.find(cp);
        bytes += it != cp_to_byte.end() ? (char)it->second : '?';
    }
    return bytes;
}

GPT2Decoder::GPT2Decoder(const std::string& encoder_json) {
    json j;
    try {
        j = json::parse(read_text_file(encoder_json));
    } catch (const json::exception& e) {
        throw std::runtime_error(encoder_json + " is not valid JSON: " + e.what());
    }
    if (!j.is_object() || j.empty())
        throw std::runtime_error(encoder_json +
                                 " is not a GPT-2 encoder.json: expected an object of token -> id, got " +
                                 (j.is_object() ? std::string("{}") : j.dump().substr(0, 40)));
    tokens_.resize(j.size());
    std::vector<bool> seen(j.size());
    for (auto& [key, id] : j.items()) {
        if (!id.is_number_integer())
            throw std::runtime_error(encoder_json + ": the id of '" + key + "' is " + id.dump() + ", not an integer");
        int64_t i = id.get<int64_t>();
        if (i < 0 || i >= (int64_t)j.size() || seen[i])
            throw std::runtime_error(encoder_json + ": id " + std::to_string(i) + " of '" + key +
                                     "' is out of range or repeated (ids must be 0.." + std::to_string(j.size() - 1) +
                                     ", each once)");
        seen[i] = true;
        tokens_[i] = gpt2_symbols_to_bytes(key);
    }
}

std::string GPT2Decoder::decode(const std::vector<int>& ids) const {
    std::string s;
    for (int id : ids) s += id >= 0 && id < (int)tokens_.size() ? tokens_[id] : id == 50256 ? "<|endoftext|>" : "";
    return s;
}

std::unique_ptr<GPT2Decoder> open_decoder(const std::string& encoder_json, int vocab_size) {
    if (!std::ifstream(encoder_json)) {
        if (vocab_size == kGpt2Vocab)
            fprintf(stderr,
                    "note: no GPT-2 vocabulary at %s, so token ids are printed; python3 data/prepare_data.py (any "
                    "dataset) puts encoder.json there, or give its path (--encoder_json)\n",
                    encoder_json.c_str());
        return nullptr;
    }
    auto d = std::make_unique<GPT2Decoder>(encoder_json);
    if ((int)d->size() != vocab_size) {
        if (vocab_size == kGpt2Vocab)
            fprintf(stderr, "note: %s has %zu tokens but the model's vocabulary has %d, so token ids are printed\n",
                    encoder_json.c_str(), d->size(), vocab_size);
        return nullptr;
    }
    return d;
}
