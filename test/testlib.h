// The C++ test programs' one harness (the shell and Python tests have testlib.sh and testlib.py):
// one line per check, "PASS name", "FAIL name: why" or "SKIPPED name: why", which
// test/run_tests.sh counts; the programs' arguments pick tests by name (run_test_list), and the
// helpers every program compares with.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rng.h"

// One check's line: why empty is a pass. The counts so far:
inline int& test_passes() {
    static int n = 0;
    return n;
}
inline int& test_failures() {
    static int n = 0;
    return n;
}
inline void report(const std::string& name, const std::string& why) {
    if (why.empty()) {
        std::printf("PASS %s\n", name.c_str());
        test_passes()++;
    } else {
        std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
        test_failures()++;
    }
    std::fflush(stdout);
}
inline void check(const std::string& name, bool ok, const std::string& why = "check failed") {
    report(name, ok ? "" : why);
}
inline void report_skipped(const std::string& name, const std::string& why) {
    std::printf("SKIPPED %s: %s\n", name.c_str(), why.c_str());
}

// f() must throw a std::exception whose message contains `needle`.
inline void expect_error(const std::string& name, const std::function<void()>& f, const std::string& needle) {
    try {
        f();
    } catch (const std::exception& e) {
        const std::string msg = e.what();
        return check(name, msg.find(needle) != std::string::npos, "message '" + msg + "' lacks '" + needle + "'");
    }
    check(name, false, "no error thrown (expected one containing '" + needle + "')");
}

// A test: `run` returns "" (PASS) or why it failed; a group's run reports its own checks (check,
// report) and returns "" or why it stopped. gpu: needs a CUDA device (as most in the CUDA
// programs' lists do; a CPU program's tests say false). skip: not empty, the test is listed but
// not run here, SKIPPED with this reason (it needs another build).
struct TestCase {
    std::string name;
    std::function<std::string()> run;
    bool gpu = true;
    bool group = false;
    std::string skip{};
};
inline TestCase test_group(const std::string& name, const std::function<void()>& f) {
    return {name, [f] { return f(), std::string(); }, false, true};
}

// PROGRAM [NAME...]: with arguments, only the tests whose name contains one of them (an argument
// that matches no test is an error); PROGRAM --list: their names, one a line, running nothing.
// GPU tests are SKIPPED with gpu_skip when it is not empty (no device, or one that cannot run).
// An exception fails its test and the program goes on. Returns the exit status.
inline int run_test_list(const std::vector<TestCase>& all, int argc, char** argv, const std::string& gpu_skip = "") {
    if (argc == 2 && std::string(argv[1]) == "--list") {
        for (const auto& t : all) std::printf("%s\n", t.name.c_str());
        return 0;
    }
    std::vector<const TestCase*> tests;
    for (const auto& t : all) {
        bool keep = argc < 2;
        for (int i = 1; i < argc && !keep; i++) keep = t.name.find(argv[i]) != std::string::npos;
        if (keep) tests.push_back(&t);
    }
    for (int i = 1; i < argc; i++)
        if (std::none_of(all.begin(), all.end(), [&](const TestCase& t) { return t.name.find(argv[i]) != std::string::npos; })) {
            std::fprintf(stderr, "error: no test name contains '%s'\n", argv[i]);
            return 2;
        }
    for (const TestCase* t : tests) {
        if (!t->skip.empty() || (t->gpu && !gpu_skip.empty())) {
            report_skipped(t->name, t->skip.empty() ? gpu_skip : t->skip);
            continue;
        }
        std::string why;
        try {
            why = t->run();
        } catch (const std::exception& e) {
            why = std::string("exception: ") + e.what();
        }
        if (!t->group || !why.empty()) report(t->name, why);
    }
    return test_failures() ? 1 : 0;
}

// ---- comparing
using Vec = std::vector<float>;

// normal values a float holds exactly, in a vector of float (or of double: randn<std::vector<double>>)
template <class V = Vec>
V randn(size_t n, Rng& r, double s = 1.0) {
    V v(n);
    for (auto& x : v) x = (float)(s * r.normal());
    return v;
}

inline std::vector<int> randint(size_t n, int hi, Rng& r) {
    std::vector<int> v(n);
    for (auto& x : v) x = (int)r.below((uint64_t)hi);
    return v;
}

// The buffers a counting backend holds (the memory tables' tests: test_io, test_cuda_bf16): each
// live allocation's bytes.
struct HeldBytes {
    std::map<const void*, size_t> sizes;
    size_t peak = 0;  // the most held at once since it was last set to 0
    template <class E>
    E* add(E* p, size_t n) {
        sizes[p] = n * sizeof(E);
        peak = std::max(peak, total());
        return p;
    }
    void remove(const void* p) { sizes.erase(p); }
    size_t total() const {
        size_t b = 0;
        for (const auto& s : sizes) b += s.second;
        return b;
    }
};

inline std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", x);
    return b;
}

// Appends one sub-case's failure text (may be empty) to why, "; "-separated.
inline void append(std::string& why, const std::string& more) {
    if (!more.empty()) why += (why.empty() ? "" : "; ") + more;
}

// max |got - ref| / max |ref| (so a tolerance is relative to the tensor's scale); NaN or a
// size mismatch fails.
inline double rel_max_err(const Vec& got, const Vec& ref) {
    if (got.size() != ref.size()) return INFINITY;
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = std::fabs((double)got[i] - (double)ref[i]);
        if (std::isnan(d)) return INFINITY;
        diff = std::max(diff, d);
        scale = std::max(scale, std::fabs((double)ref[i]));
    }
    return diff / scale;
}

// Appends "what: rel err X > tol" to why if the tensors differ by more than tol. min_err > 0:
// also fails if they agree better than that (a bf16 result must not be plain fp32).
inline void expect_close(std::string& why, const std::string& what, const Vec& got, const Vec& ref, double tol,
                         double min_err = 0.0) {
    if (got.size() != ref.size()) return append(why, what + ": size mismatch");
    double e = rel_max_err(got, ref);
    if (!(e <= tol))
        append(why, what + ": rel err " + fmt(e) + " > " + fmt(tol));
    else if (e < min_err)
        append(why, what + ": rel err " + fmt(e) + " < " + fmt(min_err) + " (the reduced-precision path not taken?)");
}

// A scalar within tol relative to ref.
inline void expect_near(std::string& why, const std::string& what, double got, double ref, double tol) {
    if (!(std::fabs(got - ref) <= tol * std::fabs(ref))) append(why, what + " " + fmt(got) + " vs " + fmt(ref));
}
