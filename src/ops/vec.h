// Vectors for the CPU ops' inner loops: GCC's vector extensions, as wide as the build's -march
// allows (64 bytes under AVX-512, 32 under AVX), and their exp. For float, SLEEF's u10 exp
// (within 1.0 ULP of the exact result; the Makefile defines HAVE_SLEEF when it finds sleef.h);
// for double (the gradient check's backend keeps exact math), and for float in a build without
// SLEEF, libm's, lane by lane. Every element of a row goes through the same function, its
// tail too (a partial vector), so no result depends on where an element sits or on the thread
// count; sums go lane by lane, then over the lanes in order: the same bits on every run.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#ifdef HAVE_SLEEF
#include <sleef.h>
#endif

namespace cpu {

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif

template <class Real>
struct VecOf {
    typedef Real type __attribute__((vector_size(kVecBytes)));
};
template <class Real>
using vec = typename VecOf<Real>::type;  // kLanes<Real> elements of Real
template <class Real>
constexpr int kLanes = kVecBytes / sizeof(Real);

template <class Real>
vec<Real> splat(Real x) {
    return vec<Real>{} + x;
}
template <class Real>
vec<Real> load(const Real* p) {
    vec<Real> v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class Real>
void store(Real* p, vec<Real> v) {
    std::memcpy(p, &v, sizeof v);
}
// A partial vector: the first n (< kLanes) elements of p, the other lanes `fill`; and its store.
template <class Real>
vec<Real> load_part(const Real* p, int n, Real fill) {
    vec<Real> v = splat(fill);
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
template <class Real>
void store_part(Real* p, vec<Real> v, int n) {
    for (int i = 0; i < n; i++) p[i] = v[i];
}
// The first min(n, kLanes) elements of p (fill in the other lanes), and their store.
template <class Real>
vec<Real> load_first(const Real* p, int n, Real fill = Real(0)) {
    return n >= kLanes<Real> ? load(p) : load_part(p, n, fill);
}
template <class Real>
void store_first(Real* p, vec<Real> v, int n) {
    if (n >= kLanes<Real>)
        store(p, v);
    else
        store_part(p, v, n);
}
template <class V>
V vmax(V a, V b) {
    return a > b ? a : b;
}
template <class Real>
Real hsum(vec<Real> v) {
    Real s = v[0];
    for (int i = 1; i < kLanes<Real>; i++) s += v[i];
    return s;
}
template <class Real>
Real hmax(vec<Real> v) {
    Real m = v[0];
    for (int i = 1; i < kLanes<Real>; i++) m = v[i] > m ? v[i] : m;
    return m;
}

// SLEEF's u10 functions on vec<float>: SLEEF_FLOATS(exp) is Sleef_expf16_u10 (AVX-512) or
// Sleef_expf8_u10 (AVX), on SleefFloats (__m512 or __m256); SLEEF's dispatcher picks the variant
// for the CPU it runs on (the same one on every run of one machine).
#if defined(HAVE_SLEEF) && defined(__AVX512F__)
#define SLEEF_FLOATS(f) Sleef_##f##f16_u10
typedef __m512 SleefFloats;
#elif defined(HAVE_SLEEF) && defined(__AVX__)
#define SLEEF_FLOATS(f) Sleef_##f##f8_u10
typedef __m256 SleefFloats;
#endif
// Whether float's exp is SLEEF's, and its largest error in ULPs of the exact result: SLEEF's u10
// bound; glibc's expf (without SLEEF) is within 0.502 ULP (its libm-test-ulps).
#ifdef SLEEF_FLOATS
constexpr bool kSleef = true;
#else
constexpr bool kSleef = false;
#endif
constexpr double kExpUlps = 1.0;

// exp of every lane of a vector V: libm's, lane by lane, but for float with SLEEF.
template <class V>
V vexp(V x) {
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = std::exp(x[i]);
    return x;
}
#ifdef SLEEF_FLOATS
template <>
inline vec<float> vexp(vec<float> x) {
    return (vec<float>)SLEEF_FLOATS(exp)((SleefFloats)x);
}
#endif

// The max of x[0..n) (n >= 1).
template <class Real>
Real max_n(const Real* x, int n) {
    constexpr int W = kLanes<Real>;
    vec<Real> m = splat<Real>(-INFINITY);
    int i = 0;
    for (; i + W <= n; i += W) m = vmax(m, load(x + i));
    if (i < n) m = vmax(m, load_part(x + i, n - i, Real(-INFINITY)));
    return hmax<Real>(m);
}

// The sum of a[i] * b[i] for i < n.
template <class Real>
Real dot_n(const Real* a, const Real* b, int n) {
    constexpr int W = kLanes<Real>;
    vec<Real> s{};
    for (int i = 0; i < n; i += W) s += load_first(a + i, n - i) * load_first(b + i, n - i);
    return hsum<Real>(s);
}

// x[i] *= f for i < n.
template <class Real>
void scale_n(Real* x, Real f, int n) {
    for (int i = 0; i < n; i += kLanes<Real>) store_first(x + i, load_first(x + i, n - i) * f, n - i);
}

// y[i] = exp(x[i] - shift) for i < n (y may be x); returns the sum of the y[i].
template <class Real>
Real exp_sum_n(Real* y, const Real* x, Real shift, int n) {
    constexpr int W = kLanes<Real>;
    vec<Real> s{};
    int i = 0;
    for (; i + W <= n; i += W) {
        vec<Real> e = vexp(load(x + i) - shift);
        store(y + i, e);
        s += e;
    }
    if (i < n) {  // the missing lanes are exp(-inf) = 0
        vec<Real> e = vexp(load_part(x + i, n - i, Real(-INFINITY)) - shift);
        store_part(y + i, e, n - i);
        s += e;
    }
    return hsum<Real>(s);
}

}  // namespace cpu
