// Sparse convolutions on the CPU: y_i = b + sum_o W_o^T x_{table[i, o]}, over the
// offsets o whose table entry is a row (>= 0; -1: no neighbour there).
//
// One table serves the three layers of inr/pointcloud/sparse_conv.py: a submanifold convolution
// (table[i, o] = the site at i + offset o), a stride-2 down convolution (a parent's 8 children)
// and a stride-2 up convolution (a child's parent, in the column of its position in the parent).
//
// Why: the torch path runs, per kernel offset, a gather of the neighbours' rows, a small matmul
// and an index_add_ into the outputs: memory-bound passes over the whole tensor, 27 of them per
// layer. Here a tile of 48 output rows stays in the L1 cache while every offset's rows are added
// into it, and each register block keeps kRows rows x up to 4 vectors of outputs in registers
// while one row of the offset's weights at a time is streamed from the cache. Each output row is
// summed by one thread in a fixed order: the result does not depend on the number of threads.
// The same op gives the input gradient (inr/pointcloud/sparse_conv.py _GatherConv: the transposed
// table, the weights transposed); gather_wgrad the weight gradient.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "gemm.h"  // wgrad; vectors.h: vec, kLanes, kRows, kTile (output rows per tile), splat/load/store,
                   // padded, for_column_blocks; FMA on

namespace {

// C[r] += A[r] @ W for R gathered rows A[r] (K,) and output rows C[r] (MV vectors), W (K, ldw).
template <int R, int MV>
inline void add_block(const float* const* A, int64_t K, const float* W, int64_t ldw, float* const* C, int64_t c) {
  vec acc[R][MV];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < MV; ++q) acc[r][q] = load(C[r] + c + q * kLanes);
  for (int64_t k = 0; k < K; ++k) {
    vec w[MV];
    for (int q = 0; q < MV; ++q) w[q] = load(W + k * ldw + c + q * kLanes);
    for (int r = 0; r < R; ++r) {
      const vec a = splat(A[r][k]);
      for (int q = 0; q < MV; ++q) acc[r][q] += a * w[q];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < MV; ++q) store(C[r] + c + q * kLanes, acc[r][q]);
}

// C[r] += A[r] @ W over all M columns (a multiple of kLanes), in blocks of up to 4 vectors.
template <int R>
inline void add_rows(const float* const* A, int64_t K, const float* W, int64_t M, float* const* C) {
  for_column_blocks(M, [&](int64_t c, auto mv) { add_block<R, decltype(mv)::value>(A, K, W, M, C, c); });
}

// bf16: the products in bfloat16 with float32 sums (gemm.h; the weights rounded once per call, x as below).
at::Tensor gather_conv(const at::Tensor& x_, const at::Tensor& table_, const at::Tensor& weight_,
                       const std::optional<at::Tensor>& bias_, bool bf16) {
  TORCH_CHECK(x_.dim() == 2 && x_.scalar_type() == at::kFloat, "gather_conv: x must be (N, Cin) float32");
  TORCH_CHECK(weight_.dim() == 3 && weight_.size(1) == x_.size(1) && weight_.scalar_type() == at::kFloat,
              "gather_conv: weight must be (K, Cin, Cout) float32");
  TORCH_CHECK(table_.dim() == 2 && table_.size(1) == weight_.size(0) && table_.scalar_type() == at::kInt,
              "gather_conv: table must be (M, K) int32");
  const at::Tensor x = x_.contiguous(), table = table_.contiguous();
  const int64_t N = x.size(0), M = table.size(0), K = weight_.size(0), Cin = x.size(1), Cout = weight_.size(2);
  const int64_t Cp = padded(Cout);  // padded with zero weights and biases
  at::Tensor weight = at::zeros({K, Cin, Cp}, x.options());
  weight.narrow(2, 0, Cout).copy_(weight_);
  at::Tensor bias = at::zeros({Cp}, x.options());
  if (bias_.has_value() && bias_->defined()) bias.narrow(0, 0, Cout).copy_(*bias_);
  at::Tensor y = at::empty({M, Cp}, x.options());
  if (M == 0) return y.narrow(1, 0, Cout);
  const float* xp = x.data_ptr<float>();
  const int32_t* tp = table.data_ptr<int32_t>();
  const float* wp = weight.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  TORCH_CHECK(!bf16 || INR_BF16, "gather_conv: this CPU build has no bfloat16 dot products");
  const int64_t C2 = pairs(Cin);
  // The weights in bf16 pairs; x's rows too, once, where each is read by many outputs (a submanifold
  // kernel's 27 offsets), else (the stride-2 layers' 8, each row read by one to eight) as gathered.
  const bool whole = bf16 && K > 8;
  std::unique_ptr<uint32_t[]> xb(whole ? new uint32_t[N * C2] : nullptr);  // left unset: every row is written
  if (whole)
    at::parallel_for(0, N, 2048, [&](int64_t i0, int64_t i1) {
      pack_rows_bf16(i1 - i0, xp + i0 * Cin, Cin, Cin, xb.get() + i0 * C2);
    });
  std::vector<uint32_t> wb(bf16 ? K * C2 * Cp : 0);
  for (int64_t o = 0; o < K && bf16; ++o) pack_weight_bf16(wp + o * Cin * Cp, Cin, Cp, wb.data() + o * C2 * Cp);
  std::atomic<bool> bad{false};
  at::parallel_for(0, (M + kTile - 1) / kTile, 1, [&](int64_t t0, int64_t t1) {
    const float* A[kTile];
    const uint32_t* Ab[kTile];
    float* C[kTile];
    std::vector<uint32_t> rows(bf16 && !whole ? kTile * C2 : 0);  // a tile's gathered rows in bf16 pairs
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kTile, n = std::min(kTile, M - r0);
      for (int64_t r = 0; r < n; ++r) std::memcpy(yp + (r0 + r) * Cp, bp, Cp * sizeof(float));
      for (int64_t o = 0; o < K; ++o) {
        int m = 0;
        for (int64_t r = 0; r < n; ++r) {
          const int32_t s = tp[(r0 + r) * K + o];
          if (s < 0) continue;
          if (s >= N) {
            bad.store(true, std::memory_order_relaxed);
            continue;
          }
          A[m] = xp + s * Cin;
          if (whole) Ab[m] = xb.get() + s * C2;
          C[m] = yp + (r0 + r) * Cp;
          ++m;
        }
        int i = 0;
#if INR_BF16
        if (bf16) {
          if (!whole)
            for (int j = 0; j < m; ++j) {
              pack_rows_bf16(1, A[j], Cin, Cin, rows.data() + j * C2);
              Ab[j] = rows.data() + j * C2;
            }
          const uint32_t* W = wb.data() + o * C2 * Cp;
          for (; i + kRows <= m; i += kRows) gemm_rows_bf16<kRows>(Ab + i, C2, W, Cp, nullptr, C + i, true, kNone);
          for (; i < m; ++i) gemm_rows_bf16<1>(Ab + i, C2, W, Cp, nullptr, C + i, true, kNone);
          continue;
        }
#endif
        const float* W = wp + o * Cin * Cp;
        for (; i + kRows <= m; i += kRows) add_rows<kRows>(A + i, Cin, W, Cp, C + i);
        for (; i < m; ++i) add_rows<1>(A + i, Cin, W, Cp, C + i);
      }
    }
  });
  TORCH_CHECK(!bad.load(), "gather_conv: a table entry is past x's rows");
  return Cp == Cout ? y : y.narrow(1, 0, Cout).contiguous();
}

