// Small checked file helpers every reader and writer uses: a write-checked output file,
// whole-file reads, atomic text writes, and a file's SHA-256.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the shard and safetensors formats are little-endian; this code writes host memory as is"
#endif

// Output file whose every write is checked. close() flushes, fsyncs and checks fclose, so a
// full disk is reported as "cannot write <path>: No space left on device" instead of being lost.
class OutFile {
  public:
    OutFile(const std::string& path, const char* mode = "wb");
    ~OutFile();  // closes without checks (error paths only)
    OutFile(const OutFile&) = delete;
    OutFile& operator=(const OutFile&) = delete;
    void write(const void* data, size_t n);
    void write(const std::string& s) { write(s.data(), s.size()); }
    void flush();  // fflush, checked
    void close();  // fflush + fsync + fclose, all checked
    const std::string& path() const { return path_; }

  private:
    [[noreturn]] void fail();
    std::string path_;
    FILE* f_ = nullptr;
};

// Whole file as bytes; throws "cannot read <path>: <reason>". Only regular files (and pipes)
// are read: a device such as /dev/zero would never end.
std::string read_text_file(const std::string& path);
// Writes path.tmp, fsyncs, renames over path, fsyncs the folder.
void write_text_file_atomic(const std::string& path, const std::string& text);
// fsync a folder so the names created or renamed in it survive a crash.
void fsync_dir(const std::string& dir);
// strerror(errno): the reason of the last failed call, for error messages.
std::string errno_text();
// Lowercase hex SHA-256 of a file's bytes (FIPS 180-4).
std::string sha256_file(const std::string& path);
