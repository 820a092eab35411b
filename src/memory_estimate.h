// The memory a model needs on its device, without allocating it: the sums of the tables its
// buffers are allocated from (src/activations.h: model_buffers and activation_buffers), so the
// estimate and what GPT<BK> allocates cannot disagree (test_io's and test_cuda_bf16's
// memory_table check they are equal). train --memory prints it; the trainer and the sampler check
// the host's memory with it.
#pragma once
#include <string>
#include <vector>

#include "params.h"

// Bytes in four parts, of a model that trains (train) or of one built for inference (!train:
// ModelUse::inference, without gradients or AdamW moments): the weights (with train their
// gradients and AdamW moments; the GEMMs' copy, CRoPE's expanded weights) of every tensor but the
// position table's; the position data (wpe, with train its gradient and moments, or src/pos.h's
// data for the longest of maxT, T and `positions`); the activations of a training step (train) or
// of a forward pass (!train; every_layer: keeping every layer's, as the attention maps do) over
// B x T tokens, with gradient accumulation over accum micro-steps of B rows also the step's token
// ids and losses; the KV cache of B rows of kv positions (0: none). act_bytes: bytes per
// activation (2 with --precision bf16, which adds a bf16 copy of the weights); cpu: the CPU
// backend's, whose LM head keeps per-tile statistics and shares of d lnf beside a chunk's logits
// (classifier_head_scratch).
struct MemoryParts {
    double weights, positions, activations, kv_cache;
    double total() const { return weights + positions + activations + kv_cache; }
};
MemoryParts model_memory_parts(const ModelConfig& m, int B, int T, bool train, int act_bytes = 4, bool cpu = true,
                               int accum = 1, int positions = 0, int kv = 0, bool every_layer = false);
double model_memory_bytes(const ModelConfig& m, int B, int T, bool train, int act_bytes = 4, bool cpu = true,
                          int accum = 1, int positions = 0);
// The activations evaluation at `lengths` adds to a training step of B x T tokens: the largest
// set of a length whose groups of rows (eval_group_rows) do not fit in the training buffers
// (activations.h: eval_fits; the cublas attention's (B,H,T,T) at a long length), else 0;
// *largest: that length. !train: an inference model's evaluation (--eval_only), in the same groups
// of rows but with no training buffers to borrow: the largest set of any length.
double eval_memory_bytes(const ModelConfig& m, int B, int T, const std::vector<int>& lengths, int act_bytes = 4,
                         bool cpu = true, int* largest = nullptr, bool train = true);
// Throws "this model needs about X GiB but the machine has Y GiB; KEY: the PART alone take about
// Z GiB: make it smaller" when the host cannot hold it, naming the setting behind the largest
// part; tokens names the settings that make the B x T tokens (e.g. "batch_size 4 x seq_len 256");
// eval_bytes: evaluation's own activations beside them (eval_memory_bytes); accum, positions: as
// model_memory_parts.
void check_host_memory(const ModelConfig& m, int B, int T, bool train, const std::string& tokens, double eval_bytes = 0,
                       int accum = 1, int positions = 0);
// The same for the parts given (model_memory_parts; train: of a model that trains).
void check_host_memory(const ModelConfig& m, const MemoryParts& parts, bool train, const std::string& tokens);
