#include "dataloader.h"
#include "rng.h"
#include "fileio.h"
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <regex>
#include <glob.h>

namespace fs = std::filesystem;

namespace {

constexpr int32_t kMagic = 20240520;
constexpr int32_t kVersion = 1;
constexpr size_t kHeaderBytes = 1024;  // 256 int32

// Shard file names: NAME_SPLIT_NNNNNN.bin, SPLIT one of train | val | test, NNNNNN six digits.
// The split is the last "_SPLIT_" before the index, so my_val_set_train_000000.bin is a train
// shard of the dataset my_val_set. Twin of SHARD_RE in data/shards.py: keep the two equal.
const std::regex kShardName(R"(^(.+)_(train|val|test)_([0-9]{6})\.bin$)");

// What to run when no shards are found: the preparing command of a known dataset folder.
std::string prepare_hint(const std::string& pattern) {
    for (const char* name : {"wikitext2", "ptb", "pg19"})
        if (pattern.find(std::string("data/") + name) != std::string::npos)
            return std::string("; prepare it with: python3 data/prepare_data.py ") + name;
    if (pattern.find("synthetic") != std::string::npos)
        return "; make it with: python3 data/make_synthetic.py --out data/synthetic";
    return "; token shards are made by data/prepare_data.py (wikitext2, ptb, pg19) or data/make_synthetic.py";
}

std::vector<std::string> find_shards(const std::string& pattern, const std::string& split) {
    std::vector<std::string> paths;
    std::error_code ec;
    if (fs::is_directory(pattern, ec)) {
        std::smatch m;
        for (const auto& e : fs::directory_iterator(pattern, ec)) {
            std::string name = e.path().filename().string();
            if (e.is_regular_file() && std::regex_match(name, m, kShardName) && m[2] == split)
                paths.push_back(e.path().string());
        }
        if (ec) throw std::runtime_error("cannot list folder '" + pattern + "': " + ec.message());
        if (paths.empty())
            throw std::runtime_error("no shards match '" + pattern + "' (a folder: looked for NAME_" + split +
                                     "_NNNNNN.bin files in it)" + prepare_hint(pattern));
        std::sort(paths.begin(), paths.end());
        return paths;
    }
    glob_t g;
    int rc = glob(pattern.c_str(), 0, nullptr, &g);  // results come sorted
    if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) paths.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty()))
        throw std::runtime_error("no shards match '" + pattern + "'" + prepare_hint(pattern));
    if (rc != 0)
        throw std::runtime_error("cannot list shards '" + pattern + "' (glob error " + std::to_string(rc) + ")");
    return paths;
}

// A text file given as a shard: its first bytes are printable text, not the magic number.
bool looks_like_text(const std::string& file) {
    size_t n = std::min<size_t>(file.size(), 256), printable = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = file[i];
        printable += (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\r' || c == '\t';
    }
    return n >= 4 && printable == n;
}

std::vector<uint16_t> read_shard(const std::string& path, int vocab_size) {
    std::string file = read_text_file(path);
    auto bad = [&](const std::string& why) { throw std::runtime_error("bad shard " + path + ": " + why); };
    // a real header starts with the magic's bytes 88 d8 34 01 (0x01 is no text)
    if (looks_like_text(file))
        bad("this looks like text, not a token shard: tokenize it first (data/prepare_data.py for wikitext2, ptb "
            "and pg19; for your own text, data/gpt2_tokenizer.py encode and data/shards.py's ShardWriter)");
    if (file.size() < kHeaderBytes)
        bad("truncated: " + std::to_string(file.size()) + " bytes, shorter than the 1024-byte header");
    int32_t header[3];
    std::memcpy(header, file.data(), sizeof header);
    if (header[0] != kMagic) bad("bad magic " + std::to_string(header[0]) + ", expected " + std::to_string(kMagic));
    if (header[1] != kVersion) bad("unsupported version " + std::to_string(header[1]) + ", expected 1");
    if (header[2] < 0) bad("negative token count " + std::to_string(header[2]));
    size_t n = (size_t)header[2];
    if (file.size() != kHeaderBytes + 2 * n)
        bad("file size " + std::to_string(file.size()) + " bytes does not match the header's " + std::to_string(n) +
            " tokens (expected 1024 + 2*" + std::to_string(n) + " = " + std::to_string(kHeaderBytes + 2 * n) +
            (file.size() < kHeaderBytes + 2 * n ? "; truncated)" : ")"));
    std::vector<uint16_t> tokens(n);
    if (n) std::memcpy(tokens.data(), file.data() + kHeaderBytes, 2 * n);  // an empty vector's data() may be null
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= vocab_size)
            bad("token at index " + std::to_string(i) + " is " + std::to_string(tokens[i]) + ", not < vocab_size " +
                std::to_string(vocab_size));
    return tokens;
}

}  // namespace

