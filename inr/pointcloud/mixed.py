"""Mixed pixels of a laser scan (edge artifacts): returns from between two surfaces.

Where a scanner's beam falls partly on a near surface and partly on one behind it (at a
silhouette), the range it measures is a blend of the two: a point in the empty space between
them, off every surface, often metres from it. A scan of a stationary scanner (E57, PTX, or a
PCD with its viewpoint: `inr.data.pointclouds.read_scan`'s `stations`) holds them along every
depth edge; no smoother can put them right, as no surface is near them, and a few hundredths of
a percent of a scan's points can add a fifth to its mean distance from the surface.

A point on a surface continues that surface in two directions of the scan's grid; a mixed pixel
continues neither of the surfaces it lies between (along a silhouette its neighbours can be mixed
pixels like it: a line, one direction). Where the file stores each point's row and column (PTX,
E57 with rowIndex and columnIndex, an organized PCD: `Scan.cells`), a point's neighbours are the
8 cells around it and the points one step beyond are those two cells away, and the spacing
towards each neighbour is its angle over its steps in the grid (many scanners store rows finer
than columns: seen by directions alone, the 8 nearest of a point then all lie along its column,
and too few points are judged). The grid is used where it is the scanner's: for at least
GRID_AGREES of the scan's points the nearest direction is a neighbour in the grid and the
neighbours along its rows and columns lie at most GRID_STRETCH times as far (not so where a
writer numbered an unordered cloud's points). Otherwise, seen from its station, each point's
SUPPORT_NEIGHBOURS nearest directions are its neighbours in the scan's grid: those within
GRID_STEPS of the local angular step, the median angle to its LOCAL_STEP nearest (a scan need
not be stored as a grid, nor evenly: thinned or merged scans are not), and the point one step
beyond a neighbour is the one nearest the direction twice as far. A neighbour q supports the
point p in the direction from p to q when

- p and q lie at about the same range: they differ by at most SAME_RANGE line scales plus
  SAME_RANGE_SPACINGS times the point spacing there (range x local step); or
- p lies on the line through q and the point q2 one step beyond q (in the same direction, within
  BEYOND_STEPS): at most ON_LINE line scales plus ON_LINE_SPACINGS times that spacing plus
  ON_LINE_BEND times the shorter of the steps p-q and q-q2 (a curved surface bends away from
  the line, the more the longer the steps: ground seen at a grazing angle is sampled in rows
  metres apart; a mixed pixel's step to the surface in front of it is long, that surface's own
  step short), and q2 is at most EVEN times as far from q as p is, plus a spacing (the steps
  of a surface grow gradually; a line from a near surface to a far one, across an edge, would
  pass through the mixed pixels between them).

A point is a mixed pixel when no two of its supporting directions are at an angle (|cos| under
APART); on a stored grid whose columns lie THIN_ACROSS or more times as far apart as its rows (or
the reverse), a point supported only along the finer axis is not, unless it lies between a
near and a far surface (`_one_coarse_step_wide`): such a grid makes parts one coarse step wide
(poles, pipes) often. Only points where the scan is a grid are judged: at least JUDGED of their neighbours
have a point one step beyond them (on a grid nearly all have 8; points drawn at random from a
scan, 0-3: there the tests above mean little, and they are left as they are). The line scale
is the scan's own: the median distance from p to the line through q and q2, where q2 lies
within 2.5 spacings of q, over 0.6745 * sqrt(6) (the scatter of a range noise on three points;
it reads 0.65-0.85 of the true range noise), in each quarter of the scan's ranges (SCALE_BINS)
and interpolated between them (`_line_scale`; since session 54: a depth camera's noise grows
with the square of the depth, and a single scale took 0.2-0.3 % of two real depth
frames' points (PCL's test data) on their far walls), zeros (but for float32 rounding: FLAT)
left out (depth in quantized steps: three points on one step).

Chosen on simulated terrestrial scans of the training site (`scripts/bench_surface.py --only
mixed`: `training_site`, each beam 7 rays whose hits blend by 1 / range^2 where it straddles a
depth edge; two stations, range noise 2 and 5 mm, beams 0, 0.8 and 1.2 steps wide; the scans
thinned to one point per 2 cm and a random 30 % of them too; 2026-12-07, session 53; README,
"Mixed pixels"). There it took 74-91 % of the returns over 5 cm off every surface, and of a
clean scan 0.05-0.07 % of the points (far, curved silhouettes a few pixels across and pixel-
wide parts), which cost its Chamfer-L1 to the truth 0.2-0.4 %. The grid's neighbours were added
later (session 54) with the same settings: on the even grids they take what the directions
take, within a few points; on grids 3 times coarser in azimuth, where the directions judge
almost nothing, THIN_ACROSS and GAP_ACROSS were chosen on the same site (README, "Mixed
pixels"; docs/surfaces-history.md).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .bands import GAUSSIAN_MAD
from .knn import nearest

SUPPORT_NEIGHBOURS, LOCAL_STEP, GRID_STEPS, BEYOND_STEPS = 8, 4, 1.6, 0.5
SAME_RANGE, SAME_RANGE_SPACINGS = 4.0, 1.0
ON_LINE, ON_LINE_SPACINGS, ON_LINE_BEND, EVEN = 4.0, 0.2, 0.1, 2.0
APART = 0.8
SCALE_STEPS = 2.5
JUDGED = 6
MIN_POINTS = 100
"""Fewer points from a station than this are left as they are."""
CHUNK = 1 << 17
SCALE_SAMPLE = 500_000
SCALE_BINS = 4
FLAT = 1e-6
"""Line offsets under this share of the range are a quantized depth's zeros (float32 rounding: ~1e-7)."""
"""Points of a scan whose neighbours give its line scale (a random subset of larger scans)."""
GRID_AGREES, GRID_STRETCH, GRID_SAMPLE = 0.8, 10.0, 20000
THIN_ACROSS, GAP_ACROSS = 2.0, 10.0


