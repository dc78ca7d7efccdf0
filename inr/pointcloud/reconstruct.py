"""The reconstruction model end to end: normalisation, voxel features, neighbours, losses.

Clouds are centred on their bounding box and measured in voxels; stage 2 works in voxel units.
In training the voxel is the bounding-box diagonal / `voxels_per_diagonal`. At inference that
base voxel holds unless it puts more input points per occupied voxel than training ever showed
(a dense scan, or a long object; the model records that density): then it shrinks until the
density is back in the trained range. Then the voxel adapts to the noise: the noise is read
from a first pass (`noise_level`; at the base voxel for weights calibrated so, at 1.5 of it for
older ones; on a random share of a dense cloud's points, `reading_share`), and the cloud is then
reconstructed once at the voxel the noise asks for (the weights' `voxel_rule`, or their
`share_rule` for a cloud read on a share: finer for less noise); where that finer pass leaves
gaps that the first pass covers, a pass at the base voxel (the first pass itself when that ran
at the base voxel on the whole cloud) fills them (`fill_gaps`). A dense cloud whose density cap
shrank the base voxel and whose noise reads high runs once instead, on a share of its points, at
the voxel its noise read at the un-capped base voxel asks for (the share route, `DENSE_FLOOR`).
Large grids are processed in tiles with overlapping margins (`reconstruct`).
"""

from __future__ import annotations

import sys
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import nn

from ..digest import array_digest
from .knn import KnnSearch, knn
from .network import PointNet, ReconstructionConfig, VoxelNet, candidate_sites
from .sparse_conv import SparseTensor
from .strays import extent
from .voxel import pack_keys, unpack_keys

DEFAULT_MAX_DENSITY = 4.0
"""Input points per occupied voxel allowed at inference when the model has not recorded the
densest input of its training (`Reconstructor.max_density`)."""

TILE, MARGIN = 64, 16
"""Tile side and overlap margin in voxels. A tile's network sees its points up to MARGIN voxels
beyond its own block and keeps only the voxels inside the block, so every voxel is decided
once, by the tile that sees it with the most context."""


VOXEL_RULE, SHARE_RULE = ((0.2, 0.5), (0.58, 0.75), (0.88, 1.0)), ((0.46, 0.5), (0.76, 0.75), (1.06, 1.0))
"""(noise in base voxels, voxel scale) knots: the voxel is the base voxel times the scale,
interpolated linearly between the knots and held at the end ones. The rule belongs to a network
(how much noise it removes per voxel) and to where its noise is read (`NOISE_VOXEL`,
`NOISE_DENSITY`), so weights carry all of them (`Reconstructor.voxel_rule`, `share_rule`,
`noise_voxel`, `noise_density`), fitted by `scripts/calibrate_voxel.py --write` on the training
generator's shapes and the training meshes, never on held-out meshes: the finest voxel scores
best while the noise stays within about what training showed per voxel; beyond, the base voxel
does. VOXEL_RULE serves clouds whose noise was read on all their points, SHARE_RULE the dense
ones read on a share (`reading_share`): the same noise reads differently on a share, and one rule
for both lost on each. Fitted on 84 records of each kind (knots at least 0.3 apart,
`calibrate_voxel.MIN_KNOT_GAP`) and scored on the shapes left out (4 folds by shape, 10 shapes,
5 draws; mean output/input Chamfer-L1 at the rule's voxel): 0.494 with two rules against 0.505
with one (whole-read records 0.492 against 0.499, share-read 0.497 against 0.512). These knots,
the shipped network's, serve new trainings until they are calibrated."""

LEGACY_VOXEL_RULE, LEGACY_NOISE_VOXEL, LEGACY_NOISE_DENSITY = ((0.36, 0.5), (0.78, 0.75), (0.88, 1.0)), 1.5, float("inf")
"""For weights from before these were stored: the rule of the network shipped before weights
carried a rule, the reading voxel of all weights before they carried one, and the whole cloud
read (no thinning) by all weights before they carried a reading density."""

NOISE_QUERIES = 20_000
"""At most about this many input points (every k-th) measure the noise."""

NOISE_VOXEL, NOISE_NEIGHBOURS, NOISE_DENSITY = 1.0, 64, 2.0
"""The noise is read against the network's output at NOISE_VOXEL base voxels (new weights; each
weights file carries its own, `Reconstructor.noise_voxel`), from planes fitted to
NOISE_NEIGHBOURS output points. With 16 neighbours the base-voxel reading saturated (σ of 0.015
and 0.02 of the diagonal read alike): there the output follows part of the noise; 64 neighbours
and 1.5 base voxels read rising through σ = 0.025 on the generator's shapes. Read at the base
voxel the noise reads low at 2 % (0.55-0.95 of it) but ranks the clouds better for the rule:
fitted to each reading on 112 generator records and 48 training-mesh records (6 meshes, σ 0.25-2 %,
5,000 and 50,000 points), the mean output/input Chamfer-L1 at the rule's voxel was, generator /
meshes, 0.436 / 0.625 read at the base voxel against 0.441 / 0.669 at 1.5 (the best tried voxel
per record: 0.586 on the meshes). And the first pass then is the base-voxel pass: a cloud the
rule leaves at the base voxel costs one pass, not two, and gap filling needs no third.

A cloud denser than NOISE_DENSITY points per occupied base voxel is read on a random share of its
points that brings it to that many per voxel of the whole cloud (`reading_share`; new weights, each
file carries its own, `Reconstructor.noise_density`). Dense clouds get a voxel shrunk by the
density cap, which can put their noise at or past a voxel; there, with 8 points per occupied
voxel, the output follows the noise and the reading collapsed: bull (a training mesh) at 1 %,
300,000 points, σ 1.08 base voxels, read 0.35 σ whole, 0.75 σ on a quarter of its points and 0.81
σ on an eighth (5,000 points at 1 %: 1.0-1.1 σ; turbine at σ = 0 read 0.20-0.24 base voxels either
way). 2 per voxel is about where the 5,000-point clouds that most calibration records hold lie
(1.9 on bull), so those are read whole."""


