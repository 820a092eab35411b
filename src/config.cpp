// Table-driven configuration: every key is one row of kKeys, and the JSON loader, the CLI
// parser, help_text() and config_to_json() all walk that table. build/sample's options are a
// table of their own (kSampleKeys), read by the same parser and described by the same help.
#include "config.h"
#include "fileio.h"
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unistd.h>
#include <stdexcept>
#include <variant>

using json = nlohmann::json;

namespace {

// A key of the options struct S: a member of one of these types.
template <class S>
using FieldOf = std::variant<std::string S::*, int S::*, double S::*, uint64_t S::*, std::vector<int> S::*, Pos S::*,
                             RopeScaling::Kind S::*, DataOrder S::*, Decay S::*, Schedule S::*, Device S::*,
                             Precision S::*, Attention S::*, Classifier S::*>;

template <class S>
struct KeyOf {
    const char* name;
    const char* group;  // train: model | data | optimiser | eval | output | command line
    FieldOf<S> field;
    const char* help;
    const char* shown = nullptr;  // --help's default column, where not the member's default
};
using Key = KeyOf<Config>;

// An option without a value; field null: one main handles before parsing (--help).
template <class S>
struct FlagOf {
    const char* name;
    const char* group;
    bool S::*field;
    const char* help;
};

const Key kKeys[] = {
    {"pos", "model", &Config::pos, "position scheme (listed below)"},
    {"n_layer", "model", &Config::n_layer, "number of transformer blocks L"},
    {"n_head", "model", &Config::n_head, "attention heads H (head size D = n_embd / n_head)"},
    {"n_embd", "model", &Config::n_embd,
     "model width C (on the GPU a multiple of 8 in bf16, of 4 in fp32, for its 16-byte loads; any other costs speed "
     "only)"},
    {"vocab_size", "model", &Config::vocab_size, "vocabulary size V (every token must be < V)"},
    {"max_seq_len", "model", &Config::max_seq_len, "longest sequence maxT (size of the learned position table)"},
    {"rope_base", "model", &Config::rope_base, "RoPE base: theta_j = base^(-2j/D)"},
    {"partial_rotary_factor", "model", &Config::partial_rotary_factor,
     "rotary schemes: f in (0, 1]: the first R = 2 floor(f D / 2) channels of each head rotate, theta_j = "
     "base^(-2j/R); the rest pass unrotated (MODEL.md, Partial rotary)"},
    {"rope_scaling", "model", &Config::rope_scaling,
     "rotary schemes: the cos/sin tables for long sequences (MODEL.md, RoPE scaling)"},
    {"rope_scaling_factor", "model", &Config::rope_scaling_factor,
     "rope_scaling's factor s >= 1 (0 = from the length: s = max(1, L / rope_train_len) for L tokens; dynamic "
     "always so)"},
    {"rope_train_len", "model", &Config::rope_train_len,
     "the training length rope_scaling refers to (0 = seq_len, or with --init_from the checkpoint's; config.json "
     "records the value used)"},
    {"sin_scale", "model", &Config::sin_scale,
     "sinusoidal only: the factor the fixed table is multiplied by (1 = the original table of +-1; MODEL.md)"},
    {"mlp_hidden", "model", &Config::mlp_hidden,
     "the MLP's hidden width F (0 = 4 x n_embd); a multiple of 8, so that with n_embd a multiple of 8 too rows of F "
     "and every parameter tensor stay 16-byte aligned in bf16 (the GPU's vector loads and GEMM operands; without, "
     "its slower element-wise paths)"},
    {"match_params", "model", &Config::match_params,
     "a position scheme (empty = none): sets mlp_hidden to the multiple of 8 whose total parameter count is nearest "
     "that scheme's at the default width (crope with rope's: 608 at n_layer 4, n_embd 128)"},
    {"train_data", "data", &Config::train_data,
     "training shards: a glob, or a folder (its *.bin with '_train_' in the name)"},
    {"val_data", "data", &Config::val_data,
     "validation shards: a glob, or a folder (its *.bin with '_val_' in the name); empty = none"},
    {"data_order", "data", &Config::data_order, "the order of the training windows (shuffle: anew every epoch)"},
    {"batch_size", "data", &Config::batch_size, "sequences per batch B"},
    {"grad_accum", "data", &Config::grad_accum,
     "gradient accumulation: each step's batch in this many micro-steps per rank (the same step, less memory)"},
    {"seq_len", "data", &Config::seq_len, "training sequence length T"},
    {"steps", "optimiser", &Config::steps, "number of optimiser steps"},
    {"lr", "optimiser", &Config::lr, "peak learning rate"},
    {"beta1", "optimiser", &Config::beta1, "AdamW beta1"},
    {"beta2", "optimiser", &Config::beta2, "AdamW beta2"},
    {"eps", "optimiser", &Config::eps, "AdamW eps"},
    {"weight_decay", "optimiser", &Config::weight_decay, "decoupled weight decay"},
    {"decay", "optimiser", &Config::decay, "which parameters decay"},
    {"schedule", "optimiser", &Config::schedule, "lr schedule"},
    {"step_size", "optimiser", &Config::step_size, "step schedule: multiply lr by gamma every step_size steps"},
    {"gamma", "optimiser", &Config::gamma, "step schedule factor"},
    {"warmup_steps", "optimiser", &Config::warmup_steps, "linear warmup steps"},
    {"min_lr", "optimiser", &Config::min_lr, "cosine schedule: final learning rate"},
    {"grad_clip", "optimiser", &Config::grad_clip, "clip the global gradient norm to this (0 = off)"},
    {"seed", "optimiser", &Config::seed, "random seed (initialisation and data order)"},
    {"eval_every", "eval", &Config::eval_every, "evaluate every this many steps (0 = never)"},
    {"eval_batches", "eval", &Config::eval_batches,
     "validation batches of seq_len tokens per evaluation, read as windows of the longest eval_seq_lens entry: "
     "every length scores the same tokens (0 = whole split)"},
    {"eval_seq_lens", "eval", &Config::eval_seq_lens, "evaluation lengths, e.g. 512,1024 (empty = seq_len)"},
    {"eval_long_every", "eval", &Config::eval_long_every,
     "evaluate the eval_seq_lens other than seq_len only every this many steps and after the last (0 = at every "
     "evaluation)"},
    {"accuracy_tokens", "eval", &Config::accuracy_tokens,
     "also report next-token accuracy after these input ids, e.g. 16,17 (synthetic task markers)"},
    {"checkpoint_every", "output", &Config::checkpoint_every,
     "write a checkpoint every this many steps and at the end (0 = never)"},
    {"keep_checkpoints", "output", &Config::keep_checkpoints,
     "keep the newest this many checkpoints, deleting older ones once a new one is complete (0 = keep all)"},
    {"keep_every", "output", &Config::keep_every,
     "also keep every checkpoint whose step is a multiple of this, never deleted (0 = none)"},
    {"run_dir", "output", &Config::run_dir, "run folder: config.json, log.jsonl, checkpoints"},
    {"device", "output", &Config::device, "where the model computes (auto: the GPU when one is usable)"},
    {"precision", "output", &Config::precision,
     "the activations' precision (bf16: activations and their gradients in bf16; CUDA only)"},
    {"attention", "output", &Config::attention,
     "flash saves each row's log-sum-exp, no (B,H,T,T) buffer (on the GPU head size 8, 16, 32, 64 or 128); cublas, "
     "the reference, saves the probabilities (any head size)"},
    {"classifier", "output", &Config::classifier,
     "logits: the LM head + loss writes the logits, a chunk of rows or a tile of the vocabulary at a time; fused: "
     "never, each kernel computes the logits it needs again (on the GPU tensor cores at n_embd 32, 64 or 128, "
     "bf16 or TF32); auto: fused where the GPU runs it and no classifier_chunk or classifier_tile is set, else "
     "logits"},
    {"classifier_chunk", "output", &Config::classifier_chunk,
     "classifier logits: rows of B*T per chunk of the LM head + loss, the logits of one chunk existing at a time (0 = "
     "the device's choice, which --memory prints)"},
    {"classifier_tile", "output", &Config::classifier_tile,
     "classifier logits: 0 = the LM head + loss goes by chunks of rows (classifier_chunk) | a multiple of 128: it "
     "goes over all B*T rows in tiles of this many vocabulary columns, two passes (the logits computed twice), only "
     "one tile's logits exist"},
    {"profile", "output", &Config::profile,
     "1 = time each training step's phases (LM head + loss, attention, AdamW, the rest; CUDA events on the GPU): a "
     "profile line per step, phase_ms in the log"},
    {"cuda_graph", "output", &Config::cuda_graph,
     "1 = on the GPU, capture the training step once in a CUDA graph and replay it (no effect on the CPU, in the "
     "profiling mode or under mpirun, which run the step eagerly); 0 = launch every kernel each step"},
    {"tf32", "output", &Config::tf32,
     "1 = on the GPU, the fp32 GEMMs and flash attention multiply on TF32 tensor cores (fp32 accumulation); 0 = "
     "plain fp32, as NVIDIA_TF32_OVERRIDE=0 (bf16 multiplies in bf16 either way)"},
    {"sample_every", "output", &Config::sample_every, "print a sample every this many steps (0 = never)"},
    {"encoder_json", "output", &Config::encoder_json,
     "GPT-2 encoder.json to decode samples with (ids are printed if missing)"},
    {"zero", "parallel", &Config::zero,
     "with several ranks (mpirun): 1 = ZeRO-1, the AdamW moments sharded across ranks; 0 = every rank keeps them all"},
    {"dist_timeout", "parallel", &Config::dist_timeout,
     "seconds a collective across ranks may wait before the run ends with an error (0 = forever)"},
    {"resume", "command line", &Config::resume,
     "resume RUN_DIR from its latest checkpoint (its config.json, with the changes its log records, is the base; "
     "a changed key is logged, one of the model or the data refused)"},
    {"init_from", "command line", &Config::init_from,
     "initialise the weights from this .safetensors file (with eval_only: evaluate these weights)"},
    {"eval_only", "command line", &Config::eval_only,
     "evaluate RUN_DIR's latest checkpoint once at every eval_seq_lens entry and train nothing (its config, with "
     "the changes its log records, is the base; other keys override it, e.g. eval_seq_lens, val_data)"},
    {"eval_log", "command line", &Config::eval_log, "eval_only's JSONL log, appended to (default RUN_DIR/eval.jsonl)"},
};

// The flags without a value, listed in --help after the keys of the command line.
const FlagOf<Config> kFlags[] = {
    {"overwrite", "command line", &Config::overwrite,
     "a run_dir that holds a run is refused; this deletes it and starts anew"},
    {"help, -h", "command line", nullptr, "print this help and exit"},
    {"list-pos", "command line", nullptr, "print the position schemes' names and exit"},
    {"memory", "command line", &Config::memory,
     "print the memory a training step of this config needs (with eval_only: the evaluation's), per attention "
     "mode, and exit"},
};

// build/sample's options (src/sample.cpp checks how they combine).
const KeyOf<SampleOptions> kSampleKeys[] = {
    {"checkpoint", "model", &SampleOptions::checkpoint,
     "RUN_DIR (its latest checkpoint), CKPT_DIR or FILE.safetensors (required)"},
    {"rope_scaling", "model", &SampleOptions::rope_scaling,
     "the rotary tables' scaling (any, not only the trained one; MODEL.md, RoPE scaling)", "the checkpoint's"},
    {"rope_scaling_factor", "model", &SampleOptions::rope_scaling_factor, "rope_scaling's factor s",
     "the checkpoint's"},
    {"prompt", "prompt", &SampleOptions::prompt,
     "text, encoded with GPT-2's BPE (encoder_json and the vocab.bpe beside it); without a prompt the text starts "
     "from <|endoftext|>"},
    {"prompt_ids", "prompt", &SampleOptions::prompt_ids,
     "the prompt's ids instead, \"464 3290\" or 464,3290 (what data/gpt2_tokenizer.py encode prints)"},
    {"encoder_json", "prompt", &SampleOptions::encoder_json,
     "GPT-2's vocabulary: encodes --prompt and decodes the text (without it the ids are printed)"},
    {"tokens", "sampling", &SampleOptions::tokens, "tokens to generate, printed as they come (1 to 2^20)"},
    {"temperature", "sampling", &SampleOptions::temperature, "0 = greedy"},
    {"top_k", "sampling", &SampleOptions::top_k, "sample among the k likeliest tokens (0 = the whole vocabulary)"},
    {"seed", "sampling", &SampleOptions::seed, "the sampler's random seed"},
    {"num_samples", "sampling", &SampleOptions::num_samples, "samples, one after another"},
    {"context", "sampling", &SampleOptions::context,
     "the longest context the model sees; past it the window slides, each token from the last N (with learned "
     "positions at most max_seq_len)",
     "max_seq_len"},
    {"device", "sampling", &SampleOptions::device,
     "where the model runs (cuda: a build with nvcc; auto: cuda if usable)"},
    {"precision", "sampling", &SampleOptions::precision, "the activations' precision (bf16 on cuda only)"},
    {"attention", "attention maps", &SampleOptions::attention,
     "generate nothing: write the attention probabilities of every layer and head over the prompt (at most "
     "max_seq_len tokens) to FILE, JSON with the ids and the scheme (MODEL.md, Attention maps)"},
};
const FlagOf<SampleOptions> kSampleFlags[] = {
    {"no_cache", "sampling", &SampleOptions::no_cache,
     "the whole window's forward pass for every token instead of the KV cache (the same tokens, slower)"},
    {"help, -h", "sampling", nullptr, "print this help and exit"},
};

template <class S>
bool cli_only(const KeyOf<S>& k) {
    return std::string(k.group) == "command line";
}

template <class S, size_t N>
const KeyOf<S>* find_key(const KeyOf<S> (&keys)[N], const std::string& name) {
    for (const KeyOf<S>& k : keys)
        if (name == k.name) return &k;
    return nullptr;
}
template <class S, size_t N>
const FlagOf<S>* find_flag(const FlagOf<S> (&flags)[N], const std::string& name) {
    for (const FlagOf<S>& f : flags)
        if (f.field && name == f.name) return &f;
    return nullptr;
}

// Levenshtein distance: insertions, deletions and substitutions of one character each.
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);  // row[j]: distance of a[0, i) to b[0, j)
    for (size_t j = 0; j <= b.size(); j++) row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
            diag = up;
        }
    }
    return row[b.size()];
}

