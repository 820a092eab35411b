// Tests of the host I/O layer: config parsing and validation, shard reader, safetensors,
// checkpoint folder protocol, JSONL log, write errors on a full disk, and a step's FLOP count.
// One PASS / FAIL / SKIPPED line per check (test/testlib.h); exit 1 on any FAIL.
#include <csignal>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <sys/resource.h>
#include <unistd.h>
#include "backend_cpu.h"
#include "checkpoint.h"
#include "config.h"
#include "memory_estimate.h"
#include "dataloader.h"
#include "flops.h"
#include "log.h"
#include "generate.h"
#include "model.h"
#include "safetensors.h"
#include "testlib.h"
#include "gpt2_decoder.h"
#include "ops/adamw.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

static std::string g_tmp;  // scratch folder, removed at the end

static void expect_ok(const std::string& name, const std::function<void()>& f) {
    try {
        f();
        check(name, true);
    } catch (const std::exception& e) {
        check(name, false, std::string("unexpected error: ") + e.what());
    }
}

static Config parse(std::vector<std::string> args) {
    args.insert(args.begin(), "train");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return parse_args((int)argv.size(), argv.data());
}

static void write_raw(const std::string& path, const std::string& bytes) {
    OutFile f(path);
    f.write(bytes);
    f.close();
}

static std::string shard_bytes(int32_t magic, int32_t version, int32_t n, const std::vector<uint16_t>& tokens) {
    int32_t header[256] = {magic, version, n};
    std::string s((const char*)header, sizeof header);
    s.append((const char*)tokens.data(), 2 * tokens.size());
    return s;
}

// a well-formed shard of these tokens (the format of data/shards.py)
static void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
    write_raw(path, shard_bytes(20240520, 1, (int32_t)tokens.size(), tokens));
}

static std::vector<uint16_t> iota_tokens(size_t n, uint16_t first) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    return t;
}

// ------------------------------------------------------------------------------------ config

static void test_config() {
    Config d = parse({});
    check("config_defaults",
          d.pos == Pos::rope && d.n_layer == 4 && d.n_head == 4 && d.n_embd == 128 && d.vocab_size == 50257 &&
              d.max_seq_len == 1024 && d.rope_base == 10000 && d.sin_scale == kSinScale && d.batch_size == 4 && d.seq_len == 256 &&
              d.steps == 1000 && d.lr == 1e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 &&
              d.weight_decay == 0.01 && d.decay == Decay::all && d.schedule == Schedule::step && d.step_size == 1000 &&
              d.gamma == 0.8 && d.warmup_steps == 0 && d.min_lr == 0 && d.grad_clip == 0 && d.seed == 1337 &&
              d.eval_every == 100 && d.eval_batches == 20 && d.eval_seq_lens.empty() && d.checkpoint_every == 500 &&
              d.run_dir == "runs/run" && d.device == Device::automatic && d.precision == Precision::fp32 && d.sample_every == 0 &&
              d.data_order == DataOrder::sequential && d.train_data.empty() && d.resume.empty() && !d.help);

    std::string cfg = g_tmp + "/cfg.json";
    write_raw(cfg, R"({"n_layer": 2, "lr": 0.01, "pos": "crope", "eval_seq_lens": [512, 1024], "seed": 7})");
    Config c = parse({"--lr", "0.5", "--config", cfg, "--n-head", "2", "--eval-seq-lens", "64,128", "--steps=42"});
    check("config_json_then_cli", c.n_layer == 2 && c.pos == Pos::crope && c.seed == 7 && c.lr == 0.5 && c.n_head == 2 &&
                                      c.eval_seq_lens == std::vector<int>{64, 128} && c.steps == 42);
    Config c2 = parse({"--config", cfg});
    check("config_json_array", c2.eval_seq_lens == std::vector<int>{512, 1024} && c2.lr == 0.01);
    std::string cfg2 = g_tmp + "/cfg2.json";
    write_raw(cfg2, R"({"n_layer": 3})");
    Config c4 = parse({"--config", cfg, "--config", cfg2});
    check("config_two_files_in_order", c4.n_layer == 3 && c4.pos == Pos::crope);
    write_raw(cfg, R"({"eval_seq_lens": "256,512", "train_data": "data/x"})");
    Config c3 = parse({"--config", cfg, "--init-from", "w.safetensors"});
    check("config_json_string_list", c3.eval_seq_lens == std::vector<int>{256, 512} && c3.train_data == "data/x" &&
                                         c3.init_from == "w.safetensors");
    check("config_help", parse({"--help"}).help && parse({"--steps", "3", "-h"}).help);
    std::string h = help_text();
    bool all_keys = true;
    const json dj = config_to_json(d);
    for (auto& [k, v] : dj.items()) all_keys = all_keys && h.find("--" + k + " ") != std::string::npos;
    check("config_help_text", all_keys && h.find("usage:") == 0 && h.find("optimiser:") != std::string::npos &&
                                  h.find("--resume") != std::string::npos);
    // every entry is one whole line of its own: "  --NAME  DEFAULT  HELP", the help to its end
    // (an entry cut by a fixed-size buffer lost its end and its newline, gluing the next one on)
    std::vector<std::string> lines;
    std::istringstream hs(h);
    for (std::string line; std::getline(hs, line);) lines.push_back(line);
    std::string whole = "every entry on one whole line";
    size_t entries = 0;
    for (const KeyHelp& k : key_help()) {
        int n = 0;
        for (const std::string& line : lines)
            if (line.rfind("  --" + k.name + " ", 0) == 0) {
                n++;
                if (line.size() < k.help.size() || line.compare(line.size() - k.help.size(), k.help.size(), k.help))
                    whole = "the line of --" + k.name + " does not end with its whole help: '" + line + "'";
            }
        if (n != 1) whole = "--" + k.name + " starts " + std::to_string(n) + " lines";
        entries++;
    }
    size_t option_lines = 0;
    for (const std::string& line : lines) option_lines += line.rfind("  --", 0) == 0;
    for (const std::string& line : lines)
        if (line.find("  --", 2) != std::string::npos) whole = "two entries on one line: '" + line + "'";
    check("config_help_every_entry_whole",
          whole == "every entry on one whole line" && option_lines == entries &&
              entries == dj.size() + 4 + 4,  // + resume, eval_only, eval_log, init_from; 4 flags
          whole + " (" + std::to_string(option_lines) + " entry lines for " + std::to_string(entries) + " entries)");
    // a choice key's help ends with its choices, from the table its value is read with
    std::map<std::string, std::string> choice_help = {
        {"pos", choice_list<Pos>()},           {"rope_scaling", choice_list<RopeScaling::Kind>()},
        {"data_order", choice_list<DataOrder>()}, {"decay", choice_list<Decay>()},
        {"schedule", choice_list<Schedule>()},    {"device", choice_list<Device>()},
        {"precision", choice_list<Precision>()},  {"attention", choice_list<Attention>()},
        {"classifier", choice_list<Classifier>()}};
    std::string listed;
    for (const KeyHelp& k : key_help())
        if (choice_help.count(k.name)) {
            const std::string tail = ": " + choice_help[k.name];
            if (k.help.size() < tail.size() || k.help.compare(k.help.size() - tail.size(), tail.size(), tail))
                listed += "--" + k.name + ": '" + k.help + "'; ";
            choice_help.erase(k.name);
        }
    check("config_help_lists_choices", listed.empty() && choice_help.empty() &&
                                           choice_list<Device>() == "cpu | cuda | auto");

    // JSON round trip: config_to_json -> config_from_json is the identity on the file keys
    Config m = d;
    m.pos = Pos::learned;
    m.eval_seq_lens = {8, 16};
    m.lr = 3e-4;
    m.seed = 1ull << 40;
    m.train_data = "t";
    json j = config_to_json(m);
    check("config_json_roundtrip", config_to_json(config_from_json(j, "x")) == j && !j.contains("resume") &&
                                       !j.contains("init_from") && !j.contains("help"));

    // --resume: the run's config.json is the base, CLI overrides still apply
    std::string run = g_tmp + "/resume_run";
    make_run_dir(run);
    write_raw(run + "/config.json", j.dump());
    Config r = parse({"--resume", run, "--steps", "5"});
    check("config_resume_base", r.pos == Pos::learned && r.lr == 3e-4 && r.steps == 5 && r.run_dir == run &&
                                    r.resume == run && r.eval_seq_lens == std::vector<int>{8, 16});
    // its log's config_change records apply in order (a torn last line aside); resume_changes
    // names what a resume changes and refuses a model or data key, naming both values
    write_raw(run + "/log.jsonl",
              "{\"type\":\"config\"}\n{\"changes\":{\"lr\":[0.0003,0.01]},\"step\":4,\"type\":\"config_change\"}\n"
              "{\"changes\":{\"lr\":[0.01,0.02],\"steps\":[1000,8]},\"step\":6,\"type\":\"config_change\"}\n"
              "{\"changes\":{\"lr\":[0.02,");
    Config was = parse({"--resume", run});
    check("config_resume_log_changes", was.lr == 0.02 && was.steps == 8 && was.pos == Pos::learned);
    Config now = was;
    now.lr = 0.5, now.grad_accum = 2;
    check("resume_changes_logged",
          resume_changes(was, now) == json::parse(R"({"grad_accum": [1, 2], "lr": [0.02, 0.5]})"));
    now.seq_len = 8, now.pos = Pos::rope;
    expect_error(
        "resume_changes_model_refused", [&] { resume_changes(was, now); },
        "--resume " + run + " with pos \"rope\" (the run's: \"learned\"), seq_len 8 (the run's: ");
    expect_error(
        "config_resume_empty",
        [&] {
            parse({"--resume", g_tmp + "/nothing_here"});
        },
        "cannot resume from");

    write_raw(cfg, R"({"n_layer": 2,, })");
    expect_error(
        "config_malformed_json",
        [&] {
            parse({"--config", cfg});
        },
        "cannot parse config " + cfg + ": ");
    write_raw(cfg, R"({"n_layer": 2, "foo": 1})");
    expect_error(
        "config_unknown_key",
        [&] {
            parse({"--config", cfg});
        },
        "unknown config key 'foo' in " + cfg);
    // a mistyped key gets the nearest key a file may hold, as a mistyped flag does
    write_raw(cfg, R"({"step": 3})");
    expect_error(
        "config_unknown_key_did_you_mean",
        [&] {
            parse({"--config", cfg});
        },
        "unknown config key 'step' in " + cfg + " (did you mean 'steps'?)");
    write_raw(cfg, R"({"resume": "x"})");
    expect_error(
        "config_cli_only_key_in_file",
        [&] {
            parse({"--config", cfg});
        },
        "unknown config key 'resume'");
    write_raw(cfg, R"({"n_layer": "four"})");
    expect_error(
        "config_json_wrong_type",
        [&] {
            parse({"--config", cfg});
        },
        "config key 'n_layer' in " + cfg);
    write_raw(cfg, R"([1, 2])");
    expect_error(
        "config_json_not_object",
        [&] {
            parse({"--config", cfg});
        },
        "must be a JSON object");
    expect_error(
        "config_missing_file",
        [&] {
            parse({"--config", g_tmp + "/nope.json"});
        },
        "cannot read");
    expect_error(
        "config_unknown_flag",
        [&] {
            parse({"--foo", "1"});
        },
        "unknown option '--foo'");
    expect_error(
        "config_missing_value", [&] { parse({"--steps"}); }, "the value of --steps is missing");
    expect_error(
        "config_missing_value_before_option", [&] { parse({"--steps", "--lr", "0.1"}); },
        "the value of --steps is missing (the next argument, '--lr', is an option");
    check("config_dash_value_with_equals", parse({"--run_dir=--odd"}).run_dir == "--odd");
    expect_error(
        "config_bad_int",
        [&] {
            parse({"--n_layer", "4x"});
        },
        "--n_layer: expected an integer, got '4x'");
    expect_error(
        "config_bad_double",
        [&] {
            parse({"--lr", "fast"});
        },
        "--lr: expected a number");
    expect_error(
        "config_negative_seed",
        [&] {
            parse({"--seed", "-1"});
        },
        "expected a non-negative integer");
    expect_error(
        "config_bad_list",
        [&] {
            parse({"--eval_seq_lens", "64,x"});
        },
        "expected an integer");
    expect_error(
        "config_positional_arg", [&] { parse({"steps"}); }, "unexpected argument 'steps'");
    // a choice key's value is read into its enum: an unknown name is refused there, on the command
    // line and in a file, naming the choices
    struct Choice {
        std::string key, bad, needle;
    };
    const Choice choices[] = {
        {"pos", "t5", "pos must be one of learned | sinusoidal | rope | crope"},
        {"rope_scaling", "big", "rope_scaling must be one of none | linear | ntk | dynamic | yarn | llama3"},
        {"decay", "some", "decay must be one of all | matrices, got 'some'"},
        {"schedule", "linear", "schedule must be one of constant | step | cosine, got 'linear'"},
        {"data_order", "random", "data_order must be one of sequential | shuffle, got 'random'"},
        {"device", "tpu", "device must be one of cpu | cuda | auto, got 'tpu'"},
        {"precision", "fp16", "precision must be one of fp32 | bf16, got 'fp16'"},
        {"attention", "tiled", "attention must be one of flash | cublas, got 'tiled'"},
    };
    for (const Choice& c : choices) {
        const std::string &key = c.key, &bad = c.bad, &needle = c.needle;
        expect_error("config_choice_" + key, [&] { parse({"--" + key, bad}); }, needle);
        const std::string file = g_tmp + "/choice_" + key + ".json";
        write_raw(file, "{\"" + key + "\": \"" + bad + "\"}");
        expect_error("config_choice_" + key + "_in_file", [&] { parse({"--config", file}); },
                     "config key '" + key + "' in " + file + " " + needle.substr(key.size() + 1));
    }
    check("config_choice_read", parse({"--precision", "bf16", "--device", "cpu"}).precision == Precision::bf16 &&
                                    parse({"--device", "auto"}).device == Device::automatic);
}

