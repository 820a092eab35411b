// The sample binary: loads a checkpoint and generates text from a prompt.
//   build/sample --checkpoint RUN_DIR|CKPT_DIR|FILE.safetensors [--prompt_ids "464 3290"]
//                [--tokens 64] [--temperature 1.0] [--top_k 40] [--seed 42] [--encoder data/gpt2/encoder.json]
// The prompt is given as GPT-2 ids: data/gpt2_tokenizer.py encode "text" prints them.
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_cpu.h"
#include "checkpoint.h"
#include "config.h"
#include "model_io.h"
#include "generate.h"
#include "gpt2_decoder.h"

using json = nlohmann::json;

static std::string model_file(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot read checkpoint '" + path + "': no such file");
    if (!S_ISDIR(st.st_mode)) return path;
    if (stat((path + "/model.safetensors").c_str(), &st) == 0) return path + "/model.safetensors";
    return checkpoint_latest(path) + "/model.safetensors";
}

// "464,3290" or "464 3290" (what data/gpt2_tokenizer.py encode prints)
static std::vector<int> parse_ids(const std::string& s) {
    std::vector<int> ids;
    std::string tok;
    for (size_t p = 0; p <= s.size(); p++) {
        if (p < s.size() && s[p] != ',' && s[p] != ' ') {
            tok += s[p];
            continue;
        }
        if (tok.empty()) continue;
        try {
            size_t used;
            ids.push_back(std::stoi(tok, &used));
            if (used != tok.size()) throw std::invalid_argument(tok);
        } catch (const std::exception&) {
            throw std::runtime_error("bad --prompt_ids entry '" + tok +
                                     "' (expected integers separated by commas or spaces)");
        }
        tok.clear();
    }
    if (ids.empty())
        throw std::runtime_error("--prompt_ids '" + s + "' holds no ids (leave it out to start from <|endoftext|>)");
    return ids;
}

int main(int argc, char** argv) {
    setup_process(argv);
    try {
        std::map<std::string, std::string> opt = {{"checkpoint", ""},
                                                  {"prompt_ids", ""},
                                                  {"tokens", "64"},
                                                  {"temperature", "1.0"},
                                                  {"top_k", "40"},
                                                  {"seed", "42"},
                                                  {"encoder", "data/gpt2/encoder.json"}};
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            if (a == "--help" || a == "-h") {
                printf(
                    "usage: build/sample --checkpoint RUN_DIR|CKPT_DIR|FILE.safetensors [--prompt_ids 464,3290]\n"
                    "                    [--tokens 64] [--temperature 1.0] [--top_k 40] [--seed 42]\n"
                    "                    [--encoder data/gpt2/encoder.json]\n"
                    "temperature 0 = greedy; top_k 0 = whole vocabulary. Without encoder.json the ids are printed.\n");
                return 0;
            }
            if (a.rfind("--", 0) != 0 || !opt.count(a.substr(2)))
                throw std::runtime_error("unknown argument '" + a + "'");
            if (i + 1 >= argc) throw std::runtime_error("missing value for " + a);
            opt[a.substr(2)] = argv[++i];
        }
        if (opt["checkpoint"].empty()) throw std::runtime_error("--checkpoint is required (see --help)");
        // every argument is checked before the model is loaded
        int n = (int)parse_int_arg(opt["tokens"], "--tokens", 0, 1 << 20);
        int top_k = (int)parse_int_arg(opt["top_k"], "--top_k", 0, INT_MAX);
        uint64_t seed = (uint64_t)parse_int_arg(opt["seed"], "--seed", 0, LLONG_MAX);
        double temperature = parse_number_arg(opt["temperature"], "--temperature");
        if (temperature < 0)
            throw std::runtime_error("--temperature must be >= 0 (0 = greedy), got " + opt["temperature"]);
        std::vector<int> prompt = opt["prompt_ids"].empty() ? std::vector<int>{} : parse_ids(opt["prompt_ids"]);

        StFile f = safetensors_read(model_file(opt["checkpoint"]));
        if (!f.metadata.count("config")) throw std::runtime_error(f.path + " has no model config in its metadata");
        ModelConfig mc = model_config(stored_config(f.metadata.at("config"), f.path));
        if (prompt.empty()) prompt = {mc.V > 50256 ? 50256 : 0};
        for (int id : prompt)
            if (id < 0 || id >= mc.V)
                throw std::runtime_error("prompt id " + std::to_string(id) + " is outside the vocabulary");
        const int window = std::min<int>(mc.maxT, (int)prompt.size() + n);
        check_host_memory(mc, 1, window, false,
                          "a window of " + std::to_string(window) + " tokens (the prompt and --tokens)");
        // the whole checkpoint is checked before the vocabulary is opened: a malformed one gives
        // its error alone, without a note about encoder.json before it
        std::vector<float> weights = layout_from_file<float>(param_layout(mc), f, "");
        auto decoder = open_decoder(opt["encoder"], mc.V);  // a broken encoder.json fails before the work
        GPT<CpuBackend<float>> model(mc);
        model.set_params(weights);
        auto ids = generate(model, prompt, n, temperature, top_k, seed);

        if (decoder) {
            printf("%s\n", decoder->decode(ids).c_str());
        } else {
            for (size_t i = 0; i < ids.size(); i++) printf("%s%d", i ? " " : "", ids[i]);
            printf("\n");
        }
        return 0;
    } catch (const std::exception& e) {
        fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
