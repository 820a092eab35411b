// GPT-2 ids back to text from OpenAI's encoder.json (declared in sample.h).
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "checkpoint.h"
#include "sample.h"

using json = nlohmann::json;

GPT2Decoder::GPT2Decoder(const std::string& encoder_json) {
  json j;
  try {
    j = json::parse(read_text_file(encoder_json));
  } catch (const json::exception& e) {
    throw std::runtime_error(encoder_json + " is not valid JSON: " + e.what());
  }
  // GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
  // others were moved to code points 256, 257, ... in byte order.
  std::map<int, int> cp_to_byte;
  int shifted = 0;
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cp_to_byte[printable ? b : 256 + shifted++] = b;
  }
  tokens_.resize(j.size());
  for (auto& [key, id] : j.items()) {
    int i = id.get<int>();
    if (i < 0 || i >= (int)j.size()) throw std::runtime_error(encoder_json + ": id out of range for '" + key + "'");
    std::string bytes;
    for (size_t p = 0; p < key.size();) {  // UTF-8 decode one code point
      unsigned char c = key[p];
      int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      int cp = len == 1 ? c : c & (0x7F >> len);
      for (int q = 1; q < len && p + q < key.size(); q++) cp = (cp << 6) | (key[p + q] & 0x3F);
      p += len;
      auto it = cp_to_byte.find(cp);
      bytes += it != cp_to_byte.end() ? (char)it->second : '?';
    }
    tokens_[i] = bytes;
  }
}

std::string GPT2Decoder::decode(const std::vector<int>& ids) const {
  std::string s;
  for (int id : ids) s += id >= 0 && id < (int)tokens_.size() ? tokens_[id] : id == 50256 ? "<|endoftext|>" : "";
  return s;
}