static void test_validate() {
    Config base;
    base.train_data = "data/x";
    expect_ok("validate_defaults", [&] { validate(base); });
    struct Case {
        const char* name;
        std::function<void(Config&)> edit;
        const char* needle;
    };
    const Case cases[] = {
        {"heads_divide", [](Config& c) { c.n_embd = 130; }, "n_embd (130) must be divisible by n_head (4)"},
        {"rope_odd_head", [](Config& c) { c.n_embd = 12; }, "pos=rope needs an even head size"},
        {"crope_odd_head",
         [](Config& c) {
             c.pos = Pos::crope;
             c.n_embd = 12;
         },
         "pos=crope needs an even head size"},
        {"crope_odd_embd",
         [](Config& c) {
             c.pos = Pos::crope;
             c.n_embd = 9;
             c.n_head = 1;
         },
         "pos=crope needs an even n_embd"},
        {"n_head_zero", [](Config& c) { c.n_head = 0; }, "n_head must be >= 1"},
        {"batch_size", [](Config& c) { c.batch_size = 0; }, "batch_size must be >= 1"},
        {"seq_len_zero", [](Config& c) { c.seq_len = 0; }, "seq_len must be in 1..max_seq_len"},
        {"seq_len_long", [](Config& c) { c.seq_len = 2000; }, "got seq_len 2000 with max_seq_len 1024"},
        {"eval_seq_lens",
         [](Config& c) {
             c.eval_seq_lens = {64, 0};
         },
         "eval_seq_lens entries must be >= 1"},
        {"steps", [](Config& c) { c.steps = -1; }, "steps must be >= 0"},
        {"lr", [](Config& c) { c.lr = -1e-3; }, "lr must be >= 0"},
        {"beta1", [](Config& c) { c.beta1 = 1.0; }, "beta1 must be in [0, 1)"},
        {"beta2", [](Config& c) { c.beta2 = -0.1; }, "beta2 must be in [0, 1)"},
        {"eps", [](Config& c) { c.eps = 0; }, "eps must be > 0"},
        {"weight_decay", [](Config& c) { c.weight_decay = -0.1; }, "weight_decay must be >= 0"},
        {"gamma", [](Config& c) { c.gamma = 0; }, "gamma must be > 0"},
        {"step_size", [](Config& c) { c.step_size = 0; }, "step_size must be >= 1"},
        {"vocab_small", [](Config& c) { c.vocab_size = 0; }, "vocab_size must be in 1..65536"},
        {"vocab_large", [](Config& c) { c.vocab_size = 70000; }, "vocab_size must be in 1..65536"},
        {"train_data", [](Config& c) { c.train_data = ""; }, "train_data is not set"},
        {"grad_clip", [](Config& c) { c.grad_clip = -1; }, "grad_clip must be >= 0"},
        {"mlp_hidden_step", [](Config& c) { c.mlp_hidden = 12; },
         "mlp_hidden must be 0 (4 x n_embd) or a positive multiple of 8, got 12"},
        {"mlp_hidden_negative", [](Config& c) { c.mlp_hidden = -8; }, "mlp_hidden must be 0 (4 x n_embd) or"},
        {"match_params_unknown", [](Config& c) { c.match_params = "rop"; },
         "match_params must be empty or one of learned | sinusoidal | rope | crope"},
        {"sin_scale_zero",
         [](Config& c) {
             c.pos = Pos::sinusoidal;
             c.sin_scale = 0;
         },
         "sin_scale must be > 0, got 0"},
        {"sin_scale_negative",
         [](Config& c) {
             c.pos = Pos::sinusoidal;
             c.sin_scale = -0.5;
         },
         "sin_scale must be > 0, got -0.5"},
        {"sin_scale_other_scheme", [](Config& c) { c.sin_scale = 0.5; },
         "sin_scale 0.5 is set, but pos=rope adds no sinusoidal table to scale (the key is for pos=sinusoidal)"},
        {"match_params_and_mlp_hidden",
         [](Config& c) {
             c.pos = Pos::crope;
             c.match_params = "rope";
             c.mlp_hidden = 512;
         },
         "match_params rope sets mlp_hidden (to 608 here); it cannot be 512 too: give one of them"},
    };
    for (const Case& k : cases) {
        Config c = base;
        k.edit(c);
        expect_error(
            std::string("validate_") + k.name, [&] { validate(c); }, k.needle);
    }
    Config ok = base;
    ok.schedule = Schedule::constant;
    ok.gamma = 0;
    ok.step_size = 0;           // only checked for the step schedule
    ok.eval_seq_lens = {4096};  // longer than max_seq_len is allowed here
    ok.pos = Pos::crope;
    ok.n_embd = 8;
    ok.n_head = 2;
    expect_ok("validate_allowed_combinations", [&] { validate(ok); });
    Config sin = base;
    sin.pos = Pos::sinusoidal;
    sin.sin_scale = 1;  // the original table
    expect_ok("validate_sin_scale_sinusoidal", [&] { validate(sin); });
}

