// Multiresolution hash grid on the CPU: forward, and backward to the table and to the inputs.
//
// The function is exactly the one of inr/encodings/hashgrid.py (the pure-torch twin, and
// tiny-cuda-nn's HashGrid): see that module's docstring for the layout. Registered as torch
// operators `inr_native::hashgrid_forward` and `inr_native::hashgrid_backward`; autograd and
// the shapes for torch.compile are registered from Python (inr/native/__init__.py).
//
// Work is split so that no two threads ever write the same memory, which keeps the backward
// deterministic without atomics or per-thread copies of the table:
// - forward and input gradients: over blocks of points, each block visiting the levels in turn
//   (one level's rows at a time stay in cache);
// - table gradients: over levels (each level owns its rows), every thread scanning all points.
// hashgrid_table_grad_atomic is the usual alternative (points split, atomic adds), kept only so
// that the benchmark measures what the deterministic split costs.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace {

constexpr uint32_t kPrimes[7] = {1u, 2654435761u, 805459861u, 3674653429u, 2097192037u, 1434869437u, 2165219737u};
constexpr int64_t kBlock = 256;  // points per block

struct Level {
  double scale;
  int64_t resolution, rows, offset;
  bool hashed;
  uint32_t mask;  // rows - 1 when rows is a power of two (every hashed level), else 0

  // key mod rows, without a 64-bit division on the common paths
  inline int64_t wrap(int64_t key) const {
    if (mask) return key & mask;
    return key < rows ? key : key % rows;
  }
};

std::vector<Level> make_levels(at::ArrayRef<double> scales, at::IntArrayRef resolutions, at::IntArrayRef rows,
                               at::IntArrayRef offsets, int64_t dim) {
  TORCH_CHECK(scales.size() == resolutions.size() && rows.size() == scales.size() && offsets.size() == scales.size(),
              "hashgrid: per-level lists differ in length");
  std::vector<Level> levels;
  for (size_t l = 0; l < scales.size(); ++l) {
    double dense = std::pow(static_cast<double>(resolutions[l]), static_cast<double>(dim));
    const bool pow2 = rows[l] > 0 && (rows[l] & (rows[l] - 1)) == 0 && rows[l] <= (int64_t{1} << 32);
    levels.push_back({scales[l], resolutions[l], rows[l], offsets[l], dense > static_cast<double>(rows[l]),
                      pow2 ? static_cast<uint32_t>(rows[l] - 1) : 0u});
  }
  return levels;
}

// The 2^D corners of one point's cell on one level: table rows and d-linear weights, and with
// Grad the weights' derivatives d w_c / d u_i (chain rule through frac = s u + 0.5 - floor).
template <typename T, int D, bool Grad>
struct Cell {
  int64_t index[1 << D];
  T weight[1 << D];
  T dweight[Grad ? (1 << D) : 1][D];
  bool inside[D];  // where the clamp to [0, 1] passes gradients

  inline void compute(const T* x, const Level& level, float scale) {
    int64_t cell[D];
    T frac[D];
    for (int i = 0; i < D; ++i) {
      T raw = (x[i] + T(1)) * T(0.5);
      inside[i] = raw >= T(0) && raw <= T(1);
      T u = std::fmin(std::fmax(raw, T(0)), T(1));  // fmin/fmax: a NaN coordinate reads as 0, never out of bounds
      T pos = u * static_cast<T>(scale) + T(0.5);
      T fl = std::floor(pos);
      cell[i] = static_cast<int64_t>(fl);
      frac[i] = pos - fl;
    }
    for (int c = 0; c < (1 << D); ++c) {
      T w = T(1);
      uint32_t h = 0;
      int64_t dense = 0, stride = 1;
      for (int i = 0; i < D; ++i) {
        const int bit = (c >> i) & 1;
        const int64_t corner = cell[i] + bit;
        w *= bit ? frac[i] : T(1) - frac[i];
        h ^= static_cast<uint32_t>(corner) * kPrimes[i];
        dense += corner * stride;
        stride *= level.resolution;
      }
      const int64_t key = level.hashed ? static_cast<int64_t>(h) : dense;
      index[c] = level.offset + level.wrap(key);
      weight[c] = w;
      if constexpr (Grad) {
        for (int i = 0; i < D; ++i) {
          T d = ((c >> i) & 1) ? T(1) : T(-1);
          for (int j = 0; j < D; ++j)
            if (j != i) d *= ((c >> j) & 1) ? frac[j] : T(1) - frac[j];
          dweight[c][i] = d * static_cast<T>(scale);
        }
      }
    }
  }
};

