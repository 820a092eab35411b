#include "checkpoint.h"
#include "fileio.h"
#include "safetensors.h"
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// Names a run puts in its folder (see checkpoint.h and train.cpp), with their .tmp/.old siblings.
bool is_run_entry(const std::string& name) {
    std::string base = name;
    for (const char* suffix : {".tmp", ".old", ".del"})
        if (base.size() > 4 && base.compare(base.size() - 4, 4, suffix) == 0) base.resize(base.size() - 4);
    return base == "config.json" || base == "log.jsonl" || base == "latest" || base == "lock" ||
           base == ".write_probe" || base.rfind("ckpt_", 0) == 0;
}

}  // namespace

// ---------------------------------------------------------------- run folder

void claim_run_dir(const std::string& path, bool overwrite) {
    std::error_code ec;
    if (fs::exists(path, ec) && !fs::is_directory(path, ec))  // before the run prints anything
        throw std::runtime_error("cannot create run folder '" + path + "': exists and is not a folder");
    if (!fs::is_directory(path, ec)) return;  // a new folder
    lock_run_dir(path);
    bool holds_run = false;
    std::string foreign;
    for (const auto& e : fs::directory_iterator(path, ec)) {
        std::string name = e.path().filename().string();
        if (name == "config.json" || name == "log.jsonl" || name == "latest") holds_run = true;
        if (!is_run_entry(name)) foreign += (foreign.empty() ? "" : ", ") + name;
    }
    if (ec) throw std::runtime_error("cannot list run folder '" + path + "': " + ec.message());
    if (!holds_run) return;
    if (!overwrite)
        throw std::runtime_error("run folder '" + path + "' already holds a run: continue it with --resume " + path +
                                 ", start it again with --overwrite (deletes it), or choose another --run_dir");
    if (!foreign.empty())
        throw std::runtime_error("--overwrite: run folder '" + path + "' also holds files no run writes (" + foreign +
                                 "); not deleting it: move them away or choose another --run_dir");
    // everything but the lock: a new lock file would be another file, and another trainer could take it
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().filename() != "lock") entries.push_back(e.path());
    for (const fs::path& e : entries)
        if (fs::remove_all(e, ec), ec) break;
    if (ec) throw std::runtime_error("--overwrite: cannot delete run folder '" + path + "': " + ec.message());
}

namespace {
std::map<std::string, int>& held_locks() {  // folder -> its open lock file, never closed
    static std::map<std::string, int> held;
    return held;
}
// Whether fd is still the file at `file`: a holder that ended removed it, and a lock taken on the
// removed file would be no lock at all.
bool same_file(int fd, const std::string& file) {
    struct stat a, b;
    return ::fstat(fd, &a) == 0 && ::stat(file.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
// At exit the lock files go (a finished run keeps no pid of a process long gone); the flock is
// still held while each is removed, so no other trainer can have taken it.
void remove_lock_files() {
    for (const auto& [path, fd] : held_locks())
        if (same_file(fd, path + "/lock")) ::unlink((path + "/lock").c_str());
}
}  // namespace

void lock_run_dir(const std::string& path) {
    auto& held = held_locks();
    if (held.count(path)) return;
    if (held.empty()) std::atexit(remove_lock_files);
    const std::string file = path + "/lock";
    int fd = -1;
    for (int attempt = 0;; attempt++) {
        fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) throw std::runtime_error("cannot lock run folder '" + path + "': " + errno_text());
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            char pid[32] = {};
            ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
            ::close(fd);
            const std::string holder = n > 0 ? "pid " + std::to_string(std::atol(pid)) : "its pid not written yet";
            if (err == EWOULDBLOCK)
                throw std::runtime_error("run folder '" + path + "' is in use by another trainer (" + holder +
                                         "): wait for it to end, or stop it (Ctrl-C, kill -INT) and resume it");
            throw std::runtime_error("cannot lock run folder '" + path + "': " + std::strerror(err));
        }
        if (same_file(fd, file)) break;
        ::close(fd);  // its last holder removed it as we opened it: take the new one
        if (attempt == 100) throw std::runtime_error("cannot lock run folder '" + path + "': its lock file keeps vanishing");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != (ssize_t)pid.size()) {
        const std::string why = errno_text();
        ::close(fd);
        throw std::runtime_error("cannot write " + file + ": " + why);
    }
    held[path] = fd;
}

void make_run_dir(const std::string& path) {
    auto fail = [&](const std::string& why) {
        throw std::runtime_error("cannot create run folder '" + path + "': " + why);
    };
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) fail(ec.message());
    if (!fs::is_directory(path)) fail("exists and is not a folder");
    // Permission bits do not tell root the truth (e.g. read-only mounts), so really create a file.
    std::string probe = path + "/.write_probe";
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail("not writable: " + errno_text());
    ::close(fd);
    ::unlink(probe.c_str());
}

// ---------------------------------------------------------------- checkpoints

std::string checkpoint_write(const std::string& run_dir, long step,
                             const std::function<void(const std::string& dir)>& write_files) {
    char name[32];
    std::snprintf(name, sizeof name, "ckpt_%06ld", step);
    const std::string final_dir = run_dir + "/" + name;
    const std::string tmp_dir = final_dir + ".tmp";
    const std::string old_dir = final_dir + ".old";
    std::error_code ec;
    try {
        fs::remove_all(tmp_dir);  // debris of an earlier crash
        fs::create_directory(tmp_dir);
        write_files(tmp_dir);
        fsync_dir(tmp_dir);
        // A folder cannot be renamed over a non-empty one: move an existing one of the same step
        // aside (a rerun after resuming from an earlier checkpoint), and delete it once `latest` is safe.
        if (fs::exists(final_dir)) {
            fs::remove_all(old_dir);
            fs::rename(final_dir, old_dir);
        }
        fs::rename(tmp_dir, final_dir);
        fsync_dir(run_dir);
        write_text_file_atomic(run_dir + "/latest", std::string(name) + "\n");
    } catch (const std::exception& e) {
        fs::remove_all(tmp_dir, ec);
        throw std::runtime_error("cannot write checkpoint " + final_dir + ": " + e.what());
    }
    fs::remove_all(old_dir, ec);
    return final_dir;
}