// ------------------------------------------------------------------------------------ shards

// All batches a loader yields, flattened (inputs then targets per batch).
static std::vector<int> take(DataLoader& dl, int B, int T, int nbatches) {
    std::vector<int> all, in(B * T), tg(B * T);
    for (int i = 0; i < nbatches; i++) {
        dl.next_batch(in.data(), tg.data());
        all.insert(all.end(), in.begin(), in.end());
        all.insert(all.end(), tg.begin(), tg.end());
    }
    return all;
}

static void test_dataloader() {
    const int V = 200;
    std::string dir = g_tmp + "/shards";
    fs::create_directories(dir);
    // shard 0: 21 tokens 0..20, shard 1: 11 tokens 100..110; with T=4: windows at 0,4,8,12,16 and 0,4
    std::vector<std::vector<uint16_t>> train = {iota_tokens(21, 0), iota_tokens(11, 100)};
    write_shard(dir + "/d_train_000000.bin", train[0]);
    write_shard(dir + "/d_train_000001.bin", train[1]);
    write_shard(dir + "/d_val_000000.bin", iota_tokens(9, 50));

    DataLoader folder(dir, "train", V), glob(dir + "/d_train_*.bin", "ignored", V), val(dir, "val", V);
    check("shards_folder_and_glob", folder.num_shards() == 2 && glob.num_shards() == 2 && val.num_shards() == 1 &&
                                        folder.paths() == glob.paths() && folder.num_tokens() == 32 &&
                                        val.num_tokens() == 9);
    check("shards_num_windows", folder.num_windows(4) == 7 && folder.num_windows(1) == 30 &&
                                    folder.num_windows(10) == 3 && folder.num_windows(20) == 1);

    // sequential: the expected window list, cycled over epochs
    const int B = 3, T = 4;
    std::vector<std::pair<int, int>> windows = {{0, 0}, {0, 4}, {0, 8}, {0, 12}, {0, 16}, {1, 0}, {1, 4}};
    std::vector<int> expect;
    for (int b = 0; b < 10; b++) {
        std::vector<int> in, tg;
        for (int r = 0; r < B; r++) {
            auto [s, off] = windows[(b * B + r) % windows.size()];
            for (int t = 0; t < T; t++) {
                in.push_back(train[s][off + t]);
                tg.push_back(train[s][off + t + 1]);
            }
        }
        expect.insert(expect.end(), in.begin(), in.end());
        expect.insert(expect.end(), tg.begin(), tg.end());
    }
    folder.start(B, T, false, 0);
    check("shards_sequential_windows", take(folder, B, T, 10) == expect);
    folder.start(B, T, false, 0);  // restarting gives the same batches again (evaluation)
    check("shards_restart", take(folder, B, T, 10) == expect);

    // shuffle: every epoch is a permutation of all windows; reproducible per seed
    const int T2 = 2;  // 10 + 5 = 15 windows, 5 batches per epoch of 3
    folder.start(B, T2, true, 7);
    std::vector<int> s7 = take(folder, B, T2, 15);
    bool perms = true;
    for (int e = 0; e < 3; e++) {
        std::set<int> firsts;  // a window is identified by its first input token
        for (int b = 0; b < 5; b++)
            for (int r = 0; r < B; r++) firsts.insert(s7[(e * 5 + b) * 2 * B * T2 + r * T2]);
        perms = perms && firsts.size() == 15;
    }
    check("shuffle_epochs_are_permutations", perms);
    folder.start(B, T2, true, 7);
    check("shuffle_same_seed_same_order", take(folder, B, T2, 15) == s7);
    folder.start(B, T2, true, 8);
    check("shuffle_other_seed_other_order", take(folder, B, T2, 15) != s7);
    folder.start(B, T2, false, 7);
    check("shuffle_differs_from_sequential", take(folder, B, T2, 15) != s7);

    // resume: state() after k batches, set_state on a fresh loader continues identically
    for (bool shuffle : {false, true}) {
        std::string name = std::string("shards_resume_") + (shuffle ? "shuffle" : "sequential");
        DataLoader a(dir, "train", V), b(dir, "train", V);
        a.start(B, T2, shuffle, 99);
        take(a, B, T2, 7);  // past the first epoch boundary (5 batches per epoch)
        json st = json::parse(a.state().dump());
        std::vector<int> rest = take(a, B, T2, 9);
        b.start(B, T2, shuffle, 99);
        b.set_state(st);
        check(name, take(b, B, T2, 9) == rest);
    }
    expect_error(
        "shards_resume_mismatch",
        [&] {
            DataLoader a(dir, "train", V);
            a.start(B, T2, true, 1);
            json st = a.state();
            a.start(B, T, true, 1);
            a.set_state(st);
        },
        "data position was saved for seq_len 2");
    expect_error(
        "shards_too_small", [&] { folder.start(8, T, false, 0); }, "is too small for 8 x (4+1)");

    // bad shards, one folder each
    auto bad = [&](const std::string& name, const std::string& bytes, const std::string& needle) {
        std::string d = g_tmp + "/bad_" + name;
        fs::create_directories(d);
        write_raw(d + "/b_train_000000.bin", bytes);
        expect_error(
            "shard_" + name, [&] { DataLoader dl(d, "train", 100); }, needle);
    };
    std::vector<uint16_t> ten = iota_tokens(10, 0);
    bad("wrong_magic", shard_bytes(20240521, 1, 10, ten), "bad magic 20240521");
    bad("wrong_version", shard_bytes(20240520, 2, 10, ten), "unsupported version 2");
    bad("truncated_header", shard_bytes(20240520, 1, 10, ten).substr(0, 500), "truncated: 500 bytes");
    bad("truncated_tokens", shard_bytes(20240520, 1, 10, iota_tokens(5, 0)), "does not match the header's 10 tokens");
    bad("size_mismatch", shard_bytes(20240520, 1, 10, ten) + "x", "file size 1045 bytes does not match");
    std::vector<uint16_t> big = ten;
    big[3] = 150;
    bad("token_too_large", shard_bytes(20240520, 1, 10, big), "token at index 3 is 150, not < vocab_size 100");
    bad("empty_split", shard_bytes(20240520, 1, 1, {7}), "has no token windows");
    expect_error(
        "shard_missing_folder", [&] { DataLoader dl(g_tmp + "/no_such_dir", "train", V); },
        "no shards match '" + g_tmp + "/no_such_dir'");
    expect_error(
        "shard_glob_no_match", [&] { DataLoader dl(dir + "/d_test_*.bin", "test", V); }, "no shards match");
    expect_error(
        "shard_folder_no_split", [&] { DataLoader dl(dir, "test", V); }, "looked for NAME_test_NNNNNN.bin");
}

