"""Moving-least-squares projection: the classical point-cloud smoothing baseline.

Each point is projected onto a quadratic (a second-order jet) fitted by weighted least squares
to its k nearest neighbours in a local frame: the frame's origin is the neighbours' weighted
centroid, its third axis the weighted covariance's smallest eigenvector (the normal), and the
height over the tangent plane is a + b u + c v + d u^2 + e u v + f v^2. Weights are Gaussian in
the distance, exp(-(d / h)^2) with h the distance to the k-th neighbour. Repeating the
projection on its own output (`passes`) smooths further. Noise is reduced; outliers far from
the surface are projected too but never removed (the count of points is kept).
"""

from __future__ import annotations

import numpy as np
import torch

from .knn import knn

MLS_NEIGHBOURS = 30
MLS_PASSES = 2


def mls_project(points: np.ndarray, k: int = MLS_NEIGHBOURS, passes: int = MLS_PASSES) -> np.ndarray:
    """(N, 3) float64: the points after `passes` MLS projections (neighbours from the current cloud)."""
    x = np.asarray(points, dtype=np.float64)
    for _ in range(passes):
        x = _project_once(x, min(k, len(x)))
    return x


def _project_once(x: np.ndarray, k: int) -> np.ndarray:
    t = torch.from_numpy(x)  # float64: knn takes it relative to the box centre before float32
    idx, d2 = knn(t, t, k)
    nb = x[idx.numpy()]  # (N, k, 3)
    d2 = d2.numpy().astype(np.float64)
    h2 = np.maximum(d2[:, -1:], 1e-300)
    w = np.exp(-d2 / h2)  # (N, k)
    w /= w.sum(1, keepdims=True)
    centre = np.einsum("nk,nkc->nc", w, nb)
    rel = nb - centre[:, None]
    cov = np.einsum("nk,nki,nkj->nij", w, rel, rel)
    _, vecs = np.linalg.eigh(cov)  # ascending eigenvalues: column 0 is the normal
    t1, t2, normal = vecs[:, :, 2], vecs[:, :, 1], vecs[:, :, 0]
    u, v, z = (np.einsum("nkc,nc->nk", rel, a) for a in (t1, t2, normal))
    basis = np.stack([np.ones_like(u), u, v, u * u, u * v, v * v], -1)  # (N, k, 6)
    lhs = np.einsum("nk,nki,nkj->nij", w, basis, basis)
    rhs = np.einsum("nk,nki,nk->ni", w, basis, z)
    lhs += np.eye(6) * (1e-9 * np.trace(lhs, axis1=1, axis2=2))[:, None, None] + np.eye(6) * 1e-300
    coef = np.linalg.solve(lhs, rhs[..., None])[..., 0]
    p = x - centre
    pu, pv = np.einsum("nc,nc->n", p, t1), np.einsum("nc,nc->n", p, t2)
    height = coef[:, 0] + coef[:, 1] * pu + coef[:, 2] * pv + coef[:, 3] * pu * pu + coef[:, 4] * pu * pv + coef[:, 5] * pv * pv
    return centre + pu[:, None] * t1 + pv[:, None] * t2 + height[:, None] * normal