// "did you mean --steps? " for a mistyped key of `keys` (in_file: "did you mean 'steps'? ", of the
// keys a config file may hold): the nearest key within a third of its length (at least 1 edit),
// or "" when none is that near.
template <class S, size_t N>
std::string did_you_mean(const KeyOf<S> (&keys)[N], const std::string& key, bool in_file = false) {
    const char* best = nullptr;
    size_t best_d = std::max<size_t>(1, key.size() / 3) + 1;
    for (const KeyOf<S>& k : keys)
        if (size_t d = edit_distance(key, k.name); d < best_d && !(in_file && cli_only(k))) best = k.name, best_d = d;
    if (!best) return "";
    return in_file ? "did you mean '" + std::string(best) + "'? " : "did you mean --" + std::string(best) + "? ";
}

// ---- one parser / converter per field type; `what` names the setting in errors ----

[[noreturn]] void bad_value(const std::string& what, const std::string& text, const std::string& want) {
    throw std::runtime_error(what + ": expected " + want + ", got '" + text + "'");
}

long long parse_integer(const std::string& s, const std::string& what, long long lo, long long hi) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE) bad_value(what, s, "an integer");
    if (v < lo || v > hi)  // an integer out of range: say the range, not "expected an integer"
    {
        const bool no_lo = lo == INT_MIN || lo == LLONG_MIN, no_hi = hi == INT_MAX || hi == LLONG_MAX;
        bad_value(what, s,
                  no_hi && !no_lo   ? "an integer >= " + std::to_string(lo)
                  : no_lo && !no_hi ? "an integer <= " + std::to_string(hi)
                                    : "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return v;
}

void parse_text(const std::string& s, std::string& out, const std::string&) {
    out = s;
}
void parse_text(const std::string& s, int& out, const std::string& what) {
    out = (int)parse_integer(s, what, INT_MIN, INT_MAX);
}
void parse_text(const std::string& s, double& out, const std::string& what) {
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) bad_value(what, s, "a number");
    out = v;
}
void parse_text(const std::string& s, uint64_t& out, const std::string& what) {
    errno = 0;
    char* end = nullptr;
    // strtoull silently negates "-1", so reject a sign explicitly
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || s[0] == '-' || s[0] == '+' || *end != '\0' || errno == ERANGE)
        bad_value(what, s, "a non-negative integer");
    out = v;
}
void parse_text(const std::string& s, std::vector<int>& out, const std::string& what) {
    // "512,1024"; an empty string is the empty list
    out.clear();
    size_t start = 0;
    while (start < s.size()) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        int v;
        parse_text(s.substr(start, comma - start), v, what);
        out.push_back(v);
        start = comma + 1;
        if (comma + 1 == s.size()) bad_value(what, s, "a comma-separated list of integers");
    }
}