// Evaluation's pieces (MODEL.md, Evaluation): at every length T <= L the targets are those of the
// first n windows of L, each piece T tokens from its window's start (the last one L mod T).
static void test_eval_windows() {
    std::string dir = g_tmp + "/eval_shards";
    fs::create_directories(dir);
    // token = 100 * shard + position: a target names its place. With L = 12: 4, 1 and 3 windows.
    const std::vector<size_t> sizes = {50, 23, 41};
    for (size_t s = 0; s < sizes.size(); s++)
        write_shard(dir + "/e_val_00000" + std::to_string(s) + ".bin", iota_tokens(sizes[s], (uint16_t)(100 * s)));
    DataLoader dl(dir, "val", 400);
    const int B = 2, L = 12;
    std::vector<int> starts;  // the first token of each window of L, shard by shard
    for (size_t s = 0; s < sizes.size(); s++)
        for (size_t off = 0; off + L < sizes[s]; off += L) starts.push_back((int)(100 * s + off));
    check("eval_windows_of_L", starts.size() == dl.num_windows(L) && starts.size() == 8);

    for (size_t n : {4, 8, 10}) {  // within shard 0, the whole split, past its end (cycled)
        std::multiset<int> expect;
        for (size_t w = 0; w < n; w++)
            for (int t = 1; t <= L; t++) expect.insert(starts[w % starts.size()] + t);
        for (int T : {12, 6, 4, 5, 7, 1}) {
            const std::string name = "eval_pieces_n" + std::to_string(n) + "_T" + std::to_string(T);
            std::vector<DataLoader::EvalBatch> plan = dl.eval_batches(B, L, n, T);
            std::multiset<int> got, ranks;
            bool shapes = true, consecutive = true, aligned = true;
            size_t tokens = 0;
            for (size_t i = 0; i < plan.size(); i++) {
                const DataLoader::EvalBatch& b = plan[i];
                // B pieces each; the pieces of T first, then those of L mod T
                shapes = shapes && b.pieces.size() == (size_t)B && (b.T == T || (b.T == L % T && i > 0));
                std::vector<int> in(B * b.T), tg(B * b.T);
                dl.read(b, in.data(), tg.data());
                for (int r = 0; r < B; r++) {
                    int window_start = starts[0];
                    for (int w : starts)
                        if (w <= in[r * b.T] && w / 100 == in[r * b.T] / 100) window_start = w;
                    // a piece starts a multiple of T into its window, and ends inside it
                    aligned = aligned && (in[r * b.T] - window_start) % T == 0 && in[r * b.T] - window_start + b.T <= L;
                    for (int t = 0; t < b.T; t++) {
                        consecutive = consecutive && tg[r * b.T + t] == in[r * b.T + t] + 1;
                        got.insert(tg[r * b.T + t]);
                    }
                }
                tokens += (size_t)B * b.T;
                for (int rank = 0; rank < B; rank++) {  // data parallel: each rank its row
                    std::vector<int> in1(b.T), tg1(b.T);
                    dl.read(b, in1.data(), tg1.data(), rank, 1);
                    ranks.insert(tg1.begin(), tg1.end());
                }
            }
            check(name + "_shapes", shapes && plan.size() == n / B * (L / T + (L % T ? 1 : 0)));
            check(name + "_windows", consecutive && aligned);
            check(name + "_same_targets", got == expect && tokens == n * L);
            check(name + "_ranks_partition", ranks == expect);
        }
    }
    // T dividing L: the pieces are the sequential windows of T over the same tokens, in order
    for (int T : {12, 6, 4, 3}) {
        std::vector<int> pieces;
        for (const DataLoader::EvalBatch& b : dl.eval_batches(B, L, 4, T)) {
            std::vector<int> in(B * T), tg(B * T);
            dl.read(b, in.data(), tg.data());
            pieces.insert(pieces.end(), in.begin(), in.end());
            pieces.insert(pieces.end(), tg.begin(), tg.end());
        }
        dl.start(B, T, false, 0);
        check("eval_pieces_dividing_are_windows_T" + std::to_string(T), pieces == take(dl, B, T, 4 * L / T / B));
    }
    expect_error(
        "eval_pieces_longer_than_L", [&] { dl.eval_batches(B, L, 4, 13); }, "1 <= T <= L");
    expect_error(
        "eval_pieces_partial_batch", [&] { dl.eval_batches(B, L, 3, 4); }, "n a multiple of B");
}

// ------------------------------------------------------------------------------------ safetensors