// The weight gradient of gather_conv: dW[o] = sum_i x[table[i, o]]^T grad[i] over the rows i whose
// entry is a row (>= 0). Each offset is summed by one thread over its rows in order, in tiles of
// kGradRows gathered rows (gemm.h's wgrad): the result does not depend on the number of threads.
constexpr int64_t kGradRows = 128;

at::Tensor gather_wgrad(const at::Tensor& x_, const at::Tensor& table_, const at::Tensor& grad_) {
  TORCH_CHECK(x_.dim() == 2 && x_.scalar_type() == at::kFloat, "gather_wgrad: x must be (N, Cin) float32");
  TORCH_CHECK(table_.dim() == 2 && table_.scalar_type() == at::kInt, "gather_wgrad: table must be (M, K) int32");
  TORCH_CHECK(grad_.dim() == 2 && grad_.size(0) == table_.size(0) && grad_.scalar_type() == at::kFloat,
              "gather_wgrad: grad must be (M, Cout) float32");
  const at::Tensor x = x_.contiguous(), table = table_.contiguous(), grad = grad_.contiguous();
  const int64_t N = x.size(0), M = table.size(0), K = table.size(1), Cin = x.size(1), Cout = grad.size(1);
  const int64_t Cp = padded(Cout);
  at::Tensor out = at::zeros({K, Cin, Cout}, x.options());
  const float* xp = x.data_ptr<float>();
  const int32_t* tp = table.data_ptr<int32_t>();
  const float* gp = grad.data_ptr<float>();
  float* op = out.data_ptr<float>();
  std::atomic<bool> bad{false};
  at::parallel_for(0, K, 1, [&](int64_t o0, int64_t o1) {
    std::vector<float> A(kGradRows * Cin), G(kGradRows * Cp, 0.f), dW(Cin * Cp);
    for (int64_t o = o0; o < o1; ++o) {
      std::fill(dW.begin(), dW.end(), 0.f);
      int64_t m = 0;
      for (int64_t i = 0; i < M; ++i) {
        const int32_t s = tp[i * K + o];
        if (s < 0) continue;
        if (s >= N) {
          bad.store(true, std::memory_order_relaxed);
          continue;
        }
        std::memcpy(A.data() + m * Cin, xp + s * Cin, Cin * sizeof(float));
        std::memcpy(G.data() + m * Cp, gp + i * Cout, Cout * sizeof(float));  // the padding stays 0
        if (++m == kGradRows) {
          wgrad(m, A.data(), Cin, Cin, G.data(), Cp, dW.data(), nullptr);
          m = 0;
        }
      }
      if (m) wgrad(m, A.data(), Cin, Cin, G.data(), Cp, dW.data(), nullptr);
      for (int64_t c = 0; c < Cin; ++c) std::memcpy(op + (o * Cin + c) * Cout, dW.data() + c * Cp, Cout * sizeof(float));
    }
  });
  TORCH_CHECK(!bad.load(), "gather_wgrad: a table entry is past x's rows");
  return out;
}

