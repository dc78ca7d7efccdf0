// Exact k-nearest-neighbour search on a uniform grid of cells, for point clouds (the CPU twin of
// no library: scipy's and open3d's KD-trees take ~7 s for 30 neighbours of a million points on 2
// cores; a grid sized to the cloud's density reads ~100 candidates per query).
//
// The grid: cells of side h over the points' box, the occupied ones found through an
// open-addressing hash of their packed (x, y, z) cell coordinates; the points sorted by cell, so
// that a cell's points are one contiguous run. h is sized to the cloud: starting from
// diag / sqrt(N), it is rescaled (by (fill / mean)^0.4: a surface's points per cell grow as h^2, a
// volume's as h^3) until
// the occupied cells hold about `fill` points on average, for which a point's k nearest lie mostly
// within its 3 x 3 x 3 block.
//
// Queries run in the order of their cells, each first reading the points within a guess of its
// k-th distance (the previous query's, widened; `search`). Else a query visits shells of cells
// around its own cell (ring r: the cells at Chebyshev distance r; the first, its 3 x 3 x 3 block),
// each shell's cells nearest first, keeping the k nearest so far in a max-heap and passing over
// the cells whose box lies beyond the k-th. It stops when the k-th distance is no larger than
// the distance from the query to the visited block's boundary (no point outside can be nearer), or
// when the block covers the whole grid. A query that needs more than `max_rings` rings (far from
// the cloud) is flagged, and the caller searches it another way. Distances in double; ties between
// equidistant points may come out in any order.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

namespace {

constexpr int64_t kBits = 21;                       // per axis in a packed key
constexpr int64_t kSpan = int64_t(1) << (kBits - 1);  // cell coordinates within [-kSpan, kSpan)
constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();

inline uint64_t pack(int64_t x, int64_t y, int64_t z) {
  return (uint64_t(x + kSpan) << (2 * kBits)) | (uint64_t(y + kSpan) << kBits) | uint64_t(z + kSpan);
}

struct Grid {
  double lo[3], h;
  int64_t cells[3];  // the grid's extent in cells along each axis
  std::vector<double> xyz;          // the points in cell order, (N, 3)
  std::vector<int64_t> order;       // their rows in the input
  std::vector<int64_t> start;       // cell c's points: [start[c], start[c + 1])
  std::vector<uint64_t> slot_key;   // the hash: packed key per slot, kEmpty where free
  std::vector<int64_t> slot_cell;
  uint64_t mask = 0;

