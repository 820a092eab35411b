// Run configuration: one struct, filled from defaults, then a JSON file (--config), then
// command-line overrides (--key value). Every key lives in one table in config.cpp, so the
// JSON loader, the CLI parser, --help and config_to_json can never disagree.
#pragma once
#include <cstdint>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "params.h"

// The choice keys' values, each parsed once (from its name, at the edge: a file or the command
// line) into an enum; choice_names<E>() lists its names in the enum's order (pos and rope_scaling
// take src/pos.h's tables).
enum class DataOrder { sequential, shuffle };
enum class Decay { all, matrices };  // which parameters decay
enum class Schedule { constant, step, cosine };
enum class Device { cpu, cuda, automatic };  // "auto"
enum class Precision { fp32, bf16 };
enum class Attention { flash, cublas };
enum class Classifier { automatic, logits, fused };  // "auto"
template <class E>
const std::vector<std::string>& choice_names();
#define CHOICE_NAMES(E, ...)                                     \
    template <>                                                  \
    inline const std::vector<std::string>& choice_names<E>() {   \
        static const std::vector<std::string> n = {__VA_ARGS__}; \
        return n;                                                \
    }
CHOICE_NAMES(DataOrder, "sequential", "shuffle")
CHOICE_NAMES(Decay, "all", "matrices")
CHOICE_NAMES(Schedule, "constant", "step", "cosine")
CHOICE_NAMES(Device, "cpu", "cuda", "auto")
CHOICE_NAMES(Precision, "fp32", "bf16")
CHOICE_NAMES(Attention, "flash", "cublas")
CHOICE_NAMES(Classifier, "auto", "logits", "fused")
#undef CHOICE_NAMES
template <>
inline const std::vector<std::string>& choice_names<Pos>() {  // kPosSchemes' names, in Pos's order
    static const std::vector<std::string> n = [] {
        std::vector<std::string> v;
        for (int p = 0; p < (int)std::size(kPosSchemes); p++) v.push_back(pos_name((Pos)p));
        return v;
    }();
    return n;
}
template <>
inline const std::vector<std::string>& choice_names<RopeScaling::Kind>() {
    static const std::vector<std::string> n(std::begin(kRopeScalingNames), std::end(kRopeScalingNames));
    return n;
}
template <class E>
const std::string& choice_name(E e) {
    return choice_names<E>()[(size_t)e];
}
// "A | B | C": E's names (--help's and the errors')
template <class E>
std::string choice_list() {
    std::string s;
    for (const std::string& n : choice_names<E>()) s += (s.empty() ? "" : " | ") + n;
    return s;
}
// E's value named `name`; else throws "KEY must be one of A | B, got 'NAME'" (key: the setting).
template <class E>
E parse_choice(const std::string& key, const std::string& name) {
    const std::vector<std::string>& n = choice_names<E>();
    for (size_t i = 0; i < n.size(); i++)
        if (n[i] == name) return (E)i;
    throw std::runtime_error(key + " must be one of " + choice_list<E>() + ", got '" + name + "'");
}

