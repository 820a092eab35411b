#include "safetensors.h"
#include "fileio.h"
#include <cstring>
#include <stdexcept>
#include <nlohmann/json.hpp>

using json = nlohmann::json;

namespace {

const std::map<std::string, size_t> kDtypeSizes = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

size_t shape_numel(const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

// Guards against absurd headers in corrupt files before we try to allocate or parse them.
constexpr uint64_t kMaxHeader = 100u << 20;

}  // namespace

size_t StEntry::numel() const {
    return shape_numel(shape);
}

size_t st_dtype_size(const std::string& dtype) {
    auto it = kDtypeSizes.find(dtype);
    if (it == kDtypeSizes.end()) throw std::runtime_error("unknown safetensors dtype '" + dtype + "'");
    return it->second;
}

const StEntry& StFile::get(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error(path + ": tensor '" + name + "' is missing");
    const StEntry& e = it->second;
    if (e.dtype != dtype)
        throw std::runtime_error(path + ": tensor '" + name + "' has dtype " + e.dtype + ", expected " + dtype);
    if (e.shape != shape)
        throw std::runtime_error(path + ": tensor '" + name + "' has shape " + shape_text(e.shape) + ", expected " +
                                 shape_text(shape));
    return e;
}

void safetensors_write(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::vector<size_t> sizes;
    size_t offset = 0;
    for (const StTensor& t : tensors) {
        if (t.name == "__metadata__" || header.contains(t.name))
            throw std::runtime_error("cannot write " + path + ": duplicate or reserved tensor name '" + t.name + "'");
        for (int64_t d : t.shape)
            if (d < 0) throw std::runtime_error("cannot write " + path + ": negative dimension in '" + t.name + "'");
        size_t bytes = shape_numel(t.shape) * st_dtype_size(t.dtype);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        sizes.push_back(bytes);
        offset += bytes;
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
    uint64_t n = h.size();

    OutFile f(path);
    f.write(&n, 8);
    f.write(h);
    for (size_t i = 0; i < tensors.size(); i++) f.write(tensors[i].data, sizes[i]);
    f.close();
}

StFile safetensors_read(const std::string& path) {
    std::string file = read_text_file(path);
    auto bad = [&](const std::string& why) {
        throw std::runtime_error(path + " is not a valid safetensors file: " + why);
    };
    if (file.size() < 8) bad("shorter than the 8-byte header length");
    uint64_t n;
    std::memcpy(&n, file.data(), 8);
    if (n < 2 || n > kMaxHeader || n > file.size() - 8)
        bad("header length " + std::to_string(n) + " does not fit a file of " + std::to_string(file.size()) + " bytes");
    json header;
    try {
        header = json::parse(file.begin() + 8, file.begin() + 8 + n);
    } catch (const json::exception& e) {
        bad(std::string("header is not JSON: ") + e.what());
    }
    if (!header.is_object()) bad("header is not a JSON object");

    StFile st;
    st.path = path;
    const size_t data_start = 8 + n, data_size = file.size() - data_start;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const json& v = it.value();
        if (it.key() == "__metadata__") {
            if (!v.is_object()) bad("__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) bad("__metadata__ value '" + m.key() + "' is not a string");
                st.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string what = "tensor '" + it.key() + "': ";
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
            bad(what + "needs dtype, shape and data_offsets");
        if (!v["dtype"].is_string() || !kDtypeSizes.count(v["dtype"].get<std::string>()))
            bad(what + "unknown dtype " + v["dtype"].dump());
        StEntry e;
        e.dtype = v["dtype"].get<std::string>();
        if (!v["shape"].is_array()) bad(what + "shape is not an array");
        for (const json& d : v["shape"]) {
            if (!d.is_number_unsigned()) bad(what + "shape entries must be non-negative integers");
            e.shape.push_back(d.get<int64_t>());
        }
        const json& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            bad(what + "data_offsets must be two non-negative integers");
        uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
        if (begin > end || end > data_size)
            bad(what + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside the data section of " + std::to_string(data_size) + " bytes");
        // divide rather than multiply so huge shapes in a corrupt header cannot overflow
        size_t esize = kDtypeSizes.at(e.dtype), numel = 1;
        for (int64_t d : e.shape) {
            if (d != 0 && numel > (end - begin) / (size_t)d) bad(what + "shape does not match its byte size");
            numel *= (size_t)d;
        }
        if (numel * esize != end - begin)
            bad(what + "shape " + shape_text(e.shape) + " of " + e.dtype + " needs " + std::to_string(numel * esize) +
                " bytes, data_offsets give " + std::to_string(end - begin));
        e.bytes = file.substr(data_start + begin, end - begin);
        st.tensors.emplace(it.key(), std::move(e));
    }
    return st;
}
