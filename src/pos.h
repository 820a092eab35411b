// Position schemes: the one file that knows them. Each scheme is one row of
// kPosSchemes, a set of traits; parsing, --help, validation, the parameter
// layout, GPT<BK> and the trainer read those traits, never a scheme's name.
// Adding a scheme: a Pos value, a row below, and (when a trait is new) the code
// that reads it. MODEL.md has the math of each scheme.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

enum class Pos { learned, sinusoidal, rope, crope, nope, alibi, xpos };

struct PosTraits {
    Pos pos;
    const char* name;
    bool learned_table;  // a trained table wpe (maxT, C) added to the token embedding: no position >= maxT
    bool fixed_table;    // the fixed sinusoidal table (n, C) added to the token embedding
    bool rotary;         // q and k rotated by position after the Q/K/V projection (needs an even head size)
    bool complex_qkv;    // Q/K/V complex-linear: stores A, B (3, C/2, C/2) per layer, not (3C, C) (needs an even C)
    bool alibi;          // each head's scores get the fixed bias -m_h (i - j) (alibi_slopes) before the softmax
    bool decay;          // rotary with xPos's decay: q's pair j scaled by zeta_j^(n/512), k's by zeta_j^(-m/512)
    const char* about;   // one line for --help
};

inline constexpr PosTraits kPosSchemes[] = {
    {Pos::learned, "learned", true, false, false, false, false, false,
     "GPT-2's trained position table wpe added to the embedding"},
    {Pos::sinusoidal, "sinusoidal", false, true, false, false, false, false, "fixed sin/cos table added to the embedding"},
    {Pos::rope, "rope", false, false, true, false, false, false, "q and k rotated on pairs (2j, 2j+1) by position"},
    {Pos::crope, "crope", false, false, true, true, false, false, "rope, with complex-linear Q/K/V projections (A + iB)"},
    {Pos::nope, "nope", false, false, false, false, false, false, "no position information: order comes from the causal mask"},
    {Pos::alibi, "alibi", false, false, false, false, true, false, "each head's scores biased by -slope x distance"},
    {Pos::xpos, "xpos", false, false, true, false, false, true, "rope with a per-pair decay zeta^((n-m)/512) of the scores"},
};

inline const PosTraits& pos_traits(Pos p) {
    for (const PosTraits& t : kPosSchemes)
        if (t.pos == p) return t;
    throw std::logic_error("position scheme missing from kPosSchemes");
}
inline const char* pos_name(Pos p) {
    return pos_traits(p).name;
}

// "learned | sinusoidal | rope | crope | ..."
inline std::string pos_names(const char* sep = " | ") {
    std::string s;
    for (const PosTraits& t : kPosSchemes) s += (s.empty() ? "" : sep) + std::string(t.name);
    return s;
}

// nullptr when no scheme has that name
inline const PosTraits* find_pos(const std::string& name) {
    for (const PosTraits& t : kPosSchemes)
        if (name == t.name) return &t;
    return nullptr;
}

inline Pos parse_pos(const std::string& name) {
    const PosTraits* t = find_pos(name);
    if (!t) throw std::runtime_error("pos must be one of " + pos_names() + ", got '" + name + "'");
    return t->pos;
}

// The sinusoidal table's default factor (the key sin_scale): the unscaled table (+-1) swamps token
// embeddings initialised at std 0.02; 0.01 ended lowest of the factors measured (MODEL.md).
inline constexpr double kSinScale = 0.01;

// Sinusoidal table (n, C): pe[t, 2i] = scale sin(t / 10000^(2i/C)), pe[t, 2i+1] = scale cos(...). For
// odd C the last channel gets no position.
inline std::vector<double> sinusoidal_table(int n, int C, double scale) {
    std::vector<double> pe((size_t)n * C, 0.0);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C / 2; i++) {
            double a = t / std::pow(10000.0, 2.0 * i / C);
            pe[(size_t)t * C + 2 * i] = scale * std::sin(a);
            pe[(size_t)t * C + 2 * i + 1] = scale * std::cos(a);
        }
    return pe;
}

