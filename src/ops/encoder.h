// Token embedding plus an optional additive position table (learned wpe, or the
// fixed sinusoidal table passed in its place). CPU reference.
#pragma once

namespace cpu {

// out (B,T,C) = wte[tok] (+ wpe[t])
template <class T>
void encoder_forward(T* out, const int* tok, const T* wte, const T* wpe, int B, int Tn, int C) {
#pragma omp parallel for
    for (int bt = 0; bt < B * Tn; bt++) {
        const T* e = wte + (size_t)tok[bt] * C;
        const T* p = wpe ? wpe + (size_t)(bt % Tn) * C : nullptr;
        T* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + (p ? p[c] : T(0));
    }
}

// dwte[tok] += dout, dwpe[t] += dout. Serial over positions: a token can repeat
// within the batch, and a fixed summation order keeps the result deterministic.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int* tok, int B, int Tn, int C) {
    for (int bt = 0; bt < B * Tn; bt++) {
        const T* d = dout + (size_t)bt * C;
        T* e = dwte + (size_t)tok[bt] * C;
        T* p = dwpe ? dwpe + (size_t)(bt % Tn) * C : nullptr;
        for (int c = 0; c < C; c++) {
            e[c] += d[c];
            if (p) p[c] += d[c];
        }
    }
}

}  // namespace cpu