DataLoader::DataLoader(const std::string& pattern, const std::string& split, int vocab_size) : pattern_(pattern) {
    paths_ = find_shards(pattern, split);
    for (const std::string& p : paths_) shards_.push_back(read_shard(p, vocab_size));
    if (num_windows(1) == 0)
        throw std::runtime_error("split '" + pattern + "' has no token windows (" + std::to_string(num_tokens()) +
                                 " tokens; every shard needs at least 2)");
}

size_t DataLoader::num_windows(int T) const {
    size_t w = 0;
    for (const auto& s : shards_)
        if (!s.empty()) w += (s.size() - 1) / (size_t)T;
    return w;
}

size_t DataLoader::num_tokens() const {
    size_t n = 0;
    for (const auto& s : shards_) n += s.size();
    return n;
}

void DataLoader::start(int B, int T, bool shuffle, uint64_t seed) {
    if (B < 1 || T < 1) throw std::runtime_error("DataLoader::start: B and T must be >= 1");
    first_window_.assign(1, 0);
    for (const auto& s : shards_) first_window_.push_back(first_window_.back() + (s.empty() ? 0 : (s.size() - 1) / T));
    size_t total = first_window_.back();
    if (total < (size_t)B)
        throw std::runtime_error("split '" + pattern_ + "' is too small for " + std::to_string(B) + " x (" +
                                 std::to_string(T) + "+1) tokens: it has " + std::to_string(total) + " window(s) of " +
                                 std::to_string(T + 1) + " tokens (" + std::to_string(num_tokens()) + " tokens in " +
                                 std::to_string(shards_.size()) + " shard(s))");
    B_ = B;
    T_ = T;
    shuffle_ = shuffle;
    seed_ = seed;
    epoch_ = 0;
    cursor_ = 0;
    make_order();
}

void DataLoader::make_order() {
    perm_.clear();
    if (!shuffle_) return;
    size_t n = first_window_.back();
    perm_.resize(n);
    for (size_t i = 0; i < n; i++) perm_[i] = i;
    // a fresh, decorrelated stream per epoch: hash (seed, epoch) into the starting state
    Rng rng(mix64(mix64(seed_) ^ epoch_));  // splitmix64: the same order everywhere
    for (size_t i = n - 1; i > 0; i--) std::swap(perm_[i], perm_[rng.below(i + 1)]);
}

void DataLoader::window(size_t i, size_t* shard, size_t* offset) const {
    size_t g = shuffle_ ? perm_[i] : i;
    // last shard whose first window is <= g (shards without windows share their successor's start)
    size_t s = std::upper_bound(first_window_.begin(), first_window_.end(), g) - first_window_.begin() - 1;
    *shard = s;
    *offset = (g - first_window_[s]) * (size_t)T_;
}

void DataLoader::next_batch(int* inputs, int* targets, int row0, int rows) {
    if (T_ == 0) throw std::runtime_error("DataLoader::next_batch called before start()");
    if (rows < 0) rows = B_;
    for (int b = 0; b < B_; b++) {
        if (cursor_ == first_window_.back()) {  // epoch done: the rest of the batch comes from the next one
            epoch_++;
            cursor_ = 0;
            make_order();
        }
        size_t s, off;
        window(cursor_++, &s, &off);
        if (b >= row0 && b < row0 + rows) copy(s, off, T_, b - row0, inputs, targets);  // else another rank's row
    }
}

void DataLoader::copy(size_t shard, size_t offset, int T, int r, int* inputs, int* targets) const {
    const uint16_t* tok = shards_[shard].data() + offset;  // T+1 tokens
    for (int t = 0; t < T; t++) {
        inputs[(size_t)r * T + t] = tok[t];
        targets[(size_t)r * T + t] = tok[t + 1];
    }
}

