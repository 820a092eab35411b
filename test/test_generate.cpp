// Incremental decoding (src/generate.h) against the full recompute on the CPU: for every
// position scheme, greedy runs of 200 tokens whose text grows shorter than, equal to and longer
// than the window give the same tokens, and at every step logits equal to float rounding (to
// double rounding in double); a prompt that fills the window; windows past max_seq_len; seeded
// sampling; each RoPE scaling as the context outgrows the training length; partial rotary; the one-query
// attention op against attention_forward's last row; and the bad windows and prompts.
// test_cuda_generate runs the same comparisons on the CUDA backends under the emulation.
// Usage: test_generate [NAME...]
#include <string>
#include <vector>

#include "backend_cpu.h"
#include "model_testlib.h"
#include "testlib.h"

namespace {

// Greedy (unless o says otherwise) runs with and without the cache on the CPU in Real.
template <class Real>
std::string cache_vs_recompute(Pos pos, bool flash, int prompt, int W, int n, double tol, GenOptions o = greedy()) {
    return gen_compare<CpuBackend<Real>, CpuBackend<Real>>(gen_config(pos, flash), prompt, W, n, tol, o, false);
}

// attention_decode's output for the last of n positions = attention_forward's last row, over the
// keys and values kv_cache_write stored (B rows, cache of cap positions).
std::string test_attention_decode_op() {
    std::string why;
    const int B = 2, T = 37, C = 24, H = 3, cap = 40;
    Rng r(3);
    Vec qkv = randn((size_t)B * T * 3 * C, r), slopes = {0.5f, 0.25f, 0.125f};
    for (bool alibi : {false, true}) {
        PosData<float> m;
        m.slopes = alibi ? slopes.data() : nullptr;
        Vec out((size_t)B * T * C), att((size_t)B * H * T * T), kc((size_t)B * cap * C), vc(kc.size());
        cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, m);
        // the first T - 1 positions as a prefill, the last one as a step of one token
        Vec head((size_t)B * (T - 1) * 3 * C), last((size_t)B * 3 * C);
        for (int b = 0; b < B; b++) {
            std::copy_n(qkv.begin() + (size_t)b * T * 3 * C, (size_t)(T - 1) * 3 * C,
                        head.begin() + (size_t)b * (T - 1) * 3 * C);
            std::copy_n(qkv.begin() + ((size_t)b * T + T - 1) * 3 * C, 3 * C, last.begin() + (size_t)b * 3 * C);
        }
        cpu::kv_cache_write(kc.data(), vc.data(), head.data(), B, T - 1, C, 0, cap);
        cpu::kv_cache_write(kc.data(), vc.data(), last.data(), B, 1, C, T - 1, cap);
        Vec got((size_t)B * C), want((size_t)B * C);
        cpu::attention_decode(got.data(), last.data(), kc.data(), vc.data(), B, T, cap, C, H, m);
        for (int b = 0; b < B; b++)
            std::copy_n(out.begin() + ((size_t)b * T + T - 1) * C, C, want.begin() + (size_t)b * C);
        expect_close(why, alibi ? "out (alibi)" : "out", got, want, 1e-5);
    }
    return why;
}

// The bad inputs generate() refuses: a learned table read past max_seq_len, a prompt longer than
// the window.
void test_bad_windows() {
    GenOptions o;
    ModelConfig mc = gen_config(Pos::learned, false);
    o.window = mc.maxT + 1;
    expect_error("generate_learned_window_past_max_seq_len", [&] { gen_window(mc, o); }, "max_seq_len 32");
    GPT<CpuBackend<float>> m(mc);
    m.init(1);
    o.window = 8;
    Rng rng(1);
    GenStats st;
    expect_error(
        "generate_prompt_longer_than_window",
        [&] { generate(m, std::vector<int>(9, 1), o, rng, [](int, const auto&) {}, [] {}, st); },
        "the prompt has 9 tokens, more than the context of 8");
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<TestCase> t = {
        {"generate_attention_decode_op", test_attention_decode_op, false},
        test_group("generate_bad_windows", test_bad_windows),
    };
    for (const PosTraits& s : kPosSchemes) {
        const std::string n = s.name;
        const Pos p = s.pos;
        // 5 + 200 tokens through a window of 32: shorter, equal, longer
        t.push_back({"generate_greedy_200_" + n, [p] { return cache_vs_recompute<float>(p, false, 5, 32, 200, 1e-4); },
                     false});
        t.push_back({"generate_greedy_200_flash_" + n,
                     [p] { return cache_vs_recompute<float>(p, true, 5, 32, 200, 1e-4); }, false});
        t.push_back({"generate_greedy_double_" + n,
                     [p] { return cache_vs_recompute<double>(p, false, 5, 32, 60, 1e-11); }, false});
        t.push_back({"generate_prompt_fills_window_" + n,
                     [p] { return cache_vs_recompute<float>(p, false, 32, 32, 8, 1e-4); }, false});
        t.push_back({"generate_sampled_" + n,
                     [p] {
                         GenOptions o;  // seeded sampling: the same draws from the same logits
                         o.temperature = 0.8, o.top_k = 10;
                         return cache_vs_recompute<float>(p, false, 3, 32, 80, 1e-4, o);
                     },
                     false});
        if (!s.learned_table)  // positions past the training length: a window of 48 over max_seq_len 32
            t.push_back({"generate_window_past_max_seq_len_" + n,
                         [p] { return cache_vs_recompute<float>(p, false, 5, 48, 100, 1e-4); }, false});
    }
    // RoPE scaling with s from the length (training length 12): s grows as the text does, so the
    // cache is recomputed at each new length (MODEL.md); a window of 48 slides at s = 4
    for (Pos p : {Pos::rope, Pos::crope})
        for (int k = RopeScaling::linear; k < (int)std::size(kRopeScalingNames); k++) {
            const RopeScaling sc = {(RopeScaling::Kind)k, 0, 12};
            t.push_back({std::string("generate_scaling_") + kRopeScalingNames[k] + "_" + pos_name(p), [p, sc] {
                             return gen_compare<CpuBackend<float>, CpuBackend<float>>(gen_config(p, false, sc), 5, 48,
                                                                                     100, 1e-4, greedy(), false);
                         },
                         false});
        }
    // partial rotary (f = 0.5: 4 of each head's 8 channels rotate), alone and under llama3 as above
    for (Pos p : {Pos::rope, Pos::crope, Pos::xpos})
        for (RopeScaling::Kind k : {RopeScaling::none, RopeScaling::llama3}) {
            const RopeScaling sc = {k, 0, 12, 0.5};
            t.push_back({std::string("generate_partial_") + kRopeScalingNames[k] + "_" + pos_name(p), [p, sc] {
                             return gen_compare<CpuBackend<float>, CpuBackend<float>>(gen_config(p, false, sc), 5, 48,
                                                                                     100, 1e-4, greedy(), false);
                         },
                         false});
        }
    return run_test_list(t, argc, argv);
}