// One level's cells of points [p0, p1) (at most kBlock), with the table rows they will touch
// prefetched: the loads (or the read-modify-writes) of the second pass then find many rows
// already on their way from memory instead of waiting for each miss in turn.
template <typename T, int D, bool Write>
inline void stage(Cell<T, D, false>* cells, const T* x, int64_t p0, int64_t p1, const Level& level, const T* table,
                  int F) {
  const float scale = static_cast<float>(level.scale);
  for (int64_t p = p0; p < p1; ++p) {
    Cell<T, D, false>& cell = cells[p - p0];
    cell.compute(x + p * D, level, scale);
    for (int c = 0; c < (1 << D); ++c) __builtin_prefetch(table + cell.index[c] * F, Write ? 1 : 0, 1);
  }
}

// Runs body(p0, p1) on every block of at most kBlock points, blocks split among threads.
template <typename Body>
inline void for_point_blocks(int64_t n, Body&& body) {
  at::parallel_for(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) body(b * kBlock, std::min(n, (b + 1) * kBlock));
  });
}

// Adds the staged cells' share of grad_out (level l, points [p0, p1)) into the table gradient;
// Atomic: with atomic float adds, for threads that may share rows.
template <typename T, int D, int F, bool Atomic>
inline void scatter(const Cell<T, D, false>* cells, const T* grad_out, T* grad_table, int64_t p0, int64_t p1, int64_t l,
                    int64_t width) {
  for (int64_t p = p0; p < p1; ++p) {
    const Cell<T, D, false>& cell = cells[p - p0];
    const T* g = grad_out + p * width + l * F;
    for (int c = 0; c < (1 << D); ++c) {
      T* row = grad_table + cell.index[c] * F;
      for (int f = 0; f < F; ++f) {
        const T v = g[f] * cell.weight[c];
        if constexpr (Atomic) {
#pragma omp atomic update
          row[f] += v;
        } else {
          row[f] += v;
        }
      }
    }
  }
}

template <typename T, int D, int F>
void forward_kernel(const T* x, const T* table, T* out, int64_t n, const std::vector<Level>& levels) {
  const int64_t n_levels = static_cast<int64_t>(levels.size()), width = n_levels * F;
  for_point_blocks(n, [&](int64_t p0, int64_t p1) {
    Cell<T, D, false> cells[kBlock];
    for (int64_t l = 0; l < n_levels; ++l) {
      stage<T, D, false>(cells, x, p0, p1, levels[l], table, F);
      for (int64_t p = p0; p < p1; ++p) {
        const Cell<T, D, false>& cell = cells[p - p0];
        T acc[F] = {};
        for (int c = 0; c < (1 << D); ++c) {
          const T* row = table + cell.index[c] * F;
          for (int f = 0; f < F; ++f) acc[f] += row[f] * cell.weight[c];
        }
        for (int f = 0; f < F; ++f) out[p * width + l * F + f] = acc[f];
      }
    }
  });
}

// Table gradients, level by level: each level's rows are written by one thread only, which
// also zeroes them first (while they are about to be in its cache anyway). Levels go to threads
// dynamically, the largest first: the coarse levels are small and cache-resident, the hashed
// ones cost several times more, and a static split would hand one thread all the fine ones.
template <typename T, int D, int F>
void table_grad_kernel(const T* x, const T* grad_out, T* grad_table, int64_t n, const std::vector<Level>& levels) {
  const int64_t n_levels = static_cast<int64_t>(levels.size()), width = n_levels * F;
  std::vector<int64_t> order(n_levels);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return levels[a].rows > levels[b].rows; });
#pragma omp parallel for schedule(dynamic, 1) num_threads(at::get_num_threads())
  for (int64_t i = 0; i < n_levels; ++i) {
    const int64_t l = order[i];
    Cell<T, D, false> cells[kBlock];
    std::fill(grad_table + levels[l].offset * F, grad_table + (levels[l].offset + levels[l].rows) * F, T(0));
    for (int64_t p0 = 0; p0 < n; p0 += kBlock) {
      const int64_t p1 = std::min(n, p0 + kBlock);
      stage<T, D, true>(cells, x, p0, p1, levels[l], grad_table, F);
      scatter<T, D, F, false>(cells, grad_out, grad_table, p0, p1, l, width);
    }
  }
}