struct Config {
    // model
    Pos pos = Pos::rope;
    int n_layer = 4;           // L
    int n_head = 4;            // H
    int n_embd = 128;          // C
    int vocab_size = 50257;    // V
    int max_seq_len = 1024;    // maxT
    double rope_base = 10000.0;
    double partial_rotary_factor = 1;   // f: the share of each head's channels that rotate
    RopeScaling::Kind rope_scaling = RopeScaling::none;
    double rope_scaling_factor = 0;     // s >= 1 (0 = from the length)
    int rope_train_len = 0;             // L_train of the scaling (0 = seq_len, or --init_from's)
    double sin_scale = kSinScale;  // sinusoidal: the factor the fixed table is multiplied by
    int mlp_hidden = 0;        // the MLP's hidden width F (0 = 4 x n_embd)
    std::string match_params;  // "" | a scheme: mlp_hidden gives this model that scheme's parameter count
    // data
    std::string train_data;                 // glob or folder (required)
    std::string val_data;                   // glob or folder ("" = no validation)
    DataOrder data_order = DataOrder::sequential;
    int batch_size = 4;                     // B
    int grad_accum = 1;                     // micro-steps per optimiser step, B / (ranks x grad_accum) rows each
    int seq_len = 256;                      // T
    // optimiser
    int steps = 1000;
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
    Decay decay = Decay::all;
    Schedule schedule = Schedule::step;
    int step_size = 1000;
    double gamma = 0.8;
    int warmup_steps = 0;
    double min_lr = 0.0;
    double grad_clip = 0.0;  // 0 = off
    uint64_t seed = 1337;
    // eval
    int eval_every = 100;
    int eval_batches = 20;             // 0 = whole split
    std::vector<int> eval_seq_lens;    // empty = the training seq_len
    int eval_long_every = 0;           // the eval_seq_lens other than seq_len only this often (0 = always)
    std::vector<int> accuracy_tokens;  // accuracy of the prediction after these input ids
    // output
    int checkpoint_every = 500;
    int keep_checkpoints = 2;  // the newest this many (0 = all)
    int keep_every = 0;        // and those at multiples of this step (0 = none)
    std::string run_dir = "runs/run";
    Device device = Device::automatic;
    Precision precision = Precision::fp32;
    Attention attention = Attention::flash;
    Classifier classifier = Classifier::automatic;  // fused: the LM head + loss without logits in memory
    int classifier_chunk = 0;         // rows per LM head + loss chunk (0 = the device's choice)
    int classifier_tile = 0;          // vocabulary columns per LM head + loss tile over all rows (0 = chunks of rows)
    int profile = 0;                  // 1 = time each step's phases (LM head + loss, attention, AdamW, rest)
    int cuda_graph = 1;               // 1 = the GPU replays the training step as one CUDA graph (one process)
    int tf32 = 1;                     // 1 = fp32 GEMMs and flash attention on TF32 tensor cores (GPU)
    int sample_every = 0;
    std::string encoder_json = "data/gpt2/encoder.json";
    // parallel (mpirun: batch_size is the global batch, split evenly across the ranks)
    int zero = 0;               // 1 = ZeRO-1: AdamW moments sharded across ranks
    double dist_timeout = 600;  // seconds a collective may wait (0 = forever)
    // command line only (never read from or written to JSON)
    std::string resume;       // RUN_DIR to resume from
    std::string eval_only;    // RUN_DIR to evaluate once (its latest checkpoint, or init_from), training nothing
    std::string eval_log;     // eval_only's JSONL log ("" = RUN_DIR/eval.jsonl), appended to
    std::string init_from;    // safetensors file to initialise the weights from
    std::string init_sha256;  // its SHA-256, recorded with it in config.json, the log and checkpoints
    bool overwrite = false;   // --overwrite: delete a run folder that holds a run and start anew
    bool help = false;        // --help / -h given: main prints help_text() and exits 0
    bool list_pos = false;    // --list-pos given: main prints the scheme names, one a line
    bool memory = false;      // --memory given: main prints the memory estimate per attention mode
};

