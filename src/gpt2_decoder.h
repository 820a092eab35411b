// GPT-2 ids decoded back to text from OpenAI's encoder.json (defined in gpt2_decoder.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

constexpr int kGpt2Vocab = 50257;  // GPT-2's vocabulary, <|endoftext|> = 50256

// id -> bytes, inverting GPT-2's byte-to-unicode mapping of encoder.json's keys.
// Throws, naming the file, for anything but an object of token -> id with ids 0..n-1 each once.
class GPT2Decoder {
  public:
    explicit GPT2Decoder(const std::string& encoder_json);
    std::string decode(const std::vector<int>& ids) const;
    size_t size() const { return tokens_.size(); }
    const std::vector<std::string>& tokens() const { return tokens_; }  // id -> bytes

  private:
    std::vector<std::string> tokens_;
};

// A token as encoder.json and vocab.bpe write it (one code point per byte) -> its bytes; a code
// point that stands for no byte becomes '?'.
std::string gpt2_symbols_to_bytes(const std::string& symbols);

// The decoder for a model of vocab_size ids, or nullptr (print ids) when encoder_json is missing
// or has another number of tokens; for a GPT-2 vocabulary it says why, once, on stderr.
std::unique_ptr<GPT2Decoder> open_decoder(const std::string& encoder_json, int vocab_size);
