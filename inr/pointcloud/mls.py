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

from typing import Optional

import numpy as np
import torch

from .. import _external, native
from .knn import knn, knn_chunks

MLS_NEIGHBOURS = 30
MLS_PASSES = 2
PROJECT_CHUNK = 1 << 17
"""Points projected at once: their neighbourhoods and jets take ~0.5 GB at k = 30 (all at once,
mls_fill's last round on a million points held ~5 GB)."""
NATIVE_MAX_NEIGHBOURS = 64
"""The native projection's most neighbours per point (more: the NumPy path)."""
FILL_NEIGHBOURS, FILL_PAIRS, FILL_REACH, FILL_ROUNDS = 16, 6, 2.0, 8
"""mls_fill: the jet's neighbours, the nearest points each point pairs with, the longest pair
(in median nearest-point spacings), the most rounds."""
SNAP_CELLS = 8
"""`_even_midpoints` snaps its cell means to midpoints where the cells hold more than this many."""
FOLLOW_POOL = 2
"""mls_fill's points that follow a scan's density are chosen among at least this many times as
many (filled in to that many where fewer: the fewer, the more of its choice is forced and the less
closely it follows; the fill to 3x made `reconstruct --density scan` of a 110,000-point airborne
scan take 27.5 s instead of 17.8 s; 2026-12-07, docs/surfaces-history.md)."""


def mls_project(points: np.ndarray, k: int = MLS_NEIGHBOURS, passes: int = MLS_PASSES,
                backend: str = "auto") -> np.ndarray:
    """(N, 3) float64: the points after `passes` MLS projections (neighbours from the current cloud).
    backend: as `_project_once`'s."""
    x = np.asarray(points, dtype=np.float64)
    for _ in range(passes):
        x = _project_once(x, min(k, len(x)), backend=backend)
    return x


def _project_once(x: np.ndarray, k: int, ref: Optional[np.ndarray] = None, backend: str = "auto",
                  fresh: bool = False, others: bool = False) -> np.ndarray:
    """x projected onto the jets fitted to each one's k nearest points of ref (default: x).
    backend: 'native' (inr/native/mls.cpp), 'numpy' (the jets in chunks of PROJECT_CHUNK points;
    each point's projection is its own: the same result), or 'auto' (native where it builds).
    fresh: leave out the points of x that lie exactly on a point of ref (before projection).
    others: each jet fitted to the k nearest points of ref after the nearest one, which where ref
    was made from x may be the point's own copy, exact or projected, and would draw the jet to it
    (`inr.pointcloud.keep`)."""
    ref = x if ref is None else ref
    native_runs = _native_runs(backend, k)
    rt = torch.from_numpy(np.ascontiguousarray(ref, dtype=np.float64))
    parts = []
    # in chunks of queries (`knn_chunks`): a 10-million-point scan's neighbours at once took 3.6 GB
    wanted = min(k + 1, len(ref)) if others else k
    for start, idx, d2 in knn_chunks(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)), rt, wanted):
        part = x[start:start + len(idx)]
        if others and idx.shape[1] > 1:
            idx, d2 = idx[:, 1:].contiguous(), d2[:, 1:].contiguous()
        if fresh:
            new = (d2[:, 0] > 0).numpy()
            part, idx, d2 = part[new], idx[new], d2[new]
        if native_runs:
            parts.append(native.mls_project(torch.from_numpy(np.ascontiguousarray(part, dtype=np.float64)), rt, idx,
                                            d2.double()).numpy())
        else:
            parts.append(np.concatenate([_project_chunk(part[i:i + PROJECT_CHUNK], ref, idx[i:i + PROJECT_CHUNK].numpy(),
                                                        d2[i:i + PROJECT_CHUNK].numpy())
                                         for i in range(0, len(part), PROJECT_CHUNK)] or [np.zeros((0, 3))]))
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def _native_runs(backend: str, k: int) -> bool:
    return _external.uses_native(backend, "MLS projections", twin="numpy") and k <= NATIVE_MAX_NEIGHBOURS


def _project_chunk(x: np.ndarray, ref: np.ndarray, idx: np.ndarray, d2: np.ndarray) -> np.ndarray:
    nb = ref[idx]  # (N, k, 3)
    d2 = d2.astype(np.float64)
    h2 = np.maximum(d2[:, -1:], 1e-300)
    w = np.exp(-d2 / h2)  # (N, k)
    w /= w.sum(1, keepdims=True)
    centre = np.einsum("nk,nkc->nc", w, nb)
    rel = nb - centre[:, None]
    wrel = rel * w[..., None]
    cov = wrel.transpose(0, 2, 1) @ rel  # sum_k w rel rel^T, as batched products (einsum of three is slow)
    _, vecs = np.linalg.eigh(cov)  # ascending eigenvalues: column 0 is the normal
    t1, t2, normal = vecs[:, :, 2], vecs[:, :, 1], vecs[:, :, 0]
    u, v, z = np.moveaxis(rel @ vecs[:, :, ::-1], -1, 0)  # coordinates along t1, t2, normal: (N, k) each
    basis = np.stack([np.ones_like(u), u, v, u * u, u * v, v * v], -1)  # (N, k, 6)
    wbasis = (basis * w[..., None]).transpose(0, 2, 1)  # (N, 6, k)
    lhs = wbasis @ basis
    rhs = (wbasis @ z[..., None])[..., 0]
    lhs += np.eye(6) * (1e-9 * np.trace(lhs, axis1=1, axis2=2))[:, None, None] + np.eye(6) * 1e-300
    coef = np.linalg.solve(lhs, rhs[..., None])[..., 0]
    p = x - centre
    pu, pv = np.einsum("nc,nc->n", p, t1), np.einsum("nc,nc->n", p, t2)
    height = coef[:, 0] + coef[:, 1] * pu + coef[:, 2] * pv + coef[:, 3] * pu * pu + coef[:, 4] * pu * pv + coef[:, 5] * pv * pv
    return centre + pu[:, None] * t1 + pv[:, None] * t2 + height[:, None] * normal