DENSE_FLOOR, DENSE_LOW, DENSE_NOISE, DENSE_DENSITY, DENSE_THIN, DENSE_AGREE = 0.35, 0.2, 0.9, 2.0, 0.5, 0.62
"""Dense, noisy clouds (`Reconstructor._readings`): the share route. The density cap shrinks a
dense scan's voxel and so puts its noise at a voxel or more of it, where the network (trained on
up to about a voxel) follows part of the noise, and where the noise read collapses (bull, a
training mesh, 1,000,000 points at σ = 1 % of the diagonal: read 0.15 σ, and the rule then chose
an even finer voxel: denoise / input Chamfer-L1 1.17, worse than the input). Read in the
un-capped frame (diagonal / 56, where training read it) on a share of 2 points per occupied voxel,
the noise reads 0.92-1.08 σ at σ = 1-1.5 % (bull, pig, cactus at 300,000 and 1,000,000 points)
but 1.1-2.0 σ at 0.25-0.5 %: below about 0.3 voxels that reading sits on its floor (the network's
own roughness), and the capped reading is the one that holds (0.97-1.07 σ there). So a capped
cloud reading at least DENSE_FLOOR un-capped voxels un-capped, or at least DENSE_LOW un-capped
voxels capped, runs once, on a random share of DENSE_DENSITY points per occupied voxel (the cloud
thinned, not the voxel shrunk), at the voxel that puts the un-capped reading at DENSE_NOISE
voxels (at most the un-capped voxel), given that reading; else the capped voxel and its rule hold.
Chosen on those training meshes (denoise / input Chamfer-L1 after `mls_fill` to the input's
count; share route / capped route as shipped before): 300,000 points at σ = 0.5 / 1 / 1.5 %:
bull 0.445 / 0.411 / 0.439 against 0.511 / 0.710 / 1.014, pig 0.365 / 0.348 / 0.379 against
0.446 / 0.723 / 0.842, cactus 0.355 / 0.323 / 0.321 against 0.513 / 0.721 / 0.999; at 0.25 %
(all three stay capped) the share route would have scored 0.546 / 0.420 / 0.416 against 0.442 /
0.430 / 0.403. 1,000,000 points at 1 / 1.5 %: bull 0.412 / 0.475, pig 0.341 / 0.403. 50,000
points (capped to 0.65-1.0 of the un-capped voxel), 4 meshes at 0.25 / 0.5 / 1 %: both routes
within 0.03 of each other on all 12. Noise at 0.8 voxels against 0.9: a tie on the 11 noisy
clouds (mean 0.391 each), 0.9 better at 0.5 %; 4 points per voxel against 2 (at 0.8 voxels): worse on 5 of 7, by up to 0.10
(the one-off scripts: branch candidate-lvlbr, candidate/scripts/s34/).

Thin parts read as noise too: where the un-capped voxel misses a plate's two sides, its one sheet
between them lies half the plate's thickness from each, and the un-capped reading rises with no
noise at all (turbine and rotor, training meshes of thin plates, clean: 0.39-0.43 un-capped
voxels, over DENSE_FLOOR). On the share route such clean scans came out much worse than on the
capped one (denoise / input Chamfer-L1, 150,000 / 300,000 points: turbine 1.385 / 1.593 against
0.955 / 0.961, rotor 1.441 / 1.690 against 0.996 / 0.975; at σ = 0.25 %: turbine 0.720 / 0.715
against 0.532 / 0.459). So an un-capped reading under DENSE_THIN un-capped voxels is read again
at the share route's own voxel, which resolves such plates, and the share route runs only where
that reads at least DENSE_AGREE of it. Readings (the second over the first, on the training
meshes, 50,000-1,000,000 points): 0.67-0.91 on 35 clouds with σ = 0.5-1.5 % (bull, pig, cactus,
bear, dino, elephant, hand, head, horizons, knot1, ChineseDragon, pinion, couplingdown); 0.12-0.57 on
turbine and rotor at σ = 0-0.5 %; 0.06-0.56 on other meshes' clouds at σ = 0-0.25 %, whose share-route
gains were small (ChineseDragon, anchor, bull, pinion at 50,000 points: 0.005-0.039; rotor
at 0.25 %: 0.088, lost now). At σ = 2-2.5 % the second reading falls too (0.23-0.54: the noise is
a voxel or more at the share's voxel), but there the un-capped one reads 0.53-0.72, and plates read
at most 0.49 (turbine at 0.5 %), hence DENSE_THIN (branch candidate-lvlbr, candidate/scripts/s35/)."""


FINER_SCALES, FINER_NOISE, FINER_OWN = (0.5, 0.35), 0.5, 0.6
"""Finer than the rule, for dense clouds (`Reconstructor._finer`). The base pass's reading holds
the network's own error at the base voxel and, on thin plates it merges into one sheet, their
thickness: blade (a training mesh, a sheet 0.5 % of its diagonal thick), 50,000 clean points, read
2.8e-3 of the diagonal, and the rule's voxel (scale 0.63) and that level as the network's input made
it 2.05 times the input's Chamfer-L1. Read again at the rule's voxel the noise reads nearer the
truth (bull, 0.25 % noise: 3.8e-3 at the base voxel, 2.6e-3 at scale 0.5), and where it reads at
most FINER_NOISE of a finer voxel, that voxel holds it too (the rule's scales stopped at 0.5, where
it read 0.4 of the voxel). So a cloud read on a share (denser than `NOISE_DENSITY`) that the rule
runs finer than the base voxel is read at that voxel, which gives the network its level, then at
each finer scale of FINER_SCALES while the reading there stays within FINER_NOISE voxels.
Chosen on 6 training meshes (blade, turbine, rotor, bull, pig, cheese; 50,000 points, σ = 0,
0.25, 0.5 % of the diagonal; denoise / input Chamfer-L1 after `mls_fill`): the level read at the
rule's voxel instead of the base one: blade 0.25 % 0.811 → 0.668, rotor 0.992 → 0.915 (0.5 %: 0.803 →
0.749), the others within 0.016; finer scales: clean 0.91-0.94 at 0.35 against 0.97-2.05 at the
rule's, rotor 0.25 % 0.735; a reading over 0.5 voxels at the next scale marked where it stopped
paying (turbine and rotor at 0.5 %; blade at 0.25 % one step later). Scale 0.25 gained 0.01-0.03
more on clean clouds at twice the time, and lost on cheese (0.46 voxels there): not kept. Checked on
9 other training meshes (hand, elephant, dino, pinion, couplingdown, horizons, knot1, anchor,
cactus), 50,000 points: clean 0.904-0.992 → 0.894-0.923 (all 9 better), 0.25 % no worse on any (by
at most 0.001), up to 0.036 better; 0.5 % (4 of them capped) within 0.003. It costs up to two more
passes (50,000 points: 7-11 s → 20-40 s). Not for sparse clouds read whole: at 5,000 points the
level read at the rule's voxel lost on blade, turbine and pinion at 2 % (by 0.02-0.09) for a few
gains at 1 % (scripts: branch candidate-lvlbr, candidate/scripts/s36/).

FINER_OWN: on denser clouds the reading at the rule's voxel falls short of the noise (the output
follows part of it) and the network, given that lower level, keeps more noise. Training meshes at
σ = 0.25 %, the level read at the rule's voxel (in its voxels) and denoise / input Chamfer-L1 given
it against the base pass's level: 50,000 points 0.32-0.57 per voxel, better or tied on all 8
clouds (blade 0.57: 0.668 against 0.811); 300,000 points 0.54 / 0.67 / 0.74 (rotor, pig, bull):
0.601 / 0.506 / 0.514 against 0.597 / 0.503 / 0.505; 1,000,000 points 0.69 / 0.72 (bull, pig):
0.630 / 0.599 against 0.570 / 0.546. So it replaces the base level only up to FINER_OWN of its voxel
(branch candidate-lvlbr, candidate/scripts/s37/)."""


