// llm.c-compatible token shard reader (format in MODEL.md: 1024-byte header of 256 int32 LE
// [20240520, 1, N, ...], then N uint16 LE tokens, file size exactly 1024 + 2N).
//
// Which files: `pattern` is a glob (glob(3), e.g. data/x/x_train_*.bin) or a folder; for a folder
// every file directly in it named NAME_<split>_NNNNNN.bin is used (split = train | val | test; the
// same rule as data/shards.py). Shards are used in sorted path order. Errors that mean "not
// prepared yet" or "a text file" say which command makes the shards.
//
// Windows: a batch is B windows of T+1 consecutive tokens (inputs = first T, targets = last T).
// Windows never cross shard boundaries; a shard of N tokens has windows at offsets k*T for
// k = 0 .. (N-1)/T - 1. Order: sequential (shards in order, windows by offset, B consecutive
// windows per batch) or shuffle (each epoch a Fisher-Yates permutation of all windows seeded
// from (seed, epoch) with splitmix64, identical on every platform). When the windows run out the
// next epoch starts, also in the middle of a batch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

class DataLoader {
  public:
    // Reads and checks every shard (magic, version, size, every token < vocab_size); throws on error.
    DataLoader(const std::string& pattern, const std::string& split, int vocab_size);

    // Starts epoch 0 at its first window. Throws if the split has fewer than B windows of T+1 tokens.
    void start(int B, int T, bool shuffle, uint64_t seed);
    // Fills inputs and targets, B*T ints each (row b = window b). Data parallel: a rank passes
    // its rows [row0, row0 + rows) of the global batch (buffers of rows*T ints); every rank
    // advances by the whole batch, so the position is the same everywhere.
    void next_batch(int* inputs, int* targets, int row0 = 0, int rows = -1);
    // Hash of every token of the split, to check that all ranks read the same data.
    uint64_t fingerprint() const;

    // Position for bit-exact resume: {"epoch", "cursor", "seq_len", "shuffle", "seed"}.
    nlohmann::json state() const;
    // Call after start() with the same T and order; continues exactly where state() was taken.
    void set_state(const nlohmann::json& s);

    // Evaluation's batches (MODEL.md, Evaluation): every length T <= L scores the targets of the
    // first n windows of length L in sequential order (n a multiple of B; past the split's end they
    // start again). Each window is cut from its start into L/T pieces of T tokens and, when T does
    // not divide L, one of L mod T. A batch holds B pieces of one length, those of T first.
    struct EvalBatch {
        int T;                                          // the pieces' length
        std::vector<std::pair<size_t, size_t>> pieces;  // (shard, offset) of each piece's T+1 tokens
    };
    std::vector<EvalBatch> eval_batches(int B, int L, size_t n, int T) const;
    // Fills inputs and targets (rows x b.T ints each) from pieces [row0, row0 + rows) of b.
    void read(const EvalBatch& b, int* inputs, int* targets, int row0 = 0, int rows = -1) const;

    size_t num_windows(int T) const;  // windows of T+1 tokens over all shards
    size_t num_tokens() const;
    size_t num_shards() const { return shards_.size(); }
    const std::vector<std::string>& paths() const { return paths_; }

  private:
    void make_order();                                           // builds the window order of epoch_
    void window(size_t i, size_t* shard, size_t* offset) const;  // i-th window of the current order
    // row r of inputs and targets (T ints each) from the T+1 tokens at offset of shard
    void copy(size_t shard, size_t offset, int T, int r, int* inputs, int* targets) const;

    std::string pattern_;
    std::vector<std::string> paths_;
    std::vector<std::vector<uint16_t>> shards_;
    // current run
    int B_ = 0, T_ = 0;
    bool shuffle_ = false;
    uint64_t seed_ = 0;
    uint64_t epoch_ = 0;
    size_t cursor_ = 0;                 // next window index in the epoch's order
    std::vector<size_t> first_window_;  // per shard: global index of its first window (+ total at end)
    std::vector<size_t> perm_;          // shuffle only: epoch order of global window indices
};
