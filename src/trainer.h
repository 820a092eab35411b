// The training loop of build/train on backend BK: Trainer<BK> (data, model, the steps with
// evaluation, checkpoints, the JSONL log and the progress line) and train_with<BK>, which prints
// the run's header and runs it. train.cpp runs it on the CPU, cuda/programs.cpp on the GPU.
#pragma once
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_cpu.h"
#include "checkpoint.h"
#include "config.h"
#include "memory_estimate.h"
#include "dataloader.h"
#include "dist.h"
#include "evaluation.h"
#include "flops.h"
#include "log.h"
#include "model.h"
#include "model_io.h"
#include "generate.h"
#include "gpt2_decoder.h"
#include "run_checkpoints.h"

using json = nlohmann::json;

using json = nlohmann::json;

inline std::string with_commas(size_t n) {
    std::string s = std::to_string(n);
    for (int i = (int)s.size() - 3; i > 0; i -= 3) s.insert(i, ",");
    return s;
}

inline std::string duration(double seconds) {
    char b[32];
    long s = (long)seconds;
    if (s >= 3600)
        snprintf(b, sizeof b, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(b, sizeof b, "%ldm%02lds", s / 60, s % 60);
    return b;
}

// "12.3 GFLOP/s" (TFLOP/s from 1e12 on), and the share of the peak when the GPU's is known
inline std::string flops_text(double flops, double peak_tflops) {
    char b[64];
    int n = flops >= 1e12 ? snprintf(b, sizeof b, "%.1f TFLOP/s", flops / 1e12)
                          : snprintf(b, sizeof b, "%.1f GFLOP/s", flops / 1e9);
    if (peak_tflops > 0) snprintf(b + n, sizeof b - n, " | MFU %.1f%%", 100 * flops / (peak_tflops * 1e12));
    return b;
}

// The peak that a run's arithmetic (its log's run_on.arithmetic) computes at: bf16, tf32 or fp32.
inline std::string peak_kind(const std::string& arithmetic) {
    if (arithmetic == "bf16") return "bf16";
    return arithmetic.find("TF32 tensor cores") != std::string::npos ? "tf32" : "fp32";
}

// SIGINT / SIGTERM: the first asks the loop to stop after the current step (with a checkpoint),
// a second one ends the process at once.
inline volatile sig_atomic_t g_stop_signal = 0;

// Mean wall time per step over the last `window` steps, everything included (evaluation,
// samples, checkpoints): the ETA counts what the rest of the run will really do.
struct StepClock {
    std::deque<double> seconds;
    size_t window;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    explicit StepClock(size_t w) : window(w) {}
    void tick() {
        auto now = std::chrono::steady_clock::now();
        seconds.push_back(std::chrono::duration<double>(now - last).count());
        last = now;
        if (seconds.size() > window) seconds.pop_front();
    }
    double eta(int steps_left) const {
        double sum = 0;
        for (double x : seconds) sum += x;
        return seconds.empty() ? 0 : sum / seconds.size() * steps_left;
    }
};

template <class BK>
struct Trainer {
    using Real = typename BK::real;
    Config cfg;
    ModelConfig mc;
    GPT<BK> model;
    DataLoader train;
    std::unique_ptr<DataLoader> val;
    std::unique_ptr<JsonlLog> log;
    std::unique_ptr<GPT2Decoder> decoder;  // for samples (nullptr: ids are printed)
    int step = 0;
    // data parallel (src/dist.h): batch_size is the global batch; this rank takes its rows
    // [row0, row0 + rows) of every batch, training and validation alike
    const dist::Group& dg = dist::group();
    int rows = cfg.batch_size / dg.world, row0 = dg.rank * rows;

    RunCheckpoints<BK> checkpoints{model, cfg, train, rows, row0};
    std::unique_ptr<Evaluation<BK>> evaluation;  // with validation data

    const json run_on;  // {"device", "arithmetic"}: where and how this run computes, for its log
    // one step's FLOPs (src/flops.h), and the GPU's peak TFLOP/s in the run's arithmetic (0: unknown)
    const double step_flops = train_step_flops(mc, (double)cfg.batch_size * cfg.seq_len, cfg.seq_len);
    const double peak_tflops = gpu_peak_tflops(BK::device_name(), peak_kind(run_on["arithmetic"]));

    Trainer(const Config& c, json on)
        : cfg(c),
          mc(model_config(c)),
          model(mc, c.eval_only.empty() ? ModelUse::train : ModelUse::inference, dist::group()),
          train(c.train_data, "train", c.vocab_size),
          run_on(std::move(on)) {
        train.start(cfg.batch_size, cfg.seq_len, cfg.data_order == DataOrder::shuffle, cfg.seed);
        if (!cfg.val_data.empty()) val = std::make_unique<DataLoader>(cfg.val_data, "val", cfg.vocab_size);
        printf("data: train %s tokens in %zu shard(s)", with_commas(train.num_tokens()).c_str(), train.num_shards());
        if (val) printf(" | val %s tokens in %zu shard(s)", with_commas(val->num_tokens()).c_str(), val->num_shards());
        printf(" | %s order\n", choice_name(cfg.data_order).c_str());
        model.positions.cover(position_len(cfg));
        // a split too small for B x (L+1) fails now, not after training
        if (val) val->start(cfg.batch_size, eval_span_len(cfg), false, 0);
        if (val) evaluation.reset(new Evaluation<BK>{model, cfg, *val, rows, row0});
        if (cfg.zero && model.training) model.shard_optimizer();
        dist::check_same("training data", std::to_string(train.fingerprint()));
        if (val) dist::check_same("validation data", std::to_string(val->fingerprint()));
        // a broken encoder.json fails now, not after training steps ran
        if (cfg.sample_every > 0) decoder = open_decoder(cfg.encoder_json, mc.V);
    }

    void save_checkpoint() { checkpoints.save(step); }
    void evaluate(bool last = false) {
        if (evaluation) evaluation->run(step, last, [&](const json& rec) { record(rec); });
    }

    void print_sample() {
        std::vector<int> prompt = {mc.V > 50256 ? 50256 : 0};
        auto ids = generate(model, prompt, std::min(32, mc.maxT - 1), 1.0, 40, cfg.seed + step);
        std::string text;
        if (decoder) {
            text = decoder->decode(std::vector<int>(ids.begin() + 1, ids.end()));
        } else {
            for (size_t i = 1; i < ids.size(); i++) text += (i > 1 ? " " : "") + std::to_string(ids[i]);
        }
        printf("sample | step %d | %s\n", step, text.c_str());
    }

    // --init_from: weights only.
    void load_init_weights() {
        model.set_params(checkpoints.weights_of_this_model(cfg.init_from));
        cfg.init_sha256 = sha256_file(cfg.init_from);  // recorded in config.json, the log and the checkpoints
    }

    // The run's log is rank 0's; every record gets the fields of `tag` (eval_only's: what was evaluated).
    json tag = json::object();
    void record(json rec) {
        rec.update(tag);
        if (log) log->write(rec);
    }

    // --eval_only: validation once at every eval_seq_lens entry, of the run's latest checkpoint (or
    // init_from), as the run's last evaluation does it; the records, tagged with the checkpoint and
    // the keys given otherwise than the run's (changes), go to eval_log. Nothing is trained or written
    // into the run's own files.
    int evaluate_only(const json& changes) {
        if (!val)
            throw std::runtime_error("--eval_only needs validation data: " + cfg.run_dir +
                                     " has no val_data (give --val_data)");
        // train_main checked that the checkpoint reads back
        const std::string path = cfg.init_from.empty() ? checkpoint_latest(cfg.run_dir) + "/model.safetensors" : cfg.init_from;
        model.set_params(checkpoints.weights_of_this_model(path, &step));
        if (!cfg.init_from.empty()) cfg.init_sha256 = sha256_file(path);  // as a run started from it records it
        tag = {{"checkpoint", path}, {"changes", changes}};
        if (dg.rank == 0)
            log = std::make_unique<JsonlLog>(cfg.eval_log.empty() ? cfg.run_dir + "/eval.jsonl" : cfg.eval_log, true);
        std::string line;
        for (const auto& [key, was_now] : changes.items())
            line += (line.empty() ? "" : ", ") + key + " " + was_now[0].dump() + " -> " + was_now[1].dump();
        std::string threads;  // on the CPU: its OpenBLAS rounds by thread count
        if (run_on.contains("threads")) {
            const int was = run_threads(cfg.run_dir), now = run_on["threads"];
            threads = " | threads " + std::to_string(now) +
                      (was == now ? " (the run's)"
                       : was     ? " (the run trained with " + std::to_string(was) +
                                   ": losses may differ from its own in the last digits)"
                                 : " (the run's log records no thread count)");
        }
        printf("eval_only: %s (step %d)%s%s | log %s\n", path.c_str(), step,
               line.empty() ? "" : (" | differs from the run: " + line).c_str(), threads.c_str(),
               log ? log->path().c_str() : "-");
        record({{"type", "eval_only"}, {"step", step}, {"config", config_to_json(cfg)}, {"run_on", run_on}});
        model.reserve_training(rows / cfg.grad_accum, cfg.seq_len);  // evaluation in training's groups of rows
        evaluate(true);
        return 0;
    }

    // Runs the training loop; returns the exit status: 0, or 128 + signal when stopped by one.
    // resume: the keys this resume changes (resume_changes), logged at the step they apply from;
    // config.json keeps what the run started with.
    // The run folder and the weights: a new run's (initialised, or --init_from's) with its config,
    // or the resumed run's latest checkpoint with the config changes logged.
    void open_run(bool resume, const json& changes) {
        const bool root = dg.rank == 0;  // rank 0 writes the run folder; the others only read it
        if (root) {
            make_run_dir(cfg.run_dir);
            lock_run_dir(cfg.run_dir);                       // held since claim_run_dir unless the folder is new
            if (!resume) claim_run_dir(cfg.run_dir, false);  // a run another trainer began here meanwhile
        }
        if (resume) {
            step = checkpoints.load(checkpoint_latest(cfg.run_dir));
            if (root) log = std::make_unique<JsonlLog>(cfg.run_dir + "/log.jsonl", true);
            if (root) log->truncate_after(step);
            printf("resumed %s at step %d\n", cfg.run_dir.c_str(), step);
            record({{"type", "resumed"}, {"step", step}, {"run_on", run_on}});  // this machine may not be the first's
            if (!changes.empty()) {
                std::string line;
                for (const auto& [key, was_now] : changes.items())
                    line += (line.empty() ? "" : ", ") + key + " " + was_now[0].dump() + " -> " + was_now[1].dump();
                printf("config change from step %d: %s (in the log; config.json keeps the run's start)\n", step,
                       line.c_str());
                record({{"type", "config_change"}, {"step", step}, {"changes", changes}});
            }
        } else {
            if (!cfg.init_from.empty())
                load_init_weights();
            else
                model.init(cfg.seed);
            if (root) log = std::make_unique<JsonlLog>(cfg.run_dir + "/log.jsonl", false);
            if (root) write_text_file_atomic(cfg.run_dir + "/config.json", config_to_json(cfg).dump(2) + "\n");
        }
        ParamCounts pc = param_counts(mc);
        if (!resume)
            record({{"type", "config"},
                    {"config", config_to_json(cfg)},
                    {"params", {{"total", pc.total}, {"embeddings", pc.embeddings}, {"attention", pc.attention}}},
                    {"run_on", run_on}});
    }

    int run(bool resume, const json& changes) {
        open_run(resume, changes);
        const int T = cfg.seq_len;
        model.reserve_training(rows / cfg.grad_accum, T);  // one micro-step's; evaluation borrows them
        std::vector<int> in((size_t)rows * T), tg((size_t)rows * T);
        clock = StepClock(std::max(20, cfg.eval_every));  // a window that always holds an evaluation
        model.queue.profile = cfg.profile;
        model.queue.use_graph = cfg.cuda_graph == 1;
        const AdamWConfig opt{cfg.beta1,          cfg.beta2,    (float)cfg.eps, (float)cfg.weight_decay,
                              cfg.decay == Decay::all, cfg.grad_clip};
        // On the GPU step k+1 is queued before step k is read (printed, logged, checked), so the
        // device never waits for the host; the profiling mode and data parallel read each step at once.
        const bool lookahead = BK::asynchronous && !cfg.profile && !dg.mpi;
        bool graph_said = false;
        std::deque<Queued> queued;  // steps queued and not reported yet
        auto report_all = [&] {
            while (!queued.empty()) report(queued);
        };
        const int first_step = step;
        while (step < cfg.steps) {
            bool eval_now = cfg.eval_every > 0 && step % cfg.eval_every == 0;
            bool sample_now = cfg.sample_every > 0 && step % cfg.sample_every == 0 && step > 0;
            if (eval_now || sample_now) report_all();
            if (eval_now) evaluate();
            if (sample_now) print_sample();
            // the clock starts with the first step: the evaluation before it, counted in every
            // step's share by the first ETA, made that ETA up to ten times the run
            if (step == first_step) clock.last = std::chrono::steady_clock::now();

            queued.push_back({step + 1, lr_at(cfg, step), std::chrono::steady_clock::now()});
            train.next_batch(in.data(), tg.data(), row0, rows);
            model.train_step(in.data(), tg.data(), rows, T, opt, (float)queued.back().lr, step + 1, cfg.grad_accum);
            if (model.queue.graph_nodes && !graph_said) {  // captured at the second step
                printf("step: one CUDA graph of %zu nodes (kernels, GEMMs, memsets) replayed per step\n",
                       model.queue.graph_nodes);
                graph_said = true;
            }
            step++;
            while (queued.size() > (lookahead ? 1u : 0u)) report(queued);

            if (int sig = dist::max(g_stop_signal)) {  // a signal to any rank stops all, at the same step
                report_all();
                return stop(sig);
            }
            if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0 && step < cfg.steps) {
                report_all();
                save_checkpoint();
            }
        }
        report_all();
        if (cfg.eval_every > 0) evaluate(true);
        if (cfg.checkpoint_every > 0) save_checkpoint();
        return 0;
    }

    // A training step queued by run(): its number (1-based), learning rate and start time.
    struct Queued {
        int step;
        double lr;
        std::chrono::steady_clock::time_point start;
    };
    std::chrono::steady_clock::time_point last_report{};
    StepClock clock{20};

    // Reads the oldest queued step's results (waiting for it), stops on a non-finite loss, and
    // prints and logs the step. Its time runs from its start, or from the previous step's report
    // if that came later (steps queued ahead overlap).
    void report(std::deque<Queued>& queued) {
        Queued q = queued.front();
        queued.pop_front();
        StepResult r = model.read_step();
        // the global batch's mean loss (all ranks see the same value, and stop together on NaN)
        double loss = dist::sum(r.loss) / dg.world;
        if (!std::isfinite(loss))
            throw std::runtime_error("loss is " + std::to_string(loss) + " at step " + std::to_string(q.step - 1) +
                                     " (diverged; try a lower lr or grad_clip)");
        auto now = std::chrono::steady_clock::now();
        double ms = std::chrono::duration<double, std::milli>(now - std::max(q.start, last_report)).count();
        last_report = now;
        double tps = cfg.batch_size * cfg.seq_len / (ms / 1000);
        double flops = step_flops / (ms / 1000);  // the whole run's, all ranks
        clock.tick();
        double eta = clock.eta(cfg.steps - q.step);
        printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %7.1f ms | %8.0f tok/s | %s | ETA %s\n", q.step,
               cfg.steps, loss, q.lr, r.norm, ms, tps, flops_text(flops, peak_tflops * dg.world).c_str(),
               duration(eta).c_str());
        json rec = {{"type", "train"},     {"step", q.step}, {"loss", loss},        {"lr", q.lr},
                    {"grad_norm", r.norm}, {"step_ms", ms},  {"tokens_per_s", tps}, {"flops_per_s", flops},
                    {"eta_s", eta}};
        if (peak_tflops > 0) rec["mfu"] = flops / (peak_tflops * 1e12 * dg.world);
        if (dg.mpi) rec["comm_ms"] = r.comm_ms;  // the gradient all-reduce / reduce-scatter and the norm
        if (cfg.profile) {                       // the step's time per phase (GPU: CUDA events), in the log as phase_ms
            std::vector<double> ph = model.queue.profile_read();
            std::string line;
            for (int i = 0; i < kPhases; i++) {
                rec["phase_ms"][kPhaseNames[i]] = ph[i];
                line += std::string(i ? " | " : "") + kPhaseNames[i] + " " + std::to_string(ph[i]).substr(0, 7) + " ms";
            }
            printf("profile | step %d | %s\n", q.step, line.c_str());
        }
        record(rec);
    }

    // After SIGINT / SIGTERM: a checkpoint of the finished step (also with checkpoint_every 0), a
    // "stopped" record, and the exit status a shell gives a process ended by that signal.
    int stop(int sig) {
        const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        save_checkpoint();
        record({{"type", "stopped"}, {"step", step}, {"signal", name}});
        printf("stopped by %s at step %d; continue with: --resume %s\n", name, step, cfg.run_dir.c_str());
        dist::barrier();  // no rank exits (non-zero: the launcher would end the rest) before rank 0 has written
        return 128 + sig;
    }
};

