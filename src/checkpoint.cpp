#include "checkpoint.h"
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

std::string errno_text() { return std::strerror(errno); }

// Some files (character devices, pipes) and file systems cannot be fsynced; that is not a write error.
bool fsync_unsupported(int err) { return err == EINVAL || err == ENOTSUP || err == EROFS; }

// fsync a folder so the names created or renamed in it survive a crash.
void fsync_dir(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) throw std::runtime_error("cannot open folder " + dir + ": " + errno_text());
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0 && !fsync_unsupported(err)) throw std::runtime_error("cannot sync folder " + dir + ": " + std::strerror(err));
}

}  // namespace

// ---------------------------------------------------------------- OutFile

OutFile::OutFile(const std::string& path, const char* mode) : path_(path) {
    f_ = std::fopen(path.c_str(), mode);
    if (!f_) fail();
}

OutFile::~OutFile() {
    if (f_) std::fclose(f_);
}

void OutFile::fail() {
    std::string msg = "cannot write " + path_ + ": " + errno_text();
    if (f_) std::fclose(f_);
    f_ = nullptr;
    throw std::runtime_error(msg);
}

void OutFile::write(const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, f_) != n) fail();
}

void OutFile::flush() {
    if (std::fflush(f_) != 0) fail();
}

void OutFile::close() {
    flush();
    if (::fsync(fileno(f_)) != 0 && !fsync_unsupported(errno)) fail();
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path_ + ": " + errno_text());
}

// ---------------------------------------------------------------- small helpers

std::string read_text_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read " + path + ": " + errno_text());
    std::string s;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    bool bad = std::ferror(f);
    int err = errno;
    std::fclose(f);
    if (bad) throw std::runtime_error("cannot read " + path + ": " + std::strerror(err));
    return s;
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp";
    try {
        OutFile f(tmp);
        f.write(text);
        f.close();
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::string msg = "cannot write " + path + ": rename failed: " + errno_text();
        std::remove(tmp.c_str());
        throw std::runtime_error(msg);
    }
    fs::path parent = fs::path(path).parent_path();
    fsync_dir(parent.empty() ? "." : parent.string());
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
    if (name.empty() || name.find('/') != std::string::npos)
        throw std::runtime_error("no checkpoint in '" + run_dir + "': 'latest' is corrupt");
    const std::string dir = run_dir + "/" + name;
    if (fs::is_directory(dir)) return dir;
    // a crash between the two renames in checkpoint_write leaves the previous copy as .old
    if (fs::is_directory(dir + ".old")) return dir + ".old";
    throw std::runtime_error("no checkpoint in '" + run_dir + "': 'latest' names " + name + ", which does not exist");
}
