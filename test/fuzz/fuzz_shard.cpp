// Fuzz target: the token shard reader (src/dataloader.cpp) on any bytes: the header, the token
// count against the file size, truncation, ids against vocab_size; a shard that reads is then
// batched as training (both orders) and evaluation take it.
#include "fuzz.h"

#include "dataloader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz_file("shards/fuzz_train_000000.bin", std::string((const char*)data, size));
    refusal_ok([&] {
        DataLoader dl(fuzz_dir() + "/shards", "train", 50257);
        const size_t n = dl.num_tokens();
        for (int T : {1, 3, 16}) {
            refusal_ok([&] {
                dl.start(2, T, T == 3, 7);
                std::vector<int> in(2 * T), tg(2 * T);
                for (int k = 0; k < 3; k++) dl.next_batch(in.data(), tg.data());
                for (size_t i = 0; i < in.size(); i++)
                    fuzz_require(in[i] >= 0 && in[i] < 50257 && tg[i] >= 0 && tg[i] < 50257, "an id out of range");
                for (const auto& b : dl.eval_batches(2, 2 * T, 4, T)) {
                    std::vector<int> ein(b.pieces.size() * b.T), etg(ein.size());
                    dl.read(b, ein.data(), etg.data());
                }
            });
        }
        fuzz_require(dl.num_tokens() == n, "the token count changed");
    });
    return 0;
}