// RoPE's table settings (MODEL.md, Partial rotary and RoPE scaling): which channels of each head
// rotate, and the scaling for sequences longer than the training length. Each changes the cos/sin
// tables only, so every op, backend and attention path applies it unchanged.
struct RopeScaling {
    enum Kind { none, linear, ntk, dynamic, yarn, llama3 } kind = none;
    double factor = 0;  // s >= 1; 0 = from the length (s())
    int train_len = 1;  // the training length L_train that s and the yarn and llama3 ramps refer to
    double partial = 1;  // partial_rotary_factor f in (0, 1]: the first R = rotary_dims(D) channels rotate
    // s for a sequence of L tokens: the factor, or (0, and always for dynamic) max(1, L / L_train)
    double s(int L) const {
        if (kind == none) return 1;
        return factor > 0 && kind != dynamic ? factor : std::max(1.0, (double)L / train_len);
    }
    // R = 2 floor(f D / 2) of a head's D channels (D at f = 1): pairs j < R/2 rotate
    int rotary_dims(int D) const { return 2 * (int)std::floor(partial * D / 2); }
};
inline constexpr const char* kRopeScalingNames[] = {"none", "linear", "ntk", "dynamic", "yarn", "llama3"};

// RoPE cos/sin tables (n, D/2): angle m * theta_j at position m for the R = sc.rotary_dims(D)
// rotated pairs j < R/2, theta_j = base^(-2j/R), under scaling sc with factor s (sc.s(L) for a
// sequence of L tokens); pairs from R/2 on get the identity (cos 1, sin 0). yarn's temperature
// multiplies the rotated pairs' cos and sin, so that their q.k gets its square. Computed in
// double whatever the model's precision.
inline void rope_tables(std::vector<double>& cos_t, std::vector<double>& sin_t, int n, int D, double base,
                        const RopeScaling& sc = {}, double s = 1) {
    cos_t.assign((size_t)n * (D / 2), 1.0);
    sin_t.assign((size_t)n * (D / 2), 0.0);
    const int R = sc.rotary_dims(D);
    const bool ntk = sc.kind == RopeScaling::ntk || sc.kind == RopeScaling::dynamic;
    if (ntk && s != 1) base *= std::pow(s, R / (R - 2.0));
    const double temp = sc.kind == RopeScaling::yarn ? 0.1 * std::log(s) + 1 : 1;
    for (int j = 0; j < R / 2; j++) {
        double theta = std::pow(base, -2.0 * j / R);
        const double lambda = 2 * M_PI / theta;  // the pair's wavelength
        if (sc.kind == RopeScaling::yarn) {  // the ramp: long wavelengths interpolated, short ones kept
            const double r = sc.train_len / lambda, alpha = 1, beta = 32;
            const double gamma = r < alpha ? 0 : r > beta ? 1 : (r - alpha) / (beta - alpha);
            theta *= (1 - gamma) / s + gamma;
        }
        if (sc.kind == RopeScaling::llama3) {  // wavelengths past L_train interpolated, under L_train/4 kept
            if (lambda > sc.train_len)
                theta /= s;
            else if (lambda >= sc.train_len / 4.0) {
                const double smooth = (sc.train_len / lambda - 1) / 3;
                theta *= (1 - smooth) / s + smooth;
            }
        }
        for (int m = 0; m < n; m++) {
            double a = (sc.kind == RopeScaling::linear ? m / s : m) * theta;
            cos_t[(size_t)m * (D / 2) + j] = temp * std::cos(a);
            sin_t[(size_t)m * (D / 2) + j] = temp * std::sin(a);
        }
    }
}

// xPos's decay (Sun et al. 2023) on RoPE's tables (n, D/2), in place, on the R rotated channels'
// pairs: zeta_j = (2j/R + 0.4) / 1.4; q's cos/sin at position m scaled by zeta_j^(m/512), k's
// copies (kcos_t, ksin_t) by zeta_j^(-m/512), so the score of q at n and k at m carries
// zeta_j^((n-m)/512). Positions are not shifted: the tables only grow, and the factors must not
// change for keys already in the KV cache.
inline double xpos_zeta(int j, int R) { return (2.0 * j / R + 0.4) / 1.4; }
inline void xpos_tables(std::vector<double>& cos_t, std::vector<double>& sin_t, std::vector<double>& kcos_t,
                        std::vector<double>& ksin_t, int n, int D, int R) {
    kcos_t = cos_t, ksin_t = sin_t;
    for (int m = 0; m < n; m++)
        for (int j = 0; j < R / 2; j++) {
            const size_t i = (size_t)m * (D / 2) + j;
            const double z = std::pow(xpos_zeta(j, R), m / 512.0);
            cos_t[i] *= z, sin_t[i] *= z, kcos_t[i] /= z, ksin_t[i] /= z;
        }
}
// The positions xpos_tables serves: up to n - 1, q's smallest factor zeta_0^(m/512) stays a normal
// float (fp32 and bf16 share the range) and k's 1/zeta_0^(m/512) finite; past it q's rows fade to
// zero and k's overflow, and the scores are NaN. About 35,700 positions, whatever D.
inline int xpos_max_positions() {
    const double decay = -std::log(xpos_zeta(0, 2)) / 512;  // per position, of the fastest pair
    const double room = std::min(-std::log((double)FLT_MIN), std::log((double)FLT_MAX));
    return 1 + (int)std::floor(room / decay);
}

