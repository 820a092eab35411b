// The KV cache of incremental decoding (generate.h, GPT::forward_cached): its buffers
// (kv_buffers, activations.h, the table --memory counts), the rows and positions they hold, and
// each layer's part.
#pragma once
#include <cstddef>

#include "activations.h"
#include "params.h"

template <class BK>
struct KVCache : KVBuffers<typename BK::act> {
    using Act = typename BK::act;
    int rows = 0, positions = 0;  // the buffers hold `rows` rows of up to `positions` tokens
    size_t layer = 0;             // elements of one layer's keys (rows, positions, C)

    KVCache() = default;
    KVCache(const KVCache&) = delete;
    KVCache& operator=(const KVCache&) = delete;
    ~KVCache() { release(); }

    // Room for B rows of up to cap positions each (kept when it is large enough).
    void reserve(const ModelConfig& c, int B, int cap) {
        if (B == rows && cap <= positions) return;
        release();
        rows = B, positions = cap, layer = (size_t)B * cap * c.C;
        kv_buffers<size_t, KVBuffers<Act>>(c, B, cap, [&](auto member, size_t n) { this->*member = BK::alloc_act(n); });
    }
    // Whether tokens [first, first + T) of each of B rows fit.
    bool holds(int B, int first, int T) const { return B == rows && first + T <= positions; }
    // Layer l's keys and values (rows, positions, C).
    Act* keys(int l) const { return this->k + l * layer; }
    Act* values(int l) const { return this->v + l * layer; }

  private:
    void release() {
        for (Act** p : {&this->k, &this->v})
            if (*p) BK::free(*p), *p = nullptr;
        rows = positions = 0, layer = 0;
    }
};
