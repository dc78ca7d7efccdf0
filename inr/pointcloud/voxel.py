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


def even_subsample(points, n: int, seed: int = 0):
    """n of the points (numpy (N, 3), N >= n), spread evenly: Open3D's voxel down-sampling (the
    mean of the points in each cell) at the largest cell size that leaves at least n cells
    (bisection on a log scale), then a random n of those. Fewer gaps than a random choice, so
    the surface is covered better by the same number of points."""
    import numpy as np

    if len(points) <= n:
        return points
    down = _voxel_down_sample(np.asarray(points, dtype=np.float64))
    small, big = 0.0, float(np.linalg.norm(np.ptp(points, axis=0)))
    for _ in range(30):
        mid = (small + big) / 2 if small == 0.0 else (small * big) ** 0.5
        small, big = (mid, big) if len(down(mid)) >= n else (small, mid)
    if small == 0.0:  # cannot reach n cells (near-duplicate points): a random choice
        return points[np.random.default_rng(seed).choice(len(points), n, replace=False)]
    cells = down(small)
    return cells[np.random.default_rng(seed).choice(len(cells), n, replace=False)]


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