// What this config's run allocates (model_memory_parts): a training step's model and activations
// with what evaluation adds beside them and, with sample_every, the sampler's KV cache (one row of
// the window, as generate() reserves it), or with eval_only an inference model and evaluation's
// own sets alone. *eval: evaluation's bytes, *Te: its longest length (eval_memory_bytes).
inline MemoryParts run_memory(const Config& c, const ModelConfig& mc, int act_bytes, bool cpu, double* eval = nullptr,
                              int* Te = nullptr) {
    const bool train = c.eval_only.empty();
    const int rows = c.batch_size / c.grad_accum;  // one micro-step's (per rank: divide by the ranks too)
    const double e = eval_memory_bytes(mc, rows, c.seq_len, evaluated_lengths(c), act_bytes, cpu, Te, train);
    MemoryParts p = model_memory_parts(mc, rows, c.seq_len, train, act_bytes, cpu, c.grad_accum, position_len(c));
    p.activations = train ? p.activations + e : e;
    if (train && c.sample_every > 0)
        p.kv_cache = model_memory_parts(mc, 1, 1, false, act_bytes, cpu, 1, 0, gen_window(mc, GenOptions{})).kv_cache;
    if (eval) *eval = e;
    return p;
}

// run_memory under each attention mode: flash keeps (B,H,T) log-sum-exps where cublas keeps every
// layer's (B,H,T,T) probabilities and their gradient. bf16 activations take 2 bytes. cpu: the
// run's device is the CPU (else a GPU), whose classifier rows per chunk (BK::classifier_chunk)
// `chunk` is, unless the config sets them.
inline void print_memory(const Config& c, bool cpu, int chunk) {
    ModelConfig mc = model_config(c);
    if (mc.classifier_chunk == 0) mc.classifier_chunk = chunk;
    const int act_bytes = c.precision == Precision::bf16 ? 2 : 4;
    mc.flash = true;
    const int rows = c.batch_size / c.grad_accum;
    const bool train = c.eval_only.empty();
    const MemoryParts flash_parts = run_memory(c, mc, act_bytes, cpu);
    const double flash = flash_parts.total() / 1048576.0;
    mc.flash = false;
    const double cublas = run_memory(c, mc, act_bytes, cpu).total() / 1048576.0;
    std::string head = mc.classifier_fused       ? std::string("classifier fused (no logits)")
                       : mc.classifier_tile > 0 ? "classifier tiles of " + std::to_string(mc.classifier_tile) + " columns"
                                                : "classifier chunk " + std::to_string(mc.classifier_chunk) + " rows";
    const std::string what =
        !train ? std::string("evaluation only (an inference model: no gradients or AdamW moments)")
               : "training step of " + std::to_string(rows) + " x " + std::to_string(c.seq_len) + " tokens" +
                     (c.grad_accum > 1 ? " (one micro-step of " + std::to_string(c.grad_accum) + ")" : "");
    printf("memory estimate, %s: attention flash %.0f MiB | cublas %.0f MiB (flash saves %.0f MiB) | %s",
           what.c_str(), flash, cublas, cublas - flash, head.c_str());
    const double kv = flash_parts.kv_cache / 1048576.0;  // sample_every's
    printf(kv > 0 ? " | of them the sampler's KV cache %.1f MiB\n" : "\n", kv);
}

