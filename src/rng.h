// A small seeded RNG (splitmix64) whose sequence is the same on every platform
// and standard library, so initialisation and data order are reproducible.
#pragma once
#include <cmath>
#include <cstdint>

// splitmix64's output mixer, also used to derive seeds (data order per epoch)
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ull); }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
    // Uniform in [0, n) without modulo bias: reject the few values below 2^64 mod n.
    uint64_t below(uint64_t n) {
        uint64_t threshold = (0 - n) % n;
        for (;;) {
            uint64_t r = next();
            if (r >= threshold) return r % n;
        }
    }
    double normal() {  // Box-Muller; one value per call keeps the stream simple
        double u1 = 1.0 - uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
};
