// Softmax + cross-entropy, fused: per row the loss, and (when dscale != 0)
// dlogits written over the logits, so probabilities are never stored. CPU reference.
#pragma once
#include <cmath>

namespace cpu {

// Rows of ld >= V columns (the padded vocabulary; the columns [V, ld) are not classes):
// losses (N) = -log softmax(logits[:, :V])[target]; if dscale != 0, logits (N,ld) <-
// (softmax - onehot) * dscale on the first V columns and 0 on the padded ones.
template <class T>
void classifier_loss(T* logits, T* losses, const int* targets, int N, int V, int ld, T dscale) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T* z = logits + (size_t)i * ld;
        T mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += std::exp(z[v] - mx);
        T logsum = std::log(sum) + mx;
        losses[i] = logsum - z[targets[i]];
        if (dscale != T(0)) {
#pragma omp simd
            for (int v = 0; v < V; v++) z[v] = std::exp(z[v] - logsum) * dscale;
            z[targets[i]] -= dscale;
            for (int v = V; v < ld; v++) z[v] = T(0);
        }
    }
}

// losses (N) = -log softmax(logits)[target]; logits (N,V) <- (softmax - onehot) * dscale if dscale != 0
template <class T>
void softmax_crossentropy(T* logits, T* losses, const int* targets, int N, int V, T dscale) {
    classifier_loss(logits, losses, targets, N, V, V, dscale);
}

}  // namespace cpu
