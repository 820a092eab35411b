// The GEMM-only time of one CPU training step: the limit scripts/bench_cpu.sh prints beside the
// trainer's step time. Takes build/train's model flags (--pos, --n_layer, --n_head, --n_embd,
// --batch_size, --seq_len, ...), runs real training steps of that model on random tokens through
// a backend whose matrix products note their (transA, transB, M, N, K) as they go, then times
// exactly the products of one step through the same BLAS, on buffers of their sizes: so the list
// can never drift from what the model calls. Not a test (no PASS lines): a benchmark tool.
//
// usage: build/test/bench_gemms [--reps N] [--shapes] [build/train's flags]
//   --reps N   timed passes over the step's products (default 5; the median is printed)
//   --shapes   also a table per distinct product: calls, GFLOP, ms and GFLOP/s, and ms in the step
// Last line: "gemm_ms MS calls N gflop G in_step_ms S": MS the median pass, S the same products'
// time inside the noted step (what they took between the step's other ops).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend_cpu.h"
#include "config.h"
#include "model.h"

namespace {

// One product as the ops asked for it: C (M,N) = op(A) op(B) (+ C when accumulate), and the
// milliseconds it took inside the step.
struct Product {
    bool ta, tb, accumulate;
    int M, N, K, lda, ldb, ldc;
    double in_step_ms;
    auto key() const { return std::make_tuple(ta, tb, accumulate, M, N, K, lda, ldb, ldc); }
    double gflop() const { return 2.0 * M * N * K * 1e-9; }
};
std::vector<Product> noted;

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The Gemm of src/ops/matmul.h that notes each product, then runs (and times) it through cpu::gemm.
struct NotingGemm {
    template <class T>
    static void gemm(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb, T beta,
                     T* Cm, int ldc) {
        const double t0 = now_ms();
        cpu::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
        noted.push_back({ta, tb, beta != T(0), M, N, K, lda, ldb, ldc, now_ms() - t0});
    }
};

// CpuBackend<float> with its matrix products noted: everything else is the trainer's.
struct NotingBackend : CpuBackend<float> {
    static constexpr auto matmul_forward = cpu::matmul_forward<float, NotingGemm>;
    static constexpr auto matmul_backward = cpu::matmul_backward<float, NotingGemm>;
    static constexpr auto matmul_dinp_add = cpu::matmul_dinp_add<float, NotingGemm>;
};

// Elements an operand of rows x cols (as stored, row-major with leading dimension ld) spans.
size_t span(int rows, int ld) {
    return (size_t)rows * ld;
}

// Runs the products in order on buffers A, B, C big enough for each; returns the milliseconds.
double run_products(const std::vector<Product>& ps, const float* A, const float* B, float* C) {
    const double t0 = now_ms();
    for (const Product& p : ps)
        cpu::gemm(p.ta, p.tb, p.M, p.N, p.K, 1.0f, A, p.lda, B, p.ldb, p.accumulate ? 1.0f : 0.0f, C, p.ldc);
    return now_ms() - t0;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    setup_process(argv);  // the trainer's OpenMP settings
    int reps = 5;
    bool shapes = false;
    std::vector<char*> rest = {argv[0]};  // build/train's flags, for parse_args
    try {
        for (int i = 1; i < argc; i++) {
            const std::string a = argv[i];
            if (a == "--reps") {
                if (i + 1 >= argc) throw std::runtime_error("--reps needs a value");
                reps = (int)parse_int_arg(argv[++i], "--reps", 1, 1000);
            } else if (a == "--shapes") {
                shapes = true;
            } else {
                rest.push_back(argv[i]);
            }
        }
        Config cfg = parse_args((int)rest.size(), rest.data());
        validate(cfg);  // as the trainer does (train_data is checked, not read: the tokens are random)
        const int B = cfg.batch_size, Tn = cfg.seq_len;

        GPT<NotingBackend> model(model_config(cfg));
        model.init(cfg.seed);
        Rng rng(cfg.seed);
        std::vector<int> tokens((size_t)B * (Tn + 1));
        for (int& t : tokens) t = (int)rng.below(cfg.vocab_size);
        std::vector<int> in, tg;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tn; t++) {
                in.push_back(tokens[(size_t)b * (Tn + 1) + t]);
                tg.push_back(tokens[(size_t)b * (Tn + 1) + t + 1]);
            }
        AdamWConfig opt;
        opt.wd = (float)cfg.weight_decay;
        // the first step touches the buffers for the first time; the second is the one noted
        for (int step = 1; step <= 2; step++) {
            noted.clear();
            model.train_step(in.data(), tg.data(), B, Tn, opt, (float)cfg.lr, step);
            model.read_step();
        }
        const std::vector<Product> ps = noted;

        size_t na = 0, nb = 0, nc = 0;
        for (const Product& p : ps) {
            na = std::max(na, span(p.ta ? p.K : p.M, p.lda));
            nb = std::max(nb, span(p.tb ? p.N : p.K, p.ldb));
            nc = std::max(nc, span(p.M, p.ldc));
        }
        // small values, as the step's (no denormals, no overflow over repeated accumulation)
        std::vector<float> A(na), Bm(nb), Cm(nc, 0.0f);
        for (float& x : A) x = (float)(0.02 * rng.normal());
        for (float& x : Bm) x = (float)(0.02 * rng.normal());
        run_products(ps, A.data(), Bm.data(), Cm.data());  // warm-up pass
        std::vector<double> passes;
        for (int r = 0; r < reps; r++) passes.push_back(run_products(ps, A.data(), Bm.data(), Cm.data()));

        double gflop = 0, in_step_ms = 0;
        for (const Product& p : ps) gflop += p.gflop(), in_step_ms += p.in_step_ms;
        if (shapes) {
            // per distinct product: its calls timed together, median of reps
            std::map<decltype(ps[0].key()), std::vector<Product>> groups;
            for (const Product& p : ps) groups[p.key()].push_back(p);
            printf("| transA | transB | M | N | K | accumulate | calls | GFLOP | ms | GFLOP/s | ms in the step |\n");
            printf("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
            for (const auto& [key, g] : groups) {
                std::vector<double> t;
                for (int r = 0; r < reps; r++) t.push_back(run_products(g, A.data(), Bm.data(), Cm.data()));
                const Product& p = g.front();
                const double ms = median(t), gf = p.gflop() * g.size();
                double in_step = 0;
                for (const Product& q : g) in_step += q.in_step_ms;
                printf("| %c | %c | %d | %d | %d | %s | %zu | %.2f | %.1f | %.0f | %.1f |\n", p.ta ? 'T' : 'N',
                       p.tb ? 'T' : 'N', p.M, p.N, p.K, p.accumulate ? "yes" : "no", g.size(), gf, ms, gf / (ms * 1e-3),
                       in_step);
            }
        }
        printf("gemm_ms %.1f calls %zu gflop %.6g in_step_ms %.1f\n", median(passes), ps.size(), gflop, in_step_ms);
    } catch (const std::exception& e) {
        fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
