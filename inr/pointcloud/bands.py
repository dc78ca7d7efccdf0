"""Denoising a cloud whose point spacing varies widely, band by band of like spacing.

A terrestrial laser scan is mm apart at the station and dm apart tens of metres away, with about
the same range noise everywhere: near the station the noise is large against the spacing (what
the network trained on), far away it is a small fraction of it. The network runs at one voxel for
a cloud and spreads its output evenly; on such scans that left the points less accurate than they
came in (README, "Laser scans"). Here the cloud is split into bands of like spacing, and each band
is denoised by what suits the ratio of its noise to its spacing:

- each point's spacing: the distance to its nearest other point, the median over its
  BAND_NEIGHBOURS nearest (so that a band is made of whole patches, not speckle); bands are
  BAND_FACTOR wide, counted from the cloud's smallest spacing;
- each band's noise: the median distance its points move under MLS projection (`mls_project`,
  of the whole cloud), / 0.6745 (a Gaussian's sigma from the median of its absolute value);
- ratio >= NETWORK_RATIO: the network, run on the band with the points around it (within
  CONTEXT_SPACINGS of the band's spacing, thinned to one per cell of that spacing) as context;
  of its output, the points whose nearest input point is the band's;
- ratio >= KEEP_RATIO: the band's MLS projection;
- below: the band's points as scanned (the noise is under a fiftieth of the spacing; a smoother
  averaging over neighbours that far apart smooths over bumps and edges), except those that
  MLS moves by at most MOVE_LIMIT times the band's noise, which take its projection (on flat
  ground MLS removes the noise; where it would move a point farther, its quadric does not fit).

First the points that lie off the cloud's own MLS surface are left out (`keep.on_surface`, the
surface the points' MLS projections, read per spacing band), and the bands and projections are
made again without them: the routes that project or keep the points would otherwise carry a
scanner's stray returns into the output (ranges off by a multipath echo or a beam's edge: a
2 % share of them on the training site's terrestrial scan left 2.1 % of `denoise`'s points over
4 sigma off the surface, 11.8 mm off on average; with them left out 0.18 %, 1.76 mm; the same
scan without them 0.02-0.04 %, 0.72-0.73 mm, where 0.35 % of the points were left out, none
far off. Left out from the first bands and projections instead of made again: 0.42 %, 2.08 mm).

Each band's output has the band's count x `factor` points (`mls_fill`). The thresholds were
chosen on terrestrial scans of a site made of training meshes (2026-12-07, session 52; README,
"Laser scans"): the network beat MLS where the ratio was 0.5 and more, tied at ~0.3 and lost
twofold at 0.14; MLS moved points farther than the noise where it was under ~0.02. MOVE_LIMIT:
1.5, 2.5 and 4 scored within 0.006 of each other there, 2.5 better than keeping all (by
0.001-0.016 of the input's accuracy on the six scans); applied to the bands MLS takes whole
as well, it lost (0.272-0.422 against 0.253-0.359).
"""

from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np
import torch

from .keep import on_surface
from .knn import knn, knn_chunks
from .mls import mls_fill, mls_project

BAND_FACTOR, BAND_NEIGHBOURS = 2.0, 16
NETWORK_RATIO, KEEP_RATIO, MOVE_LIMIT = 0.3, 0.02, 2.5
CONTEXT_SPACINGS = 20.0
MIN_KEPT = BAND_NEIGHBOURS
"""Where fewer points than this lie on the surface, none is left out."""
SMOOTH_CHUNK = 1 << 18
"""Points whose neighbours' median spacing is taken at once."""
MIN_NETWORK_POINTS = 200
"""A band of fewer points than this is not given to the network (MLS or kept, by its ratio)."""
GAUSSIAN_MAD = 0.6745
"""The median of |x| for x ~ N(0, 1)."""


class ByBand(NamedTuple):
    points: np.ndarray  # the denoised cloud, float64 (about factor x N, 3)
    bands: List["Band"]  # finest first
    groups: np.ndarray  # the band each output point came from, as `spacing_bands` numbers them
    kept: np.ndarray  # (N,) bool: the input points not left out as off the surface


