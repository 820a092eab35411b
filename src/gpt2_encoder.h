// Text to GPT-2 ids, the same as data/gpt2_tokenizer.py's encode (defined in gpt2_encoder.cpp):
// GPT-2's pre-tokenizer pattern with the Unicode classes of ICU (libicu-dev), then byte-level BPE
// with the merges of vocab.bpe. The literal "<|endoftext|>" is ordinary text, as in encode.
// A build without ICU (the Makefile's ICU=0, or no unicode/uchar.h) has the same functions, and
// they throw "this build has no Unicode library".
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpt2_decoder.h"

// GPT-2's pre-tokens of UTF-8 text, as Python's regex.findall(PATTERN, text):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Throws for text that is not valid UTF-8, naming the byte offset.
std::vector<std::string> gpt2_pretokenize(const std::string& text);

class GPT2Encoder {
  public:
    // The vocabulary of encoder_json and the merges of the vocab.bpe beside it ("left right" a
    // line after a version line, ranked by line), where data/gpt2_tokenizer.py keeps them. Throws,
    // naming the file and line, for a merge whose parts or result are not tokens, and for a
    // vocabulary without a token for every byte.
    explicit GPT2Encoder(const std::string& encoder_json);
    // Throws for text that is not valid UTF-8.
    std::vector<int> encode(const std::string& text) const;
    const GPT2Decoder& vocab() const { return vocab_; }

  private:
    GPT2Decoder vocab_;
    int byte_id_[256];
    // (left id << 32 | right id) -> (rank, id of the merged token)
    std::unordered_map<uint64_t, std::pair<int, int>> merges_;
};