def mls_fill(points: np.ndarray, n: int, seed: int = 0, backend: str = "auto",
             like: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, 3) float64: n points of the cloud's surface. A cloud of n or more points gives an even
    subset (`even_subsample`). A smaller one keeps all its points and gains midpoints: those of
    every pair of a point and one of its FILL_PAIRS nearest lying within FILL_REACH median
    spacings of each other (so no pair spans a gap between parts), each projected onto the jet
    of its FILL_NEIGHBOURS nearest points; as many as are missing, spread evenly (chosen before
    they are projected, `_even_midpoints`); in rounds until there are n. Fewer than n only when
    no pair is left (isolated points). backend: the projections', as `_project_once`'s.
    like: the scan the points stand for: then the n points follow its density instead of spreading
    evenly (`density_subsample`), chosen among at least FOLLOW_POOL x n (filled as above)."""
    from .voxel import density_subsample, even_subsample

    x = np.asarray(points, dtype=np.float64)
    pool = n if like is None else FOLLOW_POOL * n
    for _ in range(FILL_ROUNDS):
        if len(x) >= pool or len(x) < 2:
            break
        t = torch.from_numpy(x)
        idx, d2 = knn(t, t, FILL_PAIRS + 1)
        idx, d = idx[:, 1:].numpy(), np.sqrt(d2[:, 1:].numpy().astype(np.float64))
        first = np.repeat(np.arange(len(x)), idx.shape[1])
        near = (first < idx.reshape(-1)) & (d.reshape(-1) <= FILL_REACH * np.median(d[:, 0]))
        pairs = np.unique(np.stack([first[near], idx.reshape(-1)[near]], 1), axis=0)
        if len(pairs) == 0:
            break
        # a later round's pairs can share a midpoint ((a + b) / 2 and (c + d) / 2 with (a + c) / 2 and
        # (b + d) / 2, exactly on flat patches): each once
        mids = _without_repeats(_even_midpoints((x[pairs[:, 0]] + x[pairs[:, 1]]) / 2, pool - len(x), seed))
        # fresh: a pair offered again in a later round, whose midpoint an earlier round added and
        # its projection left in place (neighbours on a line, as a scan line's), adds nothing
        x = np.concatenate([x, _project_once(mids, min(FILL_NEIGHBOURS, len(x)), x, backend, fresh=True)])
    return even_subsample(x, n, seed) if like is None else density_subsample(x, n, like, seed)


def _without_repeats(rows: np.ndarray) -> np.ndarray:
    """The rows (N, 3) less exact repeats, the first of each kept, in order. Repeats share their first
    column, so one sort of it finds the few candidates (none, most often: then the rows as they are)."""
    order = np.argsort(rows[:, 0], kind="stable")
    tied = np.flatnonzero(rows[order[1:], 0] == rows[order[:-1], 0])
    if len(tied) == 0:
        return rows
    candidates = np.unique(np.r_[order[tied], order[tied + 1]])  # ascending: a repeat's first comes first
    _, first = np.unique(rows[candidates], axis=0, return_index=True)
    keep = np.ones(len(rows), dtype=bool)
    keep[np.setdiff1d(candidates, candidates[first])] = False
    return rows[keep]


def _even_midpoints(mids: np.ndarray, m: int, seed: int) -> np.ndarray:
    """At most m of the midpoints, spread evenly: the means of `even_subsample`'s cells. Where the
    cells hold over SNAP_CELLS midpoints on average (a fill of a few points over a large cloud),
    a mean can lie off the surface, in a gap between parts: there each is replaced by its nearest
    midpoint (equidistant ones: the first, so that rounding does not change the choice)."""
    from .voxel import even_subsample

    if len(mids) <= m:
        return mids
    chosen = even_subsample(mids, m, seed)
    if len(mids) <= SNAP_CELLS * m:
        return chosen
    idx, d2 = knn(torch.from_numpy(chosen), torch.from_numpy(mids), min(4, len(mids)))
    idx, d2 = idx.numpy(), d2.numpy().astype(np.float64)
    tied = d2 <= d2[:, :1] * (1 + 1e-6) + 1e-18
    return mids[np.unique(np.where(tied, idx, len(mids)).min(1))]