def mixed_pixels(points: np.ndarray, stations: np.ndarray, cells: Optional[np.ndarray] = None) -> np.ndarray:
    """(N,) bool: the mixed pixels of a scan, points (N, 3) each seen from its station (N, 3) (one
    scan per distinct station). cells (N, 3) int, where the file stores its scans as grids: each
    point's scan, row and column (-1 in a scan stored without them); a scan's grid then gives its
    neighbours (module docstring)."""
    points = np.asarray(points, np.float64)
    stations = np.broadcast_to(np.asarray(stations, np.float64), points.shape)
    out = np.zeros(len(points), dtype=bool)
    if len(points) == 0:
        return out
    if cells is not None:
        cells = np.asarray(cells, np.int64)
    for idx in _scans(stations, None if cells is None else cells[:, 0]):
        if len(idx) >= MIN_POINTS:
            grid = None if cells is None or (cells[idx, 1:] < 0).any() else cells[idx, 1:]
            out[idx] = _one_station(points[idx], stations[idx[0]], grid)
    return out


def _scans(stations: np.ndarray, numbers: Optional[np.ndarray]) -> list:
    """The indices of each scan's points: one scan per distinct station (and scan number, where
    given). A file lists a scan's points together, so the distinct ones are read from where the
    station or number changes (no sort of every point)."""
    n = len(stations)
    change = (stations[1:] != stations[:-1]).any(1)
    if numbers is not None:
        change |= numbers[1:] != numbers[:-1]
    starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    if len(starts) == 1:
        return [np.arange(n)]
    key = stations[starts] if numbers is None else np.concatenate([stations[starts], numbers[starts, None]], 1)
    _, label = np.unique(key, axis=0, return_inverse=True)
    label = np.repeat(label.reshape(-1), np.diff(np.concatenate([starts, [n]])))
    return [np.flatnonzero(label == s) for s in range(int(label.max()) + 1)]


