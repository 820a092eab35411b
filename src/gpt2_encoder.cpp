// Text to GPT-2 ids (gpt2_encoder.h).
#include "gpt2_encoder.h"

#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fileio.h"

#ifdef HAVE_ICU
#include <unicode/uchar.h>
#include <unicode/utf8.h>

namespace {
enum Class { kLetter, kNumber, kSpace, kOther };

// The classes of the pattern as Python's regex module has them: \p{L} and \p{N} are the general
// categories L* and N*, \s is the White_Space property (which, unlike Python's str.isspace, leaves
// out U+001C..U+001F). Debian 12's python3-regex and ICU 72 agree on every code point (Unicode 15.0).
Class char_class(UChar32 c) {
    uint32_t gc = U_GET_GC_MASK(c);
    if (gc & U_GC_L_MASK) return kLetter;
    if (gc & U_GC_N_MASK) return kNumber;
    return u_isUWhiteSpace(c) ? kSpace : kOther;
}
}  // namespace

std::vector<std::string> gpt2_pretokenize(const std::string& text) {
    // the code points, their classes, and the byte each starts at (one more: the end)
    std::vector<UChar32> cp;
    std::vector<Class> cls;
    std::vector<size_t> at;
    const uint8_t* s = (const uint8_t*)text.data();
    for (int64_t i = 0, n = (int64_t)text.size(); i < n;) {
        int64_t start = i;
        UChar32 c;
        U8_NEXT(s, i, n, c);  // c < 0: ill-formed (overlong, a surrogate, cut short, past U+10FFFF)
        if (c < 0) {
            char hex[8];
            snprintf(hex, sizeof hex, "0x%02X", s[start]);
            throw std::runtime_error("invalid UTF-8 at byte " + std::to_string(start) + " (" + hex + ")");
        }
        cp.push_back(c);
        cls.push_back(char_class(c));
        at.push_back(start);
    }
    at.push_back(text.size());
    const size_t m = cp.size();
    auto is = [&](size_t i, char ch) { return i < m && cp[i] == (UChar32)ch; };
    auto run_end = [&](size_t p) {  // the end of the run of cls[p]'s class that starts at p
        size_t q = p;
        while (q < m && cls[q] == cls[p]) q++;
        return q;
    };
    std::vector<std::string> pieces;
    for (size_t p = 0, end; p < m; p = end) {
        // the alternatives in the pattern's order; the first that matches at p wins
        if (is(p, '\'') && (is(p + 1, 's') || is(p + 1, 't') || is(p + 1, 'm') || is(p + 1, 'd'))) {
            end = p + 2;
        } else if (is(p, '\'') && (((is(p + 1, 'r') || is(p + 1, 'v')) && is(p + 2, 'e')) ||
                                   (is(p + 1, 'l') && is(p + 2, 'l')))) {
            end = p + 3;
        } else if (cls[p] != kSpace) {
            end = run_end(p);
        } else if (cp[p] == ' ' && p + 1 < m && cls[p + 1] != kSpace) {
            end = run_end(p + 1);  // " ?": one plain space joins the letters, digits or others after it
        } else {
            // \s+(?!\S) gives back the run's last whitespace when a non-space follows (the space
            // that the next word takes); a single one followed by a non-space is \s+ alone
            size_t r = run_end(p);
            end = r == m || r - p == 1 ? r : r - 1;
        }
        pieces.push_back(text.substr(at[p], at[end] - at[p]));
    }
    return pieces;
}
#else
static const char* kNoUnicode =
    "this build has no Unicode library for GPT-2's pre-tokenizer (install libicu-dev, then make again)";

std::vector<std::string> gpt2_pretokenize(const std::string&) { throw std::runtime_error(kNoUnicode); }
#endif

static uint64_t pair_key(int left, int right) { return (uint64_t)left << 32 | (uint32_t)right; }

