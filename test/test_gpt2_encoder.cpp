// Tests of src/gpt2_encoder (text to GPT-2 ids, build/sample --prompt) that need no GPT-2
// vocabulary: the pre-tokenizer on each alternative of GPT-2's pattern, BPE on a small vocabulary
// written here, invalid UTF-8 and each malformed vocabulary. test/test_tokenizer.py compares the
// encoder with data/gpt2_tokenizer.py on the real vocabulary through the other modes:
//   test_gpt2_encoder [NAME...] [--list]     the checks (a build without ICU: the error it gives)
//   test_gpt2_encoder --encode ENCODER_JSON  each line of stdin a JSON string -> a JSON list of ids
//   test_gpt2_encoder --pieces               each line of stdin a JSON string -> a JSON list of pre-tokens
//   test_gpt2_encoder --unassigned           "first last": the ranges of code points ICU has no character for
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <unistd.h>

#include "gpt2_encoder.h"
#include "testlib.h"
#ifdef HAVE_ICU
#include <unicode/uchar.h>
#endif

namespace fs = std::filesystem;
using json = nlohmann::json;

#ifdef HAVE_ICU
static std::string utf8(int cp) {
    std::string s;
    if (cp < 0x80) return s += (char)cp;
    if (cp < 0x800) return s += {(char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 0x3F))};
    return s += {(char)(0xE0 | cp >> 12), (char)(0x80 | (cp >> 6 & 0x3F)), (char)(0x80 | (cp & 0x3F))};
}

static std::string show(const std::vector<std::string>& v) { return json(v).dump(); }

static void pretokenizer_checks() {
    // (text, its pre-tokens), each as Python's regex.findall(gpt2_tokenizer.PATTERN, text) gives them
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"I'm here, don't worry", {"I", "'m", " here", ",", " don", "'t", " worry"}},
        {"they'll've it's 'd're", {"they", "'ll", "'ve", " it", "'s", " '", "d", "'re"}},
        {"I'M '''s", {"I", "'", "M", " '''", "s"}},  // contractions are lower-case only
        {"2024 3.14159", {"2024", " 3", ".", "14159"}},
        {"\xd9\xa3\xc2\xbd\xc2\xb2\xe2\x85\xab x1", {"\xd9\xa3\xc2\xbd\xc2\xb2\xe2\x85\xab", " x", "1"}},  // ٣½²Ⅻ: Nd No No Nl
        {"a  b", {"a", " ", " b"}},
        {"a   b  ", {"a", "  ", " b", "  "}},
        {"hello  \n world", {"hello", "  \n", " world"}},
        {"\n\n\n", {"\n\n\n"}},
        {"x\t\ty", {"x", "\t", "\t", "y"}},
        {" ", {" "}},
        {"a\xc2\xa0" "b\xe3\x80\x80" "c", {"a", "\xc2\xa0", "b", "\xe3\x80\x80", "c"}},  // NBSP, U+3000: \s, not " ?"
        {"a\x1c" "b", {"a", "\x1c", "b"}},  // U+001C: not White_Space, so not \s for regex
        {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", {"caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac"}},  // café 日本
        {"e\xcc\x81!", {"e", "\xcc\x81!"}},  // a combining accent (Mn) is neither letter nor digit
        {"\xf0\x9f\x91\x8d\xf0\x9f\x91\x8d x", {"\xf0\x9f\x91\x8d\xf0\x9f\x91\x8d", " x"}},  // 👍👍
        {"<|endoftext|>", {"<|", "endoftext", "|>"}},
        {"", {}},
    };
    int bad = 0;
    std::string why;
    for (auto& [text, want] : cases) {
        auto got = gpt2_pretokenize(text);
        if (got != want && bad++ == 0) why = json(text).dump() + " gave " + show(got) + ", expected " + show(want);
    }
    check("pretokenize_pattern_cases", bad == 0, why);
    for (auto [name, text, offset] : std::vector<std::tuple<std::string, std::string, int>>{
             {"utf8_bad_byte", "ok \xff", 3},
             {"utf8_overlong", "a\xc0\xaf", 1},
             {"utf8_surrogate", "ab\xed\xa0\x80", 2},
             {"utf8_cut_short", "\xe6\x97", 0},
             {"utf8_past_10ffff", "x\xf4\x90\x80\x80", 1}})
        expect_error(name, [&] { gpt2_pretokenize(text); }, "invalid UTF-8 at byte " + std::to_string(offset) + " (0x");
}

// A small byte-level vocabulary in folder dir: the 256 bytes (ids 0..255 in byte order), then the
// merges' results; vocab.bpe holds the merges (symbols as encoder.json writes them, "Ġ" for " ").
static std::string write_vocab(const fs::path& dir, const std::vector<std::string>& merges,
                               const std::string& bpe_header = "#version: 0.2\n") {
    fs::create_directories(dir);
    std::string symbol[256];
    for (int cp = 0; cp < 512; cp++) {  // GPT-2's byte map, inverted
        std::string b = gpt2_symbols_to_bytes(utf8(cp));
        if (b.size() == 1 && (b != "?" || cp == '?')) symbol[(unsigned char)b[0]] = utf8(cp);
    }
    json enc = json::object();
    for (int b = 0; b < 256; b++) enc[symbol[b]] = b;
    std::ofstream bpe(dir / "vocab.bpe");
    bpe << bpe_header;
    for (auto& m : merges) {
        bpe << m << "\n";
        std::string merged = m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1);
        size_t next_id = enc.size();
        if (!enc.contains(merged)) enc[merged] = next_id;
    }
    std::ofstream(dir / "encoder.json") << enc.dump();
    return (dir / "encoder.json").string();
}

