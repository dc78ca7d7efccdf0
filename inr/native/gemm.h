// C = A @ W (+ bias) in register blocks, with a ReLU or mask epilogue, and the weight gradient
// dW += A^T G: the small-matrix products of the kernels whose activations stay in the cache
// (mlp.cpp, encoder.cpp, sparse_conv.cpp). Row-major throughout; W, G and dW have M columns, a
// multiple of the vector width (the callers pad their widths); A and C any strides.

#pragma once

#include <vector>

#include "vectors.h"  // vec, kLanes, kRows, kTile, splat/load/store, padded, for_column_blocks; FMA on

namespace {

enum Epilogue { kNone, kRelu, kMask };

// C[R, kLanes MV] = acc, after ReLU, or times (mask > 0), or as it is.
template <int R, int MV>
inline void finish(const vec (&acc)[R][MV], float* C, int64_t ldc, Epilogue epilogue, const float* mask, int64_t ldm) {
  const vec zero = splat(0.f);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < MV; ++q) {
      vec v = acc[r][q];
      if (epilogue == kRelu) v = v > zero ? v : zero;
      if (epilogue == kMask) v = load(mask + r * ldm + q * kLanes) > zero ? v : zero;
      store(C + r * ldc + q * kLanes, v);
    }
}

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
  finish<R, MV>(acc, C, ldc, epilogue, mask, ldm);
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

// bfloat16 products with float32 sums (vdpbf16ps: each lane adds a_2k w_2k + a_2k+1 w_2k+1), twice
// the products per instruction of float32 FMAs. Operands are rows of bf16 pairs over k (vectors.h
// bf16_pair): A[n, K2] with K2 = ceil(K / 2), W[K2, M] holding W[2k, m] and W[2k+1, m] in one word;
// an odd K's last pair is padded with zero. Inputs round to 8 significant bits, the sums do not.
inline int64_t pairs(int64_t K) { return (K + 1) / 2; }

// W[K, M] (row-major) -> its bf16 pairs P[K2, M]
inline void pack_weight_bf16(const float* W, int64_t K, int64_t M, uint32_t* P) {
  for (int64_t k = 0; k < K; k += 2)
    for (int64_t m = 0; m < M; ++m) P[k / 2 * M + m] = bf16_pair(W[k * M + m], k + 1 < K ? W[(k + 1) * M + m] : 0.f);
}

// A[n, K] (stride lda) -> its bf16 pairs Ab[n, K2]: 16 values per instruction where the CPU has
// them (vcvtneps2bf16 rounds as bf16_bits does, but reads subnormal floats as zero)
inline void pack_rows_bf16(int64_t n, const float* A, int64_t lda, int64_t K, uint32_t* Ab) {
  const int64_t K2 = pairs(K);
  for (int64_t r = 0; r < n; ++r) {
    const float* a = A + r * lda;
    uint32_t* out = Ab + r * K2;
    int64_t k = 0;
#if INR_BF16
    for (; k + 16 <= K; k += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k / 2), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(a + k)));
#endif
    for (; k < K; k += 2) out[k / 2] = bf16_pair(a[k], k + 1 < K ? a[k + 1] : 0.f);
  }
}

#if INR_BF16
// C[R rows, kLanes MV] = (or +=, with accumulate) A[R rows] @ W over K2 pairs, then ReLU or nothing;
// row r of A at A[r], of C at C[r].
template <int R, int MV>
inline void gemm_block_bf16(const uint32_t* const* A, int64_t K2, const uint32_t* W, int64_t ldw, const float* bias,
                            float* const* C, bool accumulate, Epilogue epilogue) {
  vec acc[R][MV];
  for (int q = 0; q < MV; ++q) {
    const vec b = bias ? load(bias + q * kLanes) : splat(0.f);
    for (int r = 0; r < R; ++r) acc[r][q] = accumulate ? load(C[r] + q * kLanes) : b;
  }
  for (int64_t k = 0; k < K2; ++k) {
    __m512bh w[MV];
    for (int q = 0; q < MV; ++q) w[q] = (__m512bh)_mm512_loadu_si512(W + k * ldw + q * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(A[r][k]));
      for (int q = 0; q < MV; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], a, w[q]);
    }
  }
  // finish's epilogue, written out for rows given by pointers: finish through a row-pointer lambda
  // ran this block 1.2-1.4x slower at width 64 (a one-off timing)
  const vec zero = splat(0.f);
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < MV; ++q) {
      vec v = acc[r][q];
      if (epilogue == kRelu) v = v > zero ? v : zero;
      store(C[r] + q * kLanes, v);
    }
}

// C[r] (=, or +=) A[r] @ W over all M columns (a multiple of kLanes), for R rows given by pointers
template <int R>
inline void gemm_rows_bf16(const uint32_t* const* A, int64_t K2, const uint32_t* W, int64_t M, const float* bias,
                           float* const* C, bool accumulate, Epilogue epilogue) {
  for_column_blocks(M, [&](int64_t c, auto mv) {
    float* Cc[R];
    for (int r = 0; r < R; ++r) Cc[r] = C[r] + c;
    gemm_block_bf16<R, decltype(mv)::value>(A, K2, W + c, M, bias ? bias + c : nullptr, Cc, accumulate, epilogue);
  });
}

// C[n, M] = A[n, K] @ W (+ bias), then ReLU or nothing, with W in bf16 pairs (pack_weight_bf16);
// A is rounded to bf16 in `scratch`.
inline void gemm_bf16(int64_t n, const float* A, int64_t lda, int64_t K, const uint32_t* W, int64_t M, const float* bias,
                      float* C, int64_t ldc, Epilogue epilogue, std::vector<uint32_t>& scratch) {
  const int64_t K2 = pairs(K);
  if (static_cast<int64_t>(scratch.size()) < n * K2) scratch.resize(n * K2);
  pack_rows_bf16(n, A, lda, K, scratch.data());
  const uint32_t* rows[kRows];
  float* out[kRows];
  int64_t r = 0;
  for (; r + kRows <= n; r += kRows) {
    for (int i = 0; i < kRows; ++i) rows[i] = scratch.data() + (r + i) * K2, out[i] = C + (r + i) * ldc;
    gemm_rows_bf16<kRows>(rows, K2, W, M, bias, out, false, epilogue);
  }
  for (; r < n; ++r) {
    rows[0] = scratch.data() + r * K2, out[0] = C + r * ldc;
    gemm_rows_bf16<1>(rows, K2, W, M, bias, out, false, epilogue);
  }
}
#endif

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