def _directional_neighbours(u: np.ndarray, whole, idx: np.ndarray):
    """(near, beyond, grid, past, spacing / range) of the points idx of a scan's unit directions u
    (N, 3) stored in any order: each one's SUPPORT_NEIGHBOURS nearest directions (whole:
    `_nearest_directions`), the direction nearest one step beyond each, whether a neighbour lies
    within GRID_STEPS of the local step, whether the beyond point lies within BEYOND_STEPS of
    where the step leads, and the local step (n, 1)."""
    near, angle = whole[0][idx], whole[1][idx]
    step = np.median(angle[:, :LOCAL_STEP], axis=1)  # the grid's step here: its direct neighbours' angle
    ahead = 2 * u[near] - u[idx, None, :]  # the direction one step past each neighbour
    ahead /= np.maximum(np.linalg.norm(ahead, axis=2, keepdims=True), 1e-300)
    b2, b = nearest(ahead.reshape(-1, 3), u, 1)
    beyond = b[:, 0].reshape(ahead.shape[:2])
    past = np.sqrt(b2[:, 0].astype(np.float64)).reshape(ahead.shape[:2]) <= BEYOND_STEPS * step[:, None]
    grid = angle <= GRID_STEPS * step[:, None]
    return near, beyond, grid, past & grid, step[:, None]


def _nearest_directions(u: np.ndarray):
    """(indices (N, k), angles (N, k)) of each direction's SUPPORT_NEIGHBOURS nearest others."""
    k = min(SUPPORT_NEIGHBOURS, len(u) - 1)
    d2, near = nearest(u, u, k + 1)
    return near[:, 1:], np.sqrt(d2[:, 1:].astype(np.float64))


class _GridLookup:
    """The points of a scan by their cells (N, 2) row and column (`_grid_neighbours`)."""

    OFFSETS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]
    STEPS = np.sqrt(np.array([dr * dr + dc * dc for dr, dc in OFFSETS], np.float64))

    def __init__(self, cells: np.ndarray):
        self.cells = cells
        self.width = int(cells[:, 1].max()) + 1
        key = cells[:, 0] * self.width + cells[:, 1]
        self.order = np.argsort(key, kind="stable")
        self.sorted_key = key[self.order]

    def find(self, idx: np.ndarray, dr: int, dc: int) -> np.ndarray:
        """The point in the cell (dr, dc) away from each of the points idx, -1 where none."""
        row, col = self.cells[idx, 0] + dr, self.cells[idx, 1] + dc
        want = row * self.width + col
        at = np.minimum(np.searchsorted(self.sorted_key, want), len(self.sorted_key) - 1)
        found = (self.sorted_key[at] == want) & (row >= 0) & (col >= 0) & (col < self.width)
        return np.where(found, self.order[at], -1)


def _grid_neighbours(u: np.ndarray, lookup: _GridLookup, idx: np.ndarray):
    """`_directional_neighbours` from the scan's grid: the 8 cells around each point and the cells
    one step beyond them, where the scan has a point (the point itself where not, flagged); the
    step of each neighbour is its angle over its steps in the grid (a scanner's rows and columns
    need not be as far apart)."""
    near = np.stack([lookup.find(idx, dr, dc) for dr, dc in lookup.OFFSETS], 1)
    beyond = np.stack([lookup.find(idx, 2 * dr, 2 * dc) for dr, dc in lookup.OFFSETS], 1)
    grid, past = near >= 0, (near >= 0) & (beyond >= 0)
    near, beyond = np.where(grid, near, idx[:, None]), np.where(past, beyond, idx[:, None])
    step = np.linalg.norm(u[near] - u[idx, None, :], axis=2) / lookup.STEPS
    return near, beyond, grid, past, step


