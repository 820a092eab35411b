#include "fileio.h"
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// Some files (character devices, pipes) and file systems cannot be fsynced; that is not a write error.
bool fsync_unsupported(int err) {
    return err == EINVAL || err == ENOTSUP || err == EROFS;
}

}  // namespace

std::string errno_text() {
    return std::strerror(errno);
}

void fsync_dir(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) throw std::runtime_error("cannot open folder " + dir + ": " + errno_text());
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0 && !fsync_unsupported(err))
        throw std::runtime_error("cannot sync folder " + dir + ": " + std::strerror(err));
}

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

// ---------------------------------------------------------------- whole files

std::string read_text_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read " + path + ": " + errno_text());
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
        std::fclose(f);
        throw std::runtime_error("cannot read " + path + ": " +
                                 (S_ISDIR(st.st_mode) ? "is a folder" : "not a regular file (a device?)"));
    }
    std::string s;
    if (S_ISREG(st.st_mode)) s.reserve(st.st_size);  // one allocation: a checkpoint is tens of MB
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

// ---------------------------------------------------------------- SHA-256

namespace {

uint32_t rotr(uint32_t x, int n) {
    return (x >> n) | (x << (32 - n));
}

// One 64-byte block into the state h (FIPS 180-4, section 6.2.2).
void sha256_block(uint32_t h[8], const unsigned char* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | p[4 * i + 1] << 16 | p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

}  // namespace

std::string sha256_file(const std::string& path) {
    std::string data = read_text_file(path);
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t full = data.size() / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, (const unsigned char*)data.data() + i);
    // padding: 0x80, zeros, then the bit length as a big-endian 64-bit number
    std::string tail = data.substr(full) + '\x80';
    tail.append((tail.size() <= 56 ? 56 : 120) - tail.size(), '\0');
    uint64_t bits = (uint64_t)data.size() * 8;
    for (int i = 7; i >= 0; i--) tail += (char)(bits >> (8 * i));
    for (size_t i = 0; i < tail.size(); i += 64) sha256_block(h, (const unsigned char*)tail.data() + i);
    char hex[65];
    for (int i = 0; i < 8; i++) std::snprintf(hex + 8 * i, 9, "%08x", h[i]);
    return hex;
}
