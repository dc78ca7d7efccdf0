"""Geometry out of a radiance field: density on a lattice, a coloured marching-cubes mesh.

Marching cubes is scikit-image's; this module samples the field and maps the result to world
units. No file formats here (the task layer writes meshes with trimesh, points with open3d).
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
import torch

from .. import progress

DensityFn = Callable[[torch.Tensor], torch.Tensor]
ColorFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def lattice_points(aabb: torch.Tensor, resolution: int) -> torch.Tensor:
    """(R^3, 3) points of a resolution^3 lattice spanning the box aabb corner to corner, x-major
    (point (i, j, k) is row (i R + j) R + k)."""
    lo, hi = aabb[:3].float(), aabb[3:].float()
    axes = [torch.linspace(float(lo[a]), float(hi[a]), resolution, device=aabb.device) for a in range(3)]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)


def density_lattice(density_fn: DensityFn, aabb: torch.Tensor, resolution: int, chunk: int = 1 << 16) -> torch.Tensor:
    """(R, R, R) densities at the lattice points, evaluated `chunk` points at a time."""
    pts = lattice_points(aabb, resolution)
    starts = progress.bar(range(0, len(pts), chunk), f"density on {resolution}^3 points", unit="chunk")
    out = torch.cat([density_fn(pts[k : k + chunk]).reshape(-1).float() for k in starts])
    return out.view(resolution, resolution, resolution)


def extract_mesh(
    density_fn: DensityFn,
    aabb: torch.Tensor,
    resolution: int = 256,
    threshold: float = 10.0,
    color_fn: Optional[ColorFn] = None,
    chunk: int = 1 << 16,
) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Marching cubes on the density lattice at level `threshold`.

    The lattice is padded by one layer of zero density, so surfaces cut by the box are closed.
    Vertex colours (optional) are color_fn(vertices, directions) with each direction pointing
    into the surface along the density gradient, i.e. the surface seen head-on from outside.

    Returns:
        vertices (V, 3) float32 in world units, faces (F, 3) int64 with outward normals (right
        hand), colours (V, 3) float32 in [0, 1] or None.
    Raises:
        ValueError if no density crosses the threshold.
    """
    from skimage.measure import marching_cubes

    grid = density_lattice(density_fn, aabb, resolution, chunk).cpu().numpy()
    lo, hi = grid.min(), grid.max()
    if not (lo < threshold < hi):
        raise ValueError(f"no surface at density {threshold:g}: the densities in the box range over [{lo:.3g}, {hi:.3g}]")
    padded = np.pad(grid, 1, constant_values=0.0)
    box = aabb.double().cpu().numpy()
    spacing = (box[3:] - box[:3]) / (resolution - 1)
    verts, faces, _, _ = marching_cubes(padded, level=threshold, spacing=tuple(spacing))
    verts = verts - spacing + box[:3]  # undo the padding's one-cell shift
    # scikit-image orders faces for surfaces around *low* values; ours enclose high density
    faces = faces[:, ::-1].copy()
    colors = None
    if color_fn is not None:
        v = torch.from_numpy(verts).float().to(aabb.device)
        inward = _density_gradient(density_fn, v, float(spacing.min()))
        parts = [color_fn(v[k : k + chunk], inward[k : k + chunk]).float() for k in range(0, len(v), chunk)]
        colors = torch.cat(parts).clamp(0, 1).cpu().numpy() if parts else np.zeros((0, 3), np.float32)
    return verts.astype(np.float32), faces.astype(np.int64), colors


def _density_gradient(density_fn: DensityFn, points: torch.Tensor, h: float, chunk: int = 1 << 14) -> torch.Tensor:
    """Unit central-difference gradients of the density (pointing into the surface)."""
    out = []
    eye = torch.eye(3, device=points.device) * h
    for k in range(0, len(points), chunk):
        p = points[k : k + chunk]
        g = torch.stack([(density_fn(p + eye[a]) - density_fn(p - eye[a])).reshape(-1) for a in range(3)], -1)
        out.append(torch.nn.functional.normalize(g.float(), dim=-1))
    return torch.cat(out) if out else torch.zeros(0, 3, device=points.device)