// A choice key's value by name; what: "--KEY" or "config key 'KEY' in FILE".
template <class E, class = std::enable_if_t<std::is_enum<E>::value>>
void parse_text(const std::string& s, E& out, const std::string& what) {
    out = parse_choice<E>(what.rfind("--", 0) == 0 ? what.substr(2) : what, s);
}

void from_json_value(const json& j, std::string& out, const std::string& what) {
    if (!j.is_string()) bad_value(what, j.dump(), "a string");
    out = j.get<std::string>();
}
void from_json_value(const json& j, int& out, const std::string& what) {
    bool ok =
        j.is_number_integer() && (j.is_number_unsigned() ? j.get<uint64_t>() <= (uint64_t)INT_MAX
                                                         : j.get<int64_t>() >= INT_MIN && j.get<int64_t>() <= INT_MAX);
    if (!ok) bad_value(what, j.dump(), "an integer");
    out = j.get<int>();
}
void from_json_value(const json& j, double& out, const std::string& what) {
    if (!j.is_number()) bad_value(what, j.dump(), "a number");
    out = j.get<double>();
}
void from_json_value(const json& j, uint64_t& out, const std::string& what) {
    if (!j.is_number_unsigned()) bad_value(what, j.dump(), "a non-negative integer");
    out = j.get<uint64_t>();
}
template <class E, class = std::enable_if_t<std::is_enum<E>::value>>
void from_json_value(const json& j, E& out, const std::string& what) {
    std::string name;
    from_json_value(j, name, what);
    parse_text(name, out, what);
}
void from_json_value(const json& j, std::vector<int>& out, const std::string& what) {
    if (j.is_string()) return parse_text(j.get<std::string>(), out, what);
    if (!j.is_array()) bad_value(what, j.dump(), "an array of integers or a string like \"512,1024\"");
    out.clear();
    for (const json& e : j) {
        int v;
        from_json_value(e, v, what);
        out.push_back(v);
    }
}

