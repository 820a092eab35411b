// Linear layer y = x W^T + b through BLAS (OpenBLAS's cblas). CPU reference.
#pragma once
#ifndef NO_CBLAS
#include <cblas.h>
#endif

#include "ops/vec.h"

namespace cpu {

#ifndef NO_CBLAS
// C (M,N) = alpha * op(A) op(B) + beta * C, row-major. One row (M = 1: a generated token's
// products) goes to GEMV: GEMM would pack all of B for it (the LM head's 25 MB per token).
inline void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* Cm, int ldc) {
    if (M == 1)  // c = op(B)^T a, a's elements lda apart when A is transposed
        return cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B, ldb, A,
                           ta ? lda : 1, beta, Cm, 1);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, Cm, ldc);
}
inline void gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
                 int ldb, double beta, double* Cm, int ldc) {
    if (M == 1)
        return cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B, ldb, A,
                           ta ? lda : 1, beta, Cm, 1);
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, Cm, ldc);
}
#else
// Built without a BLAS (the Makefile found no cblas.h, as on a bare GPU machine
// where the CPU backend only serves as the tests' reference): a plain loop, slow
// but the same contract.
template <class Real>
void gemm(bool ta, bool tb, int M, int N, int K, Real alpha, const Real* A, int lda, const Real* B, int ldb, Real beta,
          Real* Cm, int ldc) {
#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            Real s = 0;
            for (int k = 0; k < K; k++)
                s += (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                     (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            Real& c = Cm[(size_t)i * ldc + j];
            c = alpha * s + (beta == Real(0) ? Real(0) : beta * c);
        }
}
#endif

// out (N,OC) = inp (N,IC) . w (OC,IC)^T + bias (OC)
template <class Real>
void matmul_forward(Real* out, const Real* inp, const Real* w, const Real* bias, int N, int IC, int OC) {
    if (bias) {
#pragma omp parallel for
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) out[(size_t)i * OC + o] = bias[o];
    }
    gemm(false, true, N, OC, IC, Real(1), inp, IC, w, IC, bias ? Real(1) : Real(0), out, OC);
}

// dinp (N,IC) = dout . w (overwritten: no zeroed buffer needed) ; dw (OC,IC) += dout^T . inp ;
// dbias (OC) += column sums of dout (the weights' gradients add up over a step). Any may be null.
template <class Real>
void matmul_backward(Real* dinp, Real* dw, Real* dbias, const Real* dout, const Real* inp, const Real* w, int N, int IC,
                     int OC) {
    if (dinp) gemm(false, false, N, IC, OC, Real(1), dout, OC, w, IC, Real(0), dinp, IC);
    if (dw) gemm(true, false, OC, IC, N, Real(1), dout, OC, inp, IC, Real(1), dw, IC);
    if (dbias) {  // a vector of columns per task, its rows in order
#pragma omp parallel for
        for (int o = 0; o < OC; o += kLanes<Real>) {
            vec<Real> s{};
            for (int i = 0; i < N; i++) s += load_first(dout + (size_t)i * OC + o, OC - o);
            store_first(dbias + o, load_first(dbias + o, OC - o) + s, OC - o);
        }
    }
}

// dinp (N,IC) += dout (N,OC) . w (OC,IC): an input gradient summed over several GEMMs (the
// classifier's vocabulary tiles)
template <class Real>
void matmul_dinp_add(Real* dinp, const Real* dout, const Real* w, int N, int IC, int OC) {
    gemm(false, false, N, IC, OC, Real(1), dout, OC, w, IC, Real(1), dinp, IC);
}

}  // namespace cpu