READ_POINTS, READ_SHARE, READ_EDGE = 30_000, 0.1, 2
"""The finer step's readings (`_finer`) of a cloud whose reading share holds more than twice
max(READ_POINTS, READ_SHARE of its points) run the network on random tiles (a fixed seed) of its
grid holding about that many, and read the noise from their points at least READ_EDGE voxels
inside them (`_sampled_tiles`). The reading at the rule's voxel of a 1,000,000-point cloud
(training meshes bull, pig; σ = 0.25 %) ran 68-87 s on the whole share; on random tiles holding
10 % of its points it read within 0.04-0.06 of the whole share's reading (20 draws; 25 %: within
0.02-0.03), at 300,000 points 10 % within 0.02. At 100,000 points (5 training meshes, σ = 0 and
0.25 %, the readings at the rule's voxel and scales 0.5 and 0.35), tiles holding 30,000 points read
within 0.003-0.031 of the whole share on 21 of 22 readings (20 draws; blade, clean, at 0.5: 0.17
against 0.12, far under the gates); as shipped before (100,000 points, so clouds of 100,000 read whole)
against these: the same scale chosen on all 10 clouds, denoise / input within 0.003, 24-33 s
against 30-43 s clean and 13-20 s against 21-39 s at 0.25 % (branch candidate-lvlbr,
candidate/scripts/s38/)."""


FILL_UNEXPLAINED, FILL_REACH, FILL_ATTACH, FILL_SUPPORT = 1.0, 1.5, 2.0, 2
"""Gap filling after a pass finer than the base voxel (distances in base voxels), from the points
of a coarser pass (the first pass, that read the noise). Input points farther than
FILL_UNEXPLAINED from the fine output are unexplained. The coarser pass's points farther than
FILL_REACH from the fine output and within FILL_REACH of an unexplained point are candidates;
candidates chained by links of FILL_REACH form patches. A patch joins the output when one of its
points lies within FILL_ATTACH of the fine output (a gap continues the surface) and at least
FILL_SUPPORT unexplained points lie nearest it (an outlier alone is unexplained too). The first
pass (run anyway, to read the noise) finds the gaps; the base-voxel pass's points fill them (the
first pass's own where it ran at the base voxel; for weights that read the noise at 1.5 base
voxels, a base pass runs then). A first pass on a share of a dense cloud finds none: a base
pass runs and both finds and fills them. Why: a fine voxel holds few points, and where a scan is sparse
(surfaces the rays graze, far from the scanner) the network drops them as noise; on simulated
range scans of training meshes whole regions went missing at half the base voxel. Chosen (with
the noise read at 1.5 base voxels) on 10 training meshes' range scans and 5 %-outlier scans
(mean `reconstruct` ratio, range scans / outliers): no filling 0.777 / 0.491; from the coarse
pass with one supporting point and no patch test 0.713 / 0.510, with the patch test 0.717 /
0.492, and 2 supporting points 0.719 / 0.492 (3: 0.722, 5: 0.729 on the scans); from the
base-voxel pass with the same rule 0.728 / 0.491 (the coarse pass's blobs around outliers near the
surface are not in it)."""


def fill_gaps(fine: torch.Tensor, coarse: torch.Tensor, noisy: torch.Tensor, voxel: float) -> torch.Tensor:
    """(C,) bool: which of a coarser pass's points (C, 3) fill a gap of the fine output (F, 3)
    that input points (N, 3) show (FILL_UNEXPLAINED, FILL_REACH, FILL_ATTACH, FILL_SUPPORT;
    `voxel`: the base voxel side)."""
    out = torch.zeros(len(coarse), dtype=torch.bool, device=coarse.device)
    if len(coarse) == 0:
        return out
    if len(fine) == 0:
        return ~out
    to_fine_of = KnnSearch(fine, 1)  # built once for both searches (the fine output: 35M points on a 10M-point scan)
    unexplained = noisy[to_fine_of(noisy)[1][:, 0] > (FILL_UNEXPLAINED * voxel) ** 2]
    if len(unexplained) == 0:
        return out
    reach2 = (FILL_REACH * voxel) ** 2
    to_fine = to_fine_of(coarse)[1][:, 0]
    rows = ((to_fine > reach2) & (knn(coarse, unexplained, 1)[1][:, 0] < reach2)).nonzero()[:, 0]
    if len(rows) == 0:
        return out
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pairs = cKDTree(coarse[rows].detach().cpu().double().numpy()).query_pairs(FILL_REACH * voxel, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(rows), len(rows)))
    patch = torch.from_numpy(connected_components(graph, directed=False)[1]).to(coarse.device)
    # a patch's support: the unexplained points whose nearest candidate lies in it, within reach
    idx, d2 = knn(unexplained, coarse[rows], 1)
    support = torch.bincount(patch[idx[d2[:, 0] < reach2, 0]], minlength=int(patch.max()) + 1)
    attached = torch.isin(patch, patch[to_fine[rows] < (FILL_ATTACH * voxel) ** 2])
    out[rows[attached & (support[patch] >= FILL_SUPPORT)]] = True
    return out