// " | rope_scaling yarn, s 2, training length 64" (nothing for none)
inline std::string scaling_text(const Config& c) {
    if (c.rope_scaling == RopeScaling::none) return "";
    char s[48] = "max(1, L / training length)";
    if (c.rope_scaling != RopeScaling::dynamic && c.rope_scaling_factor > 0)
        snprintf(s, sizeof s, "%g", c.rope_scaling_factor);
    return " | rope_scaling " + choice_name(c.rope_scaling) + ", s " + std::string(s) + ", training length " +
           std::to_string(model_config(c).rope_scaling.train_len);
}

inline void print_model(const Config& c, const std::string& device, const std::string& arith, size_t bytes_per_param,
                        bool cpu, int chunk) {
    ModelConfig mc = model_config(c);
    ParamCounts pc = param_counts(mc);
    const std::string mlp = mc.F() != 4 * mc.C ? " mlp_hidden=" + std::to_string(mc.F()) : "";
    char partial[96] = "";  // " | partial_rotary_factor 0.5: 16 of 32 channels rotate" (nothing at 1)
    if (c.partial_rotary_factor != 1)
        snprintf(partial, sizeof partial, " | partial_rotary_factor %g: %d of %d channels rotate", c.partial_rotary_factor,
                 mc.rope_scaling.rotary_dims(mc.C / mc.H), mc.C / mc.H);
    printf("model: pos=%s L=%d H=%d C=%d%s V=%d maxT=%d%s%s | device %s | precision %s\n", pos_name(c.pos), mc.L, mc.H,
           mc.C, mlp.c_str(), mc.V, mc.maxT, partial, scaling_text(c).c_str(), device.c_str(), arith.c_str());
    std::string matched;  // match_params: the count this model's was matched to
    if (!c.match_params.empty())
        matched = " | mlp_hidden " + std::to_string(mc.F()) + ": nearest " + c.match_params + "'s total " +
                  with_commas(param_counts(with_scheme(mc, parse_pos(c.match_params))).total);
    printf("parameters: total %s | embeddings %s | attention block %s%s\n", with_commas(pc.total).c_str(),
           with_commas(pc.embeddings).c_str(), with_commas(pc.attention).c_str(), matched.c_str());
    if (c.eval_only.empty())
        printf("weights + grads + AdamW moments: %.1f MiB\n", 4.0 * pc.total * bytes_per_param / (1 << 20));
    else  // an inference model: no gradients or moments
        printf("weights: %.1f MiB\n", 1.0 * pc.total * bytes_per_param / (1 << 20));
    if (c.grad_accum > 1)
        printf("gradient accumulation: each step's batch of %d in %d micro-steps\n", c.batch_size, c.grad_accum);
    print_memory(c, cpu, chunk);
}

