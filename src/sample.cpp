// The sample binary: loads a checkpoint and generates text from a prompt, streaming each token as
// it comes (generate.h: a KV cache, or the full recompute with --no_cache), then a line of its
// speed on stderr; or with --attention writes the attention probabilities over the prompt
// (attention_json). Its options: kSampleKeys in config.cpp (build/sample --help).
// --prompt is encoded as data/gpt2_tokenizer.py encode TEXT does (src/gpt2_encoder.h), with the
// vocab.bpe beside encoder.json; --prompt_ids takes the ids themselves.
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "memory_estimate.h"
#include "fileio.h"
#include "model_io.h"
#include "generate.h"
#include "gpt2_decoder.h"
#include "gpt2_encoder.h"
#include "sampler.h"

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
                                     "' (expected integers separated by commas or spaces; a text prompt is --prompt TEXT)");
        }
        tok.clear();
    }
    if (ids.empty())
        throw std::runtime_error("--prompt_ids '" + s + "' holds no ids (leave it out to start from <|endoftext|>)");
    return ids;
}

// The attention file (MODEL.md, "Attention maps"): the checkpoint, the scheme, the prompt's ids and
// probabilities (L,H,T,T) as nested lists, so that numpy.array(json.load(f)["attention"]) is the
// array. %.9g keeps every float exactly.
static std::string attention_json(const std::string& checkpoint, const std::string& pos, const std::vector<int>& ids,
                                  const std::vector<float>& att, int L, int H) {
    const size_t T = ids.size();
    std::string s = "{\"checkpoint\": " + json(checkpoint).dump() + ", \"pos\": " + json(pos).dump() +
                    ", \"tokens\": " + json(ids).dump() + ", \"shape\": " + json({L, H, (int)T, (int)T}).dump() +
                    ", \"attention\": [";
    char num[32];
    for (int l = 0; l < L; l++) {
        s += l ? ",\n  [" : "\n  [";
        for (int h = 0; h < H; h++) {
            s += h ? ",\n   [" : "[";
            for (size_t t = 0; t < T; t++) {
                s += t ? ",\n    [" : "[";
                const float* row = att.data() + (((size_t)l * H + h) * T + t) * T;  // (T)
                for (size_t t2 = 0; t2 < T; t2++) {
                    std::snprintf(num, sizeof num, t2 ? ", %.9g" : "%.9g", row[t2]);
                    s += num;
                }
                s += "]";
            }
            s += "]";
        }
        s += "]";
    }
    return s + "]}\n";
}

// How the options combine and their ranges, checked before anything is read. Returns whether the
// model runs on the GPU (--device auto: when one is usable).
static bool check_options(const SampleOptions& o) {
    auto given = [&](const char* k) { return o.given.count(k) > 0; };
    if (o.checkpoint.empty()) throw std::runtime_error("--checkpoint is required (see --help)");
    if (given("prompt") && given("prompt_ids"))
        throw std::runtime_error("--prompt and --prompt_ids both give the prompt: use one of them");
    const bool maps = given("attention");
    if (maps && o.attention.empty()) throw std::runtime_error("--attention is empty: give the file to write");
    for (const char* k : {"tokens", "temperature", "top_k", "seed", "num_samples", "context", "no_cache"})
        if (maps && given(k)) throw std::runtime_error(std::string("--attention generates nothing: leave out --") + k);
    for (const char* k : {"device", "precision"})
        if (maps && given(k))
            throw std::runtime_error(std::string("--attention computes on the CPU: leave out --") + k);
    for (const auto& [k, v] : {std::pair<const char*, int>{"tokens", o.tokens},
                               {"num_samples", o.num_samples},
                               {"context", given("context") ? o.context : 1}}) {
        if (v < 1) throw std::runtime_error(std::string("--") + k + " must be at least 1, got " + std::to_string(v));
        if (v > 1 << 20)
            throw std::runtime_error(std::string("--") + k + " must be at most 1048576, got " + std::to_string(v));
    }
    if (o.top_k < 0)
        throw std::runtime_error("--top_k must be >= 0 (0 = the whole vocabulary), got " + std::to_string(o.top_k));
    if (o.temperature < 0) {
        char t[32];
        snprintf(t, sizeof t, "%g", o.temperature);
        throw std::runtime_error(std::string("--temperature must be >= 0 (0 = greedy), got ") + t);
    }
    bool cuda = o.device == Device::cuda;
#ifdef HAVE_CUDA
    if (o.device != Device::cpu) {
        const DeviceCheck d = cuda_check_device();
        if (cuda && d.state != DeviceCheck::Usable) throw std::runtime_error("--device cuda: " + d.why);
        cuda = d.state == DeviceCheck::Usable;
    }
#else
    if (cuda)
        throw std::runtime_error("--device cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
    if (o.precision == Precision::bf16 && !cuda) throw std::runtime_error("--precision bf16 needs --device cuda");
    return cuda;
}
// The prompt's ids: --prompt_ids, or --prompt encoded with the vocabulary it opens into `encoder`.
static std::vector<int> read_prompt(const SampleOptions& o, std::unique_ptr<GPT2Encoder>& encoder) {
    std::vector<int> prompt = o.prompt_ids.empty() ? std::vector<int>{} : parse_ids(o.prompt_ids);
    if (!o.given.count("prompt")) return prompt;
    if (o.prompt.empty()) throw std::runtime_error("--prompt is empty (leave it out to start from <|endoftext|>)");
    try {
        encoder = std::make_unique<GPT2Encoder>(o.encoder_json);
        return encoder->encode(o.prompt);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("--prompt: ") + e.what());
    }
}