def reading_share(points: torch.Tensor, voxel: float, cap: float) -> torch.Tensor:
    """The points the noise is read on: `points` itself when it holds at most `cap` points per
    occupied voxel of side `voxel`, else a random share (a fixed seed: the same cloud reads the same)
    of cap times its occupied voxels, on points' device."""
    occupied = occupied_voxels(points, voxel)
    if len(points) <= cap * occupied:
        return points
    # drawn on the CPU (the seeded generator's device) whatever the default device, then moved
    keep = torch.randperm(len(points), generator=torch.Generator().manual_seed(0), device="cpu")[: int(cap * occupied)]
    return points[keep.to(points.device)]


def voxel_scale(noise_voxels: float, rule=VOXEL_RULE) -> float:
    """The voxel scale for a cloud of this noise (in base voxels; NaN -> 1) under `rule`'s knots."""
    if noise_voxels != noise_voxels:
        return 1.0
    return float(np.interp(noise_voxels, [x for x, _ in rule], [y for _, y in rule]))


class Frame(NamedTuple):
    centre: torch.Tensor
    voxel: float
    """Voxel side in world units."""
    uncapped: Optional[float] = None
    """The base voxel before the density cap shrank it (`make_frame`); None where none did."""


class Reading(NamedTuple):
    """What `Reconstructor._readings` read of a cloud's noise."""
    first: Optional[torch.Tensor]
    """The first pass's points (`_read_noise`; None where it did not run)."""
    level: float
    """The noise that pass read, in the frame's voxels (NaN where it did not run or found no surface)."""
    whole: bool
    """Whether that pass read the whole cloud (not a share of it)."""
    share_voxel: Optional[float] = None
    """The voxel of the share route for a dense, noisy cloud (`DENSE_FLOOR`), world units; None: the frame's rule."""
    share_level: float = float("nan")
    """The noise read in the un-capped frame, world units (NaN where not read)."""


class Plan(NamedTuple):
    """What `Reconstructor.reconstruct` runs (`Reconstructor._plan`)."""
    cloud: torch.Tensor
    """The points the network reads: the cloud, or on the share route a share of it."""
    base: float
    """The base voxel, world units: the frame's, or the share route's voxel."""
    scale: float
    """The pass's voxel over `base`."""
    given: Optional[float]
    """The noise level the network is given, world units (None: none)."""
    first: Optional[torch.Tensor]
    """The first pass's points (None where none ran)."""
    whole: bool
    """Whether the first pass read the whole cloud."""
    level: float
    """The noise read, in the frame's voxels (NaN where none was read)."""


def occupied_voxels(points: torch.Tensor, voxel: float) -> int:
    """How many voxels of side `voxel` hold at least one of the points."""
    ijk = torch.floor((points - points.min(0).values) / voxel).long()
    return len(torch.unique(pack_keys(ijk)))


def density(points: torch.Tensor, voxel: float) -> float:
    """Mean number of points per occupied voxel of side `voxel`."""
    return len(points) / occupied_voxels(points, voxel)


STRAY_REACH = 10_000
"""Points farther than this many base voxels from the box's centre are strays by any measure
(178 diagonals at 56 voxels per diagonal) and are left out of the network's input: they could
not be voxelized (packed keys hold +-2^15 voxels at half the base voxel). Nearer strays stay in
the input, where the network may keep them if they form a surface of their own."""


