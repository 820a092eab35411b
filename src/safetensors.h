// safetensors (https://huggingface.co/docs/safetensors): 8-byte little-endian header length N,
// N bytes of JSON header (padded with spaces to a multiple of 8), then the raw little-endian data.
// Header: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end)}, ..., "__metadata__": {str: str}}
// with offsets relative to the start of the data section.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct StTensor {
    std::string name;
    std::string dtype;           // "F32" or "F64" (also F16, BF16, I64, I32, I16, I8, U8, BOOL)
    std::vector<int64_t> shape;  // {} = scalar
    const void* data;            // numel * dtype size bytes, host order (little-endian)
};

struct StEntry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::string bytes;  // the raw data
    size_t numel() const;
};

struct StFile {
    std::string path;
    std::map<std::string, std::string> metadata;
    std::map<std::string, StEntry> tensors;
    // The named tensor, checked for presence, dtype and shape; throws a message naming the file.
    const StEntry& get(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape) const;
};

// Bytes per element of a dtype; throws for an unknown one.
size_t st_dtype_size(const std::string& dtype);
// Throws "cannot write <path>: <reason>" on any failure (e.g. a full disk); the file is fsynced.
void safetensors_write(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);
// Throws "cannot read <path>: ..." or "<path> is not a valid safetensors file: ...".
StFile safetensors_read(const std::string& path);
