// Moving-least-squares projection of points onto second-order jets, in double precision (and the
// PCA normals of a cloud, `pca_normals`, with the same eigensolver): the
// per-point maths of inr/pointcloud/mls.py (its module docstring has the method), which there runs
// as batched NumPy (a k x 3 neighbourhood, a 3 x 3 eigendecomposition and a 6 x 6 solve per point,
// each a pass over memory). Here each point is one loop over its neighbours with everything in
// registers; the neighbours (k nearest, with their squared distances) come from the caller.
//
// The frame: weights w_j = exp(-d_j^2 / h^2) (h: the k-th neighbour's distance), normalised; the
// weighted centroid; the weighted covariance's eigenvectors by cyclic Jacobi rotations (smallest:
// the normal, largest: t1, middle: t2); the height over the tangent plane fitted as
// a + b u + c v + d u^2 + e u v + f v^2 by the weighted normal equations, regularised by 1e-9 of
// their trace as the NumPy path is, solved by Gaussian elimination with partial pivoting. The
// eigenvectors' signs and the tangent axes' turn within a degenerate plane do not change the
// projection. Each point is its own: the result does not depend on the number of threads.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>

namespace {

// Eigenvalues (ascending) and eigenvectors (columns of V) of the symmetric 3 x 3 matrix a.
void eigen3(double a[3][3], double w[3], double V[3][3]) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) V[i][j] = i == j ? 1.0 : 0.0;
  double scale = 0.0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) scale += a[i][j] * a[i][j];
  static constexpr int kPairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (int sweep = 0; sweep < 32; ++sweep) {
    const double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
    if (off <= 1e-32 * scale || off == 0.0) break;
    for (const auto& pq : kPairs) {
      const int p = pq[0], q = pq[1], r = 3 - p - q;
      const double apq = a[p][q];
      if (apq == 0.0) continue;
      // the rotation that zeroes a[p][q]: t = tan of its angle, the smaller root
      const double theta = (a[q][q] - a[p][p]) / (2.0 * apq);
      const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
      const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
      a[p][p] -= t * apq;
      a[q][q] += t * apq;
      a[p][q] = a[q][p] = 0.0;
      const double arp = a[r][p], arq = a[r][q];
      a[r][p] = a[p][r] = c * arp - s * arq;
      a[r][q] = a[q][r] = s * arp + c * arq;
      for (int i = 0; i < 3; ++i) {
        const double vp = V[i][p], vq = V[i][q];
        V[i][p] = c * vp - s * vq;
        V[i][q] = s * vp + c * vq;
      }
    }
  }
  int order[3] = {0, 1, 2};
  std::sort(order, order + 3, [&](int i, int j) { return a[i][i] < a[j][j]; });
  double U[3][3];
  for (int c = 0; c < 3; ++c) {
    w[c] = a[order[c]][order[c]];
    for (int i = 0; i < 3; ++i) U[i][c] = V[i][order[c]];
  }
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 3; ++c) V[i][c] = U[i][c];
}

