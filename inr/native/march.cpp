// The occupancy-grid marcher's candidate samples on the CPU: the lattice samples of every ray
// whose midpoint lies before the ray's exit and in an occupied cell, packed ray by ray.
//
// The same float32 operations, in the same order, as the torch path of inr/render/occupancy.py
// `march` (t = t_first + step * k, mid = t + step / 2, point = o + d * mid, the grid's
// cell_index), so both give identical samples. Two passes over the rays (count, then fill at the
// prefix-summed offsets), each split among threads; no (rays x steps) intermediate is built.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// Whether the cell holding grid coordinates u ([0, 1)^3 on the grid) is occupied: the torch
// twin's cell_index (clamp to [0, 1 - 1e-6], scale by the resolution, truncate).
inline bool cell_occupied(const float* u, int64_t resolution, float upper, const bool* binaries) {
  int64_t ijk[3];
  bool inside = true;
  for (int i = 0; i < 3; ++i) {
    inside = inside && u[i] >= 0.0f && u[i] < 1.0f;
    const float c = std::min(std::max(u[i], 0.0f), upper);
    ijk[i] = static_cast<int64_t>(c * static_cast<float>(resolution));
  }
  return inside && binaries[(ijk[0] * resolution + ijk[1]) * resolution + ijk[2]];
}

struct Grid {
  float lo[3], extent[3];
  int64_t resolution;
  const bool* binaries;
  float upper;  // 1 - 1e-6 in float32, the clamp of cell_index

  inline bool occupied(const float* p) const {
    float u[3];
    for (int i = 0; i < 3; ++i) u[i] = (p[i] - lo[i]) / extent[i];
    return cell_occupied(u, resolution, upper, binaries);
  }
};

// A contracted grid (inr/render/contraction.py): cells over contracted space, u = (y + 2) / 4.
struct ContractedGrid {
  float centre[3], half[3];
  int64_t resolution;
  const bool* binaries;
  float upper;

  inline bool occupied(const float* p) const {
    float x[3];
    float n = 0.0f;
    for (int i = 0; i < 3; ++i) {
      x[i] = (p[i] - centre[i]) / half[i];
      n = std::max(n, std::abs(x[i]));
    }
    const float scale = n > 1.0f ? (2.0f - 1.0f / n) / n : 1.0f;
    float u[3];
    for (int i = 0; i < 3; ++i) u[i] = (x[i] * scale + 2.0f) * 0.25f;
    return cell_occupied(u, resolution, upper, binaries);
  }
};

// The samples every ray's walk keeps, packed ray by ray: walk(r, emit) calls emit(t_start,
// t_end) for each of ray r's samples in order. Two passes over the rays (count, then fill at
// the prefix-summed offsets), each split among threads. Returns ray indices, starts and (when
// with_ends) ends.
template <typename Walk>
std::tuple<at::Tensor, at::Tensor, at::Tensor> pack(int64_t n, const at::Tensor& like, bool with_ends, const Walk& walk) {
  std::vector<int64_t> offsets(n + 1, 0);
  at::parallel_for(0, n, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t count = 0;
      walk(r, [&](float, float) { ++count; });
      offsets[r + 1] = count;
    }
  });
  for (int64_t r = 0; r < n; ++r) offsets[r + 1] += offsets[r];
  auto ray_idx = at::empty({offsets[n]}, like.options().dtype(at::kLong));
  auto t_starts = at::empty({offsets[n]}, like.options());
  auto t_ends = with_ends ? at::empty({offsets[n]}, like.options()) : at::Tensor();
  int64_t* ri = ray_idx.data_ptr<int64_t>();
  float* ts = t_starts.data_ptr<float>();
  float* te = with_ends ? t_ends.data_ptr<float>() : nullptr;
  at::parallel_for(0, n, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t at = offsets[r];
      walk(r, [&](float a, float b) {
        ri[at] = r;
        ts[at] = a;
        if (te != nullptr) te[at] = b;
        ++at;
      });
    }
  });
  return {ray_idx, t_starts, t_ends};
}

