"""Synthetic training shapes and scanner-like corruption.

Shapes are signed distance functions composed at random: primitives (box, sphere, cylinder,
torus, capsule, cone, thin plate, thin rod), their unions (hard and smooth), and deformations
(twist, bend, taper), each randomly rotated and scaled. A mesh comes from scikit-image's
marching cubes on the SDF; clean dense points are trimesh's area-weighted surface samples.

Corruption (the issue's ranges): Gaussian noise with sigma 0.5-2 % of the bounding-box diagonal,
4-16x fewer points, 0-5 % outliers uniform in the (slightly enlarged) box, and holes (points
within random balls on the surface removed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

SDF = Callable[[np.ndarray], np.ndarray]


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def box(half: np.ndarray) -> SDF:
    def f(p):
        q = np.abs(p) - half
        return np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(-1), 0)
    return f


def sphere(r: float) -> SDF:
    return lambda p: np.linalg.norm(p, axis=-1) - r


def cylinder(r: float, h: float) -> SDF:
    def f(p):
        d = np.stack([np.linalg.norm(p[..., :2], axis=-1) - r, np.abs(p[..., 2]) - h], -1)
        return np.minimum(d.max(-1), 0) + np.linalg.norm(np.maximum(d, 0), axis=-1)
    return f


def torus(r_major: float, r_minor: float) -> SDF:
    return lambda p: np.linalg.norm(np.stack([np.linalg.norm(p[..., :2], axis=-1) - r_major, p[..., 2]], -1), axis=-1) - r_minor


def capsule(h: float, r: float) -> SDF:
    return lambda p: np.linalg.norm(p - np.stack([np.zeros_like(p[..., 0]), np.zeros_like(p[..., 0]),
                                                  np.clip(p[..., 2], -h, h)], -1), axis=-1) - r


def cone(r: float, h: float) -> SDF:
    """A cone of base radius r at z = -h, apex at z = +h (an exact-enough bound: the max of the
    slanted side's and the caps' distances)."""
    def f(p):
        q = np.linalg.norm(p[..., :2], axis=-1)
        slope = r / (2 * h)
        side = (q - slope * (h - p[..., 2])) / np.sqrt(1 + slope**2)
        return np.maximum(side, np.abs(p[..., 2]) - h)
    return f


def transformed(f: SDF, rotation: np.ndarray, shift: np.ndarray) -> SDF:
    return lambda p: f((p - shift) @ rotation)  # rotation orthonormal: p -> R^T (p - t)


def union(fs: List[SDF], smooth: float = 0.0) -> SDF:
    def f(p):
        d = fs[0](p)
        for g in fs[1:]:
            e = g(p)
            if smooth > 0:  # polynomial smooth minimum
                hh = np.clip(0.5 + 0.5 * (e - d) / smooth, 0, 1)
                d = e * (1 - hh) + d * hh - smooth * hh * (1 - hh)
            else:
                d = np.minimum(d, e)
        return d
    return f


def twist(f: SDF, rate: float) -> SDF:
    def g(p):
        a = rate * p[..., 2]
        c, s = np.cos(a), np.sin(a)
        return f(np.stack([c * p[..., 0] - s * p[..., 1], s * p[..., 0] + c * p[..., 1], p[..., 2]], -1)) / (1 + abs(rate))
    return g


def bend(f: SDF, rate: float) -> SDF:
    def g(p):
        a = rate * p[..., 0]
        c, s = np.cos(a), np.sin(a)
        return f(np.stack([c * p[..., 0] - s * p[..., 2], p[..., 1], s * p[..., 0] + c * p[..., 2]], -1)) / (1 + abs(rate))
    return g


def taper(f: SDF, rate: float) -> SDF:
    def g(p):
        k = 1 + rate * p[..., 2:3]
        return f(np.concatenate([p[..., :2] / k, p[..., 2:]], -1)) * np.min(np.abs(k))
    return g


def random_primitive(rng: np.random.Generator) -> SDF:
    kind = rng.integers(8)
    u = lambda lo, hi: float(rng.uniform(lo, hi))  # noqa: E731
    if kind == 0:
        f = box(rng.uniform(0.15, 0.5, 3))
    elif kind == 1:
        f = sphere(u(0.2, 0.5))
    elif kind == 2:
        f = cylinder(u(0.1, 0.4), u(0.15, 0.5))
    elif kind == 3:
        f = torus(u(0.25, 0.45), u(0.05, 0.15))
    elif kind == 4:
        f = capsule(u(0.1, 0.4), u(0.08, 0.25))
    elif kind == 5:
        f = cone(u(0.2, 0.45), u(0.2, 0.45))
    elif kind == 6:
        f = box(np.array([u(0.25, 0.5), u(0.25, 0.5), u(0.03, 0.06)]))  # thin plate
    else:
        f = cylinder(u(0.03, 0.06), u(0.3, 0.5))  # thin rod
    return transformed(f, _rotation(rng), rng.uniform(-0.3, 0.3, 3))


def random_shape(rng: np.random.Generator) -> SDF:
    """A union of 1-4 primitives, sometimes smooth, sometimes deformed."""
    parts = [random_primitive(rng) for _ in range(int(rng.integers(1, 5)))]
    f = union(parts, smooth=float(rng.uniform(0.02, 0.1)) if rng.random() < 0.3 else 0.0)
    r = rng.random()
    if r < 0.15:
        f = twist(f, float(rng.uniform(-2, 2)))
    elif r < 0.3:
        f = bend(f, float(rng.uniform(-1.2, 1.2)))
    elif r < 0.4:
        f = taper(f, float(rng.uniform(-0.6, 0.6)))
    return f


def sdf_mesh(f: SDF, resolution: int = 72, extent: float = 1.2):
    """trimesh.Trimesh of the zero level set of f over [-extent, extent]^3."""
    import trimesh
    from skimage.measure import marching_cubes

    axis = np.linspace(-extent, extent, resolution)
    grid = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1)
    values = f(grid.reshape(-1, 3)).reshape(resolution, resolution, resolution)
    values = np.pad(values, 1, constant_values=max(float(values.max()), 1e-3))  # closed surfaces
    if not (values.min() < 0 < values.max()):
        raise ValueError("the shape has no surface inside the box")
    step = 2 * extent / (resolution - 1)
    verts, faces, _, _ = marching_cubes(values, 0.0, spacing=(step, step, step))
    return trimesh.Trimesh(verts - step - extent, faces, process=True)


@dataclass
class Corruption:
    noise: Tuple[float, float] = (0.005, 0.02)
    """Gaussian sigma as a share of the bounding-box diagonal."""
    sparsity: Tuple[float, float] = (4.0, 16.0)
    """Input points = dense points / this."""
    outliers: Tuple[float, float] = (0.0, 0.05)
    """Share of input points replaced by uniform outliers."""
    holes: Tuple[int, int] = (0, 3)
    hole_radius: Tuple[float, float] = (0.03, 0.08)
    """As a share of the bounding-box diagonal."""


def sample_surface(mesh, n: int, rng: np.random.Generator) -> np.ndarray:
    import trimesh

    pts, _ = trimesh.sample.sample_surface(mesh, n, seed=int(rng.integers(2**31)))
    return np.asarray(pts, dtype=np.float64)


def corrupt(clean: np.ndarray, rng: np.random.Generator, c: Optional[Corruption] = None) -> np.ndarray:
    """A scanner-like input made from clean dense surface points."""
    c = c or Corruption()
    lo, hi = clean.min(0), clean.max(0)
    diag = float(np.linalg.norm(hi - lo))
    keep = np.ones(len(clean), dtype=bool)
    for _ in range(int(rng.integers(c.holes[0], c.holes[1] + 1))):
        centre = clean[rng.integers(len(clean))]
        keep &= np.linalg.norm(clean - centre, axis=1) > rng.uniform(*c.hole_radius) * diag
    pts = clean[keep]
    n = max(2, int(len(clean) / rng.uniform(*c.sparsity)))
    pts = pts[rng.choice(len(pts), size=min(n, len(pts)), replace=False)]
    pts = pts + rng.normal(scale=rng.uniform(*c.noise) * diag, size=pts.shape)
    n_out = int(round(rng.uniform(*c.outliers) * len(pts)))
    if n_out:
        margin = 0.05 * (hi - lo)
        pts[rng.choice(len(pts), n_out, replace=False)] = rng.uniform(lo - margin, hi + margin, size=(n_out, 3))
    return pts
