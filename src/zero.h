// Data parallel (src/dist.h: one process per device, each running the whole model on its rows of
// every batch): after the backward pass the gradients are summed over the ranks of the process
// group the trainer gives, and their global norm taken. On a backend whose collectives run beside
// its compute (CUDA: NCCL on its own stream) each layer's sum starts as soon as its backward is
// done. ZeRO-1 (--zero 1): each rank keeps the AdamW moments of one shard of the parameters only,
// gets that shard's summed gradients by a reduce-scatter, updates it (ModelWeights::adamw, src/weights.h) and gathers
// the other ranks' shards of the weights.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "dist.h"
#include "params.h"
#include "step.h"

// The part of a flat buffer of n parameters whose AdamW moments this rank keeps: all of them
// [0, n) without ZeRO-1, else [begin, end) of a buffer split in blocks of `block`, one per rank.
struct Shard {
    bool zero = false;
    size_t begin = 0, end = 0, block = 0;
};

template <class BK>
struct GradSync {
    using Real = typename BK::real;
    dist::Group group;  // the trainer's; a world of one by default
    Shard shard;        // the part of the parameters whose AdamW moments this rank keeps

    GradSync(const dist::Group& g, size_t n) : group(g) { shard.end = shard.block = n; }

    // ZeRO-1's split of n parameters: rank r owns [r*block, min((r+1)*block, n)), block a multiple
    // of 32 so that a shard starts aligned. params and grads grow to block x world elements (a
    // zero tail) so that the collectives split them evenly; m and v keep this rank's shard only.
    // Before the weights are set; false (nothing changed) outside a launcher.
    bool shard_buffers(size_t n, Real*& params, Real*& grads, Real*& m, Real*& v) {
        if (!group.mpi) return false;
        const size_t w = group.world;
        shard.zero = true;
        shard.block = ((n + w - 1) / w + 31) / 32 * 32;
        shard.begin = std::min(n, group.rank * shard.block);
        shard.end = std::min(n, shard.begin + shard.block);
        for (Real** p : {&params, &grads}) BK::free(*p), *p = BK::alloc(shard.block * w);
        for (Real** p : {&m, &v}) BK::free(*p), *p = BK::alloc(shard.block);
        return true;
    }

    // Without ZeRO-1 on a backend with asynchronous collectives: each layer's gradients are summed
    // while the backward of the layers before it runs.
    bool overlap() const { return BK::async_allreduce && group.mpi && !shard.zero; }
    // The backward is done with layer l (l = -1: with everything, the embeddings and the final
    // LayerNorm last): with overlap, the sum of its gradients starts.
    void layer_done(const std::vector<ParamTensor>& layout, Real* grads, int L, int l) {
        if constexpr (BK::async_allreduce)
            if (overlap()) BK::allreduce_sum_async(layer_parts(layout, grads, L, l));
    }
    // Layer l's slice of every per-layer tensor (stacked over L), or with l = -1 the other tensors.
    static std::vector<std::pair<Real*, size_t>> layer_parts(const std::vector<ParamTensor>& layout, Real* grads, int L,
                                                             int l) {
        std::vector<std::pair<Real*, size_t>> parts;
        for (const auto& p : layout) {
            bool whole = p.name == "wte" || p.name == "wpe" || p.name == "lnf.weight" || p.name == "lnf.bias";
            if (l < 0 && whole) parts.push_back({grads + p.offset, p.numel});
            if (l >= 0 && !whole) parts.push_back({grads + p.offset + l * (p.numel / L), p.numel / L});
        }
        return parts;
    }

    // Sums the n gradients over the ranks (with ZeRO-1 only this rank's shard, by a
    // reduce-scatter; a no-op sum at world size 1), then the global gradient's sum of squares into
    // scalars->sumsq, on the device without waiting at world size 1. Under a launcher it waits (the
    // norm of ZeRO-1's shards is summed on the host) and returns the time it took (comm_ms).
    double reduce(Real* grads, size_t n, StepScalars* scalars) {
        const bool timed = group.mpi;
        if (timed) BK::synchronize();  // time the gradient sum alone
        auto t0 = std::chrono::steady_clock::now();
        bool overlapped = false;  // started during the backward pass
        if constexpr (BK::async_allreduce)
            if ((overlapped = overlap())) BK::allreduce_wait();
        if (shard.zero) {
            BK::reduce_scatter_sum(grads, shard.block);
            size_t mine = shard.end - shard.begin;
            StepScalars h;
            BK::copy_to_host_async(&h, scalars, sizeof h);
            BK::synchronize();
            h.sumsq = dist::sum(mine ? BK::sum_squares(grads + shard.begin, mine) : 0.0);
            BK::copy_scalars_from_host(scalars, h);
        } else {
            if (!overlapped) BK::allreduce_sum(grads, n);
            BK::sum_squares_to(&scalars->sumsq, grads, n);
        }
        if (!timed) return 0;
        BK::synchronize();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
};
