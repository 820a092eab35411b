// The model's position data (src/pos.h's tables, one backend buffer) and what it holds: the
// positions it covers and, for the rotary schemes, the scaling factor s of its tables. GPT keeps
// one and passes its view to the ops; generate.h reads the s it holds (cached_keys_hold).
#pragma once
#include <stdexcept>
#include <vector>

#include "params.h"
#include "pos.h"

// The s a model's tables hold after a sequence of L tokens, from s: a rotary scheme's scaling
// whose s follows the length (RopeScaling::s) changes it.
inline double positions_s_after(const ModelConfig& m, int L, double s) {
    return pos_traits(m.pos).rotary ? m.rope_scaling.s(L) : s;
}
// Keys cached (rotated) under s still hold for a text of n tokens when n's scaling is that s.
inline bool cached_keys_hold(const ModelConfig& m, int n, double s) {
    return m.rope_scaling.s(n) == s;
}

template <class BK>
struct Positions {
    using Real = typename BK::real;
    const ModelConfig& cfg;
    const PosTraits& pt;
    Real*& buf;          // the model's pos_buf: allocated with its own buffers, for maxT positions
    PosData<Real> view;  // its parts, as the ops take them
    int len = 0;         // positions covered
    double s = 1;        // rotary: the scaling factor its tables hold

    Positions(const ModelConfig& c, Real*& b)
        : cfg(c), pt(pos_traits(c.pos)), buf(b), s(c.rope_scaling.s(c.rope_scaling.train_len)) {}

    // The tables cover at least n positions (the longest sequence run).
    void cover(int n) {
        if (n > len) build(n, s);
    }
    // The tables for a sequence of L tokens: rebuilt when their s changes.
    void set_length(int L) {
        const double sL = positions_s_after(cfg, L, s);
        if (sL != s) build(len, sL);
    }

  private:
    // The same size is rewritten in place once the device is idle (queued work and CUDA graphs
    // read the buffer by its address); more positions take a buffer of their size.
    void build(int n, double s_new) {
        const PosBuffer b = pos_buffer(pt, n, cfg.C, cfg.H, cfg.rope_base, cfg.sin_scale, cfg.rope_scaling, s_new);
        if (n == len) {
            BK::synchronize();
        } else if (len) {
            if (buf) BK::free(buf);
            buf = b.size ? BK::alloc(b.size) : nullptr;
        }
        if (b.size) {
            const std::vector<Real> h(b.data.begin(), b.data.end());
            BK::copy_from_host(buf, h.data(), h.size());
        }
        view = b.view<Real>(buf);
        len = n, s = s_new;
    }
};