// ALiBi's slopes (H,): m_h = 2^(-8h/H) for heads h = 1..H when H is a power of two. Otherwise the
// n = 2^floor(log2 H) slopes of that rule for n heads, then every other slope of the rule for 2n
// heads (2^(-4(2k-1)/n), k = 1..H-n), as the ALiBi paper does.
inline std::vector<double> alibi_slopes(int H) {
    int n = 1;
    while (2 * n <= H) n *= 2;
    std::vector<double> m(H);
    for (int h = 1; h <= H; h++) m[h - 1] = h <= n ? std::exp2(-8.0 * h / n) : std::exp2(-4.0 * (2 * (h - n) - 1) / n);
    return m;
}

// The position data the ops read, for positions 0..n-1: each part a scheme's traits ask for, null
// when absent. Built on the host by pos_buffer (below), uploaded as one buffer and passed whole to
// the rope and attention ops of both backends, so a new mechanism (a table, a scale) is a member
// here, its part in pos_buffer and the kernels that read it.
template <class Real>
struct PosData {
    const Real* table = nullptr;   // fixed_table: the sinusoidal table (n, C) added to the embedding
    const Real* cos = nullptr;     // rotary: cos and sin of each position's angles (n, D/2)
    const Real* sin = nullptr;
    const Real* slopes = nullptr;  // alibi: each head's slope (H,)
    const Real* kcos = nullptr;    // decay: k's cos and sin (n, D/2), q's (cos, sin) being scaled apart
    const Real* ksin = nullptr;
    // The data from position p on, for tokens that start there (incremental decoding); C, D: the
    // widths of the table's and the rotary tables' rows.
    PosData from(int p, int C, int D) const {
        auto row = [&](const Real* t, int w) { return t ? t + (size_t)p * w : nullptr; };
        return {row(table, C), row(cos, D / 2), row(sin, D / 2), slopes, row(kcos, D / 2), row(ksin, D / 2)};
    }
};

// A scheme's position data for n positions as one flat buffer (double), each part's offset in it
// (kAbsent: the scheme has none). pos_layout gives the offsets and size alone (the memory estimate).
struct PosBuffer {
    static constexpr size_t kAbsent = ~(size_t)0;
    size_t table = kAbsent, cos = kAbsent, sin = kAbsent, slopes = kAbsent, kcos = kAbsent, ksin = kAbsent, size = 0;
    std::vector<double> data;  // pos_buffer's, size doubles
    // the parts as they lie in a copy of the buffer at base
    template <class Real>
    PosData<Real> view(const Real* base) const {
        auto at = [&](size_t off) { return off == kAbsent ? nullptr : base + off; };
        return {at(table), at(cos), at(sin), at(slopes), at(kcos), at(ksin)};
    }
};

inline PosBuffer pos_layout(const PosTraits& t, int n, int C, int H) {
    PosBuffer b;
    auto part = [&](size_t& off, size_t len) { off = b.size, b.size += len; };
    if (t.fixed_table) part(b.table, (size_t)n * C);
    if (t.rotary) part(b.cos, (size_t)n * (C / H / 2)), part(b.sin, (size_t)n * (C / H / 2));
    if (t.alibi) part(b.slopes, (size_t)H);
    if (t.decay) part(b.kcos, (size_t)n * (C / H / 2)), part(b.ksin, (size_t)n * (C / H / 2));
    return b;
}

// rotary: the tables under sc (its rotated channels, its scaling with factor s: rope_tables)
inline PosBuffer pos_buffer(const PosTraits& t, int n, int C, int H, double rope_base, double sin_scale,
                            const RopeScaling& sc = {}, double s = 1) {
    PosBuffer b = pos_layout(t, n, C, H);
    b.data.resize(b.size);
    auto put = [&](size_t off, const std::vector<double>& v) { std::copy(v.begin(), v.end(), b.data.begin() + off); };
    if (t.fixed_table) put(b.table, sinusoidal_table(n, C, sin_scale));
    if (t.rotary) {
        std::vector<double> c, sn;
        rope_tables(c, sn, n, C / H, rope_base, sc, s);
        if (t.decay) {
            std::vector<double> kc, ks;
            xpos_tables(c, sn, kc, ks, n, C / H, sc.rotary_dims(C / H));
            put(b.kcos, kc), put(b.ksin, ks);
        }
        put(b.cos, c), put(b.sin, sn);
    }
    if (t.alibi) put(b.slopes, alibi_slopes(H));
    return b;
}