// The table gradient the common way, for the benchmark's comparison only: points split among
// threads, every corner added with an atomic float add. Its sums depend on the thread
// interleaving (not deterministic); table_grad_kernel above is what training uses.
template <typename T, int D, int F>
void table_grad_atomic_kernel(const T* x, const T* grad_out, T* grad_table, int64_t n,
                              const std::vector<Level>& levels) {
  const int64_t n_levels = static_cast<int64_t>(levels.size()), width = n_levels * F;
  for_point_blocks(n, [&](int64_t p0, int64_t p1) {
    Cell<T, D, false> cells[kBlock];
    for (int64_t l = 0; l < n_levels; ++l) {
      stage<T, D, true>(cells, x, p0, p1, levels[l], grad_table, F);
      scatter<T, D, F, true>(cells, grad_out, grad_table, p0, p1, l, width);
    }
  });
}

template <typename T, int D, int F>
void input_grad_kernel(const T* x, const T* table, const T* grad_out, T* grad_x, int64_t n,
                       const std::vector<Level>& levels) {
  const int64_t n_levels = static_cast<int64_t>(levels.size()), width = n_levels * F;
  for_point_blocks(n, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int i = 0; i < D; ++i) grad_x[p * D + i] = T(0);
    for (int64_t l = 0; l < n_levels; ++l) {
      const float scale = static_cast<float>(levels[l].scale);
      for (int64_t p = p0; p < p1; ++p) {
        Cell<T, D, true> cell;
        cell.compute(x + p * D, levels[l], scale);
        const T* g = grad_out + p * width + l * F;
        T du[D] = {};
        for (int c = 0; c < (1 << D); ++c) {
          const T* row = table + cell.index[c] * F;
          T dot = T(0);
          for (int f = 0; f < F; ++f) dot += row[f] * g[f];
          for (int i = 0; i < D; ++i) du[i] += dot * cell.dweight[c][i];
        }
        for (int i = 0; i < D; ++i)
          if (cell.inside[i]) grad_x[p * D + i] += du[i] * T(0.5);  // du/dx = 1/2
      }
    }
  });
}

// Runs CALL with constexpr D and F set to the runtime (dim, features); the Python side routes
// only these sizes here.
#define INR_CASE_F(DIM, FEAT, CALL) \
  case FEAT: {                      \
    constexpr int D = DIM;          \
    constexpr int F = FEAT;         \
    CALL;                           \
    break;                          \
  }
#define INR_CASE_D(DIM, features, CALL)                                                    \
  case DIM:                                                                                \
    switch (features) {                                                                    \
      INR_CASE_F(DIM, 1, CALL)                                                             \
      INR_CASE_F(DIM, 2, CALL)                                                             \
      INR_CASE_F(DIM, 4, CALL)                                                             \
      INR_CASE_F(DIM, 8, CALL)                                                             \
      default: TORCH_CHECK(false, "hashgrid native: features per level must be 1, 2, 4 or 8"); \
    }                                                                                      \
    break;
#define INR_DISPATCH(dim, features, CALL)                                \
  switch (dim) {                                                         \
    INR_CASE_D(1, features, CALL)                                        \
    INR_CASE_D(2, features, CALL)                                        \
    INR_CASE_D(3, features, CALL)                                        \
    INR_CASE_D(4, features, CALL)                                        \
    default: TORCH_CHECK(false, "hashgrid native: inputs must be 1- to 4-D"); \
  }

template <typename T, int D, int F>
void backward(const at::Tensor& x, const at::Tensor& table, const at::Tensor& grad_out, at::Tensor& grad_table,
              at::Tensor& grad_x, int64_t n, const std::vector<Level>& levels, bool table_grad, bool input_grad) {
  if (table_grad)
    table_grad_kernel<T, D, F>(x.data_ptr<T>(), grad_out.data_ptr<T>(), grad_table.data_ptr<T>(), n, levels);
  if (input_grad)
    input_grad_kernel<T, D, F>(x.data_ptr<T>(), table.data_ptr<T>(), grad_out.data_ptr<T>(), grad_x.data_ptr<T>(), n,
                               levels);
}

template <typename T, int D, int F>
void backward_atomic(const at::Tensor& x, const at::Tensor& grad_out, at::Tensor& grad_table, int64_t n,
                     const std::vector<Level>& levels) {
  table_grad_atomic_kernel<T, D, F>(x.data_ptr<T>(), grad_out.data_ptr<T>(), grad_table.data_ptr<T>(), n, levels);
}