std::vector<DataLoader::EvalBatch> DataLoader::eval_batches(int B, int L, size_t n, int T) const {
    if (B < 1 || T < 1 || T > L || n % B)
        throw std::logic_error("eval_batches: needs 1 <= T <= L and n a multiple of B >= 1");
    std::vector<std::pair<size_t, size_t>> windows;  // the first n windows of L, shard by shard, cycled
    while (windows.size() < n) {
        size_t before = windows.size();
        for (size_t s = 0; s < shards_.size() && windows.size() < n; s++)
            for (size_t off = 0; off + L < shards_[s].size() && windows.size() < n; off += L)
                windows.push_back({s, off});
        if (windows.size() == before)
            throw std::runtime_error("split '" + pattern_ + "' has no window of " + std::to_string(L + 1) + " tokens");
    }
    // the pieces of T of every window in order (for T dividing L: the windows of T of the same
    // tokens), then the rest pieces, each group in batches of B
    std::vector<EvalBatch> batches;
    auto add = [&](int len, int first, int last) {  // pieces at first, first + len, .. < last
        for (size_t w = 0; w < n; w++)
            for (int p = first; p < last; p += len) {
                if (batches.empty() || batches.back().T != len || batches.back().pieces.size() == (size_t)B)
                    batches.push_back({len, {}});
                batches.back().pieces.push_back({windows[w].first, windows[w].second + p});
            }
    };
    const int full = L / T * T;
    add(T, 0, full);
    if (full < L) add(L - full, full, L);
    return batches;
}

void DataLoader::read(const EvalBatch& b, int* inputs, int* targets, int row0, int rows) const {
    if (rows < 0) rows = (int)b.pieces.size();
    for (int r = 0; r < rows; r++) copy(b.pieces[row0 + r].first, b.pieces[row0 + r].second, b.T, r, inputs, targets);
}

uint64_t DataLoader::fingerprint() const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the shards' sizes and tokens
    for (const auto& sh : shards_) {
        uint64_t n = sh.size();
        for (size_t i = 0; i < sizeof n; i++) h = (h ^ ((n >> (8 * i)) & 0xff)) * 1099511628211ull;
        for (uint16_t t : sh) h = (((h ^ (t & 0xff)) * 1099511628211ull) ^ (t >> 8)) * 1099511628211ull;
    }
    return h;
}

nlohmann::json DataLoader::state() const {
    return {{"epoch", epoch_}, {"cursor", cursor_}, {"seq_len", T_}, {"shuffle", shuffle_}, {"seed", seed_}};
}

void DataLoader::set_state(const nlohmann::json& s) {
    if (T_ == 0) throw std::runtime_error("DataLoader::set_state called before start()");
    uint64_t epoch, seed;
    size_t cursor;
    int T;
    bool shuffle;
    try {
        for (const char* key : {"epoch", "cursor", "seq_len", "seed"})
            if (!s.at(key).is_number_integer() || s.at(key).get<int64_t>() < 0)
                throw std::runtime_error(std::string("bad data loader state: '") + key + "' is " + s.at(key).dump() +
                                         ", not a non-negative integer");
        epoch = s.at("epoch").get<uint64_t>();
        cursor = s.at("cursor").get<size_t>();
        T = s.at("seq_len").get<int>();
        shuffle = s.at("shuffle").get<bool>();
        seed = s.at("seed").get<uint64_t>();
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("bad data loader state: ") + e.what());
    }
    // a position only means something for the same windows in the same order
    if (T != T_ || shuffle != shuffle_ || (shuffle && seed != seed_))
        throw std::runtime_error("data position was saved for seq_len " + std::to_string(T) +
                                 (shuffle ? ", shuffle seed " + std::to_string(seed) : ", sequential") +
                                 "; cannot continue with seq_len " + std::to_string(T_) +
                                 (shuffle_ ? ", shuffle seed " + std::to_string(seed_) : ", sequential"));
    if (cursor > first_window_.back())
        throw std::runtime_error("data position " + std::to_string(cursor) + " is past the split's " +
                                 std::to_string(first_window_.back()) + " windows (different data?)");
    epoch_ = epoch;
    cursor_ = cursor;
    make_order();
}
