// A training run's checkpoints (src/checkpoint.h's folders) for the trainer (train.cpp): GPT<BK>'s
// weights and AdamW moments in safetensors, the training data's position in state.json; and the
// weights of a file (a checkpoint, --init_from, --eval_only's) checked to be this model's.
// Rank 0 writes; every rank reads, so any number of ranks resumes what any other number wrote.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "config.h"
#include "dataloader.h"
#include "dist.h"
#include "model.h"
#include "model_io.h"

// What a file's weights must match: the model keys that shape or place them.
inline std::string describe(const ModelConfig& m) {
    char b[224];
    snprintf(b, sizeof b,
             "pos=%s L=%d H=%d C=%d mlp_hidden=%d V=%d maxT=%d rope_base=%g partial_rotary_factor=%g sin_scale=%g",
             pos_name(m.pos), m.L, m.H, m.C, m.F(), m.V, m.maxT, m.rope_base, m.rope_scaling.partial, m.sin_scale);
    return b;
}

template <class BK>
struct RunCheckpoints {
    using Real = typename BK::real;
    GPT<BK>& model;
    const Config& cfg;
    DataLoader& train;
    int rows, row0;  // this rank's rows [row0, row0 + rows) of a batch

    // Never write (or point `latest` at) weights that are not finite, or that give a non-finite
    // loss (finite but diverged, say of size 1e30): a forward pass of them on the batch the next
    // step trains on (the loader's position is kept) must give a finite loss first, so --resume
    // from `latest` always continues a sound state.
    void save(int step) {
        const dist::Group& dg = dist::group();
        auto refuse = [&](const std::string& what) {
            std::string kept;
            try {
                kept = "'latest' still names " + checkpoint_latest(cfg.run_dir).substr(cfg.run_dir.size() + 1);
            } catch (const std::exception&) {
                kept = "the run has no checkpoint";
            }
            throw std::runtime_error(what + " at step " + std::to_string(step) +
                                     " (diverged; try a lower lr or grad_clip): no checkpoint written; " + kept);
        };
        if (!std::isfinite(BK::sum_squares(model.params, model.num_params))) refuse("the weights are not finite");
        const nlohmann::json at = train.state();
        std::vector<int> in((size_t)rows * cfg.seq_len), tg(in.size());
        train.next_batch(in.data(), tg.data(), row0, rows);
        train.set_state(at);
        double loss = dist::sum(model.forward(in.data(), tg.data(), rows, cfg.seq_len, false)) / dg.world;
        if (!std::isfinite(loss)) refuse("the weights give a loss of " + std::to_string(loss));
        auto m = moments(model.m), v = moments(model.v);  // every rank takes part; rank 0 writes
        if (dg.rank != 0) return;
        std::string dir = checkpoint_write(cfg.run_dir, step, [&](const std::string& tmp) {
            std::map<std::string, std::string> meta = {{"config", config_to_json(cfg).dump()},
                                                       {"step", std::to_string(step)}};
            auto p = model.get(model.params);
            safetensors_write(tmp + "/model.safetensors", layout_tensors(model.layout, p, ""), meta);
            auto mv = layout_tensors(model.layout, m, "m.");
            auto vt = layout_tensors(model.layout, v, "v.");
            mv.insert(mv.end(), vt.begin(), vt.end());
            safetensors_write(tmp + "/optim.safetensors", mv, meta);
            nlohmann::json state = {{"step", step}, {"train_data", train.state()}};
            write_text_file_atomic(tmp + "/state.json", state.dump(2) + "\n");
        });
        printf("checkpoint: %s\n", dir.c_str());
        checkpoint_prune(cfg.run_dir, cfg.keep_checkpoints, cfg.keep_every);
    }

    // The checkpoint in dir into the model (each rank keeps its shard of the moments) and the
    // loader; returns its step.
    int load(const std::string& dir) {
        model.set_params(weights_of_this_model(dir + "/model.safetensors"));
        StFile opt = safetensors_read(dir + "/optim.safetensors");
        const Shard& s = model.sync.shard;
        for (auto [buf, prefix] : {std::pair<Real*, const char*>{model.m, "m."}, {model.v, "v."}})
            BK::copy_from_host(buf, model.padded(layout_from_file<Real>(model.layout, opt, prefix)).data() + s.begin,
                               s.end - s.begin);
        const nlohmann::json state = checkpoint_state(dir);
        const int step = (int)state["step"].get<long>();
        if (step > cfg.steps)
            throw std::runtime_error("the checkpoint in " + cfg.run_dir + " is at step " + std::to_string(step) +
                                     ", past steps = " + std::to_string(cfg.steps) + " (give a larger --steps)");
        try {
            train.set_state(state.at("train_data"));
        } catch (const std::exception& e) {
            throw std::runtime_error("bad training state in " + dir + "/state.json: " + e.what());
        }
        return step;
    }

    // Weights from a file whose own config (when it has one) is valid and describes this model: an
    // edited config.json or another run's file must not load into a model it does not fit.
    // *at: the step its metadata records (a checkpoint's), else left as it is.
    std::vector<Real> weights_of_this_model(const std::string& path, int* at = nullptr) const {
        StFile f = safetensors_read(path);
        if (at && f.metadata.count("step")) *at = std::atoi(f.metadata.at("step").c_str());
        if (f.metadata.count("config")) {
            ModelConfig theirs = model_config(stored_config(f.metadata.at("config"), f.path));
            if (describe(theirs) != describe(model.cfg))
                throw std::runtime_error(f.path + " holds the weights of another model (" + describe(theirs) +
                                         "); this run's is " + describe(model.cfg));
        }
        return layout_from_file<Real>(model.layout, f, "");
    }

    // The AdamW moments of the whole model on rank 0 (ZeRO-1: gathered from every rank's shard).
    std::vector<Real> moments(const Real* buf) const {
        const Shard& s = model.sync.shard;
        if (!s.zero) return model.get(buf);
        const int world = dist::group().world;
        std::vector<Real> mine(s.block), all(s.block * world);
        BK::copy_to_host(mine.data(), buf, s.end - s.begin);
        dist::gather(mine.data(), all.data(), s.block);
        all.resize(model.num_params);
        return model.unpadded(all);  // the buffer layout (padded wte) to the checkpoint's
    }
};