// The run on backend BK: the model's header (device, arithmetic: its precision as the device
// computes it), then the training loop or, with eval_only, the evaluation.
template <class BK>
int train_with(const Config& cfg, bool resume, const json& changes, std::string device, const std::string& arith) {
    const dist::Group& dg = dist::group();
    if (dg.mpi)
        device +=
            " x " + std::to_string(dg.world) + (dg.world > 1 ? " ranks" : " rank") + (cfg.zero ? " (ZeRO-1)" : "");
    if constexpr (BK::graphs)
        device += graph_step<BK>(cfg.cuda_graph == 1, cfg.profile, dg.mpi) ? " | step: CUDA graph" : " | step: eager";
    print_model(cfg, device, arith, sizeof(typename BK::real), std::is_same<BK, CpuBackend<float>>::value,
                BK::classifier_chunk);
    json run_on = {{"device", device}, {"arithmetic", arith}};
    if (std::is_same<BK, CpuBackend<float>>::value) run_on["threads"] = omp_get_max_threads();
    Trainer<BK> t(cfg, run_on);
    return cfg.eval_only.empty() ? t.run(resume, changes) : t.evaluate_only(changes);
}

// train_with on this process's GPU (mpi: local_rank's) in cfg's precision, then the peak device
// memory: cuda/programs.cpp, in a build with the CUDA backend (src/device.h).
int cuda_train(const Config& cfg, bool resume, const json& changes, bool mpi, int local_rank);
