"""Far stray points of a scan: the few points far from the rest (a scanner's reflections, a bird)
that would set a cloud's bounding box, and the box without them; and outliers scattered through
the volume in larger numbers than the reconstruction network trained with (`scattered`)."""

from __future__ import annotations

from typing import Tuple

import numpy as np
import torch

from .knn import SPREAD_NEIGHBOURS, KnnSearch

STRAY_QUANTILE, STRAY_RATIO, STRAY_MARGIN, STRAY_SAMPLE = 0.005, 1.5, 0.25, 100_000
"""A few stray points far from the rest would set the bounding box, and with it the
reconstruction network's voxel (3 points 10 diagonals out made `denoise` worse than its input)
or the box a signed distance field is fitted in. Strays are looked for when the cloud's box is
more than STRAY_RATIO times as long (diagonal) as the box between the STRAY_QUANTILE and
1 - STRAY_QUANTILE quantiles of each coordinate (over at most about STRAY_SAMPLE points, every
k-th); then the strays are the points farther than STRAY_MARGIN quantile-box diagonals from the
quantile box, and the box of the others is the box the cloud would have without them. Points
spread over the surface, 5 % uniform outliers in the box and range scans stay well below the
ratio (at most 1.19 over the benchmark's 172 clouds and 300 of the training stream's): there
nothing changes."""