// The checkpoint's model, with the command line's scaling, checked against the prompt (which gets
// <|endoftext|> when empty) and the window; flash off where the attention maps or the GPU's
// kernels need the cublas mode.
static ModelConfig model_for(const SampleOptions& o, const StFile& f, const GPT2Encoder* encoder,
                             std::vector<int>& prompt, const GenOptions& go, bool cuda) {
    if (!f.metadata.count("config")) throw std::runtime_error(f.path + " has no model config in its metadata");
    Config stored = stored_config(f.metadata.at("config"), f.path);
    if (o.given.count("rope_scaling")) stored.rope_scaling = o.rope_scaling;  // any scaling, not only the trained one
    if (o.given.count("rope_scaling_factor")) stored.rope_scaling_factor = o.rope_scaling_factor;
    validate_model(stored);
    ModelConfig mc = model_config(stored);
    if (encoder && (int)encoder->vocab().size() != mc.V)
        throw std::runtime_error("--prompt: the model's vocabulary has " + std::to_string(mc.V) + " ids, not the " +
                                 std::to_string(encoder->vocab().size()) + " of " + o.encoder_json +
                                 " (give its ids with --prompt_ids)");
    if (prompt.empty()) prompt = {mc.V > 50256 ? 50256 : 0};
    for (int id : prompt)
        if (id < 0 || id >= mc.V)
            throw std::runtime_error("prompt id " + std::to_string(id) + " is outside the vocabulary");
    const bool maps = o.given.count("attention");
    if (maps && (int)prompt.size() > mc.maxT)
        throw std::runtime_error("--attention: the prompt has " + std::to_string(prompt.size()) +
                                 " tokens, more than the model's max_seq_len " + std::to_string(mc.maxT));
    if (!maps) {
        int window;
        try {
            window = gen_window(mc, go);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string("--context: ") + e.what());
        }
        if ((int)prompt.size() > window)
            throw std::runtime_error("the prompt has " + std::to_string(prompt.size()) +
                                     " tokens, more than the context of " + std::to_string(window) +
                                     (pos_traits(mc.pos).learned_table
                                          ? " (max_seq_len: learned positions have no row past it)"
                                      : o.given.count("context") ? " (--context)"
                                                                 : " (max_seq_len; a longer one: --context N)"));
    }
    // --attention: the cublas mode, which keeps every layer's probabilities in the training activations
    if (maps) mc.flash = false;
#ifdef HAVE_CUDA
    // the flash kernels take some head sizes; the cublas attention computes the same for the others
    if (cuda && mc.flash && !cuda_flash_supports_head_size(mc.C / mc.H)) mc.flash = false;