template <class Value>
json to_json_value(const Value& v) {
    if constexpr (std::is_enum<Value>::value)
        return json(choice_name(v));
    else
        return json(v);
}

std::string to_text(const std::string& v) {
    return "\"" + v + "\"";
}
std::string to_text(int v) {
    return std::to_string(v);
}
std::string to_text(uint64_t v) {
    return std::to_string(v);
}
std::string to_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}
template <class E, class = std::enable_if_t<std::is_enum<E>::value>>
std::string to_text(E v) {
    return to_text(choice_name(v));
}
std::string to_text(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
    return "\"" + s + "\"";
}

// Apply every key of a JSON object; `where` is the source for error messages.
void apply_json(Config& c, const json& j, const std::string& where) {
    if (!j.is_object()) throw std::runtime_error("config " + where + " must be a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it) {
        const Key* k = find_key(kKeys, it.key());
        if (!k || cli_only(*k)) {
            std::string hint = did_you_mean(kKeys, it.key(), true);
            throw std::runtime_error("unknown config key '" + it.key() + "' in " + where +
                                     (hint.empty() ? "" : " (" + hint.substr(0, hint.size() - 1) + ")"));
        }
        std::string what = "config key '" + it.key() + "' in " + where;
        std::visit([&](auto field) { from_json_value(it.value(), c.*field, what); }, k->field);
    }
}

void apply_json_file(Config& c, const std::string& path) {
    json j;
    try {
        j = json::parse(read_text_file(path));
    } catch (const json::exception& e) {
        throw std::runtime_error("cannot parse config " + path + ": " + e.what());
    }
    apply_json(c, j, path);
}

void require(bool ok, const std::string& msg) {
    if (!ok) throw std::runtime_error(msg);
}

using Options = std::vector<std::pair<std::string, std::string>>;

// The arguments as (key, value) pairs: "--key value" or "--key=value", dashes -> underscores; a
// flag's pair has the value "". `extra`: a key outside the table (train's --config).
template <class S, size_t N, size_t M>
Options split_options(const std::vector<std::string>& args, const KeyOf<S> (&keys)[N], const FlagOf<S> (&flags)[M],
                      const char* extra = "") {
    Options opts;
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (a.size() < 3 || a.compare(0, 2, "--") != 0)
            throw std::runtime_error("unexpected argument '" + a + "' (options are --key value; see --help)");
        std::string key = a.substr(2), value;
        size_t eq = key.find('=');
        bool has_value = eq != std::string::npos;
        if (has_value) {
            value = key.substr(eq + 1);
            key = key.substr(0, eq);
        }
        for (char& ch : key)
            if (ch == '-') ch = '_';
        if (find_flag(flags, key)) {
            if (has_value) throw std::runtime_error("--" + key + " takes no value, got '" + a + "'");
            opts.emplace_back(key, "");
            continue;
        }
        if (key != extra && !find_key(keys, key))
            throw std::runtime_error("unknown option '" + a.substr(0, has_value ? eq + 2 : a.size()) + "' (" +
                                     did_you_mean(keys, key) + "see --help)");
        if (!has_value) {
            // "--steps --lr 0.1": the value of --steps is missing, not "0.1" unexpected
            if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
                throw std::runtime_error(
                    "the value of " + a + " is missing" +
                    (i + 1 < args.size() ? " (the next argument, '" + args[i + 1] +
                                               "', is an option; a value that starts with -- goes as " + a + "=VALUE)"
                                         : ""));
            value = args[++i];
        }
        opts.emplace_back(key, value);
    }
    return opts;
}

// Whether args hold a or b (--help and --list-pos win over everything else, so that they work
// even next to a broken option).
bool has_arg(const std::vector<std::string>& args, const char* a, const char* b) {
    return std::find(args.begin(), args.end(), a) != args.end() || std::find(args.begin(), args.end(), b) != args.end();
}

// Each option of opts into s, in order (a later one wins); what is not in the tables is skipped.
template <class S, size_t N, size_t M>
void apply_options(S& s, const Options& opts, const KeyOf<S> (&keys)[N], const FlagOf<S> (&flags)[M]) {
    for (const auto& opt : opts) {  // not a structured binding: C++17 lets no lambda capture one (clang refuses)
        if (const FlagOf<S>* f = find_flag(flags, opt.first)) {
            s.*(f->field) = true;
            continue;
        }
        const std::string what = "--" + opt.first;
        if (const KeyOf<S>* k = find_key(keys, opt.first))
            std::visit([&](auto field) { parse_text(opt.second, s.*field, what); }, k->field);
    }
}

