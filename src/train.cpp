// The train binary: config -> device -> the training loop (trainer.h), with evaluation,
// checkpoints, a JSONL log and a progress line per step. One training step, top to bottom:
// next_batch, forward, backward, grad norm (and clipping), learning-rate schedule, AdamW update.
#include <omp.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "dist.h"
#include "memory_estimate.h"
#include "model_io.h"
#include "trainer.h"

// SIGINT / SIGTERM set g_stop_signal (trainer.h); a second one ends the process at once.
static void on_stop_signal(int sig) {
    if (g_stop_signal) _exit(128 + sig);
    g_stop_signal = sig;
}

static void catch_stop_signals() {
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;  // a read or write in progress goes on; the loop checks the flag
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM}) {
        struct sigaction old;
        sigaction(sig, nullptr, &old);
        if (old.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);  // ignored (nohup, a background job): keep it so
    }
}


// --memory: whether the run would use the CPU (not for --device cuda, nor auto on a machine with
// a usable GPU), so that the estimate holds without that device here.
static bool memory_on_cpu(const Config& c) {
#ifdef HAVE_CUDA
    if (c.device == Device::cuda || c.precision == Precision::bf16) return false;
    if (c.device == Device::automatic) return cuda_check_device().state != DeviceCheck::Usable;
#else
    (void)c;
#endif
    return true;
}

// --classifier auto becomes fused where the GPU's kernels run it (faster by cuda/README.md's
// traffic model) and no chunk or tile shapes the logits, else logits; fused where the GPU's
// kernels cannot run it stops with why (the CPU runs it anywhere).
static void resolve_classifier(Config& c, bool cuda) {
    std::string gpu_why = "not on the GPU";
#ifdef HAVE_CUDA
    if (cuda) gpu_why = cuda_classifier_fused_unsupported(c.n_embd, c.precision == Precision::bf16, c.tf32 == 1);
#endif
    if (c.classifier == Classifier::automatic) {
        const bool shaped = c.classifier_chunk > 0 || c.classifier_tile > 0;
        c.classifier = gpu_why.empty() && !shaped ? Classifier::fused : Classifier::logits;
    } else if (c.classifier == Classifier::fused && cuda && !gpu_why.empty()) {
        throw std::runtime_error(gpu_why);
    }
}

// Whether this run computes on the GPU: --device cuda stops when it cannot, with what is wrong;
// auto takes the GPU when one is usable and says so when one is present but not usable.
static bool use_cuda(const Config& c, int local_rank) {
    const bool bf16 = c.precision == Precision::bf16;
#ifdef HAVE_CUDA
    if (c.device == Device::cpu) {
        if (bf16) throw std::runtime_error("precision bf16 needs --device cuda");
        return false;
    }
    const DeviceCheck d = cuda_check_device(local_rank);
    if (d.state != DeviceCheck::Usable) {
        if (c.device == Device::cuda) throw std::runtime_error("--device cuda: " + d.why);
        if (bf16) throw std::runtime_error("precision bf16 needs --device cuda (--device auto: " + d.why + ")");
        if (d.state == DeviceCheck::Unusable)
            fprintf(stderr, "warning: --device auto: training on the CPU, the GPU is not usable: %s\n", d.why.c_str());
        return false;
    }
    if (c.attention == Attention::flash) cuda_check_flash_head_size(c.n_embd / c.n_head);
    // The kernels' 16-byte loads need rows of C in whole packs; otherwise they go element-wise.
    if (const int pack = bf16 ? 8 : 4; c.n_embd % pack)
        fprintf(stderr,
                "warning: n_embd %d is not a multiple of %d: rows of %s activations and weights are not whole 16-byte "
                "packs, so the GPU takes its slower element-wise paths (same results, less speed)\n",
                c.n_embd, pack, choice_name(c.precision).c_str());
    return true;
#else
    // NVCC= on make's command line (make cpu, make run's build) leaves the backend out on purpose
#ifdef CUDA_LEFT_OUT
    constexpr const char* kNoCudaWhy = "built without it on purpose, as make run's build_cpu/ is; make builds build/train with it";
#else
    constexpr const char* kNoCudaWhy = "nvcc was not found at build time";
#endif
    (void)local_rank;
    if (c.device == Device::cuda)
        throw std::runtime_error("--device cuda: this build has no CUDA backend (" + std::string(kNoCudaWhy) + ")");
    if (bf16) throw std::runtime_error("precision bf16 needs --device cuda (this build has no CUDA backend)");
    return false;
#endif
}

// The training length RoPE scaling refers to when rope_train_len is 0: the one the --init_from
// checkpoint's config records (its rope_train_len, or before that key its seq_len), else seq_len.
static int trained_length(const Config& c) {
    if (c.init_from.empty()) return c.seq_len;
    const StFile f = safetensors_read(c.init_from);
    if (!f.metadata.count("config")) return c.seq_len;
    const Config theirs = stored_config(f.metadata.at("config"), f.path);
    return theirs.rope_train_len > 0 ? theirs.rope_train_len : theirs.seq_len;
}

static int fail(const std::string& msg);