def sdf_lattice(sdf_fn: DensityFn, resolution: int, block: int = 2, margin: float = 1.5,
                chunk: int = 1 << 16, device=None, show_progress: bool = True,
                coarsest: int = 33) -> Tuple[torch.Tensor, torch.Tensor]:
    """A signed distance field on a lattice over [-1, 1]^3, evaluated where the surface can be.

    The lattice has `resolution` points per side, rounded up so that its cells split into blocks
    of `block`^3. The field is first known at the block corners; a block whose corners all
    have one sign and |f| >= margin x the block's diagonal cannot hold the zero level of a
    distance field (|grad f| ~ 1), so its points are filled by trilinear interpolation of its
    corners (same sign, no surface); all other blocks are evaluated point by point. The corners
    are themselves such a lattice, one level coarser (down to `coarsest` points per side, which
    are all evaluated): the interpolated corners lie in blocks that the coarser level already
    ruled out, and stay ruled out at this one. The work grows with the surface's area instead of
    the volume (a fitted armadillo at 256: 3.4 s, against 8.2 s with one level of blocks of 4).

    Returns:
        values (R, R, R) float32 (point (i, j, k) at -1 + (i, j, k) * 2 / (R - 1)), and the
        evaluated points as a bool mask of the same shape.
    """
    blocks = max(1, -(-(resolution - 1) // block))
    res = blocks * block + 1
    dev = torch.device("cpu") if device is None else torch.device(device)
    if blocks + 1 > coarsest and blocks % block == 0:
        coarse = sdf_lattice(sdf_fn, blocks + 1, block, margin, chunk, dev, False, coarsest)[0]
    else:
        axis = torch.linspace(-1.0, 1.0, blocks + 1, device=dev)
        corners = torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
        coarse = torch.cat([sdf_fn(c).reshape(-1).float() for c in torch.split(corners, chunk)]).view((blocks + 1,) * 3)
    # the 8 corners of every block: (blocks,)^3 x 8
    cube = torch.stack([coarse[i : i + blocks, j : j + blocks, k : k + blocks]
                        for i in (0, 1) for j in (0, 1) for k in (0, 1)], -1)
    diagonal = 3**0.5 * 2.0 / blocks
    active = (cube.amin(-1) <= 0) & (cube.amax(-1) >= 0) | (cube.abs().amin(-1) < margin * diagonal)
    values = torch.nn.functional.interpolate(coarse[None, None], size=(res,) * 3, mode="trilinear", align_corners=True)[0, 0]
    cells = active.repeat_interleave(block, 0).repeat_interleave(block, 1).repeat_interleave(block, 2)
    mask = torch.nn.functional.max_pool3d(torch.nn.functional.pad(cells.float(), (1, 1, 1, 1, 1, 1))[None, None],
                                          kernel_size=2, stride=1)[0, 0] > 0
    idx = mask.nonzero()
    points = idx.float() * (2.0 / (res - 1)) - 1.0
    starts = range(0, len(points), chunk)
    if show_progress:
        starts = progress.bar(starts, f"SDF near the surface ({len(points):,} of {res ** 3:,} points)", unit="chunk")
    if len(points):
        vals = torch.cat([sdf_fn(points[k : k + chunk]).reshape(-1).float() for k in starts])
        values[idx[:, 0], idx[:, 1], idx[:, 2]] = vals
    return values, mask


def zero_level_mesh(values: torch.Tensor, mask: Optional[torch.Tensor] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Marching cubes at level 0 of a signed distance lattice over [-1, 1]^3 (negative inside),
    only in the masked cells when a mask is given. Not padded: an open surface stays open where
    it meets the box.

    Returns:
        vertices (V, 3) float32 in the lattice's [-1, 1] coordinates, faces (F, 3) int64 with
        outward normals (right hand).
    Raises:
        ValueError if the field does not change sign.
    """
    from skimage.measure import marching_cubes

    grid = values.detach().cpu().numpy()
    lo, hi = float(grid.min()), float(grid.max())
    if not (lo < 0 < hi):
        raise ValueError(f"no zero level: the field ranges over [{lo:.3g}, {hi:.3g}] in the box")
    res = grid.shape[0]
    spacing = 2.0 / (res - 1)
    m = None if mask is None else mask.detach().cpu().numpy()
    verts, faces, _, _ = marching_cubes(grid, level=0.0, spacing=(spacing,) * 3, mask=m)
    return (verts - 1.0).astype(np.float32), faces.astype(np.int64)