// x = A^-1 b for a 6 x 6 A (overwritten), by elimination with partial pivoting
void solve6(double A[6][6], double b[6], double x[6]) {
  for (int c = 0; c < 6; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 6; ++r)
      if (std::fabs(A[r][c]) > std::fabs(A[pivot][c])) pivot = r;
    if (pivot != c) {
      for (int j = 0; j < 6; ++j) std::swap(A[c][j], A[pivot][j]);
      std::swap(b[c], b[pivot]);
    }
    for (int r = c + 1; r < 6; ++r) {
      const double f = A[r][c] / A[c][c];
      for (int j = c; j < 6; ++j) A[r][j] -= f * A[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = 5; c >= 0; --c) {
    double s = b[c];
    for (int j = c + 1; j < 6; ++j) s -= A[c][j] * x[j];
    x[c] = s / A[c][c];
  }
}

void project_point(const double* x, const double* ref, const int64_t* idx, const double* d2, int64_t k, double* out) {
  double w[64];  // k <= 64 (checked)
  const double h2 = std::max(d2[k - 1], 1e-300);
  double total = 0.0;
  for (int64_t j = 0; j < k; ++j) total += (w[j] = std::exp(-d2[j] / h2));
  double centre[3] = {0, 0, 0};
  for (int64_t j = 0; j < k; ++j) {
    w[j] /= total;
    for (int c = 0; c < 3; ++c) centre[c] += w[j] * ref[idx[j] * 3 + c];
  }
  double cov[3][3] = {};
  for (int64_t j = 0; j < k; ++j) {
    double rel[3];
    for (int c = 0; c < 3; ++c) rel[c] = ref[idx[j] * 3 + c] - centre[c];
    for (int a = 0; a < 3; ++a)
      for (int b = a; b < 3; ++b) cov[a][b] += w[j] * rel[a] * rel[b];
  }
  cov[1][0] = cov[0][1];
  cov[2][0] = cov[0][2];
  cov[2][1] = cov[1][2];
  double values[3], V[3][3];
  eigen3(cov, values, V);
  const double normal[3] = {V[0][0], V[1][0], V[2][0]}, t2[3] = {V[0][1], V[1][1], V[2][1]},
               t1[3] = {V[0][2], V[1][2], V[2][2]};
  double lhs[6][6] = {}, rhs[6] = {};
  for (int64_t j = 0; j < k; ++j) {
    double rel[3];
    for (int c = 0; c < 3; ++c) rel[c] = ref[idx[j] * 3 + c] - centre[c];
    const double u = rel[0] * t1[0] + rel[1] * t1[1] + rel[2] * t1[2];
    const double v = rel[0] * t2[0] + rel[1] * t2[1] + rel[2] * t2[2];
    const double z = rel[0] * normal[0] + rel[1] * normal[1] + rel[2] * normal[2];
    const double basis[6] = {1.0, u, v, u * u, u * v, v * v};
    for (int a = 0; a < 6; ++a) {
      const double wa = w[j] * basis[a];
      rhs[a] += wa * z;
      for (int b = a; b < 6; ++b) lhs[a][b] += wa * basis[b];
    }
  }
  double trace = 0.0;
  for (int a = 0; a < 6; ++a) {
    trace += lhs[a][a];
    for (int b = 0; b < a; ++b) lhs[a][b] = lhs[b][a];
  }
  for (int a = 0; a < 6; ++a) lhs[a][a] += 1e-9 * trace + 1e-300;
  double coef[6];
  solve6(lhs, rhs, coef);
  double p[3];
  for (int c = 0; c < 3; ++c) p[c] = x[c] - centre[c];
  const double pu = p[0] * t1[0] + p[1] * t1[1] + p[2] * t1[2];
  const double pv = p[0] * t2[0] + p[1] * t2[1] + p[2] * t2[2];
  const double height =
      coef[0] + coef[1] * pu + coef[2] * pv + coef[3] * pu * pu + coef[4] * pu * pv + coef[5] * pv * pv;
  for (int c = 0; c < 3; ++c) out[c] = centre[c] + pu * t1[c] + pv * t2[c] + height * normal[c];
}

// x (N, 3) float64, ref (M, 3) float64, idx (N, k) int64 rows of ref, d2 (N, k) float64 squared
// distances, nearest first -> (N, 3) float64: each x projected onto the jet of its neighbours.
at::Tensor mls_project(const at::Tensor& x_in, const at::Tensor& ref_in, const at::Tensor& idx_in, const at::Tensor& d2_in) {
  const at::Tensor x = x_in.contiguous(), ref = ref_in.contiguous(), idx = idx_in.contiguous(), d2 = d2_in.contiguous();
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kDouble && x.dim() == 2 && x.size(1) == 3,
              "mls_project: x must be (N, 3) float64 on the CPU");
  TORCH_CHECK(ref.scalar_type() == at::kDouble && ref.dim() == 2 && ref.size(1) == 3, "mls_project: ref must be (M, 3) float64");
  const int64_t n = x.size(0), m = ref.size(0);
  TORCH_CHECK(idx.scalar_type() == at::kLong && idx.dim() == 2 && idx.size(0) == n, "mls_project: idx must be int64 (", n, ", k)");
  const int64_t k = idx.size(1);
  TORCH_CHECK(k >= 1 && k <= 64, "mls_project: 1 to 64 neighbours, got ", k);
  TORCH_CHECK(d2.scalar_type() == at::kDouble && d2.sizes() == idx.sizes(), "mls_project: d2 must be float64 like idx");
  at::Tensor out = at::empty({n, 3}, x.options());
  const double* px = x.data_ptr<double>();
  const double* pr = ref.data_ptr<double>();
  const int64_t* pi = idx.data_ptr<int64_t>();
  const double* pd = d2.data_ptr<double>();
  double* po = out.data_ptr<double>();
  for (int64_t i = 0; i < n * k; ++i) TORCH_CHECK(pi[i] >= 0 && pi[i] < m, "mls_project: idx ", pi[i], " is past ref's ", m, " rows");
  at::parallel_for(0, n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) project_point(px + i * 3, pr, pi + i * k, pd + i * k, k, po + i * 3);
  });
  return out;
}

