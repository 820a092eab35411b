// The train binary: config -> data -> model -> the training loop, with
// evaluation, checkpoints, a JSONL log and a progress line per step.
// One training step, top to bottom: next_batch, forward, backward, grad norm
// (and clipping), learning-rate schedule, AdamW update.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_cpu.h"
#include "checkpoint.h"
#include "config.h"
#include "dataloader.h"
#include "log.h"
#include "model.h"
#include "model_io.h"
#include "sample.h"
#ifdef HAVE_CUDA
#include "backend_cuda.h"
#endif

using json = nlohmann::json;

// Learning rate at step (0-based): linear warmup, then the schedule.
static double lr_at(const Config& c, int step) {
  if (step < c.warmup_steps) return c.lr * (step + 1) / c.warmup_steps;
  if (c.schedule == "step") return c.lr * std::pow(c.gamma, step / c.step_size);
  if (c.schedule == "cosine") {
    double span = std::max(1, c.steps - c.warmup_steps);
    double progress = std::min(1.0, (step - c.warmup_steps) / span);
    return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(M_PI * progress));
  }
  return c.lr;
}

static std::string with_commas(size_t n) {
  std::string s = std::to_string(n);
  for (int i = (int)s.size() - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

static std::string duration(double seconds) {
  char b[32];
  long s = (long)seconds;
  if (s >= 3600) snprintf(b, sizeof b, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else snprintf(b, sizeof b, "%ldm%02lds", s / 60, s % 60);
  return b;
}

// Evaluation lengths: the training length unless eval_seq_lens says otherwise.
static std::vector<int> eval_lengths(const Config& c) {
  return c.eval_seq_lens.empty() ? std::vector<int>{c.seq_len} : c.eval_seq_lens;
}

template <class BK>
struct Trainer {
  using T = typename BK::real;
  Config cfg;
  ModelConfig mc;
  GPT<BK> model;
  DataLoader train;
  std::unique_ptr<DataLoader> val;
  std::unique_ptr<JsonlLog> log;
  std::unique_ptr<GPT2Decoder> decoder;  // for samples, read once when first needed
  int step = 0;

  explicit Trainer(const Config& c)
      : cfg(c), mc(model_config(c)), model(mc), train(c.train_data, "train", c.vocab_size) {
    train.start(cfg.batch_size, cfg.seq_len, cfg.data_order == "shuffle", cfg.seed);
    if (!cfg.val_data.empty()) val = std::make_unique<DataLoader>(cfg.val_data, "val", cfg.vocab_size);
    printf("data: train %s tokens in %zu shard(s)", with_commas(train.num_tokens()).c_str(), train.num_shards());
    if (val) printf(" | val %s tokens in %zu shard(s)", with_commas(val->num_tokens()).c_str(), val->num_shards());
    printf(" | %s order\n", cfg.data_order.c_str());
    int longest = cfg.seq_len;
    for (int t : eval_lengths(cfg)) {
      if (pos_traits(mc.pos).learned_table && t > mc.maxT) continue;  // a trained table ends at maxT: n/a
      longest = std::max(longest, t);
      if (val) val->start(cfg.batch_size, t, false, 0);  // a split too small for B x (t+1) fails now, not after training
    }
    model.set_max_positions(longest);
  }

  // --- checkpoints: weights and AdamW moments in safetensors, training state in JSON
  std::vector<StTensor> tensors(const std::vector<T>& flat, const std::string& prefix) const {
    return layout_tensors(model.layout, flat, prefix);
  }
  std::vector<T> flat_from(const StFile& f, const std::string& prefix) const {
    return layout_from_file<T>(model.layout, f, prefix);
  }
  void save_checkpoint() {
    std::string dir = checkpoint_write(cfg.run_dir, step, [&](const std::string& tmp) {
      std::map<std::string, std::string> meta = {{"config", config_to_json(cfg).dump()},
                                                 {"step", std::to_string(step)}};
      auto p = model.get(model.params), m = model.get(model.m), v = model.get(model.v);
      safetensors_write(tmp + "/model.safetensors", tensors(p, ""), meta);
      auto mv = tensors(m, "m.");
      auto vt = tensors(v, "v.");
      mv.insert(mv.end(), vt.begin(), vt.end());
      safetensors_write(tmp + "/optim.safetensors", mv, meta);
      json state = {{"step", step}, {"train_data", train.state()}};
      write_text_file_atomic(tmp + "/state.json", state.dump(2) + "\n");
    });
    printf("checkpoint: %s\n", dir.c_str());
  }
  void load_checkpoint(const std::string& dir) {
    model.set_params(flat_from(safetensors_read(dir + "/model.safetensors"), ""));
    StFile opt = safetensors_read(dir + "/optim.safetensors");
    BK::copy_from_host(model.m, flat_from(opt, "m.").data(), model.num_params);
    BK::copy_from_host(model.v, flat_from(opt, "v.").data(), model.num_params);
    json state;
    try {
      state = json::parse(read_text_file(dir + "/state.json"));
      step = state.at("step").get<int>();
      train.set_state(state.at("train_data"));
    } catch (const json::exception& e) {
      throw std::runtime_error("bad training state in " + dir + "/state.json: " + e.what());
    }
  }

  // Mean validation loss over eval_batches batches (0 = the whole split), per length.
  void evaluate() {
    if (!val) return;
    for (int Te : eval_lengths(cfg)) {
      if (pos_traits(mc.pos).learned_table && Te > mc.maxT) {
        printf("val | step %d | seq_len %d | n/a (learned positions end at %d)\n", step, Te, mc.maxT);
        continue;
      }
      int B = cfg.batch_size;
      // eval_batches counts batches of the training length: every length sees the same
      // tokens (the start of the split), so the losses at different lengths compare
      size_t batches = cfg.eval_batches > 0 ? std::max<size_t>(1, (size_t)cfg.eval_batches * cfg.seq_len / Te)
                                            : std::max<size_t>(1, val->num_windows(Te) / B);
      val->start(B, Te, false, 0);
      std::vector<int> in((size_t)B * Te), tg((size_t)B * Te);
      double sum = 0;
      size_t hits = 0, counted = 0;
      for (size_t i = 0; i < batches; i++) {
        val->next_batch(in.data(), tg.data());
        sum += model.forward(in.data(), tg.data(), B, Te, false);
        count_hits(in, tg, hits, counted);
      }
      double loss = sum / batches;
      json rec = {{"type", "val"}, {"step", step}, {"loss", loss}, {"seq_len", Te}};
      std::string acc;
      if (counted) {
        rec["accuracy"] = (double)hits / counted;
        rec["accuracy_count"] = counted;
        acc = " | accuracy " + std::to_string((double)hits / counted).substr(0, 6) + " (" + std::to_string(counted) + ")";
      }
      printf("val | step %d | seq_len %d | loss %.4f | ppl %.2f%s\n", step, Te, loss, std::exp(loss), acc.c_str());
      log->write(rec);
    }
  }

  // Greedy next-token hits at positions whose input is one of accuracy_tokens
  // (the synthetic task's markers), from the logits of the last forward.
  void count_hits(const std::vector<int>& in, const std::vector<int>& tg, size_t& hits, size_t& counted) {
    for (size_t i = 0; i < in.size(); i++) {
      if (std::find(cfg.accuracy_tokens.begin(), cfg.accuracy_tokens.end(), in[i]) == cfg.accuracy_tokens.end())
        continue;
      auto row = model.logits(i, 1);
      hits += std::max_element(row.begin(), row.end()) - row.begin() == tg[i];
      counted++;
    }
  }

  void print_sample() {
    std::vector<int> prompt = {mc.V > 50256 ? 50256 : 0};
    auto ids = generate(model, prompt, std::min(32, mc.maxT - 1), 1.0, 40, cfg.seed + step);
    if (!decoder && std::ifstream(cfg.encoder_json)) decoder = std::make_unique<GPT2Decoder>(cfg.encoder_json);
    std::string text;
    if (decoder) {
      text = decoder->decode(std::vector<int>(ids.begin() + 1, ids.end()));
    } else {
      for (size_t i = 1; i < ids.size(); i++) text += (i > 1 ? " " : "") + std::to_string(ids[i]);
    }
    printf("sample | step %d | %s\n", step, text.c_str());
  }

  void run(bool resume) {
    make_run_dir(cfg.run_dir);
    if (resume) {
      load_checkpoint(checkpoint_latest(cfg.run_dir));
      log = std::make_unique<JsonlLog>(cfg.run_dir + "/log.jsonl", true);
      log->truncate_after(step);
      printf("resumed %s at step %d\n", cfg.run_dir.c_str(), step);
    } else {
      if (!cfg.init_from.empty()) model.set_params(flat_from(safetensors_read(cfg.init_from), ""));
      else model.init(cfg.seed);
      log = std::make_unique<JsonlLog>(cfg.run_dir + "/log.jsonl", false);
    }
    write_text_file_atomic(cfg.run_dir + "/config.json", config_to_json(cfg).dump(2) + "\n");
    ParamCounts pc = param_counts(mc);
    if (!resume)
      log->write({{"type", "config"},
                  {"config", config_to_json(cfg)},
                  {"params", {{"total", pc.total}, {"embeddings", pc.embeddings}, {"attention", pc.attention}}}});

    const int B = cfg.batch_size, Tn = cfg.seq_len;
    std::vector<int> in((size_t)B * Tn), tg((size_t)B * Tn);
    double ema_ms = 0;
    for (; step < cfg.steps; step++) {
      if (cfg.eval_every > 0 && step % cfg.eval_every == 0) evaluate();
      if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0 && step > 0) save_checkpoint();
      if (cfg.sample_every > 0 && step % cfg.sample_every == 0 && step > 0) print_sample();
      auto t0 = std::chrono::steady_clock::now();

      train.next_batch(in.data(), tg.data());
      double loss = model.forward(in.data(), tg.data(), B, Tn, true);
      if (!std::isfinite(loss))
        throw std::runtime_error("loss is " + std::to_string(loss) + " at step " + std::to_string(step) +
                                 " (diverged; try a lower lr or grad_clip)");
      model.backward();
      double norm = model.grad_norm();
      float gscale = cfg.grad_clip > 0 && norm > cfg.grad_clip ? (float)(cfg.grad_clip / norm) : 1.0f;
      double lr = lr_at(cfg, step);
      model.update((float)lr, (float)cfg.beta1, (float)cfg.beta2, (float)cfg.eps, (float)cfg.weight_decay,
                   cfg.decay == "all", step + 1, gscale);
      BK::synchronize();

      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
      double tps = B * Tn / (ms / 1000);
      printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %7.1f ms | %8.0f tok/s | ETA %s\n", step + 1,
             cfg.steps, loss, lr, norm, ms, tps, duration(ema_ms / 1000 * (cfg.steps - step - 1)).c_str());
      fflush(stdout);
      log->write({{"type", "train"},
                  {"step", step + 1},
                  {"loss", loss},
                  {"lr", lr},
                  {"grad_norm", norm},
                  {"step_ms", ms},
                  {"tokens_per_s", tps}});
    }
    evaluate();
    if (cfg.checkpoint_every > 0) save_checkpoint();
  }
};

static void print_model(const Config& c, const std::string& device, size_t bytes_per_param) {
  ModelConfig mc = model_config(c);
  ParamCounts pc = param_counts(mc);
  printf("model: pos=%s L=%d H=%d C=%d V=%d maxT=%d | device %s | precision %s\n", c.pos.c_str(), mc.L, mc.H, mc.C,
         mc.V, mc.maxT, device.c_str(), c.precision.c_str());
  printf("parameters: total %s | embeddings %s | attention block %s\n", with_commas(pc.total).c_str(),
         with_commas(pc.embeddings).c_str(), with_commas(pc.attention).c_str());
  printf("weights + grads + AdamW moments: %.1f MiB\n", 4.0 * pc.total * bytes_per_param / (1 << 20));
}

template <class BK>
static void train_with(const Config& cfg, bool resume, const std::string& device) {
  print_model(cfg, device, sizeof(typename BK::real));
  Trainer<BK> t(cfg);
  t.run(resume);
}

int main(int argc, char** argv) {
  try {
    Config cfg = parse_args(argc, argv);  // --resume RUN_DIR starts from RUN_DIR/config.json
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
    const bool bf16 = cfg.precision == "bf16";  // validate() allows fp32 | bf16

    bool cuda = cfg.device == "cuda";
#ifdef HAVE_CUDA
    if (cfg.device == "auto") cuda = CudaBackend::available();
    if (cuda && !CudaBackend::available()) throw std::runtime_error("--device cuda: no CUDA device found");
    if (bf16 && !cuda)
      throw std::runtime_error(std::string("precision bf16 needs --device cuda") +
                               (cfg.device == "auto" ? " (--device auto found no CUDA device)" : ""));
    if (cuda) {
      // mixed precision inside the CUDA backend: bf16 GEMM operands, fp32 master weights and the rest
      ::gpu::set_precision_bf16(bf16);
      train_with<CudaBackend>(cfg, resume, "cuda (" + CudaBackend::device_name() + ")");
      printf("peak device memory: %.1f MiB\n", CudaBackend::peak_memory() / 1048576.0);
      return 0;
    }
#else
    if (cuda) throw std::runtime_error("--device cuda: this build has no CUDA backend (nvcc was not found at build time)");
    if (bf16) throw std::runtime_error("precision bf16 needs --device cuda (this build has no CUDA backend)");
#endif
    train_with<CpuBackend<float>>(cfg, resume, "cpu");
    return 0;
  } catch (const std::exception& e) {
    fflush(stdout);
    fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