// Under mpirun: rank 0 alone prints and writes the run folder; every rank has the same config and
// an even share of the batch.
static void join_ranks(const Config& cfg) {
    const dist::Group& dg = dist::group();
    if (dg.rank != 0 && !freopen("/dev/null", "w", stdout)) throw std::runtime_error("cannot silence rank's stdout");
    if (cfg.batch_size % (dg.world * cfg.grad_accum))
        throw std::runtime_error("batch_size " + std::to_string(cfg.batch_size) +
                                 " is the global batch, split evenly across the " + std::to_string(dg.world) +
                                 " ranks and grad_accum " + std::to_string(cfg.grad_accum) +
                                 " micro-steps: give a multiple of " + std::to_string(dg.world * cfg.grad_accum));
    dist::set_timeout(cfg.dist_timeout);
    dist::check_same("config", config_to_json(cfg).dump());
}

// Before the run folder is touched: on the CPU, the host holds the run (one micro-step's
// activations, and evaluation's where they do not fit in them) and evaluation takes the run's
// threads; every checkpoint the run reads reads back.
static void check_before_run(const Config& cfg, bool cuda, bool resume) {
    if (!cuda) {
        const ModelConfig mc = model_config(cfg);
        const bool train = cfg.eval_only.empty();  // evaluation only: an inference model, its sets alone
        int Te = 0;
        double eval = 0;
        const MemoryParts parts = run_memory(cfg, mc, 4, true, &eval, &Te);
        const bool by_eval = !train || eval > parts.activations - eval;  // above the step's own
        check_host_memory(
            mc, parts, train,
            by_eval ? "eval_seq_lens entry " + std::to_string(Te)
                    : "batch_size " + std::to_string(cfg.batch_size) + " x seq_len " + std::to_string(cfg.seq_len));
    }
    // evaluation on the CPU at the run's thread count: the losses of its own evaluation, bit for
    // bit, unless OMP_NUM_THREADS asks for another
    if (!cuda && !cfg.eval_only.empty() && !std::getenv("OMP_NUM_THREADS"))
        if (int t = run_threads(cfg.eval_only)) omp_set_num_threads(t);
    // a checkpoint that does not read back fails before the run prints its model
    if (resume) checkpoint_sound(cfg.resume, true);
    if (!cfg.eval_only.empty() && cfg.init_from.empty()) try {
            checkpoint_sound(cfg.eval_only, false);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string(e.what()) + ": nothing to evaluate (give --init_from FILE.safetensors)");
        }
}

static int train_main(int argc, char** argv) {
    if (argc < 2) {  // nothing given: how to start, rather than the first key that is missing
        fputs(usage_line().c_str(), stderr);
        return fail(std::string("nothing to train: give a config (--config configs/cpu_small.json, say) or --resume "
                                "RUN_DIR; ") +
                    argv[0] + " --help lists every key");
    }
    try {
        Config cfg = parse_args(argc, argv);  // --resume RUN_DIR starts from its config (resumed_config)
        if (cfg.help) {
            printf("%s", help_text().c_str());
            return 0;
        }
        if (cfg.list_pos) {  // for scripts: the schemes of src/pos.h, one name a line
            for (const PosTraits& t : kPosSchemes) printf("%s\n", t.name);
            return 0;
        }
        bool resume = !cfg.resume.empty();
        validate(cfg);
        // before mlp_hidden is resolved (below): an older run's config.json may hold 0
        json changes = resume ? resume_changes(resumed_config(cfg.resume), cfg) : json::object();
        if (!cfg.eval_only.empty()) changes = config_changes(resumed_config(cfg.eval_only), cfg);
        cfg.mlp_hidden = model_config(cfg).mlp_hidden;  // resolved: config.json and the checkpoints record it
        if (cfg.memory) {  // before any folder or allocation: works for a config this machine cannot run
            const bool cpu = memory_on_cpu(cfg);
            resolve_classifier(cfg, !cpu);
            int chunk = CpuBackend<float>::classifier_chunk;
#ifdef HAVE_CUDA
            if (!cpu) chunk = cuda_classifier_chunk();
#endif
            print_memory(cfg, cpu, chunk);
            return 0;
        }
        // recorded as mlp_hidden is; after --memory, which reads no file
        if (!resume && cfg.rope_train_len == 0) cfg.rope_train_len = trained_length(cfg);
        const dist::Group& dg = dist::group();
        if (dg.world > 1) join_ranks(cfg);
        // the device and the memory first: a machine that cannot run this config keeps the old run
        const bool cuda = use_cuda(cfg, dg.mpi ? dg.local_rank : 0);
        resolve_classifier(cfg, cuda);
        check_before_run(cfg, cuda, resume);
        if (dg.rank == 0 && cfg.eval_only.empty()) {  // the run folder is this process's before anything in it changes
            if (resume)
                lock_run_dir(cfg.run_dir);
            else
                claim_run_dir(cfg.run_dir, cfg.overwrite);
        }
        catch_stop_signals();
#ifdef HAVE_CUDA
        if (cuda) return cuda_train(cfg, resume, changes, dg.mpi, dg.local_rank);
#endif
        return train_with<CpuBackend<float>>(cfg, resume, changes, "cpu", choice_name(cfg.precision));
    } catch (const std::bad_alloc&) {
        return fail("out of memory (make the model, batch_size or seq_len smaller)");
    } catch (const std::exception& e) {
        return fail(e.what());
    }
}

// An error on one rank of several ends them all (the others may be waiting in a collective).
static int fail(const std::string& msg) {
    if (dist::group().world > 1) dist::abort_all(msg, 1);
    fflush(stdout);
    fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

// One process per device under mpirun or srun (src/dist.h); alone, a world of one.
int main(int argc, char** argv) {
    setup_process(argv);
    try {
        dist::init(&argc, &argv);
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    int rc = train_main(argc, argv);
    dist::finalize();
    return rc;
}
