// Fuzz target: the command line and the config file (src/config.cpp: parse_args, every key of
// kKeys, --config files, validate), then what train_main does with a valid config: the model's
// shape and memory, and the config written to config.json and read back (config_to_json,
// config_from_json), which must give the same config.
// Input: the arguments, one a line; then kFileSep and the --config file, when there is one.
#include "fuzz.h"

#include "config.h"
#include "memory_estimate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<std::string> parts = fuzz_parts(data, size, 2);
    std::vector<std::string> args = {"train"};
    for (size_t at = 0; at < parts[0].size();) {
        size_t nl = parts[0].find('\n', at);
        if (nl == std::string::npos) nl = parts[0].size();
        args.push_back(parts[0].substr(at, nl - at));
        at = nl + 1;
    }
    if (!parts[1].empty()) args.insert(args.begin() + 1, {"--config", fuzz_file("config.json", parts[1])});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    refusal_ok([&] {
        const Config c = parse_args((int)args.size(), argv.data());
        if (c.help || c.list_pos) return;
        validate(c);
        const ModelConfig m = model_config(c);
        model_memory_bytes(m, c.batch_size / c.grad_accum, c.seq_len, true);
        const nlohmann::json j = config_to_json(c);
        fuzz_require(config_to_json(config_from_json(j, "config.json")) == j, "config.json reads back otherwise");
        fuzz_require(config_to_json(stored_config(j.dump(), "metadata")) == j, "the stored config reads back otherwise");
    });
    return 0;
}
