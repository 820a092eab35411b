// The GEMM-only time of one CPU training step: the limit scripts/bench_cpu.sh prints beside the
// trainer's step time. Takes build/train's model flags (--pos, --n_layer, --n_head, --n_embd,
// --batch_size, --seq_len, ...), runs real training steps of that model on random tokens through
// the trainer's CPU backend, noting each matrix product's (transA, transB, M, N, K) and operands
// as it reaches the BLAS, then times exactly the products of one step through the same BLAS, on
// the step's own buffers (the same addresses, so the same traffic through the caches): so the
// list can never drift from what the model calls. Products the step ran inside a parallel region, one per thread on one
// core each (the LM head's vocabulary tiles, attention's blocks), run so again, each on the thread
// that ran it.
// Not a test (no PASS lines): a benchmark tool.
//
// usage: build/test/bench_gemms [--reps N] [--shapes] [build/train's flags]
//        build/test/bench_gemms --peak [--reps N]
//   --reps N   timed passes over the step's products (default 5; the median is printed)
//   --shapes   also a table per distinct product: calls, GFLOP, ms and GFLOP/s, and ms in the step
//   --peak     instead, the machine's own single-precision GEMM rate through the same BLAS: one
//              2048 x 2048 x 2048 product on every thread; last line "sgemm_gflops G" (median)
// Last line: "gemm_ms MS calls N gflop G in_step_ms S": MS the median pass, S the same products'
// time inside the noted step (what they took between the step's other ops).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <omp.h>

#include "backend_cpu.h"
#include "config.h"
#include "model.h"

namespace {

// One product as the ops asked for it: C (M,N) = op(A) op(B) (+ C when accumulate), the
// milliseconds it took inside the step, and the thread that ran it inside a parallel region (-1:
// outside one, on every thread).
struct Product {
    bool ta, tb, accumulate;
    int M, N, K, lda, ldb, ldc;
    const float *a, *b;
    float* c;
    double in_step_ms;
    int thread;
    auto key() const { return std::make_tuple(ta, tb, accumulate, M, N, K, lda, ldb, ldc); }
    double gflop() const { return 2.0 * M * N * K * 1e-9; }
};
std::vector<Product> noted;

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The step's products are noted where they reach the BLAS: this program's own cblas_sgemm stands
// in front of the library's (the executable's symbol wins the link), notes each product while
// `noting`, and runs (and times) it through the library's Fortran entry sgemm_, which its
// cblas_sgemm calls too: row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
bool noting = false;

}  // namespace

#ifndef NO_CBLAS
extern "C" void sgemm_(const char* ta, const char* tb, const blasint* m, const blasint* n, const blasint* k,
                       const float* alpha, const float* a, const blasint* lda, const float* b, const blasint* ldb,
                       const float* beta, float* c, const blasint* ldc);

extern "C" void cblas_sgemm(const CBLAS_ORDER order, const CBLAS_TRANSPOSE ta, const CBLAS_TRANSPOSE tb,
                            const blasint M, const blasint N, const blasint K, const float alpha, const float* A,
                            const blasint lda, const float* B, const blasint ldb, const float beta, float* Cm,
                            const blasint ldc) {
    if (order != CblasRowMajor) throw std::logic_error("bench_gemms: the CPU ops' products are row-major");
    const double t0 = now_ms();
    const char cta = ta == CblasTrans ? 'T' : 'N', ctb = tb == CblasTrans ? 'T' : 'N';
    sgemm_(&ctb, &cta, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, Cm, &ldc);
    if (!noting) return;
    const Product p{ta == CblasTrans, tb == CblasTrans, beta != 0.0f, M, N, K, lda, ldb, ldc, A, B, Cm, now_ms() - t0,
                    omp_in_parallel() ? omp_get_thread_num() : -1};
#pragma omp critical(noting)
    noted.push_back(p);
}
#endif