def make_frame(points: torch.Tensor, voxels_per_diagonal: float, max_density: Optional[float] = None,
               box: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> Frame:
    """The voxel is diagonal / voxels_per_diagonal (the diagonal of `extent`: the bounding box
    less far strays), or smaller where max_density asks for it (bisection on a
    log scale: density grows with the voxel). box: `extent(points)` when the caller has it."""
    lo, hi = extent(points) if box is None else box
    voxel = float((hi - lo).norm()) / voxels_per_diagonal
    if max_density is not None and density(points, voxel) > max_density:
        small, big = voxel / 256, voxel
        for _ in range(16):
            mid = (small * big) ** 0.5
            small, big = (mid, big) if density(points, mid) <= max_density else (small, mid)
        return Frame((lo + hi) / 2, small, voxel)
    return Frame((lo + hi) / 2, voxel)


def plane_residuals(queries: torch.Tensor, surface: torch.Tensor, k: int = 16) -> torch.Tensor:
    """Distance of each query point (Q, 3) to the plane fitted (least squares, PCA) to its k
    nearest points of `surface` (M, 3): (Q,) on the queries' device."""
    idx, _ = knn(queries, surface, k)
    nb = surface[idx].double()
    centre = nb.mean(1)
    rel = nb - centre[:, None]
    _, vectors = torch.linalg.eigh(rel.transpose(1, 2) @ rel)  # ascending: column 0 is the normal
    return ((queries.double() - centre) * vectors[:, :, 0]).sum(-1).abs().to(queries.dtype)


def plane_sigma(points: torch.Tensor, surface: torch.Tensor, k: int) -> float:
    """The Gaussian sigma of points' offsets from a surface: the median distance of (at most about
    NOISE_QUERIES of) the points to the planes of their k nearest surface points (`plane_residuals`),
    / 0.6745 (a Gaussian's sigma from the median of its absolute value)."""
    queries = points[:: max(1, len(points) // NOISE_QUERIES)]  # a median needs no more
    return float(plane_residuals(queries, surface, k).median()) / 0.6745


def to_voxel_units(points: torch.Tensor, frame: Frame) -> torch.Tensor:
    """World points -> coordinates in voxels (voxel (i, j, k) spans [i, i+1) x ...)."""
    return (points - frame.centre) / frame.voxel


MOMENT_PAIRS = ([0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2])
"""Coordinate pairs of the covariance features: xx, yy, zz, xy, xz, yz."""


def candidate_input(u: torch.Tensor, moments: bool = False, noise_input: bool = False,
                    noise: Optional[float] = None) -> SparseTensor:
    """Candidate voxels (input voxels and their neighbours) of points u (N, 3) in voxel units,
    with features [log(1 + count), mean offset of the points from the centre (3), is_input];
    with `moments`, the covariance of the voxel's points about their mean (xx, yy, zz, xy, xz,
    yz; x4, so that points spread evenly over the voxel give 1/3 on the diagonal); with
    `noise_input`, on every candidate, the cloud's `noise` in voxels and 1, or 0 and 0 when it
    is not given (None)."""
    ijk = torch.floor(u).long()
    dev = u.device
    zeros = torch.zeros(len(u), dtype=torch.long, device=dev)
    in_keys, inverse, counts = torch.unique(pack_keys(ijk, zeros), return_inverse=True, return_counts=True)
    rel = u - ijk.float() - 0.5
    n = counts[:, None].float()
    mean = torch.zeros(len(in_keys), 3, device=dev).index_add_(0, inverse, rel) / n
    in_coords = torch.empty(len(in_keys), 3, dtype=torch.long, device=dev)
    in_coords[inverse] = ijk
    coords, batch, is_input = candidate_sites(in_coords, torch.zeros(len(in_keys), dtype=torch.long, device=dev))
    keys = pack_keys(coords, batch)
    pos = torch.searchsorted(in_keys, keys).clamp(max=len(in_keys) - 1)
    feats = torch.zeros(len(coords), VoxelNet.input_width(moments, noise_input), device=dev)
    rows = is_input.nonzero()[:, 0]
    src = pos[rows]
    feats[rows, 0] = torch.log1p(counts[src].float())
    feats[rows, 1:4] = mean[src]
    feats[rows, 4] = 1.0
    if moments:
        d = rel - mean[inverse]
        i, j = MOMENT_PAIRS
        cov = torch.zeros(len(in_keys), 6, device=dev).index_add_(0, inverse, d[:, i] * d[:, j]) / n
        feats[rows, 5:11] = 4.0 * cov[src]
    if noise_input and noise is not None:
        feats[:, -2:] = torch.tensor([float(noise), 1.0], device=dev)
    return SparseTensor(coords, feats, batch, _sorted_keys=keys)


def neighbours(centres: torch.Tensor, u: torch.Tensor, k: int, reach: float = 1.5) -> Tuple[torch.Tensor, torch.Tensor]:
    """The k input points nearest each voxel centre (V, 3) among u (N, 3), as positions relative
    to the centre (V, k, 3), and a mask (V, k), True where the point is farther than `reach`
    (max-norm; 1.5 is the voxel's 3^3 block) or missing, and must be ignored."""
    idx, _ = knn(centres, u, k)
    rel = u[idx] - centres[:, None, :]
    mask = rel.abs().amax(-1) > reach
    if idx.shape[1] < k:
        rel = torch.cat([rel, rel.new_zeros(len(centres), k - idx.shape[1], 3)], 1)
        mask = torch.cat([mask, mask.new_ones(len(centres), k - idx.shape[1])], 1)
    return torch.where(mask[..., None], torch.zeros_like(rel), rel), mask


def nearest_index(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Index into y of each x's nearest point (no gradient)."""
    return knn(x, y, 1)[0][:, 0]


def chamfer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Differentiable chamfer: mean_a min_b |a-b| + mean_b min_a |a-b| (distances, not squared).

    The nearest neighbours are found without gradient and the distances recomputed for those
    pairs: the same value and (sub)gradient as differentiating the min over a full distance
    matrix, without keeping that matrix for the backward pass.
    """
    d_ab = ((a - b[nearest_index(a, b)]) ** 2).sum(-1).clamp_min(1e-12).sqrt()  # finite gradient at 0
    d_ba = ((b - a[nearest_index(b, a)]) ** 2).sum(-1).clamp_min(1e-12).sqrt()
    return d_ab.mean() + d_ba.mean()


def tile_key(u: torch.Tensor, start: torch.Tensor, tile: int, threshold: float, noise: Optional[float], crop: bool) -> str:
    """A hash of what one tile of `Reconstructor._run` is computed from, with the weights: its
    points in voxel units (the frame is in them), its lower corner and size, the threshold, the
    noise level in voxels given to the network and whether it is cropped."""
    settings = [*start.tolist(), tile, threshold, np.nan if noise is None else noise, crop]
    return array_digest(u.detach().cpu().numpy(), np.array(settings, np.float64))


class Reconstructor(nn.Module):
    """Both stages; forward() returns the losses for a (noisy, clean) pair, reconstruct() the points."""

    keep_tiles: Optional[Callable[[str, Callable[[], np.ndarray]], np.ndarray]] = None
    """Set by a command that keeps its work (`inr.tasks.stages.Stages.tile`): (a tile's `tile_key`,
    what computes its points) -> those points, (M, 3) float32 in voxel units, computed or kept from
    a run that was killed. None: every tile computed."""

    def __init__(self, cfg: Optional[ReconstructionConfig] = None, voxels_per_diagonal: float = 56.0) -> None:
        super().__init__()
        self.cfg = cfg or ReconstructionConfig()
        self.voxels_per_diagonal = float(voxels_per_diagonal)
        self.stage1 = VoxelNet(self.cfg)
        self.stage2 = PointNet(self.cfg)
        # the most input points per occupied voxel seen in training: inference stays at or below it
        self.register_buffer("max_density", torch.tensor(0.0))
        # (noise, scale) knots of the noise-adaptive voxel, calibrated for these weights with the
        # noise read at noise_voxel base voxels: on the whole cloud, and on a share of a dense one
        self.register_buffer("voxel_rule", torch.tensor(VOXEL_RULE))
        self.register_buffer("share_rule", torch.tensor(SHARE_RULE))
        self.register_buffer("noise_voxel", torch.tensor(NOISE_VOXEL))
        self.register_buffer("noise_density", torch.tensor(NOISE_DENSITY))

    @property
    def rule(self) -> Tuple[Tuple[float, float], ...]:
        """The weights' voxel rule for clouds read whole, as (noise in base voxels, voxel scale)
        knots (`voxel_scale`)."""
        return self.rule_for(whole=True)

    def rule_for(self, whole: bool) -> Tuple[Tuple[float, float], ...]:
        """The weights' voxel rule for a cloud whose noise was read whole, or on a share of it."""
        knots = self.voxel_rule if whole else self.share_rule
        return tuple((round(x, 6), round(y, 6)) for x, y in knots.tolist())  # float32 -> the stored decimals

    def forward(self, noisy: torch.Tensor, clean: torch.Tensor, on_predicted: bool = True,
                noise: Optional[float] = None) -> Dict[str, torch.Tensor]:
        """Losses of one pair. Stage 2 places points in the true voxels and, with on_predicted,
        also in the voxels stage 1 wrongly predicts occupied: there, as at inference, its points
        must move to the nearby surface. `noise`: the cloud's noise in base voxels, for weights
        that read it (`noise_input`; None: not given)."""
        frame = make_frame(noisy, self.voxels_per_diagonal)
        if self.training:
            self.max_density.fill_(max(float(self.max_density), density(noisy, frame.voxel)))
        u, v = to_voxel_units(noisy, frame), to_voxel_units(clean, frame)
        x = candidate_input(u, self.cfg.moments, self.cfg.noise_input, noise)
        out = self.stage1(x)
        gt_keys = torch.unique(pack_keys(torch.floor(v).long(), torch.zeros(len(v), dtype=torch.long, device=v.device)))
        target = torch.isin(x.keys, gt_keys).float()
        bce = sum(nn.functional.binary_cross_entropy_with_logits(lg, target) for lg in out.logits) / len(out.logits)
        chosen = target > 0
        if on_predicted:
            chosen |= out.logits[-1].detach() > 0
        pts = self._points(x, out, chosen.nonzero()[:, 0], u)
        cd = chamfer(pts.reshape(-1, 3), v)
        acc = ((out.logits[-1] > 0).float() == target).float().mean()
        return {"loss": bce + cd, "bce": bce.detach(), "chamfer": cd.detach(), "accuracy": acc.detach()}

    def _points(self, x: SparseTensor, out, rows: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Stage 2 on candidate rows: (V, K, 3) points in voxel units."""
        centres = x.coords[rows].float() + 0.5
        rel, mask = neighbours(centres, u, self.cfg.neighbours, self.cfg.reach)
        return centres[:, None, :] + self.stage2(out.sites.feats[rows], rel, mask)

    @torch.no_grad()
    def reconstruct(self, noisy: torch.Tensor, threshold: float = 0.5, voxel: Optional[float] = None,
                    tile: int = TILE, margin: int = MARGIN, progress: bool = False,
                    adaptive: bool = True, noise: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """(points (V * K, 3) in world units, voxel index (V * K,)) of the predicted surface.

        voxel: the voxel side in world units. Default: the base voxel of the module docstring's
        rule, then, with `adaptive`, the noise-adaptive voxel (`noise_level`, `rule`):
        finer where the cloud's noise, read from a first pass, is low enough for it; gaps of the
        finer pass that the first one covers are filled from a base-voxel pass (`fill_gaps`); a
        dense cloud too noisy for its density-capped voxel runs once, on a share of its points,
        at the voxel its un-capped reading asks for (`DENSE_FLOOR`; `voxel_index` then counts
        that pass's voxels).
        Grids wider than `tile` voxels go tile by tile (memory bounded by one tile), with a
        progress bar on stderr when `progress` is set. `noisy` may be on any device and of any
        float dtype: the model runs on its own device in float32, on the cloud taken relative to
        its box centre (so float64 coordinates far from the origin, such as georeferenced scans,
        keep their detail); the points come back on noisy's device, in its dtype.

        Weights that read the noise level (`noise_input`) get `noise` (world units) when given;
        else, unless `voxel` is given, the level the first pass read (that pass runs without
        it, and even when `adaptive` is off); else none. Other weights ignore `noise`."""
        home, dtype = noisy.device, noisy.dtype
        noisy, origin = self._local(noisy)
        noisy, frame = self._framed(noisy, voxel)
        plan = self._plan(noisy, frame, voxel, adaptive, noise, tile, margin, progress)
        noisy, base, scale, given, first, whole_read = plan.cloud, plan.base, plan.scale, plan.given, plan.first, plan.whole
        # the first pass is the base-voxel pass when it ran there, on the whole cloud, at the same
        # threshold, and without a noise level that this network reads
        base_pass = first if whole_read and float(self.noise_voxel) == 1.0 and threshold == 0.5 and given is None else None
        if scale == 1.0 and base_pass is not None:
            pts = base_pass
        else:
            pts = self._run(noisy, Frame(frame.centre, base * scale), threshold, tile, margin, progress, given)
        k = self.cfg.points_per_voxel
        voxel_index = torch.arange(len(pts) // k, device=noisy.device).repeat_interleave(k)
        # the first pass shows whether the finer pass left gaps where it has surface; a first pass on
        # a share of the cloud cannot (a share thins sparse parts most), so then the base pass runs
        if scale < 1.0 and (not whole_read or fill_gaps(pts, first, noisy, base).any()):
            # fill the gaps from a pass at the base voxel
            whole = base_pass if base_pass is not None else self._run(noisy, Frame(frame.centre, base), threshold, tile, margin, progress, given)
            add = fill_gaps(pts, whole, noisy, base)
            whole_index = len(pts) // k + torch.arange(len(whole) // k, device=noisy.device).repeat_interleave(k)
            pts, voxel_index = torch.cat([pts, whole[add]]), torch.cat([voxel_index, whole_index[add]])
        pts = pts.to(home, dtype)
        pts += origin  # in place: a band of a 10-million-point scan makes 35 million points here
        return pts, voxel_index.to(home)

    def _plan(self, noisy: torch.Tensor, frame: Frame, voxel: Optional[float], adaptive: bool, noise: Optional[float],
              tile: int, margin: int, progress: bool) -> Plan:
        """What `reconstruct` runs on the local cloud in `frame` (`_framed`): the readings and the
        voxel they ask for (none where `voxel`, the frame's, was given by hand)."""
        # the noise adapts the voxel whichever rule set it: a dense scan's (or a long object's)
        # density-capped voxel may still be coarse for its noise
        given = noise if self.cfg.noise_input else None  # the level this network reads, world units
        plan = Plan(noisy, frame.voxel, 1.0, given, None, False, float("nan"))
        if voxel is not None or not (adaptive or (self.cfg.noise_input and given is None)):
            return plan
        if adaptive:
            read = self._readings(noisy, frame, tile, margin, progress)
        else:
            read = Reading(*self._read_noise(noisy, frame, tile=tile, margin=margin, progress=progress))
        if read.share_voxel is not None:
            # a dense, noisy cloud: one pass on a share of it at its own voxel (scale 1, no first
            # pass to reuse: no gap filling)
            return plan._replace(cloud=reading_share(noisy, read.share_voxel, DENSE_DENSITY), base=read.share_voxel,
                                 given=read.share_level if self.cfg.noise_input and given is None else given,
                                 level=read.share_level / frame.voxel)
        scale, own = 1.0, read.level * frame.voxel  # NaN: the first pass found no surface
        if adaptive:
            scale, own = self._finer(noisy, frame, voxel_scale(read.level, self.rule_for(read.whole)), own,
                                     read.whole, tile, margin, progress)
        if self.cfg.noise_input and given is None and own == own:
            given = own
        return plan._replace(scale=scale, given=given, first=read.first, whole=read.whole, level=read.level)

    def _readings(self, noisy: torch.Tensor, frame: Frame, tile: int = TILE, margin: int = MARGIN,
                  progress: bool = False) -> Reading:
        """The noise readings the adaptive voxel is decided from. A cloud whose base voxel the
        density cap shrank (`frame.uncapped`) is read first in the un-capped frame: at least
        DENSE_FLOOR un-capped voxels there sends it to the share route. Else the first pass in
        `frame` (`_read_noise`), which sends a capped cloud to the share route where it reads at
        least DENSE_LOW un-capped voxels. The share route runs at the voxel that puts the
        un-capped reading at DENSE_NOISE voxels, at most the un-capped voxel, and only where the
        un-capped reading is noise (`_noise_holds`), not thin parts the coarser voxel missed."""
        def capped() -> Reading:  # the first pass in the (capped) frame
            return Reading(*self._read_noise(noisy, frame, tile=tile, margin=margin, progress=progress))

        if frame.uncapped is None:
            return capped()
        loose = self._level_at(noisy, frame, frame.uncapped, tile, margin, progress)
        share_voxel = min(loose / DENSE_NOISE, frame.uncapped)
        if loose >= DENSE_FLOOR * frame.uncapped:
            if self._noise_holds(noisy, frame, share_voxel, loose, tile, margin, progress):
                return Reading(None, float("nan"), False, share_voxel, loose)
            return capped()  # thin parts, not noise
        read = capped()
        if (loose == loose and read.level * frame.voxel >= DENSE_LOW * frame.uncapped
                and self._noise_holds(noisy, frame, share_voxel, loose, tile, margin, progress)):
            return read._replace(share_voxel=share_voxel, share_level=loose)
        return read

    def _finer(self, noisy: torch.Tensor, frame: Frame, scale: float, level: float, whole: bool, tile: int,
               margin: int, progress: bool) -> Tuple[float, float]:
        """(the voxel scale, the noise level for the network, world units) for a cloud the rule runs
        finer than the base voxel at `scale`, where the base pass read `level` (world units): read
        again at that voxel (that level replaces the base pass's where it is at most FINER_OWN of the
        voxel), then at each finer FINER_SCALES while the noise read there stays within FINER_NOISE of
        its voxel (and gives the level). These readings run on sampled tiles of large clouds
        (`READ_POINTS`, `READ_SHARE`). A cloud the rule keeps at the base voxel, or whose reading
        found no surface, keeps both as they are."""
        if whole or scale >= 1.0 or level != level or not FINER_SCALES:
            return scale, level
        own = self._level_at(noisy, frame, frame.voxel * scale, tile, margin, progress, sample=True)
        if own <= FINER_OWN * frame.voxel * scale:  # not NaN
            level = own
        for finer in (s for s in FINER_SCALES if s < scale):
            voxel = frame.voxel * finer
            own = self._level_at(noisy, frame, voxel, tile, margin, progress, sample=True)
            if not own <= FINER_NOISE * voxel:  # NaN too
                break
            scale, level = finer, own
        return scale, level

    def _level_at(self, noisy: torch.Tensor, frame: Frame, voxel: float, tile: int, margin: int, progress: bool,
                  sample: bool = False) -> float:
        """The noise read with `voxel` (world units) as the frame's voxel (`_read_noise`), in world units
        (NaN: no surface found); `sample`: on random tiles of the reading's share (`READ_POINTS`,
        `READ_SHARE`)."""
        return self._read_noise(noisy, Frame(frame.centre, voxel), tile=tile, margin=margin, progress=progress,
                                sample=sample)[1] * voxel

    def _noise_holds(self, noisy: torch.Tensor, frame: Frame, voxel: float, loose: float, tile: int, margin: int,
                     progress: bool) -> bool:
        """Whether `loose`, the noise read in the un-capped frame (world units), is noise: at least
        DENSE_THIN un-capped voxels, or else read again at the share route's `voxel` (world units)
        at least DENSE_AGREE of it."""
        if loose >= DENSE_THIN * frame.uncapped:
            return True
        return self._level_at(noisy, frame, voxel, tile, margin, progress) >= DENSE_AGREE * loose

    def _framed(self, noisy: torch.Tensor, voxel: Optional[float] = None) -> Tuple[torch.Tensor, Frame]:
        """(the local cloud (`_local`) less its far strays (STRAY_REACH), its frame: the base voxel
        (`make_frame`, density-capped), or `voxel` when given, centred on the kept points' box)."""
        lo, hi = extent(noisy)  # again: float32 may round the quantiles differently
        diagonal_voxel = float((hi - lo).norm()) / self.voxels_per_diagonal
        near = ((noisy - (lo + hi) / 2).abs() <= STRAY_REACH * diagonal_voxel).all(1)
        whole = bool(near.all())
        noisy = noisy if whole else noisy[near]
        if voxel is not None:
            return noisy, Frame((noisy.min(0).values + noisy.max(0).values) / 2, float(voxel))
        # the box is the one just measured unless very far points were dropped
        return noisy, make_frame(noisy, self.voxels_per_diagonal, float(self.max_density) or DEFAULT_MAX_DENSITY,
                                 box=(lo, hi) if whole else None)

    def _local(self, noisy: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(noisy relative to the centre of its `extent` (its box, unless far strays set that), as
        float32 on the model's device; that centre, in noisy's dtype and on its device)."""
        lo, hi = extent(noisy)
        origin = (lo + hi) / 2
        return (noisy - origin).to(self.max_density.device, torch.float32), origin

    @torch.no_grad()
    def noise_level(self, noisy: torch.Tensor, voxel: Optional[float] = None) -> float:
        """The cloud's noise in voxels of side `voxel` (default: the base voxel): the median
        distance of its points to the planes of the network's output at `noise_voxel` times that
        voxel, / 0.6745 (a Gaussian's sigma from the median of its absolute value); a dense cloud
        is read on a share of its points (`noise_density`, `reading_share`)."""
        return self._reading(noisy, voxel)[0]

    @torch.no_grad()
    def voxel_reading(self, noisy: torch.Tensor) -> Tuple[float, float]:
        """(the noise in base voxels, the voxel scale `reconstruct` runs at), from the same readings
        (`_plan`): `noise_level` and the weights' rule for it (then `_finer`), or for a dense, noisy
        cloud the reading in the un-capped frame and the voxel it asks for (`_readings`), both in
        capped base voxels."""
        local, frame = self._framed(self._local(noisy)[0])
        plan = self._plan(local, frame, None, True, None, TILE, MARGIN, False)
        return plan.level, plan.base * plan.scale / frame.voxel

    def _reading(self, noisy: torch.Tensor, voxel: Optional[float] = None) -> Tuple[float, bool]:
        """(the noise level, whether it was read on the whole cloud), on the cloud and base frame
        `reconstruct` reads it on (far strays left out); `voxel`: the frame's voxel instead."""
        noisy, frame = self._framed(self._local(noisy)[0])
        _, level, whole = self._read_noise(noisy, frame if voxel is None else Frame(frame.centre, float(voxel)))
        return level, whole

    def _read_noise(self, noisy: torch.Tensor, frame: Frame, at: Optional[float] = None, tile: int = TILE,
                    margin: int = MARGIN, progress: bool = False, sample: bool = False) -> Tuple[torch.Tensor, float, bool]:
        """(the first pass's points, at `at` (default: the weights' `noise_voxel`) times frame's
        voxel, on the points `reading_share` keeps at the weights' `noise_density`; the noise in
        frame's voxels read from those points against them; whether they were the whole cloud).
        `sample`: where that share holds more than twice max(READ_POINTS, READ_SHARE of it) points,
        the pass runs on random tiles of it holding about that many and the noise is read from their
        points (the pass's points are then those tiles' alone)."""
        at = float(self.noise_voxel) if at is None else at
        cloud = reading_share(noisy, frame.voxel, float(self.noise_density))
        run_frame, tiles, queries = Frame(frame.centre, frame.voxel * at), None, cloud
        held = max(READ_POINTS, READ_SHARE * len(cloud))
        if sample and len(cloud) > 2 * held:
            tiles, inside = self._sampled_tiles(cloud, run_frame, tile, held)
            queries = cloud[inside]
        surface = self._run(cloud, run_frame, 0.5, tile, margin, progress, tiles=tiles)
        if len(surface) == 0 or len(queries) == 0:
            return surface, float("nan"), cloud is noisy
        return surface, plane_sigma(queries, surface, NOISE_NEIGHBOURS) / frame.voxel, cloud is noisy

    @staticmethod
    def _sampled_tiles(cloud: torch.Tensor, frame: Frame, tile: int, held: float) -> Tuple[list, torch.Tensor]:
        """(the lower corners of random tiles of `_run`'s grid for `cloud` in `frame` (a fixed seed)
        holding together at least `held` of its points, the (N,) mask of its points inside them
        by at least READ_EDGE voxels)."""
        u = to_voxel_units(cloud, frame)
        ijk = torch.floor(u).long()
        lo = ijk.min(0).values - 1  # as `_run` lays its tiles
        cell = torch.div(ijk - lo, tile, rounding_mode="floor")
        keys, which = torch.unique(pack_keys(cell), return_inverse=True)
        order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(0), device="cpu").to(cloud.device)
        take = order[: int((torch.cumsum(torch.bincount(which, minlength=len(keys))[order], 0) < held).sum()) + 1]
        within = u - (lo + tile * cell).to(u.dtype)
        inside = torch.isin(which, take) & ((within >= READ_EDGE) & (within < tile - READ_EDGE)).all(1)
        return [lo + tile * c for c in unpack_keys(keys[take])[0]], inside

    def _run(self, noisy: torch.Tensor, frame: Frame, threshold: float, tile: int, margin: int, progress: bool,
             noise: Optional[float] = None, tiles: Optional[list] = None) -> torch.Tensor:
        """Both stages on the cloud in `frame`, tile by tile: (V * K, 3) world points. `noise`: the
        cloud's noise in world units, for weights that read it (None: not given). `tiles`: the lower
        corners of the tiles to run (`_sampled_tiles`; default: all that hold a point or candidate)."""
        u = to_voxel_units(noisy, frame)
        ijk = torch.floor(u).long()
        lo = ijk.min(0).values - 1  # candidates reach one voxel beyond the points
        starts = self._tile_starts(ijk, lo, tile) if tiles is None else tiles
        crop = len(starts) > 1 or tiles is not None
        if len(starts) > 1 and progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="tiles", unit="tile", file=sys.stderr)
        level = None if noise is None else noise / frame.voxel
        chunks = []
        for start in starts:
            near = ((ijk >= start - margin) & (ijk < start + tile + margin)).all(1) if crop else slice(None)
            u_t = u[near]

            def one_tile() -> torch.Tensor:
                x = candidate_input(u_t, self.cfg.moments, self.cfg.noise_input, level)
                out = self.stage1(x)
                keep = torch.sigmoid(out.logits[-1]) > threshold
                if crop:
                    keep &= ((x.coords >= start) & (x.coords < start + tile)).all(1)
                rows = keep.nonzero()[:, 0]
                return self._points(x, out, rows, u_t).reshape(-1, 3) if len(rows) else u.new_zeros(0, 3)

            if self.keep_tiles is None:
                done = one_tile()
            else:
                kept = self.keep_tiles(tile_key(u_t, start, tile, threshold, level, crop), lambda: one_tile().cpu().numpy())
                done = torch.from_numpy(kept).to(u.device)
            if len(done):
                chunks.append(done)
        pts = torch.cat(chunks) if chunks else u.new_zeros(0, 3)
        del chunks
        return pts.mul_(frame.voxel).add_(frame.centre)  # to world units in place (35M points on a 10M-point scan)

    @staticmethod
    def _tile_starts(ijk: torch.Tensor, lo: torch.Tensor, tile: int) -> list:
        """Lower corners of the tiles that hold a point or a candidate voxel (a point +-1)."""
        keys = None
        for corner in torch.cartesian_prod(*[torch.tensor([-1, 1], device=ijk.device)] * 3):  # ijk +- 1 spans <= 2 tiles per axis
            # one corner at a time: the eight at once held ~400 bytes per point
            new = torch.unique(pack_keys(torch.div(ijk + corner - lo, tile, rounding_mode="floor")))
            keys = new if keys is None else torch.unique(torch.cat([keys, new]))
        coords, _ = unpack_keys(keys)
        return [lo + tile * c for c in coords]