static void bpe_checks(const fs::path& tmp) {
    GPT2Encoder e(write_vocab(tmp / "small", {"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "a a", "aa aa"}));
    auto id = [&](const std::string& token) {  // the id of a token given as bytes
        for (size_t i = 0; i < e.vocab().size(); i++)
            if (e.vocab().tokens()[i] == token) return (int)i;
        return -1;
    };
    std::vector<int> want = {id("hello"), id(" w"), id("or"), 'l', 'd'};
    check("bpe_lowest_rank_first", e.encode("hello world") == want, json(e.encode("hello world")).dump());
    // every occurrence of the best pair at once, left to right: aaa -> aa a; aaaaa -> aaaa a
    check("bpe_every_occurrence", e.encode("aaa") == std::vector<int>{id("aa"), 'a'} &&
                                      e.encode("aaaaa") == std::vector<int>{id("aaaa"), 'a'},
          json(e.encode("aaaaa")).dump());
    check("bpe_round_trip", e.vocab().decode(e.encode("hello world, h\xc3\xa9llo 2024")) == "hello world, h\xc3\xa9llo 2024");
    expect_error("prompt_invalid_utf8", [&] { e.encode("hi \xc3("); }, "invalid UTF-8 at byte 3");

    expect_error("vocab_missing", [&] { GPT2Encoder x((tmp / "none" / "encoder.json").string()); },
                 "no GPT-2 vocabulary at");
    std::string enc = write_vocab(tmp / "nobpe", {});
    fs::remove(tmp / "nobpe" / "vocab.bpe");
    expect_error("merges_missing", [&] { GPT2Encoder x(enc); }, "no GPT-2 merges at " + (tmp / "nobpe").string() + "/vocab.bpe");
    enc = write_vocab(tmp / "badline", {"h e", "he"});
    expect_error("merges_bad_line", [&] { GPT2Encoder x(enc); }, "vocab.bpe line 3: expected a merge 'left right', got 'he'");
    enc = write_vocab(tmp / "badpart", {"h e"}, "#version: 0.2\nx yz\n");
    expect_error("merges_unknown_token", [&] { GPT2Encoder x(enc); },
                 "vocab.bpe line 2: the merge 'x yz' has a part or a result that is not a token of");
    fs::create_directories(tmp / "nobytes");
    std::ofstream(tmp / "nobytes" / "encoder.json") << R"({"a": 0, "b": 1})";
    expect_error("vocab_without_bytes", [&] { GPT2Encoder x((tmp / "nobytes" / "encoder.json").string()); },
                 "has no token for the byte 0: it is not GPT-2's byte-level vocabulary");
}

#endif

// The modes test/test_tokenizer.py drives: one JSON string a line in, one JSON list a line out.
static int serve(const std::function<json(const std::string&)>& f) {
    std::string line;
    while (std::getline(std::cin, line)) std::cout << f(json::parse(line).get<std::string>()).dump() << "\n";
    return 0;
}

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "--encode" && argc == 3) {
            GPT2Encoder e(argv[2]);
            return serve([&](const std::string& text) { return json(e.encode(text)); });
        }
        if (mode == "--pieces") return serve([](const std::string& text) { return json(gpt2_pretokenize(text)); });
#ifdef HAVE_ICU
        if (mode == "--unassigned") {
            for (UChar32 c = 0, first = -1; c <= 0x110000; c++) {
                bool unassigned = c <= 0x10FFFF && u_charType(c) == U_UNASSIGNED;
                if (unassigned && first < 0) first = c;
                if (!unassigned && first >= 0) printf("%d %d\n", first, c - 1), first = -1;
            }
            return 0;
        }
#endif
    } catch (const std::exception& e) {
        fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    if (mode.rfind("--", 0) == 0 && mode != "--list") {
        fprintf(stderr, "error: unknown mode '%s' (test_gpt2_encoder [--encode ENCODER_JSON | --pieces | --unassigned])\n",
                mode.c_str());
        return 2;
    }
#ifdef HAVE_ICU
    const fs::path tmp = fs::temp_directory_path() / ("test_gpt2_encoder." + std::to_string(getpid()));
    const int rc = run_test_list({test_group("pretokenizer", pretokenizer_checks),
                                  test_group("bpe", [&] { bpe_checks(tmp); })},
                                 argc, argv);
    fs::remove_all(tmp);
    return rc;
#else
    return run_test_list({test_group("no_unicode_library",
                                     [] {
                                         expect_error("no_unicode_library",
                                                      [] { GPT2Encoder e("data/gpt2/encoder.json"); },
                                                      "this build has no Unicode library");
                                     })},
                         argc, argv);
#endif
}
