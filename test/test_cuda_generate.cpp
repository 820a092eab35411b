// Incremental decoding on the CUDA backends (src/generate.h; test_generate has the CPU's): the
// KV cache's write and the one-query attention (flash-decoding: the keys in splits, then their
// combination) against their CPU twins, in fp32 and bf16 (with ALiBi, over several splits); then for every position
// scheme greedy runs of 40 tokens (text shorter than, equal to and longer than the window) on
// GPT<CudaBackend<float>>: with the cache against the full recompute and against the CPU's cache, the
// same tokens and logits equal to float rounding at every step; GPT<CudaBackend<bf16_t>> with the
// cache against its own full recompute, within bf16's rounding; the same for RoPE scalings whose s
// grows with the text (dynamic, yarn; rope, crope). Without CUDA (build or device)
// every test is reported SKIPPED.
// Usage: test_cuda_generate [NAME...]
#include <string>
#include <vector>

#include "cuda_testlib.h"
#include "pos.h"
#ifdef HAVE_CUDA
#include "model_testlib.h"

namespace {

// Host values rounded to bf16, kept as floats: the CPU twin's inputs for a bf16 kernel.
Vec bf16_rounded(Vec v) {
    for (float& x : v) x = bf16_to_float(float_to_bf16(x));
    return v;
}

// kv_cache_write of T positions at pos, then attention_decode of one query over n = pos + T
// positions, against the CPU (the cache's other positions as the CPU holds them: the same
// random values). E: float or bf16_t; tol: of the decode's output.
template <class E>
std::string decode_case(int B, int C, int H, int n, int cap, bool alibi, double tol, uint64_t seed) {
    Rng r(seed);
    const int T = 1, pos = n - 1;
    Vec qkv = bf16_rounded(randn((size_t)B * T * 3 * C, r));
    Vec kc = bf16_rounded(randn((size_t)B * cap * C, r)), vc = bf16_rounded(randn(kc.size(), r));
    TestPos m(H, alibi);
    DevBuf<E> gq(qkv), gk(kc), gv(vc), go((size_t)B * C);
    cpu::kv_cache_write(kc.data(), vc.data(), qkv.data(), B, T, C, pos, cap);
    gpu::kv_cache_write(gk.p, gv.p, gq.p, B, T, C, pos, cap);
    Vec out((size_t)B * C);
    cpu::attention_decode(out.data(), qkv.data(), kc.data(), vc.data(), B, n, cap, C, H, m.cpu());
    gpu::attention_decode(go.p, gq.p, gk.p, gv.p, B, n, cap, C, H, m.gpu());
    std::string why;
    const std::string tag = " (n " + std::to_string(n) + ", D " + std::to_string(C / H) + (alibi ? ", alibi)" : ")");
    expect_close(why, "k cache" + tag, gk.get(), kc, 0.0);
    expect_close(why, "v cache" + tag, gv.get(), vc, 0.0);
    expect_close(why, "out" + tag, go.get(), out, tol);
    return why;
}

// One query against 1 to 1500 keys: one split of the kernel's keys, 1025 (the last split of one
// key) and 1500 (three); head sizes 8, 40 (lanes with one and two 16-byte packs), 32, 64, 256 (the
// largest), and 6 and 250 (element loads: rows of fp32 and bf16 not in whole packs; 250: eight
// elements a lane); and a prefill's write of several positions per row.
template <class E>
std::string test_decode(double tol) {
    std::string why;
    uint64_t seed = 1;
    for (bool alibi : {false, true}) {
        append(why, decode_case<E>(2, 16, 2, 1, 8, alibi, tol, seed++));
        append(why, decode_case<E>(2, 80, 2, 37, 40, alibi, tol, seed++));
        append(why, decode_case<E>(1, 128, 2, 1500, 1600, alibi, tol, seed++));
        append(why, decode_case<E>(1, 256, 1, 300, 300, alibi, tol, seed++));
        append(why, decode_case<E>(2, 128, 4, 1025, 1100, alibi, tol, seed++));
        append(why, decode_case<E>(2, 12, 2, 70, 80, alibi, tol, seed++));
        append(why, decode_case<E>(1, 250, 1, 600, 650, alibi, tol, seed++));
    }
    Rng r(9);
    const int B = 3, T = 5, C = 24, cap = 9, pos = 2;
    Vec qkv = bf16_rounded(randn((size_t)B * T * 3 * C, r)), kc((size_t)B * cap * C), vc(kc.size());
    DevBuf<E> gq(qkv), gk(kc), gv(vc);
    cpu::kv_cache_write(kc.data(), vc.data(), qkv.data(), B, T, C, pos, cap);
    gpu::kv_cache_write(gk.p, gv.p, gq.p, B, T, C, pos, cap);
    expect_close(why, "prefill k cache", gk.get(), kc, 0.0);
    expect_close(why, "prefill v cache", gv.get(), vc, 0.0);
    return why;
}

}  // namespace
#endif  // HAVE_CUDA