static void test_safetensors() {
    std::string path = g_tmp + "/t.safetensors";
    std::vector<float> a = {1.5f, -2.f, 3.25f, 0.f, 1e-20f, -7.f};
    std::vector<double> b = {3.141592653589793, -1e300, 0.1, 2.0};
    float scalar = 42.f;
    std::map<std::string, std::string> meta = {{"pos", "crope"}, {"n_layer", "4"}};
    safetensors_write(path,
                      {{"wte", "F32", {2, 3}, a.data()},
                       {"m.b", "F64", {4}, b.data()},
                       {"s", "F32", {}, &scalar},
                       {"empty", "F32", {0, 5}, nullptr}},
                      meta);
    StFile st = safetensors_read(path);
    const StEntry& ea = st.get("wte", "F32", {2, 3});
    const StEntry& eb = st.get("m.b", "F64", {4});
    check("safetensors_roundtrip_f32", std::memcmp(ea.bytes.data(), a.data(), 24) == 0 && ea.numel() == 6);
    check("safetensors_roundtrip_f64", std::memcmp(eb.bytes.data(), b.data(), 32) == 0);
    check("safetensors_scalar_and_empty", st.get("s", "F32", {}).bytes == std::string((char*)&scalar, 4) &&
                                              st.get("empty", "F32", {0, 5}).bytes.empty());
    check("safetensors_metadata", st.metadata == meta && st.tensors.size() == 4);
    std::string raw = read_text_file(path);
    uint64_t n;
    std::memcpy(&n, raw.data(), 8);
    json h = json::parse(raw.substr(8, n));
    check("safetensors_layout",
          n % 8 == 0 && h["wte"]["data_offsets"] == json({0, 24}) && raw.size() == 8 + n + 24 + 32 + 4);
    expect_error(
        "safetensors_get_missing", [&] { st.get("wpe", "F32", {2}); }, "tensor 'wpe' is missing");
    expect_error(
        "safetensors_get_dtype",
        [&] {
            st.get("wte", "F64", {2, 3});
        },
        "has dtype F32, expected F64");
    expect_error(
        "safetensors_get_shape",
        [&] {
            st.get("wte", "F32", {3, 2});
        },
        "has shape (2, 3), expected (3, 2)");
    expect_error(
        "safetensors_duplicate_name",
        [&] {
            safetensors_write(g_tmp + "/dup.safetensors", {{"x", "F32", {1}, a.data()}, {"x", "F32", {1}, a.data()}},
                              {});
        },
        "duplicate");

    // corrupt files: a valid header followed by the given data, or raw garbage
    auto corrupt = [&](const std::string& name, const std::string& bytes, const std::string& needle) {
        std::string p = g_tmp + "/bad_" + name + ".safetensors";
        write_raw(p, bytes);
        expect_error(
            "safetensors_" + name, [&] { safetensors_read(p); }, needle);
    };
    auto with_header = [](const std::string& header, size_t data_bytes) {
        uint64_t len = header.size();
        return std::string((char*)&len, 8) + header + std::string(data_bytes, '\0');
    };
    expect_error(
        "safetensors_missing_file", [&] { safetensors_read(g_tmp + "/none.safetensors"); }, "cannot read");
    corrupt("too_short", "abc", "shorter than the 8-byte header length");
    corrupt("huge_header", with_header("{}", 0).replace(0, 8, std::string("\xff\xff\xff\xff\0\0\0\0", 8)),
            "does not fit a file");
    corrupt("not_json", with_header("{\"a\": [", 0), "header is not JSON");
    corrupt("truncated_data", raw.substr(0, raw.size() - 10), "outside the data section");
    corrupt("size_mismatch", with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
            "needs 12 bytes, data_offsets give 8");
    corrupt("unknown_dtype", with_header(R"({"x":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1),
            "unknown dtype");
    corrupt("bad_offsets", with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
            "outside the data section");
}

// ------------------------------------------------------------------------------------ checkpoints, log

static void test_checkpoint() {
    std::string run = g_tmp + "/run/a/b";
    expect_ok("run_dir_nested", [&] { make_run_dir(run); });
    expect_error(
        "run_dir_proc", [&] { make_run_dir("/proc/x"); }, "cannot create run folder '/proc/x': ");
    expect_error(
        "run_dir_is_file", [&] { make_run_dir(g_tmp + "/cfg.json"); }, "cannot create run folder");
    expect_error(
        "checkpoint_latest_none", [&] { checkpoint_latest(run); }, "no checkpoint in '" + run + "'");

    auto writer = [](const std::string& text) {
        return [text](const std::string& dir) { write_text_file_atomic(dir + "/state.json", text); };
    };
    std::string p = checkpoint_write(run, 100, writer("v100"));
    check("checkpoint_write", p == run + "/ckpt_000100" && read_text_file(run + "/latest") == "ckpt_000100\n" &&
                                  checkpoint_latest(run) == p && read_text_file(p + "/state.json") == "v100" &&
                                  !fs::exists(p + ".tmp"));
    expect_error(
        "checkpoint_write_error",
        [&] {
            checkpoint_write(run, 200, [](const std::string& dir) {
                write_text_file_atomic(dir + "/model.safetensors", "half");
                throw std::runtime_error("simulated crash");
            });
        },
        "simulated crash");
    check("checkpoint_error_keeps_latest", checkpoint_latest(run) == p && !fs::exists(run + "/ckpt_000200.tmp") &&
                                               !fs::exists(run + "/ckpt_000200") &&
                                               read_text_file(p + "/state.json") == "v100");
    // rewriting an existing step (a rerun after resuming from an earlier checkpoint) replaces it
    checkpoint_write(run, 100, writer("v100b"));
    check("checkpoint_rewrite_same_step",
          read_text_file(checkpoint_latest(run) + "/state.json") == "v100b" && !fs::exists(run + "/ckpt_000100.old"));
    checkpoint_write(run, 300, writer("v300"));
    check("checkpoint_latest_advances", checkpoint_latest(run) == run + "/ckpt_000300");
    write_raw(run + "/latest", "ckpt_999999\n");
    expect_error(
        "checkpoint_latest_dangling", [&] { checkpoint_latest(run); }, "which does not exist");
    write_raw(run + "/latest", "ckpt_000300\n");

    // log: truncate_after drops the records of the steps a resumed run redoes, and torn lines
    std::string lp = g_tmp + "/log.jsonl";
    {
        JsonlLog log(lp, false);
        log.write({{"type", "config"}, {"config", {{"a", 1}}}});
        for (int s = 1; s <= 5; s++) {
            log.write({{"type", "train"}, {"step", s}, {"loss", 1.0 / s}});
            if (s % 2 == 0) log.write({{"type", "val"}, {"step", s}, {"loss", 2.0}, {"seq_len", 8}});
        }
    }
    OutFile torn(lp, "ab");
    torn.write(std::string("{\"type\":\"train\",\"st"));
    torn.close();
    JsonlLog log(lp, true);
    log.truncate_after(2);  // the evaluation at step 2 is redone by the resumed run
    log.write({{"type", "train"}, {"step", 3}, {"loss", 0.5}});
    std::vector<std::string> kinds;
    std::string text = read_text_file(lp), line;
    std::istringstream in(text);
    while (std::getline(in, line)) {
        json j = json::parse(line);
        kinds.push_back(j["type"].get<std::string>() +
                        (j.contains("step") ? std::to_string(j["step"].get<int>()) : ""));
    }
    check("log_truncate_after", kinds == std::vector<std::string>{"config", "train1", "train2", "train3"},
          "got " + json(kinds).dump());
}

// Write errors must surface (not be lost in a buffer) when the disk is full. Two ways that work
// unprivileged on any Linux, in containers and CI: /dev/full (every write fails with ENOSPC),
// reached through a symlink where the code wants a file name; and RLIMIT_FSIZE with SIGXFSZ
// ignored, which makes writes past the limit to a regular file fail with EFBIG.
static void test_full_disk() {
    const std::string enospc = std::strerror(ENOSPC);
    if (access("/dev/full", W_OK) != 0) {
        report_skipped("full_disk_dev_full", "/dev/full is not writable here");
    } else {
        std::vector<float> w(1000, 1.f);
        expect_error(
            "full_disk_safetensors",
            [&] {
                safetensors_write("/dev/full", {{"w", "F32", {1000}, w.data()}}, {{"k", "v"}});
            },
            "cannot write /dev/full: " + enospc);
        expect_error(
            "full_disk_shard", [&] { write_shard("/dev/full", iota_tokens(10, 0)); }, enospc);

        std::string run = g_tmp + "/fullrun";
        make_run_dir(run);
        checkpoint_write(run, 1, [](const std::string& dir) { write_text_file_atomic(dir + "/state.json", "{}"); });
        expect_error(
            "full_disk_checkpoint",
            [&] {
                checkpoint_write(run, 2, [&](const std::string& dir) {
                    fs::create_symlink("/dev/full", dir + "/model.safetensors");
                    safetensors_write(dir + "/model.safetensors", {{"w", "F32", {1000}, w.data()}}, {});
                });
            },
            enospc);
        check("full_disk_checkpoint_keeps_latest", checkpoint_latest(run) == run + "/ckpt_000001" &&
                                                       !fs::exists(run + "/ckpt_000002.tmp") &&
                                                       !fs::exists(run + "/ckpt_000002"));
        // atomic text write: the old content survives a failed replacement
        std::string tp = run + "/note.txt";
        write_text_file_atomic(tp, "old");
        fs::create_symlink("/dev/full", tp + ".tmp");
        expect_error(
            "full_disk_text_atomic", [&] { write_text_file_atomic(tp, "new"); }, enospc);
        check("full_disk_text_keeps_old", read_text_file(tp) == "old" && !fs::exists(fs::symlink_status(tp + ".tmp")));
        std::string lp = run + "/log.jsonl";
        fs::create_symlink("/dev/full", lp);
        expect_error(
            "full_disk_log",
            [&] {
                JsonlLog log(lp, true);
                log.write({{"type", "train"}, {"step", 1}});
            },
            enospc);
    }

    // regular file on a real file system: cap the file size for this process
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 65536) {
        report_skipped("full_disk_fsize", "hard RLIMIT_FSIZE too low to test");
        return;
    }
    struct rlimit lim = old;
    lim.rlim_cur = 65536;
    void (*prev)(int) = std::signal(SIGXFSZ, SIG_IGN);  // else the process is killed instead of seeing EFBIG
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
        std::signal(SIGXFSZ, prev);
        report_skipped("full_disk_fsize", std::string("setrlimit failed: ") + std::strerror(errno));
        return;
    }
    std::vector<double> big(100000, 2.0);  // 800 kB > 64 kB
    std::string path = g_tmp + "/big.safetensors";
    std::string msg;
    try {
        safetensors_write(path, {{"big", "F64", {100000}, big.data()}}, {});
    } catch (const std::exception& e) {
        msg = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, prev);
    check("full_disk_fsize_regular_file", msg == "cannot write " + path + ": " + std::strerror(EFBIG),
          msg.empty() ? "no error" : "got '" + msg + "'");
}

// ------------------------------------------------------------------------------------ robustness