// --help's rows of a key table and its flags: each key with its group, its default as text and its
// help (a choice key's ends with its choices, from their table).
template <class S, size_t N, size_t M>
std::vector<KeyHelp> help_rows(const KeyOf<S> (&keys)[N], const FlagOf<S> (&flags)[M]) {
    const S d;
    std::vector<KeyHelp> rows;
    for (const KeyOf<S>& k : keys)
        std::visit(
            [&](auto field) {
                using T = std::remove_cv_t<std::remove_reference_t<decltype(d.*field)>>;
                std::string help = k.help;
                if constexpr (std::is_enum<T>::value) help += ": " + choice_list<T>();
                rows.push_back({k.name, k.group, k.shown ? k.shown : to_text(d.*field), help});
            },
            k.field);
    for (const FlagOf<S>& f : flags) rows.push_back({f.name, f.group, "", f.help});
    // each group's rows together, the groups in the order they first appear
    std::vector<std::string> order;
    for (const KeyHelp& r : rows)
        if (std::find(order.begin(), order.end(), r.group) == order.end()) order.push_back(r.group);
    std::stable_sort(rows.begin(), rows.end(), [&](const KeyHelp& a, const KeyHelp& b) {
        return std::find(order.begin(), order.end(), a.group) < std::find(order.begin(), order.end(), b.group);
    });
    return rows;
}

// The rows, one line each, grouped, the defaults in a column.
std::string help_lines(const std::vector<KeyHelp>& rows) {
    // padded to a column, whatever the length: every entry is one whole line
    auto column = [](std::string s, size_t width) {
        if (s.size() < width) s.resize(width, ' ');
        return s;
    };
    std::string s, group;
    size_t width = 0, values = 12;  // the longest key's, and value's
    for (const KeyHelp& k : rows) width = std::max(width, k.name.size()), values = std::max(values, k.value.size());
    for (const KeyHelp& k : rows) {
        if (k.group != group) s += "\n" + (group = k.group) + ":\n";
        s += "  --" + column(k.name, width) + " " + column(k.value, values) + " " + k.help + "\n";
    }
    return s;
}

// What the options apply to: the defaults, or the resumed (or evaluated) run's resolved config,
// so that the command line still overrides it.
Config base_config(const Options& opts) {
    std::string resume, eval_only;
    bool init_from = false, overwrite = false;
    for (const auto& [key, value] : opts) {
        if (key == "resume") resume = value;
        if (key == "eval_only") eval_only = value;
        init_from |= key == "init_from";
        overwrite |= key == "overwrite";
    }
    if (!eval_only.empty() && (!resume.empty() || overwrite))
        throw std::runtime_error(
            "--eval_only evaluates a run and writes no checkpoint: --resume and --overwrite do "
            "not go with it");
    if (!resume.empty() && init_from)
        throw std::runtime_error("--init_from starts a new run from weights; --resume continues one: give only one");
    if (!resume.empty() && overwrite)
        throw std::runtime_error("--overwrite deletes a run; --resume continues it: give only one");
    Config c;
    if (!resume.empty()) {
        try {
            c = resumed_config(resume);
        } catch (const std::exception& e) {
            throw std::runtime_error("cannot resume from '" + resume + "' (no checkpoint in it?): " + e.what());
        }
    }
    if (!eval_only.empty()) {
        try {
            c = resumed_config(eval_only);
        } catch (const std::exception& e) {
            throw std::runtime_error("cannot evaluate '" + eval_only + "' (not a run folder?): " + e.what());
        }
        c.init_from.clear();  // the weights the run started from, not those it ended with
    }
    return c;
}

}  // namespace

Config parse_args(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    Config c;
    if ((c.help = has_arg(args, "--help", "-h"))) return c;
    if ((c.list_pos = has_arg(args, "--list-pos", "--list_pos"))) return c;
    const Options opts = split_options(args, kKeys, kFlags, "config");
    c = base_config(opts);
    for (const auto& [key, value] : opts)  // several --config files apply left to right
        if (key == "config") apply_json_file(c, value);
    apply_options(c, opts, kKeys, kFlags);
    return c;
}

SampleOptions parse_sample_args(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    SampleOptions o;
    if ((o.help = has_arg(args, "--help", "-h"))) return o;
    const Options opts = split_options(args, kSampleKeys, kSampleFlags);
    apply_options(o, opts, kSampleKeys, kSampleFlags);
    for (const auto& [key, value] : opts) o.given.insert(key);
    return o;
}

std::string sample_help_text() {
    return "usage: sample --checkpoint RUN_DIR|CKPT_DIR|FILE.safetensors [--prompt TEXT | --prompt_ids IDS] "
           "[--KEY VALUE ...]\n"
           "       sample --checkpoint ... [--prompt TEXT | --prompt_ids IDS] --attention FILE\n"
           "Prints the prompt and the tokens it samples after it as they come, then a line of the speed (stderr).\n"
           "(--key-name and --key_name both work; --key=value too.)\n" +
           help_lines(help_rows(kSampleKeys, kSampleFlags));
}

std::string usage_line() {
    return "usage: train [--config FILE.json] [--KEY VALUE ...] [--resume RUN_DIR | --overwrite | --eval_only "
           "RUN_DIR] [--init-from FILE.safetensors]\n";
}

std::vector<KeyHelp> key_help() {
    return help_rows(kKeys, kFlags);
}

std::string help_text() {
    std::string s = usage_line() +
                    "Settings come from the defaults, then FILE.json (an object of the keys below), then --KEY VALUE\n"
                    "(--key-name and --key_name both work; --key=value too).\n" +
                    help_lines(key_help()) + "\nposition schemes (--pos):\n";
    for (const PosTraits& t : kPosSchemes) {
        std::string name = t.name;
        name.resize(std::max<size_t>(name.size(), 12), ' ');
        s += "  " + name + " " + t.about + "\n";
    }
    return s;
}