// points (N, 3) float64, idx (N, k) int64 rows of points -> (normals (N, 3) float64: the
// eigenvector of the smallest eigenvalue of each neighbourhood's covariance, its side as the
// eigensolver leaves it; variation (N,) float64: that eigenvalue's share of their sum, 0 where
// the sum is 0). The PCA normals of inr/data/surfaces.py (its NumPy path is the twin).
std::tuple<at::Tensor, at::Tensor> pca_normals(const at::Tensor& points_in, const at::Tensor& idx_in) {
  const at::Tensor points = points_in.contiguous(), idx = idx_in.contiguous();
  TORCH_CHECK(points.device().is_cpu() && points.scalar_type() == at::kDouble && points.dim() == 2 && points.size(1) == 3,
              "pca_normals: points must be (N, 3) float64 on the CPU");
  const int64_t n = points.size(0);
  TORCH_CHECK(idx.scalar_type() == at::kLong && idx.dim() == 2 && idx.size(1) >= 1, "pca_normals: idx must be int64 (M, k)");
  const int64_t m = idx.size(0), k = idx.size(1);  // M rows: the points' own, or a chunk of them
  const int64_t* pi = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < m * k; ++i) TORCH_CHECK(pi[i] >= 0 && pi[i] < n, "pca_normals: idx ", pi[i], " is past the ", n, " points");
  at::Tensor normals = at::empty({m, 3}, points.options()), variation = at::empty({m}, points.options());
  const double* pp = points.data_ptr<double>();
  double* pn = normals.data_ptr<double>();
  double* pv = variation.data_ptr<double>();
  at::parallel_for(0, m, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t* row = pi + i * k;
      double mean[3] = {0, 0, 0};
      for (int64_t j = 0; j < k; ++j)
        for (int a = 0; a < 3; ++a) mean[a] += pp[3 * row[j] + a];
      for (int a = 0; a < 3; ++a) mean[a] /= double(k);
      double cov[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
      for (int64_t j = 0; j < k; ++j) {
        const double d[3] = {pp[3 * row[j]] - mean[0], pp[3 * row[j] + 1] - mean[1], pp[3 * row[j] + 2] - mean[2]};
        for (int a = 0; a < 3; ++a)
          for (int b = a; b < 3; ++b) cov[a][b] += d[a] * d[b];
      }
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < a; ++b) cov[a][b] = cov[b][a];
      double w[3], V[3][3];
      eigen3(cov, w, V);
      for (int a = 0; a < 3; ++a) pn[3 * i + a] = V[a][0];
      pv[i] = w[0] / std::max(w[0] + w[1] + w[2], 1e-300);
    }
  });
  return {normals, variation};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("mls_project(Tensor x, Tensor ref, Tensor idx, Tensor d2) -> Tensor");
  m.def("pca_normals(Tensor points, Tensor idx) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) {
  m.impl("mls_project", &mls_project);
  m.impl("pca_normals", &pca_normals);
}
