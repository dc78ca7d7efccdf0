// C = A @ W (+ bias) in register blocks, with a ReLU or mask epilogue, and the weight gradient
// dW += A^T G: the small-matrix products of the kernels whose activations stay in the cache
// (mlp.cpp, encoder.cpp, sparse_conv.cpp). Row-major throughout; W, G and dW have M columns, a
// multiple of the vector width (the callers pad their widths); A and C any strides.

#pragma once

#include "vectors.h"  // vec, kLanes, kRows, kTile, splat/load/store, padded, for_column_blocks; FMA on

namespace {

enum Epilogue { kNone, kRelu, kMask };

// C[R, kLanes MV] = A[R, K] @ W[K, kLanes MV] (+ bias), then ReLU, or times (mask > 0), or nothing.
template <int R, int MV>
inline void gemm_block(const float* A, int64_t lda, int64_t K, const float* W, int64_t ldw, const float* bias, float* C,
                       int64_t ldc, Epilogue epilogue, const float* mask, int64_t ldm) {
  vec acc[R][MV];
  for (int q = 0; q < MV; ++q) {
    const vec b = bias ? load(bias + q * kLanes) : splat(0.f);
    for (int r = 0; r < R; ++r) acc[r][q] = b;
  }
  for (int64_t k = 0; k < K; ++k) {
    vec w[MV];
    for (int q = 0; q < MV; ++q) w[q] = load(W + k * ldw + q * kLanes);
    for (int r = 0; r < R; ++r) {
      const vec a = splat(A[r * lda + k]);
      for (int q = 0; q < MV; ++q) acc[r][q] += a * w[q];
    }
  }
  const vec zero = splat(0.f);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < MV; ++q) {
      vec v = acc[r][q];
      if (epilogue == kRelu) v = v > zero ? v : zero;
      if (epilogue == kMask) v = load(mask + r * ldm + q * kLanes) > zero ? v : zero;
      store(C + r * ldc + q * kLanes, v);
    }
}

template <int R>
inline void gemm_rows(const float* A, int64_t lda, int64_t K, const float* W, int64_t ldw, int64_t M, const float* bias,
                      float* C, int64_t ldc, Epilogue epilogue, const float* mask, int64_t ldm) {
  for_column_blocks(M, [&](int64_t c, auto mv) {
    gemm_block<R, decltype(mv)::value>(A, lda, K, W + c, ldw, bias ? bias + c : nullptr, C + c, ldc, epilogue,
                                       mask ? mask + c : nullptr, ldm);
  });
}

// C[n, M] = A[n, K] @ W[K, M] (+ bias) with an epilogue; M a multiple of kLanes.
inline void gemm(int64_t n, const float* A, int64_t lda, int64_t K, const float* W, int64_t M, const float* bias, float* C,
                 int64_t ldc, Epilogue epilogue = kNone, const float* mask = nullptr, int64_t ldm = 0) {
  int64_t r = 0;
  for (; r + kRows <= n; r += kRows)
    gemm_rows<kRows>(A + r * lda, lda, K, W, M, M, bias, C + r * ldc, ldc, epilogue, mask ? mask + r * ldm : nullptr, ldm);
  for (; r < n; ++r)
    gemm_rows<1>(A + r * lda, lda, K, W, M, M, bias, C + r * ldc, ldc, epilogue, mask ? mask + r * ldm : nullptr, ldm);
}

// dW[KB, kLanes MV] += A[n, KB]^T @ G[n, kLanes MV]
template <int KB, int MV>
inline void wgrad_block(int64_t n, const float* A, int64_t lda, const float* G, int64_t ldg, float* dW, int64_t ldw) {
  vec acc[KB][MV];
  for (int k = 0; k < KB; ++k)
    for (int q = 0; q < MV; ++q) acc[k][q] = splat(0.f);
  for (int64_t r = 0; r < n; ++r) {
    vec g[MV];
    for (int q = 0; q < MV; ++q) g[q] = load(G + r * ldg + q * kLanes);
    for (int k = 0; k < KB; ++k) {
      const vec a = splat(A[r * lda + k]);
      for (int q = 0; q < MV; ++q) acc[k][q] += a * g[q];
    }
  }
  for (int k = 0; k < KB; ++k)
    for (int q = 0; q < MV; ++q) store(dW + k * ldw + q * kLanes, load(dW + k * ldw + q * kLanes) + acc[k][q]);
}

template <int KB>
inline void wgrad_cols(int64_t n, const float* A, int64_t lda, const float* G, int64_t M, float* dW) {
  for_column_blocks(M, [&](int64_t c, auto mv) { wgrad_block<KB, decltype(mv)::value>(n, A, lda, G + c, M, dW + c, M); });
}

// dW[K, M] += A[n, K]^T @ G[n, M]; db[M] += column sums of G (db: nullptr for none)
inline void wgrad(int64_t n, const float* A, int64_t lda, int64_t K, const float* G, int64_t M, float* dW, float* db) {
  int64_t k = 0;
  for (; k + kRows <= K; k += kRows) wgrad_cols<kRows>(n, A + k, lda, G, M, dW + k * M);
  for (; k < K; ++k) wgrad_cols<1>(n, A + k, lda, G, M, dW + k * M);
  if (db == nullptr) return;
  for (int64_t c = 0; c < M; c += kLanes) {
    vec s = splat(0.f);
    for (int64_t r = 0; r < n; ++r) s += load(G + r * M + c);
    store(db + c, load(db + c) + s);
  }
}

}  // namespace