// encoder_json is checked before GPT2Decoder reads it, for a message that says where it comes from
static const std::string& existing_vocab(const std::string& encoder_json) {
#ifndef HAVE_ICU
    throw std::runtime_error(kNoUnicode);
#endif
    if (!std::ifstream(encoder_json))
        throw std::runtime_error("no GPT-2 vocabulary at " + encoder_json +
                                 " (python3 data/prepare_data.py, any dataset, puts encoder.json and vocab.bpe in "
                                 "data/gpt2/; or give its path with --encoder_json)");
    return encoder_json;
}

GPT2Encoder::GPT2Encoder(const std::string& encoder_json) : vocab_(existing_vocab(encoder_json)) {
    std::unordered_map<std::string, int> id_of;  // token bytes -> id
    for (size_t i = 0; i < vocab_.tokens().size(); i++) id_of.emplace(vocab_.tokens()[i], (int)i);
    for (int b = 0; b < 256; b++) {
        auto it = id_of.find(std::string(1, (char)b));
        if (it == id_of.end())
            throw std::runtime_error(encoder_json + " has no token for the byte " + std::to_string(b) +
                                     ": it is not GPT-2's byte-level vocabulary");
        byte_id_[b] = it->second;
    }
    const std::string bpe = encoder_json.substr(0, encoder_json.find_last_of('/') + 1) + "vocab.bpe";
    if (!std::ifstream(bpe))
        throw std::runtime_error("no GPT-2 merges at " + bpe + " (vocab.bpe belongs beside encoder.json; python3 "
                                 "data/prepare_data.py, any dataset, puts both in data/gpt2/)");
    std::istringstream in(read_text_file(bpe));
    std::string line;
    for (int line_no = 1, rank = 0; std::getline(in, line); line_no++) {
        if (line_no == 1 || line.empty()) continue;  // line 1: "#version: 0.2"
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw std::runtime_error(bpe + " line " + std::to_string(line_no) + ": expected a merge 'left right', got '" +
                                     line.substr(0, 60) + "'");
        std::string left = gpt2_symbols_to_bytes(line.substr(0, sp)), right = gpt2_symbols_to_bytes(line.substr(sp + 1));
        auto l = id_of.find(left), r = id_of.find(right), merged = id_of.find(left + right);
        if (l == id_of.end() || r == id_of.end() || merged == id_of.end())
            throw std::runtime_error(bpe + " line " + std::to_string(line_no) + ": the merge '" + line +
                                     "' has a part or a result that is not a token of " + encoder_json);
        // a repeated merge takes its later rank, as in data/gpt2_tokenizer.py's dict of ranks
        merges_[pair_key(l->second, r->second)] = {rank++, merged->second};
    }
}

std::vector<int> GPT2Encoder::encode(const std::string& text) const {
    std::vector<int> ids;
    for (const std::string& piece : gpt2_pretokenize(text)) {
        std::vector<int> parts, next;
        for (unsigned char b : piece) parts.push_back(byte_id_[b]);
        // merge the adjacent pair of lowest rank, every occurrence left to right, until no pair merges
        while (parts.size() > 1) {
            int best_rank = INT_MAX, best_id = -1;
            uint64_t best = 0;
            for (size_t i = 0; i + 1 < parts.size(); i++) {
                auto it = merges_.find(pair_key(parts[i], parts[i + 1]));
                if (it != merges_.end() && it->second.first < best_rank)
                    best_rank = it->second.first, best_id = it->second.second, best = it->first;
            }
            if (best_id < 0) break;
            next.clear();
            for (size_t i = 0; i < parts.size(); i++) {
                bool merge = i + 1 < parts.size() && pair_key(parts[i], parts[i + 1]) == best;
                next.push_back(merge ? best_id : parts[i]);
                i += merge;
            }
            parts.swap(next);
        }
        ids.insert(ids.end(), parts.begin(), parts.end());
    }
    return ids;
}