void check_inputs(const at::Tensor& x, const at::Tensor& table, int64_t features) {
  TORCH_CHECK(x.device().is_cpu() && table.device().is_cpu(), "hashgrid native: CPU tensors only");
  TORCH_CHECK(x.dim() == 2, "hashgrid native: x must be (N, d)");
  TORCH_CHECK(x.scalar_type() == table.scalar_type(), "hashgrid native: x and table must share a dtype");
  TORCH_CHECK(table.dim() == 1 && table.numel() % features == 0, "hashgrid native: table must be flat");
}

at::Tensor hashgrid_forward(const at::Tensor& x_in, const at::Tensor& table_in, at::ArrayRef<double> scales,
                            at::IntArrayRef resolutions, at::IntArrayRef rows, at::IntArrayRef offsets,
                            int64_t features) {
  check_inputs(x_in, table_in, features);
  const auto x = x_in.contiguous();
  const auto table = table_in.contiguous();
  const int64_t n = x.size(0), dim = x.size(1);
  const auto levels = make_levels(scales, resolutions, rows, offsets, dim);
  auto out = at::empty({n, static_cast<int64_t>(levels.size()) * features}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "hashgrid_forward", [&] {
    INR_DISPATCH(dim, features,
                 (forward_kernel<scalar_t, D, F>(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(),
                                                 out.data_ptr<scalar_t>(), n, levels)));
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> hashgrid_backward(const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                                     const at::Tensor& table_in, at::ArrayRef<double> scales,
                                                     at::IntArrayRef resolutions, at::IntArrayRef rows,
                                                     at::IntArrayRef offsets, int64_t features, bool table_grad,
                                                     bool input_grad) {
  check_inputs(x_in, table_in, features);
  const auto x = x_in.contiguous();
  const auto table = table_in.contiguous();
  const auto grad_out = grad_out_in.to(x.scalar_type()).contiguous();
  const int64_t n = x.size(0), dim = x.size(1);
  const auto levels = make_levels(scales, resolutions, rows, offsets, dim);
  TORCH_CHECK(grad_out.dim() == 2 && grad_out.size(0) == n &&
                  grad_out.size(1) == static_cast<int64_t>(levels.size()) * features,
              "hashgrid native: grad_out must be (N, levels * features)");
  auto grad_table = table_grad ? at::empty_like(table)  // zeroed level by level in the kernel
                               : at::empty({0}, table.options());
  auto grad_x = input_grad ? at::empty_like(x) : at::empty({0}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "hashgrid_backward", [&] {
    INR_DISPATCH(dim, features, (backward<scalar_t, D, F>(x, table, grad_out, grad_table, grad_x, n, levels,
                                                          table_grad, input_grad)));
  });
  return {grad_table, grad_x};
}

at::Tensor hashgrid_table_grad_atomic(const at::Tensor& grad_out_in, const at::Tensor& x_in, const at::Tensor& table,
                                      at::ArrayRef<double> scales, at::IntArrayRef resolutions, at::IntArrayRef rows,
                                      at::IntArrayRef offsets, int64_t features) {
  check_inputs(x_in, table, features);
  const auto x = x_in.contiguous();
  const auto grad_out = grad_out_in.to(x.scalar_type()).contiguous();
  const int64_t n = x.size(0), dim = x.size(1);
  const auto levels = make_levels(scales, resolutions, rows, offsets, dim);
  auto grad_table = at::zeros_like(table);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "hashgrid_table_grad_atomic", [&] {
    INR_DISPATCH(dim, features, (backward_atomic<scalar_t, D, F>(x, grad_out, grad_table, n, levels)));
  });
  return grad_table;
}

}  // namespace

TORCH_LIBRARY(inr_native, m) {
  m.def("hashgrid_forward(Tensor x, Tensor table, float[] scales, int[] resolutions, int[] rows, int[] offsets, "
        "int features) -> Tensor");
  m.def("hashgrid_backward(Tensor grad_out, Tensor x, Tensor table, float[] scales, int[] resolutions, int[] rows, "
        "int[] offsets, int features, bool table_grad, bool input_grad) -> (Tensor, Tensor)");
  m.def("hashgrid_table_grad_atomic(Tensor grad_out, Tensor x, Tensor table, float[] scales, int[] resolutions, "
        "int[] rows, int[] offsets, int features) -> Tensor");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) {
  m.impl("hashgrid_forward", &hashgrid_forward);
  m.impl("hashgrid_backward", &hashgrid_backward);
  m.impl("hashgrid_table_grad_atomic", &hashgrid_table_grad_atomic);
}