std::string checkpoint_latest(const std::string& run_dir) {
    const std::string latest = run_dir + "/latest";
    if (!fs::exists(latest)) throw std::runtime_error("no checkpoint in '" + run_dir + "' (no 'latest' file)");
    std::string name = read_text_file(latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
    if (name.size() <= 5 || name.rfind("ckpt_", 0) != 0 || name.find_first_not_of("0123456789", 5) != std::string::npos)
        throw std::runtime_error("no checkpoint in '" + run_dir + "': 'latest' is corrupt");
    const std::string dir = run_dir + "/" + name;
    if (fs::is_directory(dir)) return dir;
    // a crash between the two renames in checkpoint_write leaves the previous copy as .old
    if (fs::is_directory(dir + ".old")) return dir + ".old";
    throw std::runtime_error("no checkpoint in '" + run_dir + "': 'latest' names " + name + ", which does not exist");
}

nlohmann::json checkpoint_state(const std::string& dir) {
    const std::string path = dir + "/state.json";
    nlohmann::json state;
    try {
        state = nlohmann::json::parse(read_text_file(path));
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("bad training state in " + path + ": " + e.what());
    }
    // the step is the folder's (ckpt_NNNNNN) and the weights'; anything else is a damaged or edited file
    long folder_step = std::strtol(dir.substr(dir.rfind("ckpt_") + 5).c_str(), nullptr, 10);
    if (!state.is_object() || !state.contains("step") || !state["step"].is_number_integer() ||
        state["step"].get<long>() != folder_step || !state.contains("train_data"))
        throw std::runtime_error("bad training state in " + path + ": expected {\"step\": " +
                                 std::to_string(folder_step) + ", \"train_data\": {...}} (the step of its folder)");
    return state;
}

namespace {
// Why a checkpoint folder does not read back ("" when it does): a torn or truncated file.
std::string unreadable(const std::string& dir, bool optimizer) {
    try {
        safetensors_read(dir + "/model.safetensors");
        if (optimizer) {
            safetensors_read(dir + "/optim.safetensors");
            if (!nlohmann::json::accept(read_text_file(dir + "/state.json")))
                return dir + "/state.json is not valid JSON";
        }
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}
}  // namespace

std::string checkpoint_sound(const std::string& run_dir, bool optimizer) {
    const std::string dir = checkpoint_latest(run_dir);
    const std::string why = unreadable(dir, optimizer);
    if (why.empty()) return dir;
    std::map<long, std::string> older;  // by step: the run's other checkpoints
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir, ec)) {
        const std::string name = e.path().filename().string();
        char* end = nullptr;
        const long step = name.rfind("ckpt_", 0) == 0 ? std::strtol(name.c_str() + 5, &end, 10) : -1;
        if (step >= 0 && end && *end == '\0' && e.path() != fs::path(dir)) older[step] = name;
    }
    std::string intact;
    for (auto it = older.rbegin(); it != older.rend() && intact.empty(); ++it)
        if (unreadable(run_dir + "/" + it->second, optimizer).empty()) intact = it->second;
    throw std::runtime_error(
        "the latest checkpoint " + dir + " does not read back (" + why + "); " +
        (intact.empty() ? "the run has no other checkpoint that does"
                        : intact + " does: to continue from it, write its name into " + run_dir + "/latest (echo " +
                              intact + " > " + run_dir + "/latest) and run the command again"));
}

void checkpoint_prune(const std::string& run_dir, int keep, int keep_every) {
    const std::string latest = fs::path(checkpoint_latest(run_dir)).filename().string();
    std::map<long, std::string> ckpts;  // by step
    std::vector<fs::path> debris;       // .del folders of an earlier, interrupted prune
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("ckpt_", 0) != 0 || !e.is_directory()) continue;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".del") == 0) {
            debris.push_back(e.path());
            continue;
        }
        char* end = nullptr;
        const long step = std::strtol(name.c_str() + 5, &end, 10);
        if (name.size() > 5 && *end == '\0') ckpts[step] = name;
    }
    if (ec) throw std::runtime_error("cannot list run folder '" + run_dir + "': " + ec.message());
    int newer = 0;  // checkpoints newer than the one looked at
    for (auto it = ckpts.rbegin(); it != ckpts.rend(); ++it, ++newer) {
        const bool kept = keep == 0 || newer < keep || (keep_every > 0 && it->first % keep_every == 0) ||
                          it->second == latest;
        if (kept) continue;
        const fs::path dir = fs::path(run_dir) / it->second, del = dir.string() + ".del";
        fs::rename(dir, del, ec);
        if (ec) throw std::runtime_error("cannot delete old checkpoint " + dir.string() + ": " + ec.message());
        debris.push_back(del);
    }
    for (const fs::path& d : debris) {
        fs::remove_all(d, ec);
        if (ec) throw std::runtime_error("cannot delete old checkpoint " + d.string() + ": " + ec.message());
    }
}
