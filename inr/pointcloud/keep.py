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
  EDGE_SPACINGS; a scattered point (sparse, its neighbours spread in all three directions:
  `strays.scattered_points`) only within STRAY_SIGMAS. The noise level is read from the offsets themselves, per group of points (the
  spacing bands of a scan whose spacing varies, whose noise differs; a point belongs to the
  group of the surface point nearest its projection, not to its own band: outliers, sparse,
  fall in coarse bands of their own, 25,482 of a band's 35,078 points on a 3.4M-point
  terrestrial scan, whose level they then set, 52 mm against 1.3 mm): their KEEP_QUANTILE
  quantile over that quantile of |N(0, 1)|, which outliers, a minority, move little; and at
  least SPACING_FLOOR times the group's median spacing (a point's distance to its nearest
  other): where the points lie far apart against their noise (a terrestrial scan's far bands),
  the surface between them is known only to a fraction of that, and the inliers' offsets spread
  far past the noise (at 0.1 m spacing and 5 mm noise a hundredth of them lay over 0.6 spacings
  off the jet).

Chosen on 8 training meshes, 5,000 points (2026-12-07, docs/surfaces-history.md), means over the
meshes of the inliers kept / the outliers over 4 sigma off the true surface removed, Open3D's
statistical removal beside: 1 % noise and 5 % uniform outliers 99.74 / 94.2 % (99.68 / 93.7 %);
with 20 % 99.81 / 79.2 % (99.72 / 69.7 %); 2 % noise 99.19 / 97.9 % (98.71 / 100 %); range scans
of 4 cameras, 1 % and 5 %: 99.05 / 94.7 % (99.28 / 91.2 %); 0.5 % and 5 %: 99.80 / 86.0 %
(99.78 / 71.8 %). The 25th percentile as the quantile, or T = 4, kept fewer inliers at 2 % or
removed fewer outliers (before the scattered points' rule, STRAY_SIGMAS).

Points known not to lie on a surface (a LAS file's vegetation and wires, by its classes) are not
judged by their offset: a canopy's returns lie off any surface the network makes, and on laspy's
`wkt.las` 33-53 % of each vegetation class went. They go only where isolated (`strays.isolated`:
sparse against their own median spacing, 4 of those 11,838 returns).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from .knn import knn_chunks
from .mls import _project_once
from .strays import isolated, scattered_points

KEEP_NEIGHBOURS, KEEP_SIGMAS, EDGE_SPACINGS, SPACING_RANK = 16, 3.5, 2.0, 4
KEEP_QUANTILE, HALF_NORMAL_QUANTILE = 0.4, 0.5244
"""HALF_NORMAL_QUANTILE: the KEEP_QUANTILE quantile of |x| for x ~ N(0, 1) (Phi^-1(0.7))."""
SPACING_FLOOR = 0.15
"""On the training site's terrestrial scan (5 mm noise, 2 % of the returns 0.1-2 m off along
their ray): floors 0 / 0.1 / 0.15 / 0.2 kept 96.8 / 99.0 / 99.6 / 99.7 % of the inliers and
removed 97.6 / 86.8 / 80.8 / 74.4 % of the outliers over 4 sigma off the surface (Open3D's
statistical removal: 96.8 % kept, 36 % removed)."""
STRAY_SIGMAS = 1.0
"""Scattered points (`strays.scattered_points`) are kept only this close to the surface, and the
noise is read without them. Sparse outliers gather in coarse spacing bands of their own, whose
output is a surface through them: on a 3.4M-point terrestrial scan of the training site (5 mm
noise, 2 % of the returns 0.1-2 m off along their ray) one band of 35,078 points held 25,482 of
them and read a 52 mm level (the dense bands 1.2-3.5 mm); 57 % of the far outliers went. The
test flags 69 % of them and 0.01 % of the inliers. Removing every scattered point: 95.1 % of the
far outliers gone, 99.19 % of the inliers kept; within 1 level: 88.6 % and 99.19 %; with
STRAY_GROUP besides 94.0 % and 99.04 % (with that group's level floor from its own spacing,
strays aside, 90.3 % and 99.19 %, but the few outliers the test misses set it). On the
training meshes' 4-camera range scans (1 %, 5 % outliers), whose grazing parts are sparse and
spread, all removed kept 98.82 % of the inliers (one mesh 97.0 %), within 1 level 99.05 %
(98.2 %), without the test 99.21 %: 1."""
STRAY_GROUP = 0.5
"""A group whose points are over this share scattered is read with the level (and spacing floor)
of all the points that are not (its few others, outliers that passed the test, would set it)."""
LEVEL_FLOOR = 1e-9
"""The noise level is at least this fraction of the surface's extent (a surface the points lie
exactly on reads zero)."""


def offsets(points: np.ndarray, surface: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each point's offset from the surface, its overhang in surface spacings, the surface point
    nearest its projection): see the module."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    s = np.ascontiguousarray(surface, dtype=np.float64)
    projected = _project_once(x, min(KEEP_NEIGHBOURS, len(s)), s, others=True)
    off = np.linalg.norm(x - projected, axis=1)
    st = torch.from_numpy(s)
    spacing = np.empty(len(s))
    for start, _, d2 in knn_chunks(st, st, SPACING_RANK + 1):
        spacing[start:start + len(d2)] = np.sqrt(d2[:, -1].double().numpy())
    overhang, nearest = np.empty(len(x)), np.empty(len(x), np.int64)
    for start, idx, d2 in knn_chunks(torch.from_numpy(projected), st, 1):
        near = idx[:, 0].numpy()
        nearest[start:start + len(near)] = near
        overhang[start:start + len(near)] = np.sqrt(d2[:, 0].double().numpy()) / np.maximum(spacing[near], 1e-300)
    return off, overhang, nearest


def noise_level(off: np.ndarray, floor: float = 0.0) -> float:
    """The noise level (a Gaussian's sigma) read from offsets: see KEEP_QUANTILE."""
    return max(float(np.quantile(off, KEEP_QUANTILE)) / HALF_NORMAL_QUANTILE, floor) if len(off) else floor


def on_surface(points: np.ndarray, surface: np.ndarray, groups: Optional[np.ndarray] = None,
               sigmas: float = KEEP_SIGMAS, stray: Optional[np.ndarray] = None,
               spacing: Optional[np.ndarray] = None, not_surface: Optional[np.ndarray] = None) -> np.ndarray:
    """(N,) bool: the points (N, 3) that lie on the surface (M, 3), see the module. groups: (M,)
    labels of the surface's points: the points nearest each group's are read together (default:
    all together). stray: (N,) the points likely outliers (default: the scattered ones,
    `strays.scattered_points`): kept only within STRAY_SIGMAS, and not read. spacing: (N,) each
    point's distance to its nearest other point, where the caller has it (`bands.spacing_bands`).
    not_surface: (N,) bool, points known not to lie on a surface (a LAS file's vegetation or wires,
    `inr.data.las.NOT_SURFACE_CLASSES`): kept unless isolated among themselves (`strays.isolated`),
    whatever their offset."""
    if len(points) == 0 or len(surface) < 3:
        return np.zeros(len(points), dtype=bool) if len(surface) < 3 else np.ones(0, dtype=bool)
    stray = scattered_points(points) if stray is None else np.asarray(stray, bool)
    off, overhang, nearest = offsets(points, surface)
    floor = LEVEL_FLOOR * float(np.linalg.norm(np.ptp(surface, axis=0)))
    if spacing is None:
        x = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
        spacing = np.zeros(len(points))
        for start, _, d2 in knn_chunks(x, x, 2):
            spacing[start:start + len(d2)] = np.sqrt(d2[:, -1].double().numpy())
    level = np.empty(len(points))
    labels = np.zeros(len(points), np.int64) if groups is None else np.asarray(groups)[nearest]
    for g in np.unique(labels):
        mine = labels == g
        read = mine & ~stray  # a group mostly of strays (a band of outliers) is read as all the others are
        read = read if stray[mine].mean() <= STRAY_GROUP and read.any() else ~stray if (~stray).any() else mine
        level[mine] = noise_level(off[read], max(floor, SPACING_FLOOR * float(np.median(spacing[read]))))
    kept = (off <= np.where(stray, STRAY_SIGMAS, sigmas) * level) & (overhang <= EDGE_SPACINGS)
    if not_surface is not None and np.any(not_surface):
        loose = np.asarray(not_surface, bool)
        kept[loose] = ~isolated(points, loose)[loose]
    return kept