  int64_t find(uint64_t key) const {
    uint64_t s = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask;
    while (true) {
      if (slot_key[s] == key) return slot_cell[s];
      if (slot_key[s] == kEmpty) return -1;
      s = (s + 1) & mask;
    }
  }
};

// The cell coordinate of each point for side h; false where the grid would be too wide to pack.
bool cell_coords(const double* p, int64_t n, const double lo[3], double h, std::vector<int64_t>& c, int64_t cells[3]) {
  for (int a = 0; a < 3; ++a) cells[a] = 1;
  c.resize(3 * n);
  for (int64_t i = 0; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      const double v = std::floor((p[3 * i + a] - lo[a]) / h);
      if (!(v < double(kSpan - 4))) return false;  // also NaN
      c[3 * i + a] = int64_t(v);
      cells[a] = std::max(cells[a], c[3 * i + a] + 1);
    }
  return true;
}

// Builds the grid with about `fill` points per occupied cell; false where it cannot be packed.
bool build(const double* p, int64_t n, double fill, Grid& g) {
  double hi[3];
  for (int a = 0; a < 3; ++a) g.lo[a] = hi[a] = p[a];
  for (int64_t i = 1; i < n; ++i)
    for (int a = 0; a < 3; ++a) {
      g.lo[a] = std::min(g.lo[a], p[3 * i + a]);
      hi[a] = std::max(hi[a], p[3 * i + a]);
    }
  const double diag = std::sqrt((hi[0] - g.lo[0]) * (hi[0] - g.lo[0]) + (hi[1] - g.lo[1]) * (hi[1] - g.lo[1]) +
                                (hi[2] - g.lo[2]) * (hi[2] - g.lo[2]));
  if (!(diag > 0)) {  // one point repeated: one cell
    g.h = 1.0;
  } else {
    g.h = diag / std::sqrt(double(n)) * std::sqrt(fill);
  }
  std::vector<int64_t> c;
  std::vector<uint64_t> keys(n), sorted;
  for (int round = 0; round < 6; ++round) {
    if (!cell_coords(p, n, g.lo, g.h, c, g.cells)) return false;
    for (int64_t i = 0; i < n; ++i) keys[i] = pack(c[3 * i], c[3 * i + 1], c[3 * i + 2]);
    if (!(diag > 0) || round == 5) break;
    sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    const double mean = double(n) / double(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
    if (mean > 0.8 * fill && mean < 1.25 * fill) break;
    g.h *= std::pow(fill / mean, 0.4);  // between a surface's 1/2 and a volume's 1/3
  }
  std::vector<std::pair<uint64_t, int64_t>> by_cell(n);
  for (int64_t i = 0; i < n; ++i) by_cell[i] = {keys[i], i};
  std::sort(by_cell.begin(), by_cell.end());
  g.order.resize(n);
  int64_t occupied = 0;
  for (int64_t i = 0; i < n; ++i) {
    g.order[i] = by_cell[i].second;
    occupied += i == 0 || by_cell[i].first != by_cell[i - 1].first;
  }
  g.xyz.resize(3 * n);
  g.start.clear();
  uint64_t capacity = 16;
  while (capacity < 2 * uint64_t(occupied)) capacity <<= 1;
  g.mask = capacity - 1;
  g.slot_key.assign(capacity, kEmpty);
  g.slot_cell.assign(capacity, -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = g.order[i];
    for (int a = 0; a < 3; ++a) g.xyz[3 * i + a] = p[3 * row + a];
    if (i == 0 || keys[row] != keys[g.order[i - 1]]) {
      uint64_t s = (keys[row] * 0x9E3779B97F4A7C15ULL) >> 20 & g.mask;
      while (g.slot_key[s] != kEmpty) s = (s + 1) & g.mask;
      g.slot_key[s] = keys[row];
      g.slot_cell[s] = int64_t(g.start.size());
      g.start.push_back(i);
    }
  }
  g.start.push_back(n);
  return true;
}

// The k nearest so far: a max-heap of (squared distance, row in cell order), the farthest on top.
struct Nearest {
  std::vector<std::pair<double, int64_t>> items;
  std::vector<std::pair<double, int64_t>> cells;  // (squared box distance, cell) of a shell
  int64_t k;
  bool full() const { return int64_t(items.size()) == k; }
  double top() const { return full() ? items.front().first : std::numeric_limits<double>::infinity(); }
  void offer(double d2, int64_t row) {
    if (!full()) {
      items.emplace_back(d2, row);
      std::push_heap(items.begin(), items.end());
    } else if (d2 < items.front().first) {
      std::pop_heap(items.begin(), items.end());
      items.back() = {d2, row};
      std::push_heap(items.begin(), items.end());
    }
  }
};

// The distance from q to the box of ring r's block around cell c (no point outside it is nearer),
// and whether that block covers the whole grid.
double block_bound(const Grid& g, const double* q, const int64_t c[3], int64_t r, bool& covers) {
  covers = true;
  double bound = std::numeric_limits<double>::infinity();
  for (int a = 0; a < 3; ++a) {
    covers = covers && c[a] - r <= 0 && c[a] + r >= g.cells[a] - 1;
    const double low = g.lo[a] + double(c[a] - r) * g.h, high = g.lo[a] + double(c[a] + r + 1) * g.h;
    bound = std::min(bound, std::min(q[a] - low, high - q[a]));
  }
  return bound;
}

// Calls visit(squared box distance, cell) for the occupied cells of ring r around c whose box
// lies within `limit` (squared) of q.
template <typename Visit>
void shell(const Grid& g, const double* q, const int64_t c[3], int64_t r, double limit, Visit visit) {
  for (int64_t dx = -r; dx <= r; ++dx)
    for (int64_t dy = -r; dy <= r; ++dy)
      for (int64_t dz = -r; dz <= r; ++dz) {
        if (r > 1 && std::max(std::abs(dx), std::max(std::abs(dy), std::abs(dz))) != r) continue;  // the shell
        const int64_t at[3] = {c[0] + dx, c[1] + dy, c[2] + dz};
        double gap2 = 0.0;
        bool inside = true;
        for (int a = 0; a < 3; ++a) {
          inside = inside && at[a] >= 0 && at[a] < g.cells[a];
          const double low = g.lo[a] + double(at[a]) * g.h, gap = std::max(0.0, std::max(low - q[a], q[a] - low - g.h));
          gap2 += gap * gap;
        }
        if (!inside || gap2 >= limit) continue;
        const int64_t cell = g.find(pack(at[0], at[1], at[2]));
        if (cell >= 0) visit(gap2, cell);
      }
}

// Searches one query; false where it needs more than max_rings rings. First within a guess of the
// k-th distance (`hint`, squared: the previous query's, a neighbour's, widened): every point
// nearer than it is read, and if there are k or more, the k nearest are among them. Else each
// shell's cells nearest first (by the distance from the query to the cell's box) into a max-heap,
// passing over the cells whose box lies beyond the k-th distance so far.
bool search(const Grid& g, const double* q, int64_t max_rings, double hint, Nearest& best) {
  int64_t c[3];
  for (int a = 0; a < 3; ++a) {
    const double v = std::floor((q[a] - g.lo[a]) / g.h);
    if (!(std::fabs(v) < double(kSpan / 2))) return false;  // far outside (or NaN): the caller's
    c[a] = int64_t(v);
  }
  best.items.clear();
  bool covers = false;
  if (std::isfinite(hint)) {
    double bound = 0.0;
    for (int64_t r = 1; r <= max_rings; ++r) {
      shell(g, q, c, r, hint, [&](double, int64_t cell) {
        for (int64_t i = g.start[cell]; i < g.start[cell + 1]; ++i) {
          const double* p = &g.xyz[3 * i];
          const double ex = p[0] - q[0], ey = p[1] - q[1], ez = p[2] - q[2], d2 = ex * ex + ey * ey + ez * ez;
          if (d2 < hint) best.items.emplace_back(d2, i);
        }
      });
      bound = block_bound(g, q, c, r, covers);
      if (covers || bound * bound >= hint) break;
    }
    if (int64_t(best.items.size()) >= best.k) {
      std::nth_element(best.items.begin(), best.items.begin() + (best.k - 1), best.items.end());
      best.items.resize(best.k);
      // the k nearest read, if no unread point can be nearer: the guess's ball lay within the cells
      // read, or the k-th lies within them (the rings ran out first)
      if (covers || bound * bound >= hint || best.items[best.k - 1].first <= bound * bound) {
        std::sort(best.items.begin(), best.items.end());
        return true;
      }
    }
    best.items.clear();
  }
  for (int64_t r = 1;; ++r) {
    if (r > max_rings) return false;
    best.cells.clear();
    shell(g, q, c, r, best.top(), [&](double gap2, int64_t cell) { best.cells.emplace_back(gap2, cell); });
    std::sort(best.cells.begin(), best.cells.end());
    for (const auto& [gap2, cell] : best.cells) {
      if (gap2 >= best.top()) break;
      for (int64_t i = g.start[cell]; i < g.start[cell + 1]; ++i) {
        const double* p = &g.xyz[3 * i];
        const double ex = p[0] - q[0], ey = p[1] - q[1], ez = p[2] - q[2];
        best.offer(ex * ex + ey * ey + ez * ez, i);
      }
    }
    const double bound = block_bound(g, q, c, r, covers);
    if (covers || (best.full() && best.top() <= bound * bound)) {
      std::sort_heap(best.items.begin(), best.items.end());
      return true;
    }
  }
}

// The k nearest of each query among the grid's points: (idx (Q, k) int64, d2 (Q, k) float32,
// nearest first; found (Q,) bool: false where the query needs more than max_rings rings, its rows
// then -1 and inf). `same`: the queries are the grid's own points, in their input order.
std::tuple<at::Tensor, at::Tensor, at::Tensor> query_grid(const Grid& g, bool built, const at::Tensor& queries_in,
                                                          int64_t k, int64_t max_rings, bool same) {
  const at::Tensor queries = queries_in.contiguous();
  TORCH_CHECK(queries.device().is_cpu() && queries.scalar_type() == at::kDouble && queries.dim() == 2 && queries.size(1) == 3,
              "knn_grid: queries must be (Q, 3) float64 on the CPU");
  TORCH_CHECK(max_rings >= 1, "knn_grid: max_rings >= 1");
  const int64_t m = queries.size(0);
  at::Tensor idx = at::full({m, k}, -1, queries.options().dtype(at::kLong));
  at::Tensor d2 = at::full({m, k}, std::numeric_limits<float>::infinity(), queries.options().dtype(at::kFloat));
  at::Tensor found = at::zeros({m}, queries.options().dtype(at::kBool));
  if (!built) return {idx, d2, found};
  const double* pq = queries.data_ptr<double>();
  int64_t* pi = idx.data_ptr<int64_t>();
  float* pd = d2.data_ptr<float>();
  bool* pf = found.data_ptr<bool>();
  // queries in the order of their cells (neighbouring queries read the same cells: cache hits)
  std::vector<int64_t> qorder;
  if (same) {
    qorder = g.order;
  } else {
    std::vector<std::pair<uint64_t, int64_t>> by_cell(m);
    for (int64_t i = 0; i < m; ++i) {
      int64_t cq[3];
      for (int a = 0; a < 3; ++a) {
        const double v = std::floor((pq[3 * i + a] - g.lo[a]) / g.h);
        cq[a] = std::fabs(v) < double(kSpan / 2) ? int64_t(v) : 0;
      }
      by_cell[i] = {pack(cq[0], cq[1], cq[2]), i};
    }
    std::sort(by_cell.begin(), by_cell.end());
    qorder.resize(m);
    for (int64_t i = 0; i < m; ++i) qorder[i] = by_cell[i].second;
  }
  at::parallel_for(0, m, 512, [&](int64_t i0, int64_t i1) {
    Nearest best;
    best.k = k;
    best.items.reserve(k);
    best.cells.reserve(128);
    double hint = std::numeric_limits<double>::infinity();
    for (int64_t o = i0; o < i1; ++o) {
      const int64_t i = qorder[o];
      if (!search(g, pq + 3 * i, max_rings, hint, best)) continue;
      hint = 1.5 * best.items.back().first + 1e-300;  // the next query's guess: this one's k-th, widened
      for (int64_t j = 0; j < k; ++j) {
        pi[i * k + j] = g.order[best.items[j].second];
        pd[i * k + j] = float(best.items[j].first);
      }
      pf[i] = true;
    }
  });
  return {idx, d2, found};
}

void check_points(const at::Tensor& points, double fill) {
  TORCH_CHECK(points.device().is_cpu() && points.scalar_type() == at::kDouble && points.dim() == 2 && points.size(1) == 3,
              "knn_grid: points must be (N, 3) float64 on the CPU");
  TORCH_CHECK(points.size(0) >= 1 && fill > 0, "knn_grid: at least one point, and fill > 0");
}

// queries (Q, 3) float64, points (N, 3) float64, 1 <= k <= N -> `query_grid`'s (also false where
// the grid cannot be packed).
std::tuple<at::Tensor, at::Tensor, at::Tensor> knn_grid(const at::Tensor& queries_in, const at::Tensor& points_in, int64_t k,
                                                        double fill, int64_t max_rings) {
  const at::Tensor points = points_in.contiguous();
  check_points(points, fill);
  TORCH_CHECK(k >= 1 && k <= points.size(0), "knn_grid: k must be within 1 and the ", points.size(0), " points, got ", k);
  Grid g;
  const bool built = build(points.data_ptr<double>(), points.size(0), fill, g);
  const bool same = queries_in.data_ptr() == points_in.data_ptr() && queries_in.size(0) == points.size(0);
  return query_grid(g, built, queries_in, k, max_rings, same);
}

// The grid of one cloud, built once and queried many times (queries in chunks: bounded memory).
struct KnnIndex : torch::CustomClassHolder {
  Grid g;
  bool built = false;
  int64_t n = 0;
  KnnIndex(const at::Tensor& points_in, double fill) {
    const at::Tensor points = points_in.contiguous();
    check_points(points, fill);
    n = points.size(0);
    built = build(points.data_ptr<double>(), n, fill, g);
  }
  std::tuple<at::Tensor, at::Tensor, at::Tensor> query(const at::Tensor& queries, int64_t k, int64_t max_rings) {
    TORCH_CHECK(k >= 1 && k <= n, "knn_grid: k must be within 1 and the ", n, " points, got ", k);
    return query_grid(g, built, queries, k, max_rings, false);
  }
};

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("knn_grid(Tensor queries, Tensor points, int k, float fill, int max_rings) -> (Tensor, Tensor, Tensor)");
  m.class_<KnnIndex>("KnnIndex").def(torch::init<const at::Tensor&, double>()).def("query", &KnnIndex::query);
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) { m.impl("knn_grid", &knn_grid); }