static void test_shard_names() {
    // the split is the last _SPLIT_ before a six-digit index, as data/shards.py's SHARD_RE
    std::string dir = g_tmp + "/names";
    fs::create_directories(dir);
    const char* names[] = {"my_val_set_train_000000.bin", "my_train_set_val_000000.bin", "a_test_train_val_000001.bin",
                           "x_train_00001.bin",           "x_train_000000.bin.bak",      "_train_000000.bin",
                           "x_valid_000000.bin",          "x_train_0000001.bin",         "x_train_000002.BIN"};
    for (const char* n : names) write_shard(dir + "/" + n, iota_tokens(9, 0));
    DataLoader tr(dir, "train", 100), va(dir, "val", 100);
    auto base = [](const DataLoader& d) {
        std::vector<std::string> v;
        for (const auto& p : d.paths()) v.push_back(fs::path(p).filename().string());
        return v;
    };
    check("shard_names_train", base(tr) == std::vector<std::string>{"my_val_set_train_000000.bin"},
          "train shards: " + json(base(tr)).dump());
    check("shard_names_val",
          base(va) == std::vector<std::string>{"a_test_train_val_000001.bin", "my_train_set_val_000000.bin"},
          "val shards: " + json(base(va)).dump());

    // what to do next: the command that prepares a known dataset, and text given as a shard
    expect_error(
        "shard_hint_prepare_dataset", [&] { DataLoader d("data/wikitext2/nothing_train_*.bin", "train", 100); },
        "prepare it with: python3 data/prepare_data.py wikitext2");
    expect_error(
        "shard_hint_synthetic", [&] { DataLoader d(g_tmp + "/synthetic", "train", 100); },
        "python3 data/make_synthetic.py");
    std::string text = g_tmp + "/text";
    fs::create_directories(text);
    write_raw(text + "/t_train_000000.bin", " = Valkyria Chronicles III = \n\n Senj\xc5\x8d no Valkyria 3 ...\n");
    expect_error(
        "shard_text_file", [&] { DataLoader d(text, "train", 100); }, "this looks like text, not a token shard");
    write_raw(text + "/long_train_000000.bin", std::string(5000, 'a'));
    expect_error(
        "shard_long_text_file", [&] { DataLoader d(text + "/long_train_000000.bin", "train", 100); },
        "looks like text");
    expect_error(
        "shard_device_file", [&] { DataLoader d("/dev/zero", "train", 100); }, "not a regular file");
    expect_error(
        "shard_folder_as_file", [&] { read_text_file(g_tmp); }, "is a folder");

    // a resumed data position with impossible values
    DataLoader dl(dir, "train", 100);
    dl.start(1, 4, false, 0);
    json st = dl.state();
    st["cursor"] = -3;
    expect_error(
        "shards_state_negative_cursor", [&] { dl.set_state(st); }, "'cursor' is -3, not a non-negative integer");
}

static void test_config_robustness() {
    // one validation of the model keys for every stored config (checkpoint metadata)
    expect_error(
        "stored_config_n_head_zero", [&] { stored_config(R"({"n_head": 0})", "w.safetensors"); },
        "the config in w.safetensors is not valid: n_head must be >= 1");
    expect_error(
        "stored_config_max_seq_len_zero", [&] { stored_config(R"({"max_seq_len": 0, "seq_len": 0})", "w"); },
        "max_seq_len must be >= 1");
    expect_error(
        "stored_config_not_json", [&] { stored_config("{n_layer", "w.safetensors"); },
        "cannot parse the config in w.safetensors");
    expect_ok("stored_config_needs_no_data", [&] { stored_config(R"({"pos": "crope"})", "w"); });
    // a record from before sin_scale existed ran the unscaled table; a new one says its factor
    check("stored_config_sin_scale_before_the_key",
          stored_config(R"({"pos": "sinusoidal"})", "w").sin_scale == 1 &&
              stored_config(R"({"pos": "rope"})", "w").sin_scale == kSinScale &&
              stored_config(R"({"pos": "sinusoidal", "sin_scale": 0.25})", "w").sin_scale == 0.25);

    // --init_from is recorded with its SHA-256; --resume reads the record back without loading it
    Config c;
    c.init_from = "w.safetensors";
    c.init_sha256 = "ab12";
    json j = config_to_json(c);
    Config back = config_from_json(j, "x");
    check("config_init_from_recorded", j["init_from"] == json{{"path", "w.safetensors"}, {"sha256", "ab12"}} &&
                                           back.init_from == "w.safetensors" && back.init_sha256 == "ab12");
    std::string cfg = g_tmp + "/init.json";
    write_raw(cfg, R"({"init_from": "w.safetensors"})");
    expect_error(
        "config_init_from_not_in_files",
        [&] {
            parse({"--config", cfg});
        },
        "unknown config key 'init_from'");
    expect_error(
        "config_resume_and_init_from",
        [&] {
            parse({"--resume", "r", "--init_from", "w"});
        },
        "give only one");
    expect_error(
        "config_resume_and_overwrite",
        [&] {
            parse({"--resume", "r", "--overwrite"});
        },
        "give only one");
    check("config_overwrite_flag", parse({"--overwrite", "--steps", "3"}).overwrite && !parse({}).overwrite);

    // clipping as torch's clip_grad_norm_: max_norm / (norm + 1e-6), never above 1
    check("clip_scale_torch", std::abs(clip_scale(1e-6, 0.5e-6) - 1e-6 / 1.5e-6) < 1e-12 &&
                                  std::abs(clip_scale(1.0, 4.0) - 1.0 / (4.0 + 1e-6)) < 1e-15 &&
                                  clip_scale(1.0, 0.5) == 1.0 && clip_scale(0.0, 100.0) == 1.0);

    // AdamW takes the config's betas in double (torch computes 1 - beta and the bias corrections
    // in double on the host): three steps in double precision match the update written out exactly
    {
        const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
        std::vector<double> p = {0.5, -1.0, 2.0}, g = {0.3, -0.2, 1.5}, m(3), v(3), hp = p, hm(3), hv(3);
        double err = 0;
        for (int t = 1; t <= 3; t++) {
            const StepScalars sc = adamw_scalars((float)lr, b1, b2, t);
            cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), 3, &sc, b1, b2, (float)eps, (float)wd);
            for (int i = 0; i < 3; i++) {
                double lrf = (float)lr, epsf = (float)eps, wdf = (float)wd;  // these travel as float
                hp[i] *= 1 - lrf * wdf;
                hm[i] = b1 * hm[i] + (1 - b1) * g[i];
                hv[i] = b2 * hv[i] + (1 - b2) * g[i] * g[i];
                hp[i] -=
                    lrf / (1 - std::pow(b1, t)) * hm[i] / (std::sqrt(hv[i]) / std::sqrt(1 - std::pow(b2, t)) + epsf);
                err = std::max(err, std::abs(p[i] - hp[i]) / std::abs(hp[i]));
            }
        }
        check("adamw_betas_in_double", err < 1e-12, "rel err " + std::to_string(err));
    }

    // memory: a config that cannot fit says so and how much, before anything is allocated
    ModelConfig huge;
    huge.C = 1 << 20;
    huge.H = 4;
    // and names the setting behind the largest part of it
    expect_error(
        "memory_check_huge_n_embd", [&] { check_host_memory(huge, 4, 256, true, "batch_size 4 x seq_len 256"); },
        "; n_layer 4, n_embd 1048576 and vocab_size 50257: the weights with their gradients and AdamW moments alone "
        "need about");
    ModelConfig longT;
    longT.maxT = 1 << 20;
    expect_error(
        "memory_check_huge_seq_len",
        [&] { check_host_memory(longT, 4, 1 << 20, true, "batch_size 4 x seq_len 1048576"); },
        "; batch_size 4 x seq_len 1048576: the activations alone need about");
    ModelConfig table;
    table.pos = Pos::learned;
    table.maxT = 100000000;
    expect_error(
        "memory_check_huge_max_seq_len", [&] { check_host_memory(table, 4, 256, true, "batch_size 4 x seq_len 256"); },
        "; max_seq_len 100000000: the position table alone needs about");
    ModelConfig small;
    expect_ok("memory_check_paper_model", [&] { check_host_memory(small, 8, 64, true, "batch_size 8 x seq_len 64"); });
    // the parts: the learned table is wpe with its gradient and two moments; RoPE's position data
    // its cos and sin tables (maxT, D/2)
    ModelConfig rope = small, learned = small;
    learned.pos = Pos::learned;
    MemoryParts mr = model_memory_parts(rope, 8, 64, true), ml = model_memory_parts(learned, 8, 64, true);
    check("memory_parts",
          ml.positions == 16.0 * small.maxT * small.C && mr.positions == 4.0 * small.maxT * (small.C / small.H) &&
              ml.weights == mr.weights && mr.total() == model_memory_bytes(rope, 8, 64, true),
          "positions " + std::to_string(ml.positions) + " and " + std::to_string(mr.positions) + ", weights " +
              std::to_string(ml.weights) + " vs " + std::to_string(mr.weights));
    // evaluation's own activations: none where its groups of rows (4 of 16 at 4x T) borrow the
    // training buffers; with the cublas attention at 8x T (2 rows: their (2,H,8T,8T) probabilities
    // pass the training set's L layers of (16,H,T,T)) the set of those 2 rows, and no more
    ModelConfig cublas = small, flash = small;
    flash.flash = true;
    const double own = eval_memory_bytes(cublas, 16, 256, {256, 1024, 2048});
    check("memory_eval_counted",
          eval_memory_bytes(flash, 16, 256, {256, 1024, 2048}) == 0 && eval_memory_bytes(cublas, 16, 256, {1024}) == 0 &&
              own == model_memory_parts(cublas, 2, 2048, false).activations && own > 0,
          "cublas at 2048: " + std::to_string(own) + " bytes");

    // an integer on a command line without a key table
    expect_error(
        "arg_not_integer", [&] { parse_int_arg("abc", "--tokens", 0, 100); },
        "--tokens: expected an integer, got 'abc'");
    expect_error(
        "arg_integer_too_big", [&] { parse_int_arg("99999999999999999999", "--tokens", 0, 100); },
        "expected an integer");
}

