// Run folder and checkpoint protocol, plus the small checked file helpers every writer uses.
//
// A checkpoint is written into RUN_DIR/ckpt_NNNNNN.tmp/, fsynced, renamed to RUN_DIR/ckpt_NNNNNN/,
// and only then is RUN_DIR/latest (a text file holding the folder name) replaced atomically.
// A crash or error at any point leaves the previous checkpoint and `latest` untouched.
#pragma once
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the shard and safetensors formats are little-endian; this code writes host memory as is"
#endif

// Output file whose every write is checked. close() flushes, fsyncs and checks fclose, so a
// full disk is reported as "cannot write <path>: No space left on device" instead of being lost.
class OutFile {
public:
    OutFile(const std::string& path, const char* mode = "wb");
    ~OutFile();                                // closes without checks (error paths only)
    OutFile(const OutFile&) = delete;
    OutFile& operator=(const OutFile&) = delete;
    void write(const void* data, size_t n);
    void write(const std::string& s) { write(s.data(), s.size()); }
    void flush();                              // fflush, checked
    void close();                              // fflush + fsync + fclose, all checked
    const std::string& path() const { return path_; }
private:
    [[noreturn]] void fail();
    std::string path_;
    FILE* f_ = nullptr;
};

// Whole file as bytes; throws "cannot read '<path>': <reason>".
std::string read_text_file(const std::string& path);
// Writes path.tmp, fsyncs, renames over path, fsyncs the folder.
void write_text_file_atomic(const std::string& path, const std::string& text);
// mkdir -p plus a write probe; throws "cannot create run folder '<path>': <reason>".
void make_run_dir(const std::string& path);

// Writes RUN_DIR/ckpt_NNNNNN (NNNNNN = step, zero-padded to 6) via write_files(tmpdir), then
// points RUN_DIR/latest at it. Returns the final folder path. On error the tmp folder is removed
// and a std::runtime_error "cannot write checkpoint ...: <reason>" is thrown.
std::string checkpoint_write(const std::string& run_dir, long step,
                             const std::function<void(const std::string& dir)>& write_files);
// Path of the folder named by RUN_DIR/latest; throws "no checkpoint in '<RUN_DIR>' ..." if none.
std::string checkpoint_latest(const std::string& run_dir);