// The gather table of a submanifold convolution of odd kernel size k over sites whose packed keys
// (inr/pointcloud/voxel.py pack_keys: batch << 48 | x << 32 | y << 16 | z, each coordinate
// offset by 2^15) are sorted and unique: table[i, o] = the row of site i + offset o (x-major,
// as kernel_offsets), -1 where inactive. Sites that differ only in z lie in consecutive rows, so
// each (dx, dy) costs one binary search and a short forward scan.
at::Tensor submanifold_table(const at::Tensor& keys_, int64_t k) {
  TORCH_CHECK(keys_.dim() == 1 && keys_.scalar_type() == at::kLong, "submanifold_table: keys must be (M,) int64");
  TORCH_CHECK(k >= 1 && k % 2 == 1, "submanifold_table: the kernel size must be odd");
  const at::Tensor keys = keys_.contiguous();
  const int64_t M = keys.size(0), r = k / 2, K3 = k * k * k, span = int64_t(1) << 16, mask = span - 1;
  TORCH_CHECK(M < (int64_t(1) << 31), "submanifold_table: too many sites for int32 rows");
  at::Tensor table = at::empty({M, K3}, keys.options().dtype(at::kInt));
  const int64_t* kp = keys.data_ptr<int64_t>();
  int32_t* tp = table.data_ptr<int32_t>();
  at::parallel_for(0, M, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t key = kp[i], b = key >> 48, x = (key >> 32) & mask, y = (key >> 16) & mask, z = key & mask;
      int32_t* row = tp + i * K3;
      for (int64_t dx = -r; dx <= r; ++dx)
        for (int64_t dy = -r; dy <= r; ++dy) {
          int32_t* out = row + ((dx + r) * k + (dy + r)) * k;
          const int64_t nx = x + dx, ny = y + dy;
          if (nx < 0 || nx >= span || ny < 0 || ny >= span) {
            for (int64_t dz = 0; dz < k; ++dz) out[dz] = -1;
            continue;
          }
          const int64_t column = (b << 48) | (nx << 32) | (ny << 16);
          int64_t pos = std::lower_bound(kp, kp + M, column | std::max<int64_t>(z - r, 0)) - kp;
          for (int64_t dz = -r; dz <= r; ++dz) {
            const int64_t nz = z + dz;
            out[dz + r] = -1;
            if (nz < 0 || nz >= span) continue;
            const int64_t want = column | nz;
            while (pos < M && kp[pos] < want) ++pos;
            if (pos < M && kp[pos] == want) out[dz + r] = static_cast<int32_t>(pos);
          }
        }
    }
  });
  return table;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("gather_conv(Tensor x, Tensor table, Tensor weight, Tensor? bias, bool bf16=False) -> Tensor");
  m.def("submanifold_table(Tensor keys, int k) -> Tensor");
  m.def("gather_wgrad(Tensor x, Tensor table, Tensor grad) -> Tensor");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) {
  m.impl("gather_conv", &gather_conv);
  m.impl("submanifold_table", &submanifold_table);
  m.impl("gather_wgrad", &gather_wgrad);
}