def strays(points):
    """(N,) bool: the far strays of a cloud (see STRAY_RATIO), all False when it has none; a
    tensor for a tensor (on its device), an array for an (N, 3) array; none of an empty cloud."""
    if isinstance(points, np.ndarray):
        return strays(torch.from_numpy(np.asarray(points, np.float64))).numpy()
    if len(points) == 0:
        return torch.zeros(0, dtype=torch.bool, device=points.device)
    lo, hi = points.min(0).values, points.max(0).values
    sample = points[:: max(1, len(points) // STRAY_SAMPLE)]
    q = torch.quantile(sample, torch.tensor([STRAY_QUANTILE, 1 - STRAY_QUANTILE], dtype=sample.dtype, device=sample.device), dim=0)
    inner = float((q[1] - q[0]).norm())
    if float((hi - lo).norm()) <= STRAY_RATIO * inner:
        return torch.zeros(len(points), dtype=torch.bool, device=points.device)
    margin = STRAY_MARGIN * inner
    return ~((points >= q[0] - margin) & (points <= q[1] + margin)).all(1)


def extent(points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(lo (3,), hi (3,)): the bounding box of the cloud less its far `strays`."""
    far = strays(points)
    kept = points[~far] if bool(far.any()) else points
    return kept.min(0).values, kept.max(0).values


SCATTER_NEIGHBOURS, SCATTER_SPACING, SCATTER_VARIATION = 16, 2.0, 0.12
SCATTER_SHARE, SCATTER_ROUNDS, SCATTER_SAMPLE, SCATTER_CHUNK = 0.035, 3, 20_000, 1 << 17
"""The reconstruction network trained with up to 5 % outliers uniform in the box; with more it
makes sheets of them (5,000 points, σ = 1 %, 20 % outliers: `denoise` left 13 of the 28 training
meshes' clouds worse than they came in by Chamfer-L1; README, "Heavy outliers"). A point is
scattered when it is sparse, its distance to its 8th nearest (`knn.SPREAD_NEIGHBOURS`) over
SCATTER_SPACING times the cloud's median of that distance, and its SCATTER_NEIGHBOURS nearest (itself included) spread in
all three directions: their covariance's smallest eigenvalue over SCATTER_VARIATION of the
three's sum (points even in a volume: up to 1/3; a surface whose points lie farther apart than
its noise, as in a range scan's sparse parts, less; a dense patch with noise of 1-2 % of the
diagonal reads 0.14-0.18 at the median on training meshes, so the test means something only
after the spacing one). Only where over SCATTER_SHARE of the cloud is scattered are they left
out (below it the network handles them as trained: range scans of training meshes read at most
1.6 %, evenly spread clouds with 5 % outliers 1.7 %, range scans with 5 % outliers 3.4 %, where
a gate at 2.5 % cost on 3 of 12 meshes, anchor 0.709 -> 0.911), in up to SCATTER_ROUNDS rounds
(each on the points the last one left: as outliers grow denser, fewer read as sparse at first).
Chosen on the training meshes (2026-12-07, session 52; README, "Heavy outliers")."""


def scattered(points: np.ndarray, seed: int = 0) -> np.ndarray:
    """(N,) bool: the outliers to leave out before the network (see SCATTER_SHARE); all False for
    most clouds. Each round is tried first on SCATTER_SAMPLE random points of the cloud."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    out = np.zeros(len(x), dtype=bool)
    left = np.arange(len(x))
    rng = np.random.default_rng(seed)
    for _ in range(SCATTER_ROUNDS):
        if len(left) <= SCATTER_NEIGHBOURS:
            break
        if len(left) > SCATTER_SAMPLE:
            sample = np.sort(rng.choice(len(left), SCATTER_SAMPLE, replace=False))
            if _scattered_among(x[left], sample).mean() <= SCATTER_SHARE:
                break
        flagged = _scattered_among(x[left], np.arange(len(left)))
        if flagged.mean() <= SCATTER_SHARE:
            break
        out[left[flagged]] = True
        left = left[~flagged]
    return out


def scattered_points(points: np.ndarray) -> np.ndarray:
    """(N,) bool: every point of the cloud that is scattered (SCATTER_SPACING and
    SCATTER_VARIATION against the cloud's median spacing), whatever their share: the outliers
    `denoise --keep-points` leaves out before it judges the rest (`inr.pointcloud.keep`)."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    return _scattered_among(x, np.arange(len(x))) if len(x) > SCATTER_NEIGHBOURS else np.zeros(len(x), dtype=bool)


ISOLATED_SPACING = 4.0
"""`isolated`: how many times their median spacing a point's own must exceed. The crowns of laspy's
`wkt.las` (11,838 returns classed as vegetation): 4 over it, 16 over 3x, 184 over 2x (a crown's
fringe thins out); a return metres above a canopy lies 7-12x."""


def isolated(points: np.ndarray, among: np.ndarray) -> np.ndarray:
    """(N,) bool: of the points `among` ((N,) bool), those alone in the cloud: their distance to
    their `knn.SPREAD_NEIGHBOURS`-th nearest over ISOLATED_SPACING times the median of that
    distance over `among`. For points of no surface (a canopy, wires: `inr.pointcloud.keep`),
    where `scattered`'s spread test, which spares the sparse parts of surfaces, means nothing."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    which = np.flatnonzero(among)
    out = np.zeros(len(x), dtype=bool)
    if len(which) == 0 or len(x) <= SPREAD_NEIGHBOURS:
        return out
    spacing = _spacing(torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(x[which])))
    out[which] = spacing > ISOLATED_SPACING * np.median(spacing)
    return out


def without_scattered(points: np.ndarray, seed: int = 0) -> np.ndarray:
    """The cloud less its `scattered` outliers (the same array where there are none): what the
    network's commands give the network for a whole cloud."""
    far = scattered(points, seed)
    return points[~far] if far.any() else points


def _spacing(cloud: torch.Tensor, at: torch.Tensor) -> np.ndarray:
    """Each of the points `at` (of the cloud) its distance to its SPREAD_NEIGHBOURS-th nearest other
    point of the cloud (the local spacing, as `knn.spacing_spread`'s), a chunk at a time."""
    spacing = np.empty(len(at))
    for start, _, d2 in KnnSearch(cloud, SPREAD_NEIGHBOURS + 1).chunks(at, SCATTER_CHUNK):  # the first is the point itself
        spacing[start:start + len(d2)] = np.sqrt(d2[:, -1].double().numpy())
    return spacing


def _scattered_among(cloud: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Which of cloud[queries] are scattered (SCATTER_SPACING and SCATTER_VARIATION), against
    the queries' median spacing. The spread of the neighbours is computed only for the sparse
    ones, each search structure built once (a 3.4M-point scan's test over all its points took
    86 s with both for every point, the structure rebuilt per chunk)."""
    ref = torch.from_numpy(cloud)
    at = torch.from_numpy(np.ascontiguousarray(cloud[queries]))
    spacing = _spacing(ref, at)
    out = np.zeros(len(queries), dtype=bool)
    if not len(queries):
        return out
    sparse = np.flatnonzero(spacing > SCATTER_SPACING * np.median(spacing))
    if len(sparse):
        variation = np.empty(len(sparse))
        for start, idx, _ in KnnSearch(ref, SCATTER_NEIGHBOURS).chunks(at[sparse], SCATTER_CHUNK):
            nb = cloud[idx.numpy()]
            rel = nb - nb.mean(1, keepdims=True)
            values = np.linalg.eigvalsh(np.einsum("nki,nkj->nij", rel, rel))
            variation[start:start + len(idx)] = values[:, 0] / np.maximum(values.sum(1), 1e-300)
        out[sparse] = variation > SCATTER_VARIATION
    return out