def _grid_holds(u: np.ndarray, lookup: _GridLookup) -> bool:
    """Whether a scan's stored grid is its scanner's: at least GRID_AGREES of (a sample of) its points
    have their nearest direction among their 8 neighbours in the grid (on a scanner's grid, the
    next point along its denser axis; not so where a writer numbered unordered points), and their
    neighbours along rows and along columns at most GRID_STRETCH times as far (a running count
    split into rows of a fixed length, along a scan line stored in order, passes the first test
    only)."""
    sample = np.random.default_rng(0).permutation(len(u))[:GRID_SAMPLE]
    near, _, grid, _, _ = _grid_neighbours(u, lookup, sample)
    d2, nn = nearest(u[sample], u, 2)
    agree = ((near == nn[:, 1:2]) & grid).any(1)
    axial = [1, 3, 4, 6]  # OFFSETS (-1, 0), (0, -1), (0, 1), (1, 0)
    angle = np.linalg.norm(u[near[:, axial]] - u[sample, None, :], axis=2)
    close = ~grid[:, axial] | (angle <= GRID_STRETCH * np.sqrt(d2[:, 1:2].astype(np.float64)))
    return bool((agree & close.all(1)).mean() >= GRID_AGREES)


def _geometry(points: np.ndarray, idx: np.ndarray, near: np.ndarray, beyond: np.ndarray):
    """(line_off, seg, hop) (n, k) of the points idx: each one's distance to the line through its
    neighbour q and the point q2 beyond, |q - q2|, and |p - q|."""
    q, q2 = points[near], points[beyond]
    line = q - q2
    seg = np.linalg.norm(line, axis=2)
    line /= np.maximum(seg, 1e-300)[..., None]
    rel = points[idx, None, :] - q
    hop = np.linalg.norm(rel, axis=2)
    return np.linalg.norm(rel - np.sum(rel * line, 2, keepdims=True) * line, axis=2), seg, hop


def _one_station(points: np.ndarray, station: np.ndarray, cells: Optional[np.ndarray] = None) -> np.ndarray:
    """The mixed pixels of one scan, CHUNK points at a time (the line scale from SCALE_SAMPLE of them)."""
    off = points - station
    r = np.linalg.norm(off, axis=1)
    seen = r > 0
    u = np.where(seen[:, None], off / np.where(seen, r, 1.0)[:, None], 0.0)
    lookup = None if cells is None else _GridLookup(cells)
    by_grid = lookup is not None and _grid_holds(u, lookup)
    if by_grid:
        def neighbours(idx):
            return _grid_neighbours(u, lookup, idx)
    else:
        whole = _nearest_directions(u)

        def neighbours(idx):
            return _directional_neighbours(u, whole, idx)

    n = len(points)
    sample = np.arange(n) if n <= SCALE_SAMPLE else np.sort(np.random.default_rng(0).choice(n, SCALE_SAMPLE, replace=False))
    kept, offs, at = {}, [], []
    for lo in range(0, len(sample), CHUNK):
        idx = sample[lo:lo + CHUNK]
        found = neighbours(idx)
        near, beyond, grid, past, step = found
        line_off, seg, hop = _geometry(points, idx, near, beyond)
        short = past & (seg <= SCALE_STEPS * step * r[idx, None])
        offs.append(line_off[short])
        at.append(np.broadcast_to(r[idx, None], short.shape)[short])
        if n <= SCALE_SAMPLE:
            kept[lo] = found + (line_off, seg, hop)
    scale_at = _line_scale(np.concatenate(offs), np.concatenate(at))
    mixed = np.zeros(n, dtype=bool)
    for lo in range(0, n, CHUNK):
        idx = np.arange(lo, min(lo + CHUNK, n))
        if lo in kept:
            near, beyond, grid, past, step, line_off, seg, hop = kept.pop(lo)
        else:
            near, beyond, grid, past, step = neighbours(idx)
            line_off, seg, hop = _geometry(points, idx, near, beyond)
        ri = r[idx, None]
        spacing = step * ri
        scale = scale_at(ri)
        same = grid & (np.abs(r[near] - ri) <= SAME_RANGE * scale + SAME_RANGE_SPACINGS * spacing)
        on_line = past & (seg <= EVEN * (hop + spacing)) & (line_off <= ON_LINE * scale + ON_LINE_SPACINGS * spacing
                                                             + ON_LINE_BEND * np.minimum(seg, hop))
        support = same | on_line
        v = u[near] - u[idx, None, :]
        v /= np.maximum(np.linalg.norm(v, axis=2, keepdims=True), 1e-300)
        cos = np.abs(v @ v.transpose(0, 2, 1))
        alone = ~(support[:, :, None] & support[:, None, :] & (cos < APART)).any((1, 2))
        if by_grid:
            alone &= ~_one_coarse_step_wide(support, grid, step, near, r, idx)
        judged = seen[idx] & (np.where(grid, step, np.inf).min(1) > 0) & (past.sum(1) >= JUDGED)
        mixed[idx] = alone & judged
    return mixed