#else
    (void)cuda;
#endif
    return mc;
}

// --attention: the probabilities of every layer and head over the prompt, written to the file.
static void write_attention(const SampleOptions& o, const std::string& path, const ModelConfig& mc,
                            const std::vector<float>& weights, const std::vector<int>& prompt) {
    GPT<CpuBackend<float>> model(mc, ModelUse::inference);
    model.set_params(weights);
    const int T = (int)prompt.size();
    std::vector<float> att = model.attention_maps(prompt.data(), 1, T);  // (L,1,H,T,T)
    write_text_file_atomic(o.attention, attention_json(path, pos_name(mc.pos), prompt, att, mc.L, mc.H));
    printf("attention: %s, (L %d, H %d, T %d) over the prompt\n", o.attention.c_str(), mc.L, mc.H, T);
}

int main(int argc, char** argv) {
    setup_process(argv);
    try {
        const SampleOptions o = parse_sample_args(argc, argv);
        if (o.help) {
            printf("%s", sample_help_text().c_str());
            return 0;
        }
        const bool cuda = check_options(o), bf16 = o.precision == Precision::bf16, maps = o.given.count("attention");
        GenOptions go;
        go.tokens = o.tokens;
        go.cache = !o.no_cache;
        if (o.given.count("context")) go.window = o.context;
        go.top_k = o.top_k;
        go.temperature = o.temperature;
        std::unique_ptr<GPT2Encoder> encoder;  // the vocabulary of --prompt, which also decodes
        std::vector<int> prompt = read_prompt(o, encoder);

        StFile f = safetensors_read(model_file(o.checkpoint));
        const ModelConfig mc = model_for(o, f, encoder.get(), prompt, go, cuda);
        if (!cuda)  // host memory for the CPU's model and activations
            check_host_memory(mc,
                              maps ? model_memory_parts(mc, 1, (int)prompt.size(), false, 4, true, 1, 0, 0, true)
                                   : sample_memory<CpuBackend<float>>(mc, prompt, go),
                              false,
                              maps ? "a prompt of " + std::to_string(prompt.size()) + " tokens"
                                   : "a window of " +
                                         std::to_string(std::min<int>(gen_window(mc, go), prompt.size() + go.tokens)) +
                                         " tokens (the prompt and --tokens)");
        // the whole checkpoint is checked before the vocabulary is opened (--prompt's, opened with
        // the arguments, gives errors, not notes): a malformed one gives its error alone, without
        // a note about encoder.json before it
        std::vector<float> weights = layout_from_file<float>(param_layout(mc), f, "");
        f.tensors.clear();  // the weights are in `weights`: hold them once
        if (maps) {
            write_attention(o, f.path, mc, weights, prompt);
            return 0;
        }
        // a broken encoder.json fails before the work
        std::unique_ptr<GPT2Decoder> opened = encoder ? nullptr : open_decoder(o.encoder_json, mc.V);
        const GPT2Decoder* decoder = encoder ? &encoder->vocab() : opened.get();
        GenStats st;
#ifdef HAVE_CUDA
        if (cuda)
            st = cuda_sample(mc, std::move(weights), prompt, go, o.num_samples, o.seed, decoder, bf16);
        else
#endif
            st = sample_with<CpuBackend<float>>(mc, std::move(weights), prompt, go, o.num_samples, o.seed, decoder);
        // --tokens 1 takes its token from the prefill's logits: no generation step to time
        char gen[96] = "no generation step after the prefill";
        if (st.tokens)
            snprintf(gen, sizeof gen, "generation %zu tokens at %.1f tokens/s", st.tokens,
                     st.tokens / std::max(st.generate_s, 1e-9));
        fprintf(stderr, "speed: prefill %zu tokens at %.0f tokens/s, %s (%s, %s)\n", st.prefill_tokens,
                st.prefill_tokens / std::max(st.prefill_s, 1e-9), gen, go.cache ? "KV cache" : "full recompute",
                cuda ? (bf16 ? "cuda bf16" : "cuda") : "cpu");
        return 0;
    } catch (const std::exception& e) {
        fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
