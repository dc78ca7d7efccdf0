// Register-width float vectors shared by the kernels that compute in register blocks (mlp.cpp,
// sparse_conv.cpp). Including this header also turns on fused multiply-adds for the rest of the
// including file: the library is built with -ffp-contract=off so that the hash grid rounds like
// its torch twin; these kernels have no bitwise twin to match.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#define INR_BF16 1  // bfloat16 dot products (vdpbf16ps): gemm.h's gemm_bf16
#else
#define INR_BF16 0
#endif

#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

namespace {

// One vector is one register: 16 floats with AVX-512, else 8 (AVX2). A 16-float vector on an
// AVX2 machine (two registers each) left the register blocks spilling to memory: 5-10x slower
// than torch's layers on an AVX2 EPYC, where 8-float vectors restore the blocking.
#if defined(__AVX512F__)
typedef float vec __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;
constexpr int kRows = 6;  // 6 rows x 4 vectors of accumulators + 4 weight vectors + 1 broadcast <= 32 registers
#else
typedef float vec __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;
constexpr int kRows = 3;  // 3 rows x 4 vectors + 4 weight vectors + 1 broadcast: 17 of 16 registers, one reloaded
#endif
constexpr int64_t kTile = 48;  // rows per tile: a multiple of kRows

inline vec splat(float a) { return vec{} + a; }
inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }
inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// A float rounded to bfloat16 (to nearest, ties to even; NaN stays NaN): its upper 16 bits.
inline uint32_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN: keep it quiet
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
// Two bfloat16 in one 32-bit word, the first in the low half: one lane of a vdpbf16ps operand.
inline uint32_t bf16_pair(float first, float second) { return bf16_bits(first) | bf16_bits(second) << 16; }

// Calls f(column, std::integral_constant<int, MV>) for each block of up to 4 vectors of M columns.
template <typename F>
inline void for_column_blocks(int64_t M, F&& f) {
  for (int64_t c = 0; c < M; c += 4 * kLanes) {
    switch (std::min<int64_t>(4, (M - c) / kLanes)) {
      case 4: f(c, std::integral_constant<int, 4>{}); break;
      case 3: f(c, std::integral_constant<int, 3>{}); break;
      case 2: f(c, std::integral_constant<int, 2>{}); break;
      default: f(c, std::integral_constant<int, 1>{}); break;
    }
  }
}

}  // namespace