void validate_model(const Config& c) {
    const PosTraits* pos = &pos_traits(c.pos);
    const std::string pos_is = "pos=" + std::string(pos_name(c.pos));
    // Past 2^20 the layout's sizes overflow (4 x n_embd in an int) before the memory check could
    // say the model is too large; every real model is far below (and see the count at the end).
    constexpr int kMaxSize = 1 << 20;
    require(c.n_layer <= kMaxSize, "n_layer must be <= " + std::to_string(kMaxSize) + ", got " + std::to_string(c.n_layer));
    require(c.n_embd <= kMaxSize, "n_embd must be <= " + std::to_string(kMaxSize) + ", got " + std::to_string(c.n_embd));
    require(c.n_layer >= 1, "n_layer must be >= 1, got " + std::to_string(c.n_layer));
    require(c.n_head >= 1, "n_head must be >= 1, got " + std::to_string(c.n_head));
    require(c.n_embd >= 1, "n_embd must be >= 1, got " + std::to_string(c.n_embd));
    require(c.n_embd % c.n_head == 0,
            "n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" + std::to_string(c.n_head) + ")");
    // odd C implies odd D, so check C first to give the complex projection's more specific message
    require(!pos->complex_qkv || c.n_embd % 2 == 0,
            pos_is + " needs an even n_embd, got " + std::to_string(c.n_embd));
    int D = c.n_embd / c.n_head;
    require(!pos->rotary || D % 2 == 0,
            pos_is + " needs an even head size, got n_embd/n_head = " + std::to_string(D));
    require(!pos->rotary || c.rope_base > 0, "rope_base must be > 0");
    require(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1,
            "partial_rotary_factor must be in (0, 1], got " + to_text(c.partial_rotary_factor));
    require(pos->rotary || c.partial_rotary_factor == 1,
            "partial_rotary_factor " + to_text(c.partial_rotary_factor) + " is set, but " + pos_is +
                " rotates nothing (the key is for the rotary schemes)");
    RopeScaling rotary;
    rotary.partial = c.partial_rotary_factor;
    const int R = rotary.rotary_dims(D);
    require(!pos->rotary || R >= 2, "partial_rotary_factor " + to_text(c.partial_rotary_factor) +
                                        " rotates no pair of head size " + std::to_string(D) +
                                        ": R = 2 floor(f D / 2) = " + std::to_string(R) + ", needs f >= 2/D");
    const RopeScaling::Kind kind = c.rope_scaling;
    require(pos->rotary || kind == RopeScaling::none,
            "rope_scaling " + choice_name(kind) + " is set, but " + pos_is +
                " rotates nothing to scale (the key is for the rotary schemes)");
    require(c.rope_scaling_factor == 0 || (c.rope_scaling_factor >= 1 && std::isfinite(c.rope_scaling_factor)),
            "rope_scaling_factor must be 0 (from the length) or a finite s >= 1, got " +
                to_text(c.rope_scaling_factor));
    require(c.rope_scaling_factor == 0 || kind != RopeScaling::none,
            "rope_scaling_factor " + to_text(c.rope_scaling_factor) + " is set, but rope_scaling is none");
    require(c.rope_train_len >= 0, "rope_train_len must be >= 0 (0 = seq_len), got " + std::to_string(c.rope_train_len));
    require(c.sin_scale > 0, "sin_scale must be > 0, got " + to_text(c.sin_scale));
    require(pos->fixed_table || c.sin_scale == kSinScale,
            "sin_scale " + to_text(c.sin_scale) + " is set, but " + pos_is +
                " adds no sinusoidal table to scale (the key is for pos=sinusoidal)");
    require(c.vocab_size >= 1 && c.vocab_size <= 65536,
            "vocab_size must be in 1..65536 (tokens are uint16), got " + std::to_string(c.vocab_size));
    require(c.max_seq_len >= 1, "max_seq_len must be >= 1, got " + std::to_string(c.max_seq_len));
    require(!pos->decay || c.max_seq_len <= xpos_max_positions(),
            "max_seq_len " + std::to_string(c.max_seq_len) + " is past the " + std::to_string(xpos_max_positions()) +
                " positions of " + pos_is + " (its decay's factors leave fp32's range there)");
    require(c.mlp_hidden >= 0 && c.mlp_hidden % 8 == 0,
            "mlp_hidden must be 0 (4 x n_embd) or a positive multiple of 8, got " + std::to_string(c.mlp_hidden));
    if (!c.match_params.empty()) {
        const PosTraits* other = find_pos(c.match_params);
        require(other, "match_params must be empty or one of " + pos_names() + ", got '" + c.match_params + "'");
        // a resolved config (a run's config.json) holds both, agreeing
        const int matched = matched_mlp_hidden(model_config(c), other->pos);
        require(c.mlp_hidden == 0 || c.mlp_hidden == matched,
                "match_params " + c.match_params + " sets mlp_hidden (to " + std::to_string(matched) +
                    " here); it cannot be " + std::to_string(c.mlp_hidden) + " too: give one of them");
    }
    // The sizes' products in double: a count past 2^53 would wrap the layout's 64-bit offsets,
    // and the memory check would then pass a model no machine holds.
    double total = 0;
    for (const ParamTensor& t : param_layout(model_config(c))) {
        double n = 1;
        for (int64_t d : t.shape) n *= (double)d;
        total += n;
    }
    require(total < 0x1p53, "the model is too large: " + to_text(total) + " parameters");
}

