// Parameter buffers <-> safetensors tensors, by the layout of params.h
// (names, shapes and order in MODEL.md's checkpoint table).
#pragma once
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "params.h"
#include "safetensors.h"

template <class Real>
const char* st_dtype() {
    return sizeof(Real) == 4 ? "F32" : "F64";
}

// One tensor per parameter, named prefix + name, viewing into flat (layout order).
template <class Real>
std::vector<StTensor> layout_tensors(const std::vector<ParamTensor>& layout, const std::vector<Real>& flat,
                                     const std::string& prefix) {
    std::vector<StTensor> t;
    for (const auto& p : layout) t.push_back({prefix + p.name, st_dtype<Real>(), p.shape, flat.data() + p.offset});
    return t;
}

// The flat buffer back from a file; every tensor must be there with its dtype and shape, and finite.
template <class Real>
std::vector<Real> layout_from_file(const std::vector<ParamTensor>& layout, const StFile& f, const std::string& prefix) {
    std::vector<Real> flat(layout.back().offset + layout.back().numel);
    for (const auto& p : layout) {
        const StEntry& e = f.get(prefix + p.name, st_dtype<Real>(), p.shape);
        Real* x = flat.data() + p.offset;
        std::memcpy(x, e.bytes.data(), p.numel * sizeof(Real));
        for (size_t i = 0; i < p.numel; i++)  // NaN weights would only show up later, as a "diverged" loss
            if (!std::isfinite(x[i]))
                throw std::runtime_error(f.path + ": tensor '" + prefix + p.name +
                                         "' holds non-finite values (NaN or Inf)");
    }
    return flat;
}