class Band(NamedTuple):
    points: int
    spacing: float  # the median distance to the nearest other point
    noise: float  # the sigma read from MLS's movement
    route: str  # 'network', 'mls' or 'kept' (its points that MLS moves little projected, see MOVE_LIMIT)
    output: int


def spacing_bands(points: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(each point's band, 0 for the finest spacing; each point's distance to its nearest other point)."""
    t = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
    k = min(BAND_NEIGHBOURS, len(points))
    # the neighbours in chunks (`knn_chunks`), kept as int32: a 10-million-point scan's at once took 1.8 GB
    idx = np.empty((len(points), k), np.int32 if len(points) < 2 ** 31 else np.int64)
    nearest = np.empty(len(points))
    for start, near, d2 in knn_chunks(t, t, k):
        idx[start:start + len(near)] = near.numpy()
        nearest[start:start + len(near)] = np.sqrt(d2[:, min(1, k - 1)].double().numpy())
    smooth = np.concatenate([np.median(nearest[idx[i:i + SMOOTH_CHUNK]], axis=1)  # in chunks: bounded memory
                             for i in range(0, len(points), SMOOTH_CHUNK)] or [np.zeros(0)])
    positive = smooth[smooth > 0]
    if len(positive) == 0:  # every point doubled: one band
        return np.zeros(len(points), dtype=np.int64), nearest
    finest = positive.min()
    band = np.floor(np.log(np.maximum(smooth, finest) / finest) / np.log(BAND_FACTOR) + 1e-9).astype(np.int64)
    return band, nearest


def _route(ratio: float, count: int) -> str:
    if ratio >= NETWORK_RATIO and count >= MIN_NETWORK_POINTS:
        return "network"
    return "mls" if ratio >= KEEP_RATIO else "kept"


def _with_context(points: np.ndarray, core: np.ndarray, spacing: float) -> np.ndarray:
    """The mask of the band's points and, as context, the others within CONTEXT_SPACINGS of them,
    thinned to one per cell of the band's spacing."""
    others = np.flatnonzero(~core)
    mask = core.copy()
    if len(others) == 0:
        return mask
    _, d2 = knn(torch.from_numpy(points[others]), torch.from_numpy(points[core]), 1)  # in chunks (`knn`)
    near = others[np.sqrt(d2[:, 0].double().numpy()) <= CONTEXT_SPACINGS * spacing]
    if len(near):
        cells = np.floor((points[near] - points.min(0)) / spacing).astype(np.int64)
        _, first = np.unique(cells, axis=0, return_index=True)
        mask[near[first]] = True
    return mask


def _nearest_is(queries: np.ndarray, points: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Whether each query's nearest point is one of `mask`'s, a chunk of queries at a time (`knn_chunks`):
    a band's network output can be several times the scan (35 million points for a 9.5-million-point
    scan's band of 5 million), and one search of them all held 5.8 GB."""
    keep = np.empty(len(queries), bool)
    for start, idx, _ in knn_chunks(torch.from_numpy(queries), torch.from_numpy(points), 1):
        keep[start:start + len(idx)] = mask[idx[:, 0].numpy()]
    return keep


Stages = Callable[[str, Callable[[], Dict[str, np.ndarray]]], Dict[str, np.ndarray]]
"""(a stage's name, what computes its arrays) -> those arrays: computed, or kept from a run that was
killed (`inr.tasks.stages.Stages`)."""


def compute_all(name: str, compute: Callable[[], Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """The `Stages` of a run that keeps nothing: every stage computed."""
    return compute()


def denoise_by_band(points: np.ndarray, network: Callable[[np.ndarray], np.ndarray], factor: float = 1.0,
                    seed: int = 0, stages: Stages = compute_all, follow: bool = False) -> ByBand:
    """The cloud denoised band by band (`ByBand`), the points off its surface left out first (see
    the module). network: a cloud (M, 3) float64 -> the network's points for it (float64). stages:
    each step's arrays go through it (the spacing bands, the MLS projection, the points kept, each
    band's output), so that a run killed part way can reuse those it finished. follow: each band's
    points follow its scan's density instead of spreading evenly (`mls_fill`'s like)."""
    x = np.ascontiguousarray(points, dtype=np.float64)
    band, nearest, projected = _spacing_and_projection(x, stages, "")
    kept = stages("surface", lambda: {"kept": on_surface(x, projected, band, spacing=nearest)})["kept"]
    if kept.sum() < MIN_KEPT:  # nothing left to denoise: the cloud as it came
        kept = np.ones(len(x), dtype=bool)
    if not kept.all():  # as many points out as asked of the whole cloud: the kept bands make up for those left out
        factor *= len(x) / int(kept.sum())
        x = x[kept]
        band, nearest, projected = _spacing_and_projection(x, stages, "-kept")
    moved = np.linalg.norm(x - projected, axis=1)
    outs, bands, labels = [], [], []
    for b in np.unique(band):
        core = band == b
        done = stages(f"band-{b}", lambda: _one_band(x, core, nearest, projected, moved, network, factor, seed, follow))
        outs.append(done["points"])
        labels.append(np.full(len(done["points"]), b, dtype=np.int64))
        count, spacing, noise, output = done["figures"].tolist()
        bands.append(Band(int(count), spacing, noise, str(done["route"]), int(output)))
    return ByBand(np.concatenate(outs), bands, np.concatenate(labels), kept)


def _spacing_and_projection(x: np.ndarray, stages: Stages, suffix: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each point's band, its distance to its nearest other point, its MLS projection), through stages."""
    spaced = stages("spacing" + suffix, lambda: dict(zip(("band", "nearest"), spacing_bands(x))))
    return spaced["band"], spaced["nearest"], stages("mls" + suffix, lambda: {"projected": mls_project(x)})["projected"]


def _one_band(x: np.ndarray, core: np.ndarray, nearest: np.ndarray, projected: np.ndarray, moved: np.ndarray,
              network: Callable[[np.ndarray], np.ndarray], factor: float, seed: int,
              follow: bool = False) -> Dict[str, np.ndarray]:
    """One band's output points, route and figures (count, spacing, noise, output count)."""
    count, want = int(core.sum()), max(1, int(round(factor * core.sum())))
    spacing, noise = float(np.median(nearest[core])), float(np.median(moved[core])) / GAUSSIAN_MAD
    route = _route(noise / spacing if spacing > 0 else np.inf, count)
    if route == "network":
        run = _with_context(x, core, spacing)
        pts = network(x[run])
        if len(pts):
            pts = pts[_nearest_is(pts, x, core)]
        if len(pts) < 2:  # the network kept nothing of this band: its projection instead
            route, pts = "mls", projected[core]
    elif route == "mls":
        pts = projected[core]
    else:
        little = moved[core] <= MOVE_LIMIT * noise
        pts = np.where(little[:, None], projected[core], x[core])
    out = mls_fill(pts, want, seed, like=x[core] if follow else None)
    return {"points": out, "route": np.array(route), "figures": np.array([count, spacing, noise, len(out)], np.float64)}


def describe(bands: List[Band]) -> str:
    """One line: how many points of how many bands each route took."""
    parts = []
    for route, label in (("network", "the network"), ("mls", "MLS projection"),
                         ("kept", f"kept as scanned (or projected where MLS moves them under {MOVE_LIMIT:g}x the noise)")):
        mine = [b for b in bands if b.route == route]
        if mine:
            lo, hi = min(b.spacing for b in mine), max(b.spacing for b in mine)
            spacing = f"{lo:.3g}" if len(mine) == 1 else f"{lo:.3g}-{hi:.3g}"
            parts.append(f"{label} on {sum(b.points for b in mine):,} points ({len(mine)} band{'s' * (len(mine) > 1)}, "
                         f"spacing {spacing})")
    return "by spacing band: " + "; ".join(parts)