void validate(const Config& c) {
    validate_model(c);

    require(!c.train_data.empty(), "train_data is not set (a shard glob or a folder; see --help)");
    require(c.batch_size >= 1, "batch_size must be >= 1, got " + std::to_string(c.batch_size));
    require(c.grad_accum >= 1, "grad_accum must be >= 1, got " + std::to_string(c.grad_accum));
    require(c.batch_size % c.grad_accum == 0, "batch_size " + std::to_string(c.batch_size) +
                                                  " must be a multiple of grad_accum " +
                                                  std::to_string(c.grad_accum) + " (each micro-step takes as many rows)");
    require(c.seq_len >= 1 && c.seq_len <= c.max_seq_len, "seq_len must be in 1..max_seq_len, got seq_len " +
                                                              std::to_string(c.seq_len) + " with max_seq_len " +
                                                              std::to_string(c.max_seq_len));

    require(c.steps >= 0, "steps must be >= 0, got " + std::to_string(c.steps));
    require(c.lr >= 0, "lr must be >= 0, got " + to_text(c.lr));
    require(c.beta1 >= 0 && c.beta1 < 1, "beta1 must be in [0, 1), got " + to_text(c.beta1));
    require(c.beta2 >= 0 && c.beta2 < 1, "beta2 must be in [0, 1), got " + to_text(c.beta2));
    require(c.eps > 0, "eps must be > 0, got " + to_text(c.eps));
    require(c.weight_decay >= 0, "weight_decay must be >= 0, got " + to_text(c.weight_decay));
    if (c.schedule == Schedule::step) {
        require(c.gamma > 0, "gamma must be > 0 for schedule=step, got " + to_text(c.gamma));
        require(c.step_size >= 1, "step_size must be >= 1 for schedule=step, got " + std::to_string(c.step_size));
    }
    require(c.warmup_steps >= 0, "warmup_steps must be >= 0, got " + std::to_string(c.warmup_steps));
    require(c.min_lr >= 0, "min_lr must be >= 0, got " + to_text(c.min_lr));
    require(c.grad_clip >= 0, "grad_clip must be >= 0 (0 = off), got " + to_text(c.grad_clip));

    require(c.eval_every >= 0, "eval_every must be >= 0, got " + std::to_string(c.eval_every));
    require(c.eval_long_every >= 0, "eval_long_every must be >= 0, got " + std::to_string(c.eval_long_every));
    require(c.eval_batches >= 0, "eval_batches must be >= 0, got " + std::to_string(c.eval_batches));
    for (int t : c.eval_seq_lens) {
        require(t >= 1, "eval_seq_lens entries must be >= 1, got " + std::to_string(t));
        require(!pos_traits(c.pos).decay || t <= xpos_max_positions(),
                "eval_seq_lens entry " + std::to_string(t) + " is past the " + std::to_string(xpos_max_positions()) +
                    " positions of pos=" + std::string(pos_name(c.pos)) + " (its decay's factors leave fp32's range there)");
    }
    for (int t : c.accuracy_tokens)
        require(t >= 0 && t < c.vocab_size,
                "accuracy_tokens entries must be token ids < vocab_size, got " + std::to_string(t));

    require(c.checkpoint_every >= 0, "checkpoint_every must be >= 0, got " + std::to_string(c.checkpoint_every));
    require(c.keep_checkpoints >= 0, "keep_checkpoints must be >= 0 (0 = keep all), got " +
                                         std::to_string(c.keep_checkpoints));
    require(c.keep_every >= 0, "keep_every must be >= 0 (0 = none), got " + std::to_string(c.keep_every));
    require(!c.run_dir.empty(), "run_dir must not be empty");
    require(c.sample_every >= 0, "sample_every must be >= 0, got " + std::to_string(c.sample_every));
    require(c.classifier_chunk >= 0,
            "classifier_chunk must be >= 0 (0 = the device's choice), got " + std::to_string(c.classifier_chunk));
    require(c.classifier_tile >= 0 && c.classifier_tile % 128 == 0,
            "classifier_tile must be 0 (row chunks) or a positive multiple of 128, got " +
                std::to_string(c.classifier_tile));
    require(
        c.classifier != Classifier::fused || (c.classifier_chunk == 0 && c.classifier_tile == 0),
        "classifier_chunk and classifier_tile shape the logits of --classifier logits; --classifier fused has none");
    require(c.profile == 0 || c.profile == 1, "profile must be 0 or 1, got " + std::to_string(c.profile));
    require(c.cuda_graph == 0 || c.cuda_graph == 1, "cuda_graph must be 0 or 1, got " + std::to_string(c.cuda_graph));
    require(c.tf32 == 0 || c.tf32 == 1, "tf32 must be 0 or 1, got " + std::to_string(c.tf32));
    require(c.zero == 0 || c.zero == 1, "zero must be 0 or 1 (ZeRO-1), got " + std::to_string(c.zero));
    require(c.dist_timeout >= 0,
            "dist_timeout must be >= 0 seconds (0 = wait forever), got " + to_text(c.dist_timeout));
}

json config_to_json(const Config& c) {
    json j = json::object();
    for (const Key& k : kKeys)
        if (!cli_only(k)) j[k.name] = std::visit([&](auto field) { return to_json_value(c.*field); }, k.field);
    if (!c.init_from.empty()) j["init_from"] = {{"path", c.init_from}, {"sha256", c.init_sha256}};
    return j;
}

Config config_from_json(const json& j, const std::string& where) {
    Config c;
    json keys = j;
    if (keys.is_object() && keys.contains("init_from")) {  // the record of config_to_json
        const json& r = keys["init_from"];
        if (!r.is_object() || !r.contains("path") || !r["path"].is_string() || !r.contains("sha256") ||
            !r["sha256"].is_string())
            throw std::runtime_error("config key 'init_from' in " + where +
                                     ": expected {\"path\": .., \"sha256\": ..}");
        c.init_from = r["path"].get<std::string>();
        c.init_sha256 = r["sha256"].get<std::string>();
        keys.erase("init_from");
    }
    apply_json(c, keys, where);
    // a record from before the key existed: its sinusoidal table was the unscaled one
    if (keys.is_object() && !keys.contains("sin_scale") && pos_traits(c.pos).fixed_table) c.sin_scale = 1;
    return c;
}