namespace {

// The products in runs [begin, end): one product from outside a parallel region, or all the
// products in a row that ran inside parallel regions.
std::vector<std::pair<size_t, size_t>> runs(const std::vector<Product>& ps) {
    std::vector<std::pair<size_t, size_t>> rs;
    for (size_t i = 0; i < ps.size();) {
        size_t end = i + 1;
        if (ps[i].thread >= 0)
            while (end < ps.size() && ps[end].thread >= 0) end++;
        rs.push_back({i, end});
        i = end;
    }
    return rs;
}

// Runs the products in order, on their operands; a run from parallel regions runs in one, each
// product on its thread. Returns the milliseconds.
double run_products(const std::vector<Product>& ps) {
    auto run = [&](const Product& p) {
        cpu::gemm(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.a, p.lda, p.b, p.ldb, p.accumulate ? 1.0f : 0.0f, p.c, p.ldc);
    };
    const double t0 = now_ms();
    for (const auto& [begin, end] : runs(ps)) {
        if (ps[begin].thread < 0) {
            run(ps[begin]);
            continue;
        }
#pragma omp parallel
        {
            const int me = omp_get_thread_num();
            for (size_t k = begin; k < end; k++)
                if (ps[k].thread == me) run(ps[k]);
        }
    }
    return now_ms() - t0;
}

// The products' time inside the step: each run counts its busiest thread.
double in_step(const std::vector<Product>& ps) {
    double ms = 0;
    for (const auto& [begin, end] : runs(ps)) {
        std::map<int, double> per_thread;
        for (size_t k = begin; k < end; k++) per_thread[ps[k].thread] += ps[k].in_step_ms;
        double busiest = 0;
        for (const auto& [t, m] : per_thread) busiest = std::max(busiest, m);
        ms += busiest;
    }
    return ms;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

// --peak: GFLOP/s of a large square product, the most the BLAS gets out of these cores
double sgemm_gflops(int reps) {
    const int n = 2048;
    std::vector<float> a((size_t)n * n), b(a.size()), c(a.size());
    for (size_t i = 0; i < a.size(); i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f;
    std::vector<double> passes;
    for (int r = 0; r <= reps; r++) {  // the first pass warms up
        const double t0 = now_ms();
        cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        if (r) passes.push_back(now_ms() - t0);
    }
    return 2.0 * n * n * n / (median(passes) * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
#ifdef NO_CBLAS
    std::fprintf(stderr, "error: bench_gemms times the products a BLAS runs; this build has none (no cblas.h)\n");
    return 1;
#endif
    setup_process(argv);  // the trainer's OpenMP settings
    int reps = 5;
    bool shapes = false, peak = false;
    std::vector<char*> rest = {argv[0]};  // build/train's flags, for parse_args
    try {
        for (int i = 1; i < argc; i++) {
            const std::string a = argv[i];
            if (a == "--reps") {
                if (i + 1 >= argc) throw std::runtime_error("--reps needs a value");
                reps = (int)parse_int_arg(argv[++i], "--reps", 1, 1000);
            } else if (a == "--shapes") {
                shapes = true;
            } else if (a == "--peak") {
                peak = true;
            } else {
                rest.push_back(argv[i]);
            }
        }
        if (peak) {
            if (rest.size() > 1) throw std::runtime_error("--peak takes no model flags, got " + std::string(rest[1]));
            printf("sgemm_gflops %.1f\n", sgemm_gflops(reps));
            return 0;
        }
        Config cfg = parse_args((int)rest.size(), rest.data());
        validate(cfg);  // as the trainer does (train_data is checked, not read: the tokens are random)
        const int B = cfg.batch_size, Tn = cfg.seq_len;

        GPT<CpuBackend<float>> model(model_config(cfg));
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
            noting = step == 2;
            model.train_step(in.data(), tg.data(), B, Tn, opt, (float)cfg.lr, step);
            model.read_step();
        }
        noting = false;
        const std::vector<Product> ps = noted;

        // on the step's buffers (the model's: alive until main returns), whose values stay small:
        // a few more accumulations into the gradients neither overflow nor reach denormals
        run_products(ps);  // warm-up pass
        std::vector<double> passes;
        for (int r = 0; r < reps; r++) passes.push_back(run_products(ps));

        double gflop = 0;
        for (const Product& p : ps) gflop += p.gflop();
        const double in_step_ms = in_step(ps);
        if (shapes) {
            // per distinct product: its calls timed together, median of reps
            std::map<decltype(ps[0].key()), std::vector<Product>> groups;
            for (const Product& p : ps) groups[p.key()].push_back(p);
            printf("| transA | transB | M | N | K | accumulate | calls | GFLOP | ms | GFLOP/s | ms in the step |\n");
            printf("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
            for (const auto& [key, g] : groups) {
                std::vector<double> t;
                for (int r = 0; r < reps; r++) t.push_back(run_products(g));
                const Product& p = g.front();
                const double ms = median(t), gf = p.gflop() * g.size();
                printf("| %c | %c | %d | %d | %d | %s | %zu | %.2f | %.1f | %.0f | %.1f |\n", p.ta ? 'T' : 'N',
                       p.tb ? 'T' : 'N', p.M, p.N, p.K, p.accumulate ? "yes" : "no", g.size(), gf, ms, gf / (ms * 1e-3),
                       in_step(g));
            }
        }
        printf("gemm_ms %.1f calls %zu gflop %.6g in_step_ms %.1f\n", median(passes), ps.size(), gflop, in_step_ms);
    } catch (const std::exception& e) {
        fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
