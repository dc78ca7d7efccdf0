"""Keeping a scan's own points: those that lie on a denoised surface, as they were measured.

Surveyors often want a scan's outliers gone but its points left where the scanner put them (with
their records, colours and intensities). Here the denoised cloud (the network's, `denoise`) stands
for the surface, and each input point is judged by how far it lies off it:

- its offset: the distance to its projection onto the MLS jet (`mls._project_once`) of its
  KEEP_NEIGHBOURS nearest surface points after the nearest one: where the surface was made from
  the points themselves (the bands MLS projects or keeps as scanned, `inr.pointcloud.bands`),
  that one is the point's own copy, exact or projected, and would vouch for it (on a training
  site's terrestrial scan, no floor below, 85 % of the far outliers went with it, 98 % without);
- its overhang: how far that projection lies from the nearest surface point, in the surface's
  own spacing there (that point's distance to its SPACING_RANK-th nearest other point; the
  nearest alone is often much closer than the points' usual spacing, and lost inliers): a point
  off the surface's edge projects onto the jet's extrapolation, beyond the points;
- a point is kept when its offset is at most KEEP_SIGMAS noise levels and its overhang at most
  EDGE_SPACINGS. The noise level is read from the offsets themselves, per group of points (the
  spacing bands of a scan whose spacing varies, whose noise differs): their KEEP_QUANTILE
  quantile over that quantile of |N(0, 1)|, which outliers, a minority, move little; and at
  least SPACING_FLOOR times the group's median spacing (a point's distance to its nearest
  other): where the points lie far apart against their noise (a terrestrial scan's far bands),
  the surface between them is known only to a fraction of that, and the inliers' offsets spread
  far past the noise (at 0.1 m spacing and 5 mm noise a hundredth of them lay over 0.6 spacings
  off the jet).

Chosen on 8 training meshes, 5,000 points (2026-12-07, docs/surfaces-history.md), means over the
meshes of the inliers kept / the outliers over 4 sigma off the true surface removed, Open3D's
statistical removal beside: 1 % noise and 5 % uniform outliers 99.76 / 93.4 % (99.68 / 93.7 %);
with 20 % 99.83 / 75.4 % (99.72 / 69.7 %); 2 % noise 99.41 / 97.5 % (98.71 / 100 %); range scans
of 4 cameras, 1 % and 5 %: 99.21 / 93.6 % (99.28 / 91.2 %); 0.5 % and 5 %: 99.83 / 84.9 %
(99.78 / 71.8 %). The 25th percentile as the quantile, or T = 4, kept fewer inliers at 2 % or
removed fewer outliers.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from .knn import knn_chunks
from .mls import _project_once

KEEP_NEIGHBOURS, KEEP_SIGMAS, EDGE_SPACINGS, SPACING_RANK = 16, 3.5, 2.0, 4
KEEP_QUANTILE, HALF_NORMAL_QUANTILE = 0.4, 0.5244
"""HALF_NORMAL_QUANTILE: the KEEP_QUANTILE quantile of |x| for x ~ N(0, 1) (Phi^-1(0.7))."""
SPACING_FLOOR = 0.15
"""On the training site's terrestrial scan (5 mm noise, 2 % of the returns 0.1-2 m off along
their ray): floors 0 / 0.1 / 0.15 / 0.2 kept 96.8 / 99.0 / 99.6 / 99.7 % of the inliers and
removed 97.6 / 86.8 / 80.8 / 74.4 % of the outliers over 4 sigma off the surface (Open3D's
statistical removal: 96.8 % kept, 36 % removed)."""
LEVEL_FLOOR = 1e-9
"""The noise level is at least this fraction of the surface's extent (a surface the points lie
exactly on reads zero)."""


def offsets(points: np.ndarray, surface: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(each point's offset from the surface, its overhang in surface spacings): see the module."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    s = np.ascontiguousarray(surface, dtype=np.float64)
    projected = _project_once(x, min(KEEP_NEIGHBOURS, len(s)), s, others=True)
    off = np.linalg.norm(x - projected, axis=1)
    st = torch.from_numpy(s)
    spacing = np.empty(len(s))
    for start, _, d2 in knn_chunks(st, st, SPACING_RANK + 1):
        spacing[start:start + len(d2)] = np.sqrt(d2[:, -1].double().numpy())
    overhang = np.empty(len(x))
    for start, idx, d2 in knn_chunks(torch.from_numpy(projected), st, 1):
        near = idx[:, 0].numpy()
        overhang[start:start + len(near)] = np.sqrt(d2[:, 0].double().numpy()) / np.maximum(spacing[near], 1e-300)
    return off, overhang


def noise_level(off: np.ndarray, floor: float = 0.0) -> float:
    """The noise level (a Gaussian's sigma) read from offsets: see KEEP_QUANTILE."""
    return max(float(np.quantile(off, KEEP_QUANTILE)) / HALF_NORMAL_QUANTILE, floor) if len(off) else floor


def on_surface(points: np.ndarray, surface: np.ndarray, groups: Optional[np.ndarray] = None,
               sigmas: float = KEEP_SIGMAS) -> np.ndarray:
    """(N,) bool: the points (N, 3) that lie on the surface (M, 3), see the module. groups: (N,)
    labels of points whose noise is read together (default: all together)."""
    if len(points) == 0 or len(surface) < 3:
        return np.zeros(len(points), dtype=bool) if len(surface) < 3 else np.ones(0, dtype=bool)
    off, overhang = offsets(points, surface)
    floor = LEVEL_FLOOR * float(np.linalg.norm(np.ptp(surface, axis=0)))
    x = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
    spacing = np.zeros(len(points))
    for start, _, d2 in knn_chunks(x, x, 2):
        spacing[start:start + len(d2)] = np.sqrt(d2[:, -1].double().numpy())
    level = np.empty(len(points))
    labels = np.zeros(len(points), np.int64) if groups is None else np.asarray(groups)
    for g in np.unique(labels):
        mine = labels == g
        level[mine] = noise_level(off[mine], max(floor, SPACING_FLOOR * float(np.median(spacing[mine]))))
    return (off <= sigmas * level) & (overhang <= EDGE_SPACINGS)
