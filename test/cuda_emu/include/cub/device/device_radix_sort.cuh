// cub::DeviceRadixSort of the CUDA emulation: a stable sort on the host (device memory is
// host memory), by the key bits [begin_bit, end_bit) as cub orders them (signed keys with
// the sign bit flipped, floats by their ordered bits); operands are checked against the
// device allocations, and the temporary storage protocol is cub's (a first call sizes it).
#pragma once

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cuda_runtime.h"

namespace cub {

namespace emu_detail {
template <class K>
unsigned long long ordered_bits(K k) {
    static_assert(sizeof(K) <= 8, "key wider than 64 bits");
    unsigned long long u = 0;
    std::memcpy(&u, &k, sizeof(K));
    const unsigned long long sign = 1ull << (8 * sizeof(K) - 1);
    if constexpr (std::is_floating_point_v<K>) u = (u & sign) ? ~u & (sign | (sign - 1)) : u | sign;
    else if constexpr (std::is_signed_v<K>) u ^= sign;
    return u;
}

template <class K, class V, bool kPairs>
cudaError_t sort(const char* file, int line, void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out,
                 const V* values_in, V* values_out, long long n, int begin_bit, int end_bit, cudaStream_t stream) {
    const size_t need = (size_t)(n > 0 ? n : 0) * (sizeof(K) + sizeof(V)) + 256;
    if (!temp) {
        temp_bytes = need;
        return cudaSuccess;
    }
    if (n < 0 || begin_bit < 0 || end_bit > (int)(8 * sizeof(K)) || begin_bit > end_bit || temp_bytes < need ||
        !::emu::stream_valid(stream))
        return cudaErrorInvalidValue;
    // the sort runs now, or at each replay of a capture (checks then too)
    return ::emu::enqueue(stream, file, line, "cub::DeviceRadixSort", [=, bytes = temp_bytes] {
        ::emu::check_device_range(file, line, "cub::DeviceRadixSort temporary storage", temp, bytes);
        if (n == 0) return;
        ::emu::check_device_range(file, line, "cub::DeviceRadixSort keys_in", keys_in, n * sizeof(K));
        ::emu::check_device_range(file, line, "cub::DeviceRadixSort keys_out", keys_out, n * sizeof(K));
        if constexpr (kPairs) {
            ::emu::check_device_range(file, line, "cub::DeviceRadixSort values_in", values_in, n * sizeof(V));
            ::emu::check_device_range(file, line, "cub::DeviceRadixSort values_out", values_out, n * sizeof(V));
        }
        const int bits = end_bit - begin_bit;
        const unsigned long long mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
        std::vector<unsigned long long> key(n);
        for (long long i = 0; i < n; i++) key[i] = (ordered_bits(keys_in[i]) >> begin_bit) & mask;
        std::vector<long long> idx(n);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](long long a, long long b) { return key[a] < key[b]; });
        std::vector<K> k(n);
        for (long long i = 0; i < n; i++) k[i] = keys_in[idx[i]];
        std::copy(k.begin(), k.end(), keys_out);
        if constexpr (kPairs) {
            std::vector<V> v(n);
            for (long long i = 0; i < n; i++) v[i] = values_in[idx[i]];
            std::copy(v.begin(), v.end(), values_out);
        }
        std::memset(temp, 0xFF, bytes);  // cub leaves its temporary storage undefined
    });
}
}  // namespace emu_detail

struct DeviceRadixSort {
    template <class K, class V, class N>
    static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out, const V* values_in,
                                 V* values_out, N n, int begin_bit = 0, int end_bit = sizeof(K) * 8,
                                 cudaStream_t stream = nullptr, const char* file = __builtin_FILE(),
                                 int line = __builtin_LINE()) {
        return emu_detail::sort<K, V, true>(file, line, temp, temp_bytes, keys_in, keys_out, values_in, values_out,
                                            (long long)n, begin_bit, end_bit, stream);
    }
    template <class K, class N>
    static cudaError_t SortKeys(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out, N n, int begin_bit = 0,
                                int end_bit = sizeof(K) * 8, cudaStream_t stream = nullptr,
                                const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        return emu_detail::sort<K, char, false>(file, line, temp, temp_bytes, keys_in, keys_out, (const char*)nullptr,
                                                (char*)nullptr, (long long)n, begin_bit, end_bit, stream);
    }
};

}  // namespace cub
