// What every fuzz target shares (test/fuzz/README.md): a scratch folder of its own process, the
// input cut into the files a reader takes, and the rule that a clean refusal is a pass.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>
#include <unistd.h>


// Readers that take a path get the input as files in this folder, one per process (libFuzzer's
// -jobs run several), removed when the process ends.
inline const std::string& fuzz_dir() {
    // never freed: the atexit handler runs after the statics' destructors
    static const std::string* dir = [] {
        // memory, where there is a /dev/shm: the product's fsyncs then cost nothing
        const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
        auto* d = new std::string(std::string(base) + "/gpt2_fuzz." + std::to_string(getpid()));
        std::filesystem::remove_all(*d);
        std::filesystem::create_directories(*d);
        std::atexit([] { std::filesystem::remove_all(fuzz_dir()); });
        return d;
    }();
    return *dir;
}

// fuzz_dir()/name holding bytes (folders made as needed); returns its path.
inline std::string fuzz_file(const std::string& name, const std::string& bytes) {
    const std::string path = fuzz_dir() + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    FILE* f = std::fopen(path.c_str(), "wb");  // no fsync: a test's scratch file
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::abort();
    }
    return path;
}

// The separator between the files of one input (in test/fuzz/fuzz.dict, so mutations keep it).
constexpr const char kFileSep[] = "\n=====FILE=====\n";

// The input cut at each kFileSep into exactly n parts: the missing ones empty, the extra ones
// joined into the last.
inline std::vector<std::string> fuzz_parts(const uint8_t* data, size_t size, size_t n) {
    const std::string in((const char*)data, size), sep = kFileSep;
    std::vector<std::string> parts;
    size_t at = 0;
    while (parts.size() + 1 < n) {
        size_t next = in.find(sep, at);
        if (next == std::string::npos) break;
        parts.push_back(in.substr(at, next - at));
        at = next + sep.size();
    }
    parts.push_back(in.substr(at));
    parts.resize(n);
    return parts;
}

// Runs a reader: its error (an exception with a message, what the binaries print as "error: ...")
// is the clean refusal, a pass. A crash, a sanitizer report, a hang or a blow-up is the finding.
template <class F>
void refusal_ok(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        if (!*e.what()) {  // a refusal must say why
            std::fprintf(stderr, "finding: an error without a message\n");
            std::abort();
        }
    }
}

// A property the product promises, broken: a finding.
inline void fuzz_require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "finding: %s\n", what);
    std::abort();
}