int main(int argc, char** argv) {
    std::vector<TestCase> t = {
        {"cuda_attention_decode", CUDA_FN([] { return test_decode<float>(1e-5); })},
        {"cuda_bf16_attention_decode", CUDA_FN([] { return test_decode<bf16_t>(4e-3); })},
    };
    for (const PosTraits& s : kPosSchemes) {
        const std::string n = s.name;
        [[maybe_unused]] const Pos p = s.pos;  // unused without CUDA
        // fp32 (flash attention for the prefills): with the cache against the full recompute
        // and against the CPU's cache, 5 + 40 tokens through a window of 32 (13 past it: every one a
        // prefill of the last 32, as any later one would be)
        t.push_back({"cuda_generate_greedy_" + n, CUDA_FN([p] {
                         return gen_compare<CB, CB>(gen_config(p, true), 5, 32, 40, 1e-4, greedy(), false);
                     })});
        t.push_back({"cuda_generate_vs_cpu_" + n, CUDA_FN([p] {
                         return gen_compare<CB, K>(gen_config(p, true), 5, 32, 40, 1e-4, greedy(), true);
                     })});
        // bf16: the cache's keys and values are the prefill's bf16 ones, as the recompute's are
        t.push_back({"cuda_bf16_generate_greedy_" + n, CUDA_FN([p] {
                         return gen_compare<CudaBackend<bf16_t>, CudaBackend<bf16_t>>(gen_config(p, true), 5, 32, 40, 2e-2,
                                                                              greedy(), false);
                     })});
    }
    // RoPE scaling with s from the length (training length 12) as the text outgrows it: the cache,
    // recomputed at each new s up to the window of 48, then sliding 7 times, against the CPU's (fp32)
    // and against bf16's own full recompute
    for (Pos p : {Pos::rope, Pos::crope})
        for (int k : {RopeScaling::dynamic, RopeScaling::yarn, RopeScaling::llama3}) {
            const std::string n = std::string(kRopeScalingNames[k]) + "_" + pos_name(p);
            // llama3 with partial rotary (f = 0.5): the unrotated channels through the cache too
            [[maybe_unused]] const RopeScaling sc = {(RopeScaling::Kind)k, 0, 12, k == RopeScaling::llama3 ? 0.5 : 1};
            t.push_back({"cuda_generate_scaling_vs_cpu_" + n, CUDA_FN([p, sc] {
                             return gen_compare<CB, K>(gen_config(p, true, sc), 5, 48, 50, 1e-4, greedy(), true);
                         })});
            t.push_back({"cuda_bf16_generate_scaling_" + n, CUDA_FN([p, sc] {
                             return gen_compare<CudaBackend<bf16_t>, CudaBackend<bf16_t>>(gen_config(p, true, sc), 5,
                                                                                          48, 50, 2e-2, greedy(), false);
                         })});
        }
    return run_tests(t, argc, argv);
}
