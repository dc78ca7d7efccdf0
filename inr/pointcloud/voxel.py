"""Voxelization of point clouds and back: integer voxel coordinates, centres, keys."""

from __future__ import annotations

from typing import NamedTuple

import torch

COORD_BITS = 16
"""Bits per axis in a packed key: coordinates in [-2^15, 2^15)."""
_OFFSET = 1 << (COORD_BITS - 1)


class Voxels(NamedTuple):
    coords: torch.Tensor
    """(M, 3) int64 voxel indices, unique, sorted by key."""
    inverse: torch.Tensor
    """(N,) the voxel of each input point."""
    counts: torch.Tensor
    """(M,) points per voxel."""


def pack_keys(coords: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
    """One int64 per voxel, ordered like (batch, x, y, z) lexicographically.

    coords: (M, 3) integers in [-2^15, 2^15); batch: (M,) in [0, 2^15) or None.
    """
    c = coords.long() + _OFFSET
    if bool(((c < 0) | (c >= (1 << COORD_BITS))).any()):
        raise ValueError(f"voxel coordinates must lie in [-{_OFFSET}, {_OFFSET}); use a larger voxel size")
    key = (c[:, 0] << (2 * COORD_BITS)) | (c[:, 1] << COORD_BITS) | c[:, 2]
    if batch is not None:
        key = key | (batch.long() << (3 * COORD_BITS))
    return key


def unpack_keys(keys: torch.Tensor):
    """(coords (M, 3), batch (M,)) of packed keys."""
    mask = (1 << COORD_BITS) - 1
    coords = torch.stack([(keys >> (2 * COORD_BITS)) & mask, (keys >> COORD_BITS) & mask, keys & mask], -1) - _OFFSET
    return coords, keys >> (3 * COORD_BITS)


def voxelize(points: torch.Tensor, voxel_size: float, origin: torch.Tensor | None = None) -> Voxels:
    """The voxels (cells of side voxel_size, corner at origin + voxel_size * coords) that hold
    at least one of the (N, 3) points."""
    if voxel_size <= 0:
        raise ValueError(f"voxel_size must be > 0, got {voxel_size}")
    origin = torch.zeros(3, dtype=points.dtype, device=points.device) if origin is None else origin
    ijk = torch.floor((points - origin) / voxel_size).long()
    keys, inverse, counts = torch.unique(pack_keys(ijk), return_inverse=True, return_counts=True)
    return Voxels(unpack_keys(keys)[0], inverse, counts)


def voxel_centres(coords: torch.Tensor, voxel_size: float, origin: torch.Tensor | None = None) -> torch.Tensor:
    """(M, 3) world centres of voxels."""
    origin = torch.zeros(3, device=coords.device) if origin is None else origin
    return origin.to(torch.float32) + (coords.to(torch.float32) + 0.5) * voxel_size


def devoxelize(coords: torch.Tensor, voxel_size: float, offsets: torch.Tensor, origin: torch.Tensor | None = None) -> torch.Tensor:
    """Points from voxels: (M, 3) coords and (M, K, 3) offsets from the centres, in voxel units
    -> (M * K, 3) world points (voxel-major)."""
    centres = voxel_centres(coords, voxel_size, origin)
    return (centres[:, None, :] + offsets * voxel_size).reshape(-1, 3)


EVEN_SLACK, EVEN_TOLERANCE = 0.01, 1e-3
"""even_subsample's search for its cell size stops at a size leaving n to (1 + EVEN_SLACK) n
cells (the random choice of n then drops at most 1 % of them), or once the size is known within
EVEN_TOLERANCE (as a fraction; the count moves ~0.2 % over it, and not always one way). Each
step is a voxel down-sampling of the whole cloud."""
SMALLEST_CELL = 2.0 ** -30
"""The smallest cell size even_subsample tries, as a share of the cloud's diagonal (Open3D refuses
cells that make over 2^31 along an axis: before, a cloud of near-duplicates raised its error)."""


def even_subsample(points, n: int, seed: int = 0):
    """n of the points (numpy (N, 3), N >= n), spread evenly: Open3D's voxel down-sampling (the
    mean of the points in each cell) at the largest cell size that leaves at least n cells
    (`_largest_cells`), then a random n of those. Fewer gaps than a random choice, so the surface
    is covered better by the same number of points."""
    import numpy as np

    if len(points) <= n:
        return points
    cells = _largest_cells(_voxel_down_sample(np.asarray(points, dtype=np.float64)), n,
                           float(np.linalg.norm(np.ptp(points, axis=0))))
    if cells is None:  # cannot reach n cells (near-duplicate points): a random choice
        return points[np.random.default_rng(seed).choice(len(points), n, replace=False)]
    return cells[np.random.default_rng(seed).choice(len(cells), n, replace=False)]


def _largest_cells(down, n: int, diag: float, steps: int = 40):
    """down(size) at the largest cell size that leaves at least n cells (within EVEN_SLACK or
    EVEN_TOLERANCE), or None if none does. The size is bracketed and each guess interpolates the
    cell count as a power of the size between the bracket's ends (a surface's count goes as
    size^-2, the guess before there are two ends), kept inside the bracket's central 90 % in log
    size: 4-12 steps where a bisection took 20-30 (each a down-sampling of the whole cloud)."""
    import math

    small, c_small, cells = 0.0, 0, None  # the largest size known to leave >= n cells
    big, c_big = diag, 0  # the smallest known to leave fewer (0: not counted)
    size = diag / math.sqrt(n)
    for _ in range(steps):
        if small > 0.0 and (c_small <= n * (1 + EVEN_SLACK) or big <= small * (1 + EVEN_TOLERANCE)):
            break
        if size < diag * SMALLEST_CELL:  # near-duplicate points: no cell size separates them
            break
        got = down(size)
        if len(got) >= n:
            small, c_small, cells = size, len(got), got
        else:
            big, c_big = size, len(got)
        if small == 0.0:  # no size small enough yet: shrink by the square-root law
            size = min(big * math.sqrt(max(c_big, 1) / n), big / 2)
            continue
        span = math.log(big / small)
        slope = max(math.log(c_small / c_big) / span, 0.1) if c_big else 2.0
        step = math.log(c_small / n) / slope
        size = small * math.exp(min(max(step, 0.05 * span), 0.95 * span))
    return cells


def _voxel_down_sample(points):
    """cell size -> the mean point of every occupied cell: open3d's voxel_down_sample when open3d
    is installed, else the same in numpy (cells from the cloud's minimum corner)."""
    import numpy as np

    from .. import _external

    if _external.has_open3d():
        o3d = _external.open3d()
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        return lambda size: np.asarray(cloud.voxel_down_sample(size).points)
    lo = points.min(0)

    def down(size: float):
        ijk = np.floor((points - lo) / size).astype(np.int64)
        _, inverse, counts = np.unique(ijk, axis=0, return_inverse=True, return_counts=True)
        sums = np.zeros((len(counts), 3))
        np.add.at(sums, inverse.reshape(-1), points)
        return sums / counts[:, None]

    return down


def density_subsample(points, n: int, like, seed: int = 0):
    """n of the points (numpy (N, 3), N >= n) spread like the cloud `like` (numpy (M, 3), the scan
    they stand for), not evenly: each point weighs 1 / the number of points sharing its nearest
    point of `like`, so that any region gets about n / M of a point for each point `like` has there.
    Chosen by systematic sampling along a Morton curve with those weights (each point's chance
    capped at one: `_capped_chances`), so that neighbours are not picked in clumps and left in
    gaps as by a random choice."""
    import numpy as np

    from .knn import knn

    x = np.asarray(points, dtype=np.float64)
    if len(x) <= n:
        return x
    owner = knn(torch.from_numpy(x), torch.from_numpy(np.asarray(like, dtype=np.float64)), 1)[0][:, 0].numpy()
    chance = _capped_chances(1.0 / np.bincount(owner)[owner], n)
    order = np.argsort(morton_codes(x), kind="stable")
    ends = np.cumsum(chance[order])
    marks = np.random.default_rng(seed).random() + np.arange(n)
    picked = np.unique(order[np.minimum(np.searchsorted(ends, marks, side="right"), len(x) - 1)])
    if len(picked) < n:  # rounding put two marks in one point's stretch: the likeliest others
        rest = np.setdiff1d(np.arange(len(x)), picked)
        picked = np.concatenate([picked, rest[np.argsort(-chance[rest], kind="stable")[:n - len(picked)]]])
    return x[np.sort(picked)]


def _capped_chances(weights, n: int):
    """Each point's chance of being picked, c x weight capped at 1, with c such that the chances
    sum to n (n <= the number of points; the few capped ones are found by repeating)."""
    import numpy as np

    capped = np.zeros(len(weights), dtype=bool)
    for _ in range(len(weights)):
        c = (n - capped.sum()) / weights[~capped].sum()
        more = ~capped & (c * weights >= 1.0)
        if not more.any():
            break
        capped |= more
    return np.where(capped, 1.0, np.minimum(c * weights, 1.0))


def morton_codes(points):
    """(N,) uint64 Morton (Z-order) codes of numpy (N, 3) points, 21 bits per axis over their box:
    points near each other along the codes' order lie near each other in space."""
    import numpy as np

    x = np.asarray(points, dtype=np.float64)
    lo, span = x.min(0), max(float(np.ptp(x, axis=0).max()), 1e-300)
    q = np.minimum((x - lo) / span * (1 << 21), (1 << 21) - 1).astype(np.uint64)
    code = np.zeros(len(x), dtype=np.uint64)
    for axis in range(3):
        v = q[:, axis]
        for shift, mask in ((32, 0x1F00000000FFFF), (16, 0x1F0000FF0000FF), (8, 0x100F00F00F00F00F),
                            (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)):
            v = (v | (v << np.uint64(shift))) & np.uint64(mask)
        code |= v << np.uint64(2 - axis)
    return code