Config resumed_config(const std::string& run_dir) {
    const std::string path = run_dir + "/config.json", log = run_dir + "/log.jsonl";
    json j;
    try {
        j = json::parse(read_text_file(path));
    } catch (const json::exception& e) {
        throw std::runtime_error("cannot parse " + path + ": " + e.what());
    }
    if (j.is_object() && access(log.c_str(), F_OK) == 0) {
        std::istringstream in(read_text_file(log));
        for (std::string line; std::getline(in, line);) {
            if (line.find("\"config_change\"") == std::string::npos) continue;  // most lines: no parse
            json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (!r.is_object() || r.value("type", json()) != "config_change" || !r.contains("changes") ||
                !r["changes"].is_object())
                continue;
            for (const auto& [key, was_now] : r["changes"].items())
                if (was_now.is_array() && was_now.size() == 2) j[key] = was_now[1];
        }
    }
    Config c = config_from_json(j, path + " with the changes in " + log);
    c.run_dir = run_dir;  // the run continues in its own folder, wherever it lives now
    return c;
}

int run_threads(const std::string& run_dir) {
    const std::string log = run_dir + "/log.jsonl";
    if (access(log.c_str(), F_OK) != 0) return 0;
    int threads = 0;
    std::istringstream in(read_text_file(log));
    for (std::string line; std::getline(in, line);) {
        if (line.find("\"threads\"") == std::string::npos) continue;
        json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (r.is_object() && r.contains("run_on") && r["run_on"].is_object() &&
            r["run_on"].value("threads", json()).is_number_integer())
            threads = r["run_on"]["threads"].get<int>();  // the last start or resume's
    }
    return threads > 0 ? threads : 0;
}

json config_changes(const Config& was, const Config& now) {
    const json a = config_to_json(was), b = config_to_json(now);
    json changes = json::object();
    for (const Key& k : kKeys)
        if (!cli_only(k) && a[k.name] != b[k.name]) changes[k.name] = {a[k.name], b[k.name]};
    return changes;
}

json resume_changes(const Config& was, const Config& now) {
    json changes = config_changes(was, now);
    std::string fixed;
    for (const Key& k : kKeys) {
        if (!changes.contains(k.name)) continue;
        const std::string name = k.name, group = k.group;
        const bool model_or_data = (group == "model" || group == "data") && name != "grad_accum";
        if (model_or_data || name == "seed" || name == "run_dir") {
            fixed += (fixed.empty() ? "" : ", ") + name + " " + changes[name][1].dump() +
                     " (the run's: " + changes[name][0].dump() + ")";
            changes.erase(name);
        }
    }
    if (!fixed.empty())
        throw std::runtime_error("--resume " + was.run_dir + " with " + fixed +
                                 ": a resumed run keeps its model, its data and its folder; start a new run for "
                                 "these (--init_from takes a checkpoint's weights)");
    return changes;
}

ModelConfig model_config(const Config& c) {
    ModelConfig m;
    m.pos = c.pos;
    m.L = c.n_layer, m.H = c.n_head, m.C = c.n_embd, m.V = c.vocab_size, m.maxT = c.max_seq_len;
    m.rope_base = c.rope_base;
    m.rope_scaling.kind = c.rope_scaling;
    m.rope_scaling.factor = c.rope_scaling_factor;
    m.rope_scaling.train_len = c.rope_train_len > 0 ? c.rope_train_len : c.seq_len;
    m.rope_scaling.partial = c.partial_rotary_factor;
    m.sin_scale = c.sin_scale;
    m.mlp_hidden = c.mlp_hidden;
    if (m.mlp_hidden == 0)
        m.mlp_hidden = c.match_params.empty() ? 4 * m.C : matched_mlp_hidden(m, parse_pos(c.match_params));
    m.flash = c.attention == Attention::flash;
    m.classifier_chunk = c.classifier_chunk;
    m.classifier_tile = c.classifier_tile;
    m.classifier_fused = c.classifier == Classifier::fused;  // auto: resolved by then (train.cpp)
    return m;
}

double lr_at(const Config& c, int step) {
    if (step < c.warmup_steps) return c.lr * (step + 1) / c.warmup_steps;
    if (c.schedule == Schedule::step) return c.lr * std::pow(c.gamma, step / c.step_size);
    if (c.schedule == Schedule::cosine) {
        double span = std::max(1, c.steps - c.warmup_steps);
        double progress = std::min(1.0, (step - c.warmup_steps) / span);
        return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(M_PI * progress));
    }
    return c.lr;
}

long long parse_int_arg(const std::string& s, const std::string& what, long long lo, long long hi) {
    return parse_integer(s, what, lo, hi);
}

Config stored_config(const std::string& json_text, const std::string& where) {
    json j;
    try {
        j = json::parse(json_text);
    } catch (const json::exception& e) {
        throw std::runtime_error("cannot parse the config in " + where + ": " + e.what());
    }
    Config c = config_from_json(j, where);
    try {
        validate_model(c);
    } catch (const std::exception& e) {
        throw std::runtime_error("the config in " + where + " is not valid: " + e.what());
    }
    return c;
}

void setup_process(char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    // Idle OpenMP threads spin for a long while by default; on a machine busy with other jobs they
    // take the cores from the threads with work, and steps get 3-70x slower. A short spin (1000
    // rounds, then sleep) is as fast as passive waiting under load and faster than both the default
    // and passive on free cores (scripts/README.md, CPU throughput). libgomp reads its variables when it loads,
    // before main: set it and start again. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins
    // (set one to run under valgrind, whose /proc/self/exe is not the program).
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || setenv("GOMP_SPINCOUNT", "1000", 1) != 0)
        return;
    // and malloc's large blocks on transparent huge pages (where the kernel gives them on request):
    // reading and placing a 29 MB checkpoint then takes 3,000 page faults rather than 30,000, and
    // build/sample --tokens 1 on the paper model 0.18 s rather than 0.63 s. A user's own
    // glibc.malloc.hugetlb wins.
    const std::string tunables = std::getenv("GLIBC_TUNABLES") ? std::getenv("GLIBC_TUNABLES") : "";
    if (tunables.find("glibc.malloc.hugetlb") == std::string::npos)
        setenv("GLIBC_TUNABLES", ((tunables.empty() ? "" : tunables + ":") + "glibc.malloc.hugetlb=1").c_str(), 1);
    execv("/proc/self/exe", argv);
}