static void test_files_and_run_dir() {
    std::string f = g_tmp + "/sha";
    const std::pair<std::string, std::string> known[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    bool ok = true;
    for (const auto& [data, hex] : known) {
        write_raw(f, data);
        ok = ok && sha256_file(f) == hex;
    }
    check("sha256_known_vectors", ok);

    // a run folder that holds a run is refused; --overwrite deletes it, but never other files
    std::string run = g_tmp + "/claimed";
    expect_ok("run_dir_new_is_free", [&] { claim_run_dir(run, false); });
    make_run_dir(run);
    expect_ok("run_dir_empty_is_free", [&] { claim_run_dir(run, false); });
    write_raw(run + "/log.jsonl", "{}\n");
    checkpoint_write(run, 3, [](const std::string& dir) { write_text_file_atomic(dir + "/state.json", "{}"); });
    expect_error(
        "run_dir_holds_run", [&] { claim_run_dir(run, false); }, "already holds a run: continue it with --resume");
    write_raw(run + "/notes.txt", "mine");
    expect_error(
        "run_dir_overwrite_keeps_other_files", [&] { claim_run_dir(run, true); }, "notes.txt");
    check("run_dir_other_files_kept", fs::exists(run + "/notes.txt") && fs::exists(run + "/latest"));
    fs::remove(run + "/notes.txt");
    expect_ok("run_dir_overwrite", [&] { claim_run_dir(run, true); });
    // all but its lock: another trainer must not take a new lock file while this one holds the old
    check("run_dir_overwrite_deletes",
          fs::exists(run + "/lock") && std::distance(fs::directory_iterator(run), {}) == 1);

    std::string bad = g_tmp + "/badlatest";
    make_run_dir(bad);
    write_raw(bad + "/latest", "../../etc\n");
    expect_error(
        "checkpoint_latest_bad_name", [&] { checkpoint_latest(bad); }, "'latest' is corrupt");

    // encoder.json: anything but an object of token -> id is named as such
    std::string enc = g_tmp + "/encoder.json";
    write_raw(enc, "{}");
    expect_error(
        "encoder_empty_object", [&] { GPT2Decoder d(enc); }, "is not a GPT-2 encoder.json");
    write_raw(enc, R"({"a": "0", "b": 1})");
    expect_error(
        "encoder_string_ids", [&] { GPT2Decoder d(enc); }, "the id of 'a' is \"0\", not an integer");
    write_raw(enc, R"({"a": 0, "b": 0})");
    expect_error(
        "encoder_repeated_id", [&] { GPT2Decoder d(enc); }, "out of range or repeated");
    write_raw(enc, R"({"a": 1, "b": 0})");
    check("encoder_small_ok", GPT2Decoder(enc).decode({1, 0}) == "ab");
}

// One step's FLOPs against a count by hand of its products' multiply-adds, for L=2 C=16 V=50
// and a batch of 4 rows of T=8 (32 tokens): per layer qkv 32x16x48 = 24,576, the projection
// 32x16x16 = 8,192, the MLP 2 x 32x16x64 = 65,536, the scores and the weighted sum each
// 4 x 8x8 x 16 = 4,096; the head 32x16x50 = 25,600. Forward 2 x (2 x 106,496 + 25,600) = 477,184
// FLOPs, backward twice that: 1,431,552.
static void test_flops() {
    ModelConfig m;
    m.L = 2, m.H = 2, m.C = 16, m.V = 50, m.maxT = 8;
    const double f = train_step_flops(m, 32, 8);
    check("flops_hand_count", f == 1431552.0, "got " + std::to_string(f));
    // an MLP of width 32, not 4C = 64: 2 x 32x16x32 = 32,768 per layer, 65,536 fewer FLOPs forward
    m.mlp_hidden = 32;
    const double f32 = train_step_flops(m, 32, 8);
    check("flops_mlp_hidden", f32 == 1431552.0 - 3 * 2 * 2 * 32768, "got " + std::to_string(f32));
    check("flops_gpu_peaks",
          gpu_peak_tflops("NVIDIA H200", "bf16") == 989.4 && gpu_peak_tflops("NVIDIA H200 NVL", "bf16") == 835.0 &&
              gpu_peak_tflops("NVIDIA H100 PCIe", "fp32") == 51.2 &&
              gpu_peak_tflops("NVIDIA A100-SXM4-80GB", "tf32") == 156.0 &&
              gpu_peak_tflops("CUDA emulation on the CPU (H200-like, sm_90)", "bf16") == 0 &&
              gpu_peak_tflops("NVIDIA GeForce RTX 4090", "bf16") == 0 && gpu_peak_tflops("cpu", "fp32") == 0);
    // a MIG instance has a share of the GPU's units: no peak, whatever the GPU
    check("flops_gpu_peak_mig", gpu_peak_tflops("NVIDIA H200 MIG 1g.18gb", "bf16") == 0 &&
                                    gpu_peak_tflops("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "tf32") == 0 &&
                                    gpu_peak_tflops("NVIDIA H100 80GB HBM3 MIG 7g.80gb", "fp32") == 0);
}

// The MLP width: 4 x n_embd by default, or the width match_params gives (the paper's model: CRoPE
// with RoPE's parameter count), and the parameters and memory it adds.
static void test_mlp_hidden() {
    Config c;
    c.train_data = "x";
    check("mlp_hidden_default_4C", model_config(c).mlp_hidden == 512 && model_config(c).F() == 512);
    const size_t rope = param_counts(model_config(c)).total;
    c.pos = Pos::crope;
    const ModelConfig plain = model_config(c);
    c.match_params = "rope";
    const ModelConfig m = model_config(c);
    // crope saves L x 3C²/2 = 98,304 weights; each unit of width costs L (2C + 1) = 1,028
    check("match_params_crope_rope", m.mlp_hidden == 608 && param_counts(m).total == 7226624 && rope == 7226240,
          "mlp_hidden " + std::to_string(m.mlp_hidden) + ", total " + std::to_string(param_counts(m).total));
    c.mlp_hidden = 608;  // as the run's config.json records it, with match_params
    expect_ok("match_params_resolved_config_valid", [&] { validate(c); });
    // --memory: 96 more units of width, weights, gradients and two moments in fp32 of L (2C + 1)
    // each; and the activations fch and fch_gelu (per layer) and dfch, dfch_gelu, of B*T each
    const MemoryParts a = model_memory_parts(plain, 8, 64, true), b = model_memory_parts(m, 8, 64, true);
    check("memory_mlp_hidden",
          b.weights - a.weights == 16.0 * 4 * 257 * 96 && b.activations - a.activations == 4.0 * (2 * 4 + 2) * 512 * 96,
          "weights +" + std::to_string(b.weights - a.weights) + ", activations +" +
              std::to_string(b.activations - a.activations));
}

// CpuBackend<float> counting the bytes it holds: alloc, alloc_act and alloc_int, less what is freed.
struct CountingCpu : CpuBackend<float> {
    static inline HeldBytes held;
    static float* alloc(size_t n) { return held.add(CpuBackend<float>::alloc(n), n); }
    static float* alloc_act(size_t n) { return alloc(n); }
    static void free(float* p) { held.remove(p), CpuBackend<float>::free(p); }
    static int* alloc_int(size_t n) { return held.add(CpuBackend<float>::alloc_int(n), n); }
    static void free_int(int* p) { held.remove(p), CpuBackend<float>::free_int(p); }
};

// The estimate (train --memory) is what a model holds, to the byte: constructed with position
// data for a longer length than maxT, one training step taken (its activations and, with
// gradient accumulation, the step's ids and losses), then an evaluation at that length (its own
// activations where they do not fit in the training set's: eval_memory_bytes), all of it freed
// with the model; every scheme,
// with either attention, by rows and by vocabulary tiles, with and without accumulation.
static void test_memory_table() {
    Rng r(3);
    const int B = 4, T = 9, Te = 32;  // Te: with the cublas attention, too long to borrow
    const std::vector<int> tokens = randint((size_t)B * Te, 50, r);
    for (const PosTraits& t : kPosSchemes)
        for (int accum : {1, 2})
            for (int variant = 0; variant < 3; variant++) {
                ModelConfig mc;
                mc.pos = t.pos, mc.L = 2, mc.H = 2, mc.C = 16, mc.V = 50, mc.maxT = 12;
                mc.flash = variant != 1, mc.classifier_tile = variant == 2 ? 64 : 0;
                const std::string name = std::string("memory_table_") + t.name + (accum > 1 ? "_accum" : "") +
                                         (variant == 1 ? "_cublas" : variant == 2 ? "_tiles" : "");
                // learned positions evaluate up to maxT only
                const int n = t.learned_table ? mc.maxT : Te;
                std::string why;
                {
                GPT<CountingCpu> g(mc);
                g.positions.cover(n);
                g.init(1);
                g.train_step(tokens.data(), tokens.data(), B, T, AdamWConfig(), 1e-3f, 1, accum);
                g.read_step();
                const double step = model_memory_bytes(mc, B / accum, T, true, 4, true, accum, n);
                if ((double)CountingCpu::held.total() != step)
                    append(why, "a training step holds " + std::to_string(CountingCpu::held.total()) +
                                    " bytes, the estimate says " + std::to_string((long long)step));
                g.forward(tokens.data(), tokens.data(), B, n, false);
                const double own = eval_memory_bytes(mc, B / accum, T, {n}, 4, true), eval = step + own;
                if (variant == 1 && !t.learned_table && !(own > 0)) append(why, "the evaluation borrowed the buffers");
                if ((double)CountingCpu::held.total() != eval)
                    append(why, "with an evaluation at " + std::to_string(n) + " it holds " +
                                    std::to_string(CountingCpu::held.total()) + " bytes, the estimate says " +
                                    std::to_string((long long)eval));
                }
                if (!CountingCpu::held.sizes.empty()) append(why, "the model did not free all it allocated");
                report(name, why);
            }
}

// An inference model (ModelUse::inference: sampling, evaluation only, attention maps) holds no
// gradient, moment or step buffer, and at its peak what the estimate says, to the byte: sampling
// (gen_memory_parts) with the KV cache through a window that slides, without it, and for RoPE
// under a dynamic scaling (which recomputes the cache at each length); evaluation only, in
// training's groups of rows with no training set to borrow (eval_memory_bytes, !train), its loss
// a training model's to the bit; the attention maps, every layer's forward without the backward's
// buffers, a training model's to the bit. Every scheme, either attention, by rows and by tiles.
static void test_memory_inference() {
    Rng r(4);
    const int B = 4, T = 9, Te = 32, rows = 2;  // rows: a training micro-step's (grad_accum 2)
    const std::vector<int> tokens = randint((size_t)B * Te, 50, r);
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + 3);
    for (const PosTraits& t : kPosSchemes)
        for (int variant = 0; variant < 3; variant++) {
            ModelConfig mc;
            mc.pos = t.pos, mc.L = 2, mc.H = 2, mc.C = 16, mc.V = 50, mc.maxT = 12;
            mc.flash = variant != 1, mc.classifier_tile = variant == 2 ? 64 : 0;
            const std::string name = std::string("memory_inference_") + t.name +
                                     (variant == 1 ? "_cublas" : variant == 2 ? "_tiles" : "");
            const int n = t.learned_table ? mc.maxT : Te;  // learned positions evaluate up to maxT only
            std::string why;
            auto peak = [&](const std::string& what, double want) {
                if ((double)CountingCpu::held.peak != want)
                    append(why, what + " held at most " + std::to_string(CountingCpu::held.peak) +
                                    " bytes, the estimate says " + std::to_string((long long)want));
            };
            auto inference = [&](const ModelConfig& c) {
                CountingCpu::held.peak = 0;
                auto g = std::make_unique<GPT<CountingCpu>>(c, ModelUse::inference);
                g->init(1);
                if (g->grads || g->m || g->v || g->dqkv_w) append(why, "it holds gradients or moments");
                return g;
            };
            for (int run = 0; run < 3; run++) {
                ModelConfig c = mc;
                GenOptions o;
                o.tokens = 20, o.window = t.learned_table ? mc.maxT : 16, o.cache = run != 1;
                if (run == 2) {  // no slide: only the scaling's s makes the passes longer
                    if (!t.rotary) continue;
                    c.rope_scaling.kind = RopeScaling::dynamic, c.rope_scaling.train_len = 8, o.tokens = 14;
                }
                auto g = inference(c);
                Rng rng(1);
                GenStats st;
                generate(*g, prompt, o, rng, [](int, const auto&) {}, [] {}, st);
                peak(run == 0 ? "sampling" : run == 1 ? "sampling without the cache" : "sampling, dynamic scaling",
                     gen_memory_parts(c, (int)prompt.size(), o, 4, true, CountingCpu::classifier_chunk).total());
                if (g->step_inputs) append(why, "sampling allocated the step buffers");
            }
            double want_loss = 0;
            std::vector<float> want_maps;
            {
                GPT<CountingCpu> trained(mc);  // its evaluation borrows its training set
                trained.positions.cover(n);
                trained.init(1);
                if (!mc.flash) want_maps = trained.attention_maps(tokens.data(), 1, T);
                trained.reserve_training(rows, T);
                want_loss = trained.forward(tokens.data(), tokens.data(), B, n, false);
            }
            {
                auto g = inference(mc);
                g->positions.cover(n);
                g->reserve_training(rows, T);
                g->forward(tokens.data(), tokens.data(), B, T, false);
                const double loss = g->forward(tokens.data(), tokens.data(), B, n, false);
                if (loss != want_loss)
                    append(why, "evaluation only gives a loss of " + std::to_string(loss) + ", a training model " +
                                    std::to_string(want_loss));
                const MemoryParts p = model_memory_parts(mc, rows, T, false, 4, true, 1, n);
                peak("evaluation only",
                     p.weights + p.positions + eval_memory_bytes(mc, rows, T, {T, n}, 4, true, nullptr, false));
            }
            if (!mc.flash) {
                auto g = inference(mc);
                if (g->attention_maps(tokens.data(), 1, T) != want_maps)
                    append(why, "the attention maps differ from a training model's");
                peak("the attention maps", model_memory_parts(mc, 1, T, false, 4, true, 1, 0, 0, true).total());
            }
            try {  // a model built for inference does not train
                inference(mc)->train_step(tokens.data(), tokens.data(), B, T, AdamWConfig(), 1e-3f, 1);
                append(why, "an inference model took a training step");
            } catch (const std::logic_error&) {
            }
            if (!CountingCpu::held.sizes.empty()) append(why, "the models did not free all they allocated");
            report(name, why);
        }
}

// test_io [GROUP...] runs the groups whose name contains one of them; --list names them.
int main(int argc, char** argv) {
    char tmpl[] = "/tmp/test_io_XXXXXX";
    if (!mkdtemp(tmpl)) {
        std::printf("FAIL setup: mkdtemp: %s\n", std::strerror(errno));
        return 1;
    }
    g_tmp = tmpl;
    const std::vector<TestCase> groups = {
        test_group("config", test_config),
        test_group("validate", test_validate),
        test_group("dataloader", test_dataloader),
        test_group("eval_windows", test_eval_windows),
        test_group("safetensors", test_safetensors),
        test_group("checkpoint", test_checkpoint),
        test_group("full_disk", test_full_disk),
        test_group("shard_names", test_shard_names),
        test_group("config_robustness", test_config_robustness),
        test_group("files_and_run_dir", test_files_and_run_dir),
        test_group("flops", test_flops),
        test_group("mlp_hidden", test_mlp_hidden),
        test_group("memory_table", test_memory_table),
        test_group("memory_inference", test_memory_inference),
    };
    const int rc = run_test_list(groups, argc, argv);  // an unexpected error fails only its group
    std::error_code ec;
    fs::remove_all(g_tmp, ec);
    return rc;
}
