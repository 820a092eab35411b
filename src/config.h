// Run configuration: one struct, filled from defaults, then a JSON file (--config), then
// command-line overrides (--key value). Every key lives in one table in config.cpp, so the
// JSON loader, the CLI parser, --help and config_to_json can never disagree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "model.h"

struct Config {
    // model
    std::string pos = "rope";          // a scheme name of src/pos.h
    int n_layer = 4;                   // L
    int n_head = 4;                    // H
    int n_embd = 128;                  // C
    int vocab_size = 50257;            // V
    int max_seq_len = 1024;            // maxT
    double rope_base = 10000.0;
    // data
    std::string train_data;            // glob or folder (required)
    std::string val_data;              // glob or folder ("" = no validation)
    std::string data_order = "sequential";  // sequential | shuffle
    int batch_size = 4;                // B
    int seq_len = 256;                 // T
    // optimiser
    int steps = 1000;
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
    std::string decay = "all";         // all | matrices
    std::string schedule = "step";     // constant | step | cosine
    int step_size = 1000;
    double gamma = 0.8;
    int warmup_steps = 0;
    double min_lr = 0.0;
    double grad_clip = 0.0;            // 0 = off
    uint64_t seed = 1337;
    // eval
    int eval_every = 100;
    int eval_batches = 20;             // 0 = whole split
    std::vector<int> eval_seq_lens;    // empty = the training seq_len
    std::vector<int> accuracy_tokens;  // accuracy of the prediction after these input ids
    // output
    int checkpoint_every = 500;
    std::string run_dir = "runs/run";
    std::string device = "auto";       // cpu | cuda | auto
    std::string precision = "fp32";    // fp32 | bf16
    std::string attention = "flash";   // flash | cublas
    int sample_every = 0;
    std::string encoder_json = "data/gpt2/encoder.json";
    // command line only (never read from or written to JSON)
    std::string resume;                // RUN_DIR to resume from
    std::string init_from;             // safetensors file to initialise the weights from
    bool help = false;                 // --help / -h given: main prints help_text() and exits 0
    bool list_pos = false;             // --list-pos given: main prints the scheme names, one a line
};

// Defaults (or, with --resume RUN_DIR, RUN_DIR/config.json, and run_dir = RUN_DIR)
// <- every --config FILE.json, left to right <- every --key value, wherever it appears.
// Throws std::runtime_error on bad input. --help/-h anywhere: returns at once with help = true;
// --list-pos likewise with list_pos = true.
Config parse_args(int argc, char** argv);
// Usage line plus every key with its default and one-line help, grouped.
std::string help_text();
// Throws std::runtime_error naming the first inconsistent or out-of-range setting.
void validate(const Config& c);
// All keys except the command-line-only ones (resume, init_from, help).
nlohmann::json config_to_json(const Config& c);
// Defaults overridden by the keys of j; `where` names the source in error messages.
Config config_from_json(const nlohmann::json& j, const std::string& where);
// The model part of a (validated) config.
ModelConfig model_config(const Config& c);