std::tuple<at::Tensor, at::Tensor> march_candidates(const at::Tensor& origins_in, const at::Tensor& directions_in,
                                                    const at::Tensor& t_first_in, const at::Tensor& t_far_in,
                                                    const at::Tensor& hit_in, double step_size, int64_t n_steps,
                                                    const at::Tensor& aabb_in, const at::Tensor& binaries_in,
                                                    int64_t resolution) {
  TORCH_CHECK(origins_in.device().is_cpu(), "march native: CPU tensors only");
  TORCH_CHECK(origins_in.scalar_type() == at::kFloat && directions_in.scalar_type() == at::kFloat,
              "march native: float32 rays only");
  const auto origins = origins_in.contiguous(), directions = directions_in.contiguous();
  const auto t_first = t_first_in.to(at::kFloat).contiguous(), t_far = t_far_in.to(at::kFloat).contiguous();
  const auto hit = hit_in.to(at::kBool).contiguous();
  const auto aabb = aabb_in.to(at::kFloat).contiguous();
  const auto binaries = binaries_in.to(at::kBool).contiguous();
  TORCH_CHECK(binaries.numel() == resolution * resolution * resolution, "march native: grid size mismatch");
  const float* box = aabb.data_ptr<float>();
  Grid grid;
  for (int i = 0; i < 3; ++i) {
    grid.lo[i] = box[i];
    grid.extent[i] = box[i + 3] - box[i];
  }
  grid.resolution = resolution;
  grid.binaries = binaries.data_ptr<bool>();
  grid.upper = static_cast<float>(1.0 - 1e-6);
  const float step = static_cast<float>(step_size), half = static_cast<float>(0.5 * step_size);
  const float *o = origins.data_ptr<float>(), *d = directions.data_ptr<float>();
  const float *tf = t_first.data_ptr<float>(), *tx = t_far.data_ptr<float>();
  const bool* h = hit.data_ptr<bool>();
  // the lattice t = t_first + step * k, a sample kept while its midpoint is before the exit
  auto walk = [&](int64_t r, auto&& emit) {
    if (!h[r]) return;
    for (int64_t k = 0; k < n_steps; ++k) {
      const float t = tf[r] + step * static_cast<float>(k);
      const float mid = t + half;
      if (!(mid < tx[r])) return;  // mids grow with k: none after this one is before the exit
      float p[3];
      for (int i = 0; i < 3; ++i) p[i] = d[r * 3 + i] * mid + o[r * 3 + i];
      if (grid.occupied(p)) emit(t, 0.0f);
    }
  };
  auto packed = pack(origins.size(0), origins, false, walk);
  return {std::get<0>(packed), std::get<1>(packed)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> march_contracted_candidates(
    const at::Tensor& origins_in, const at::Tensor& directions_in, const at::Tensor& s0_in, double step_size,
    int64_t n_steps, double knee, double far, const at::Tensor& aabb_in, const at::Tensor& binaries_in,
    int64_t resolution) {
  TORCH_CHECK(origins_in.device().is_cpu(), "march native: CPU tensors only");
  TORCH_CHECK(origins_in.scalar_type() == at::kFloat && directions_in.scalar_type() == at::kFloat,
              "march native: float32 rays only");
  const auto origins = origins_in.contiguous(), directions = directions_in.contiguous();
  const auto s0 = s0_in.to(at::kFloat).contiguous();
  const auto aabb = aabb_in.to(at::kFloat).contiguous();
  const auto binaries = binaries_in.to(at::kBool).contiguous();
  TORCH_CHECK(binaries.numel() == resolution * resolution * resolution, "march native: grid size mismatch");
  const float* box = aabb.data_ptr<float>();
  ContractedGrid grid;
  for (int i = 0; i < 3; ++i) {
    grid.centre[i] = (box[i] + box[i + 3]) * 0.5f;
    grid.half[i] = (box[i + 3] - box[i]) * 0.5f;
  }
  grid.resolution = resolution;
  grid.binaries = binaries.data_ptr<bool>();
  grid.upper = static_cast<float>(1.0 - 1e-6);
  const float step = static_cast<float>(step_size), kn = static_cast<float>(knee);
  const float kk = static_cast<float>(knee * knee), two_k = static_cast<float>(2.0 * knee), fr = static_cast<float>(far);
  const float *o = origins.data_ptr<float>(), *d = directions.data_ptr<float>(), *s = s0.data_ptr<float>();
  auto t_of_s = [&](float v) { return v <= kn ? v : kk / (two_k - v); };
  // samples [T(s), T(s + step)] on the lattice s = s0 + step * k, until s + step reaches 2 knee
  // or a midpoint reaches far
  auto walk = [&](int64_t r, auto&& emit) {
    for (int64_t k = 0; k < n_steps; ++k) {
      const float sa = s[r] + step * static_cast<float>(k);
      const float sb = s[r] + step * static_cast<float>(k + 1);
      if (!(sb < two_k)) return;
      const float ta = t_of_s(sa), tb = t_of_s(sb);
      const float mid = (ta + tb) * 0.5f;
      if (!(mid < fr)) return;
      float p[3];
      for (int i = 0; i < 3; ++i) p[i] = d[r * 3 + i] * mid + o[r * 3 + i];
      if (grid.occupied(p)) emit(ta, tb);
    }
  };
  return pack(origins.size(0), origins, true, walk);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("march_candidates(Tensor origins, Tensor directions, Tensor t_first, Tensor t_far, Tensor hit, "
        "float step_size, int n_steps, Tensor aabb, Tensor binaries, int resolution) -> (Tensor, Tensor)");
  m.def("march_contracted_candidates(Tensor origins, Tensor directions, Tensor s0, float step_size, int n_steps, "
        "float knee, float far, Tensor aabb, Tensor binaries, int resolution) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) {
  m.impl("march_candidates", &march_candidates);
  m.impl("march_contracted_candidates", &march_contracted_candidates);
}