// Defaults (or, with --resume RUN_DIR, RUN_DIR/config.json, and run_dir = RUN_DIR)
// <- every --config FILE.json, left to right <- every --key value, wherever it appears.
// Throws std::runtime_error on bad input. --help/-h anywhere: returns at once with help = true;
// --list-pos likewise with list_pos = true.
Config parse_args(int argc, char** argv);
// "usage: train ...\n", the first line of --help (and what a run without arguments prints).
std::string usage_line();
// One --help entry: every key (and the flags without a value) with its group, its default as
// text and its help, in --help's order.
struct KeyHelp {
    std::string name, group, value, help;
};
std::vector<KeyHelp> key_help();
// The usage line plus every entry of key_help(), each on a line of its own, grouped; then the
// position schemes.
std::string help_text();
// build/sample's options (src/sample.cpp), from their own key table by the same parser: the
// same help, the same errors.
struct SampleOptions {
    std::string checkpoint;  // RUN_DIR | CKPT_DIR | FILE.safetensors
    RopeScaling::Kind rope_scaling = RopeScaling::none;  // used only when given: else the checkpoint's
    double rope_scaling_factor = 0;
    std::string prompt, prompt_ids;
    std::string encoder_json = "data/gpt2/encoder.json";
    int tokens = 64;
    double temperature = 1.0;  // 0 = greedy
    int top_k = 40;            // 0 = the whole vocabulary
    uint64_t seed = 42;
    int num_samples = 1;
    int context = 0;  // used only when given: else max_seq_len
    Device device = Device::cpu;
    Precision precision = Precision::fp32;
    std::string attention;  // FILE: write the attention maps, generate nothing
    bool no_cache = false;
    bool help = false;            // --help / -h given
    std::set<std::string> given;  // the keys and flags the command line gave
};
// The command line's options (--help anywhere: returns at once with help = true). Throws
// std::runtime_error on an unknown option or a value of the wrong type.
SampleOptions parse_sample_args(int argc, char** argv);
std::string sample_help_text();
// Throws std::runtime_error naming the first inconsistent or out-of-range setting.
void validate(const Config& c);
// The model keys only: what every binary that builds a model from a config (a training config,
// a resumed run's config.json, a checkpoint's metadata) checks before allocating anything.
void validate_model(const Config& c);
// All keys except the command-line-only ones; with --init_from, also
// "init_from": {"path": .., "sha256": ..} (a record: --resume reads it back, never loads it).
nlohmann::json config_to_json(const Config& c);
// Defaults overridden by the keys of j; `where` names the source in error messages.
Config config_from_json(const nlohmann::json& j, const std::string& where);
// The config a resumed run continues from: RUN_DIR/config.json (the run's start) with the changes
// of its log's "config_change" records applied in order, and run_dir = RUN_DIR.
Config resumed_config(const std::string& run_dir);
// {"key": [was, now]} of every key but the command-line ones that differs between two configs.
// The OpenMP threads the run last trained with on the CPU (its log's run_on.threads; 0 when
// it records none): OpenBLAS rounds differently at another count, so evaluation uses it too.
int run_threads(const std::string& run_dir);
nlohmann::json config_changes(const Config& was, const Config& now);
// What a resume changes in the run's config `was` (resumed_config): config_changes. The model,
// its data (the checkpoint's weights, the loader's position and the validation curve belong to
// them; grad_accum aside: the same step), the seed and the folder cannot change: throws naming
// each such key with both values.
nlohmann::json resume_changes(const Config& was, const Config& now);
// The model part of a (validated) config, with its MLP width resolved: mlp_hidden, or with 0 the
// width match_params gives, else 4 x n_embd. The trainer stores that width in its config.json.
ModelConfig model_config(const Config& c);

// Learning rate at step (0-based): linear warmup, then the schedule.
double lr_at(const Config& c, int step);
// clip_scale (the factor on the gradient for clipping to grad_clip) is in step.h: the GPU computes it too.

// A config stored with weights (a checkpoint's metadata): parsed, with errors naming `where`, and
// its model keys validated as validate_model does.
Config stored_config(const std::string& json_text, const std::string& where);

// Process-wide defaults for every binary, first thing in main: stdout line-buffered (progress
// reaches a pipe or a log file at once) and OpenMP's waiting: a short spin (GOMP_SPINCOUNT=1000)
// unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT (the process starts itself again with
// it; see config.cpp).
void setup_process(char** argv);

// An integer on the command line of a program without a key table (bench_gemms), checked as
// config values are: "what: expected an integer, got 'abc'" (also when outside [lo, hi]).
long long parse_int_arg(const std::string& s, const std::string& what, long long lo, long long hi);
