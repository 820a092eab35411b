// Token embedding plus an optional additive position table (learned wpe, or the
// fixed sinusoidal table passed in its place). CPU reference.
#pragma once

namespace cpu {

// out (B,T,C) = wte[tok] (+ wpe[t])
template <class Real>
void encoder_forward(Real* out, const int* tok, const Real* wte, const Real* wpe, int B, int T, int C) {
#pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const Real* e = wte + (size_t)tok[bt] * C;
        const Real* p = wpe ? wpe + (size_t)(bt % T) * C : nullptr;
        Real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + (p ? p[c] : Real(0));
    }
}

// dwte[tok] += dout, dwpe[t] += dout. Serial over positions: a token can repeat
// within the batch, and a fixed summation order keeps the result deterministic. (V, the
// vocabulary, tok < V: the GPU's sort by token takes the bits V needs.)
template <class Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const int* tok, int B, int T, int C, int /*V*/) {
    for (int bt = 0; bt < B * T; bt++) {
        const Real* d = dout + (size_t)bt * C;
        Real* e = dwte + (size_t)tok[bt] * C;
        Real* p = dwpe ? dwpe + (size_t)(bt % T) * C : nullptr;
        for (int c = 0; c < C; c++) {
            e[c] += d[c];
            if (p) p[c] += d[c];
        }
    }
}

}  // namespace cpu