def _line_scale(offs: np.ndarray, ranges: np.ndarray):
    """The line scale as a function of range: offs, the distances from points to the lines through
    their next two points (at those points' ranges). One median (/ GAUSSIAN_MAD * sqrt(6)) for
    the scan with SCALE_BINS = 1; else the median of each of SCALE_BINS range quantiles,
    interpolated between their median ranges, and beyond the farthest along the last step where
    it rises (a depth camera's noise grows with the square of the range; a laser scanner's hardly
    at all)."""
    to_scale = 1.0 / (GAUSSIAN_MAD * np.sqrt(6))
    moved = offs > FLAT * ranges  # zeros but for rounding: depth quantized in steps (a depth camera's), three points level
    offs, ranges = offs[moved], ranges[moved]
    if len(offs) == 0:
        return lambda r: np.zeros_like(r)
    if SCALE_BINS == 1 or len(offs) < 100 * SCALE_BINS:
        whole = float(np.median(offs)) * to_scale
        return lambda r: np.full_like(r, whole)
    edges = np.quantile(ranges, np.linspace(0, 1, SCALE_BINS + 1))
    which = np.clip(np.searchsorted(edges, ranges, side="right") - 1, 0, SCALE_BINS - 1)
    centre = np.array([np.median(ranges[which == b]) for b in range(SCALE_BINS)])
    level = np.array([np.median(offs[which == b]) for b in range(SCALE_BINS)]) * to_scale
    slope = (level[-1] - level[-2]) / max(centre[-1] - centre[-2], 1e-300)

    def scale(r):  # beyond the farthest bin's median range, along its last segment
        return np.interp(r, centre, level) + np.maximum(slope, 0.0) * np.maximum(r - centre[-1], 0.0)

    return scale


def _one_coarse_step_wide(support: np.ndarray, grid: np.ndarray, step: np.ndarray, near: np.ndarray,
                          r: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(n,) bool: of the points idx (their neighbours' arrays (n, 8); r: all ranges), those supported
    only along the finer axis of an uneven grid (by the points in the next rows of their column,
    where columns lie at least THIN_ACROSS times as far apart as rows, or the reverse) that are no
    blend across a depth edge: nearer than their neighbours across
    (a pole, a pipe), or within GAP_ACROSS spacings of their range (a narrow face seen at a slant).
    Such a grid makes parts one coarse step wide often; a line of blends along an edge (as an
    upright edge gives on a levelled scanner's columns) lies between a near and a far surface.
    `_grid_neighbours`' order."""
    along_column, along_row, diagonal = [1, 6], [3, 4], [0, 2, 5, 7]

    def mean_step(at):
        known = grid[:, at]
        return np.where(known, step[:, at], 0.0).sum(1) / np.maximum(known.sum(1), 1)

    def no_edge_across(across, spacing):
        known = grid[:, across]
        dr = np.where(known, r[near[:, across]] - r[idx, None], 0.0)
        front = (known & (dr > 0)).sum(1) == known.sum(1)
        return front | (np.abs(dr).max(1) <= GAP_ACROSS * spacing)

    row_step, column_step = mean_step(along_column), mean_step(along_row)
    only_column = support[:, along_column].any(1) & ~support[:, along_row + diagonal].any(1)
    only_row = support[:, along_row].any(1) & ~support[:, along_column + diagonal].any(1)
    return ((only_column & (column_step >= THIN_ACROSS * row_step) & no_edge_across(along_row, column_step * r[idx]))
            | (only_row & (row_step >= THIN_ACROSS * column_step) & no_edge_across(along_column, row_step * r[idx])))
