// Fuzz target: a run folder read as --resume reads it (train_main and Trainer::load_checkpoint in
// src/train.cpp): config.json with its log's changes (resumed_config), validate, the latest
// checkpoint (checkpoint_latest, checkpoint_sound), its weights and AdamW moments against the
// config's model (layout_from_file), state.json (checkpoint_state) and the data position in it
// (DataLoader::set_state), and the log cut back to the step (JsonlLog::truncate_after).
// Input: config.json, log.jsonl, latest, state.json, model.safetensors, optim.safetensors, cut by
// kFileSep; the checkpoint's files go into RUN/ckpt_000003/ (the seeds' step).
#include "fuzz.h"

#include "checkpoint.h"
#include "config.h"
#include "dataloader.h"
#include "log.h"
#include "model_io.h"

namespace {
// A shard of 64 tokens, the data every fuzzed run trains on (the format: MODEL.md, Data).
std::string data_folder() {
    std::string shard(1024 + 2 * 64, '\0');
    const int32_t header[3] = {20240520, 1, 64};
    std::memcpy(&shard[0], header, sizeof header);
    for (int i = 0; i < 64; i++) shard[1024 + 2 * i] = (char)(i % 16);
    fuzz_file("data/fuzz_train_000000.bin", shard);
    return fuzz_dir() + "/data";
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string shards = data_folder();
    const std::vector<std::string> p = fuzz_parts(data, size, 6);
    const std::string run = fuzz_dir() + "/run";
    std::filesystem::remove_all(run);
    const char* names[] = {"config.json", "log.jsonl", "latest", "ckpt_000003/state.json",
                           "ckpt_000003/model.safetensors", "ckpt_000003/optim.safetensors"};
    for (int i = 0; i < 6; i++) fuzz_file(std::string("run/") + names[i], p[i]);
    refusal_ok([&] {
        Config c = resumed_config(run);
        c.train_data = shards;  // the folder's own data is the test's, whatever its config names
        c.val_data.clear();
        validate(c);
        const ModelConfig m = model_config(c);
        const std::string dir = checkpoint_sound(run, true);
        // the trainer allocates the model before it reads the weights, after check_host_memory;
        // a fuzzing process has less memory than a machine
        if (param_counts(m).total > (1u << 20)) return;
        const auto layout = param_layout(m);
        const StFile model = safetensors_read(dir + "/model.safetensors"), optim = safetensors_read(dir + "/optim.safetensors");
        if (model.metadata.count("config")) model_config(stored_config(model.metadata.at("config"), model.path));
        layout_from_file<float>(layout, model, "");
        layout_from_file<float>(layout, optim, "m.");
        layout_from_file<float>(layout, optim, "v.");
        const nlohmann::json state = checkpoint_state(dir);
        DataLoader train(c.train_data, "train", c.vocab_size);
        train.start(c.batch_size, c.seq_len, c.data_order == DataOrder::shuffle, c.seed);
        train.set_state(state.at("train_data"));
        JsonlLog(run + "/log.jsonl", true).truncate_after(state["step"].get<long>());
    });
    return 0;
}
