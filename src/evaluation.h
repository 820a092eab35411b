// The trainer's evaluation (train.cpp): the mean validation loss of GPT<BK> at each evaluation
// length over the same target tokens (MODEL.md, Evaluation), with the accuracy after the
// accuracy_tokens; and the rules for which lengths run, shared with the memory estimate.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "config.h"
#include "dataloader.h"
#include "dist.h"
#include "model.h"

// Evaluation lengths: the training length unless eval_seq_lens says otherwise.
inline std::vector<int> eval_lengths(const Config& c) {
    return c.eval_seq_lens.empty() ? std::vector<int>{c.seq_len} : c.eval_seq_lens;
}
// L, whose windows' targets every length scores: the longest length, also where not applicable
// (learned positions), so that every scheme scores the same tokens.
inline int eval_span_len(const Config& c) {
    std::vector<int> lens = eval_lengths(c);
    return *std::max_element(lens.begin(), lens.end());
}
// The lengths evaluation runs at, for the memory estimate: none without validation data; a
// learned position table's only up to max_seq_len. With eval_every 0 too: the trainer prepares
// every length (its position tables, its data) all the same.
inline std::vector<int> evaluated_lengths(const Config& c) {
    std::vector<int> ts;
    if (c.val_data.empty()) return ts;
    const ModelConfig mc = model_config(c);
    for (int t : eval_lengths(c))
        if (!pos_traits(mc.pos).learned_table || t <= mc.maxT) ts.push_back(t);
    return ts;
}
// The positions the model's position data covers (Positions::cover): the longest of
// seq_len and the evaluation lengths that apply.
inline int position_len(const Config& c) {
    const ModelConfig mc = model_config(c);
    int longest = c.seq_len;
    for (int t : eval_lengths(c))
        if (!pos_traits(mc.pos).learned_table || t <= mc.maxT) longest = std::max(longest, t);  // else n/a
    return longest;
}

template <class BK>
struct Evaluation {
    GPT<BK>& model;
    const Config& cfg;
    DataLoader& val;
    int rows, row0;  // this rank's rows [row0, row0 + rows) of a batch

    // Eval_batches batches of seq_len tokens (0 = the whole split), taken as whole batches of
    // windows of the longest length L; the lengths other than seq_len only every eval_long_every
    // steps and at the end (last). Prints a line per length and gives record its JSON.
    void run(int step, bool last, const std::function<void(const nlohmann::json&)>& record) {
        const int B = cfg.batch_size, L = eval_span_len(cfg), maxT = model.cfg.maxT;
        const size_t windows = (size_t)B * (cfg.eval_batches > 0
                                                ? std::max<size_t>(1, (size_t)cfg.eval_batches * cfg.seq_len / L)
                                                : val.num_windows(L) / B);
        for (int Te : eval_lengths(cfg)) {
            if (Te != cfg.seq_len && !last && cfg.eval_long_every > 0 && step % cfg.eval_long_every != 0) continue;
            if (model.pt.learned_table && Te > maxT) {
                printf("val | step %d | seq_len %d | n/a (learned positions end at %d)\n", step, Te, maxT);
                continue;
            }
            size_t hits = 0, counted = 0;
            const double loss = mean_loss(val.eval_batches(B, L, windows, Te), Te, hits, counted);
            nlohmann::json rec = {
                {"type", "val"}, {"step", step}, {"loss", loss}, {"seq_len", Te}, {"tokens", windows * L}};
            std::string acc;
            if (counted) {
                rec["accuracy"] = (double)hits / counted;
                rec["accuracy_count"] = counted;
                acc = " | accuracy " + std::to_string((double)hits / counted).substr(0, 6) + " (" +
                      std::to_string(counted) + ")";
            }
            printf("val | step %d | seq_len %d | loss %.4f | ppl %.2f%s\n", step, Te, loss, std::exp(loss),
                   acc.c_str());
            record(rec);
            if (!std::isfinite(loss))
                throw std::runtime_error("validation loss is " + std::to_string(loss) + " at step " +
                                         std::to_string(step) + " (diverged; try a lower lr or grad_clip)");
        }
    }

    // The mean loss of the plan's batches at length Te, over all ranks, each batch weighted by its
    // tokens over a full batch's; the accuracy's hits and count summed over the ranks.
    double mean_loss(const std::vector<DataLoader::EvalBatch>& plan, int Te, size_t& hits, size_t& counted) {
        const int world = dist::group().world;
        std::vector<int> in, tg;
        double sum = 0, full_batches = 0;
        // the batches are queued and read at once (per length of piece); the accuracy reads each
        // group of rows' logits (GPT::eval_queue) before the next group overwrites them
        for (size_t i = 0; i < plan.size(); i++) {
            const int T = plan[i].T;
            const double w = (double)T / Te;
            in.resize((size_t)rows * T), tg.resize((size_t)rows * T);
            val.read(plan[i], in.data(), tg.data(), row0, rows);
            full_batches += w;
            std::function<void(int, int)> accuracy;
            if (!cfg.accuracy_tokens.empty())
                accuracy = [&](int r, int n) { count_hits(in, tg, (size_t)r * T, (size_t)n * T, hits, counted); };
            model.eval_queue(in.data(), tg.data(), rows, T, accuracy);
            // read before the shorter pieces' batches replace the buffers the queued ones fill
            if (i + 1 == plan.size() || plan[i + 1].T != T)
                for (double batch_loss : model.eval_read()) sum += w * batch_loss;
        }
        hits = (size_t)dist::sum((long long)hits);
        counted = (size_t)dist::sum((long long)counted);
        // every rank saw its rows of each batch: the mean of the ranks' means is the batch mean
        return dist::sum(sum) / world / full_batches;
    }

    // Greedy next-token hits at positions [i0, i0 + n) of the batch whose input is one of
    // accuracy_tokens (the synthetic task's markers), from the logits of the last forward (of them).
    void count_hits(const std::vector<int>& in, const std::vector<int>& tg, size_t i0, size_t n, size_t& hits,
                    size_t& counted) {
        for (size_t i = i0; i < i0 + n; i++) {
            if (std::find(cfg.accuracy_tokens.begin(), cfg.accuracy_tokens.end(), in[i]) == cfg.accuracy_tokens.end())
                continue;
            auto row = model.logits(i - i0, 1);
            hits += std::max_element(row.begin(), row.end()) - row.begin() == tg[i];
            counted++;
        }
    }
};
