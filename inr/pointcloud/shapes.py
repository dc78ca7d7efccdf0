"""Synthetic training shapes and scanner-like corruption.

Shapes are signed distance functions composed at random: primitives (box, sphere, cylinder,
torus, capsule, cone, thin plate, thin rod), their unions (hard and smooth), and deformations
(twist, bend, taper), each randomly rotated and scaled; bodies with thin limbs (legs, antennae:
capsules down to about one voxel of the trained grid across) or thin wings (plates as thin);
and solids drilled through or cut (CSG differences: sharp concave edges, holes, higher genus);
brackets (plates a few voxels thick joined at right angles, with ribs and holes; off by default).
A mesh comes from scikit-image's marching cubes on the SDF; `open_cut` turns a mesh into an open
surface (the part on one side of a random plane). Clean dense points are trimesh's
area-weighted surface samples.

Corruption (the issue's ranges): Gaussian noise with sigma 0.5-2 % of the bounding-box diagonal,
4-16x fewer points, 0-5 % outliers uniform in the (slightly enlarged) box, and holes (points
within random balls on the surface removed). Or range scans (`RangeScan`, `scan_pair`): depth
cameras around the mesh (Open3D ray casting), noise along each ray, and as the target the part
of the surface the cameras see.
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


def difference(f: SDF, g: SDF) -> SDF:
    """f with g carved out (sharp edges where they meet)."""
    return lambda p: np.maximum(f(p), -g(p))


def segment(a: np.ndarray, b: np.ndarray, r: float) -> SDF:
    """A capsule of radius r around the segment a-b."""
    ab = b - a

    def f(p):
        t = np.clip(((p - a) @ ab) / float(ab @ ab), 0.0, 1.0)
        return np.linalg.norm(p - (a + t[..., None] * ab), axis=-1) - r
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


def _body(rng: np.random.Generator) -> Tuple[SDF, np.ndarray]:
    """A compact body (box, ellipsoid-like capsule or sphere) and its half extents."""
    half = rng.uniform([0.25, 0.15, 0.12], [0.55, 0.35, 0.3])
    kind = rng.integers(3)
    if kind == 0:
        return box(half), half
    if kind == 1:
        return transformed(capsule(float(half[0] - half[1]), float(half[1])), _rotation_to_x(), np.zeros(3)), half
    r = float(half.min() * 1.4)
    return sphere(r), np.full(3, r)


def _rotation_to_x() -> np.ndarray:
    """Maps z to x (a capsule along z lies along x)."""
    return np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])


def creature(rng: np.random.Generator) -> SDF:
    """A body with 2-8 thin limbs (legs, arms, antennae, a tail): capsules of radius 0.012-0.04
    (a voxel of the trained 56-per-diagonal grid is ~0.04 here) from inside the body outwards."""
    body, half = _body(rng)
    parts = [body]
    for _ in range(int(rng.integers(2, 9))):
        start = rng.uniform(-0.7, 0.7, 3) * half
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        end = start + direction * rng.uniform(0.4, 0.9)
        if rng.random() < 0.4:  # a knee: two segments
            knee = start + direction * rng.uniform(0.25, 0.5)
            bent = direction + rng.normal(scale=0.7, size=3)
            end = knee + bent / np.linalg.norm(bent) * rng.uniform(0.2, 0.5)
            parts.append(segment(knee, end, float(rng.uniform(0.012, 0.04))))
            end = knee
        parts.append(segment(start, end, float(rng.uniform(0.012, 0.04))))
    f = union(parts, smooth=float(rng.uniform(0.0, 0.03)))
    return transformed(f, _rotation(rng), np.zeros(3))


def winged(rng: np.random.Generator) -> SDF:
    """A body with 1-3 pairs of thin plates (wings, fins, a tail plane), half-thickness
    0.01-0.03."""
    body, half = _body(rng)
    parts = [body]
    for _ in range(int(rng.integers(1, 4))):
        span, chord, thick = rng.uniform(0.3, 0.8), rng.uniform(0.1, 0.35), rng.uniform(0.01, 0.03)
        x = rng.uniform(-0.6, 0.6) * half[0]
        sweep = rng.uniform(-0.5, 0.5)
        for side in (-1.0, 1.0):
            tilt = np.array([[1.0, 0, 0], [0, np.cos(sweep), -np.sin(sweep)], [0, np.sin(sweep), np.cos(sweep)]])
            plate = box(np.array([chord, span / 2, thick]))
            parts.append(transformed(plate, tilt, np.array([x, side * (half[1] + span / 2 - 0.05), 0.0])))
    return transformed(union(parts), _rotation(rng), np.zeros(3))


def drilled(rng: np.random.Generator) -> SDF:
    """A box, plate or cylinder with 1-4 holes drilled through or slots and corners cut away."""
    solid = random_primitive(rng) if rng.random() < 0.3 else box(rng.uniform([0.3, 0.3, 0.05], [0.6, 0.6, 0.4]))
    for _ in range(int(rng.integers(1, 5))):
        if rng.random() < 0.6:
            tool = transformed(cylinder(float(rng.uniform(0.05, 0.2)), 1.5), _rotation(rng), rng.uniform(-0.3, 0.3, 3))
        else:
            tool = transformed(box(rng.uniform(0.05, 0.3, 3)), _rotation(rng), rng.uniform(-0.5, 0.5, 3))
        solid = difference(solid, tool)
    return transformed(solid, _rotation(rng), np.zeros(3))


def gusset(axis: int, side: float, wall: float, floor: float, at: float, legs: float, h: float) -> SDF:
    """A triangular rib 2h thick in the corner between a wall's inner face and a floor's top: the
    wall stands at x = side * wall (axis 1) or y = side * wall (axis 0), the floor's top at z =
    floor; the rib lies across the wall at `at` along it, its two legs `legs` long (on the wall
    and on the floor). A bound of the distance (the max of the half-spaces' distances), exact on
    its faces."""
    def f(p):
        inward = wall - side * p[..., 1 - axis]  # from the wall's face towards the middle
        up = p[..., 2] - floor
        thin = np.abs(p[..., axis] - at) - h
        return np.maximum.reduce([thin, -inward - h, -up - h, (inward + up - legs) / np.sqrt(2.0)])
    return f


def bracket_parts(rng: np.random.Generator, half_thickness: Tuple[float, float] = (0.012, 0.03)) -> Tuple[SDF, float]:
    """(an unrotated bracket, its plates' half-thickness h): a base plate at z = -0.25 +- h with 1-3
    walls standing on its edges, half of them with 1-3 gussets (`gusset`: triangular ribs) in
    the corner between wall and base, and holes drilled through the base. Almost all of its surface is plate, a few
    voxels of the trained grid thick, 1.5-4 % of its diagonal (boeing's kind of part: a fifth of
    it 1-2 % of the diagonal thick, against 3 % of the other families'). It stays within the
    marching-cubes box (`sdf_mesh`'s extent 1.2) in any rotation, and a plate is at least 1.25
    cells of its 128-cell lattice thick."""
    h = float(rng.uniform(*half_thickness))
    a, b = float(rng.uniform(0.4, 0.8)), float(rng.uniform(0.25, 0.6))
    parts = [box(np.array([a, b, h]))]
    corners = []  # (the wall's axis: 0 along x, 1 along y; its side; its height)
    for edge in rng.permutation(4)[: int(rng.integers(1, 4))]:
        c, side = float(rng.uniform(0.15, 0.5)), 1.0 if edge % 2 else -1.0
        if edge < 2:  # a wall along x, at y = side * b
            parts.append(transformed(box(np.array([a, h, c])), np.eye(3), np.array([0.0, side * (b - h), c - h])))
        else:  # along y, at x = side * a
            parts.append(transformed(box(np.array([h, b, c])), np.eye(3), np.array([side * (a - h), 0.0, c - h])))
        corners.append((0 if edge < 2 else 1, side, c))
    for axis, side, c in corners:
        if rng.random() < 0.5:
            continue
        along, across = (a, b) if axis == 0 else (b, a)
        legs = min(c, 0.6 * across)
        for t in rng.uniform(-0.8, 0.8, int(rng.integers(1, 4))) * along:
            parts.append(gusset(axis, side, across - 2 * h, h, t, legs, h))
    f = union(parts)
    for _ in range(int(rng.integers(0, 4))):
        hole = transformed(cylinder(float(rng.uniform(0.04, 0.12)), 1.0), np.eye(3),
                           np.array([rng.uniform(-0.7, 0.7) * a, rng.uniform(-0.7, 0.7) * b, 0.0]))
        f = difference(f, hole)
    return transformed(f, np.eye(3), np.array([0.0, 0.0, -0.25])), h  # walls up to z = 1: centred in z


def bracket(rng: np.random.Generator) -> SDF:
    """A randomly rotated `bracket_parts`."""
    return transformed(bracket_parts(rng)[0], _rotation(rng), np.zeros(3))


FAMILIES = ("union", "creature", "winged", "drilled", "bracket")
FAMILY_WEIGHTS = (0.4, 0.25, 0.15, 0.2, 0.0)
"""Off by default, 'bracket' leaves the shipped weights' training stream as it was (a zero weight
draws the same shapes); `train.family_weights` turns it on."""


def random_shape(rng: np.random.Generator, families=FAMILIES, weights=FAMILY_WEIGHTS) -> SDF:
    """A shape of a family drawn with `weights`: 'union' (1-4 primitives, sometimes smooth,
    sometimes deformed), 'creature', 'winged', 'drilled' or 'bracket'."""
    family = families[int(rng.choice(len(families), p=np.asarray(weights) / np.sum(weights)))]
    if family == "creature":
        return creature(rng)
    if family == "winged":
        return winged(rng)
    if family == "drilled":
        return drilled(rng)
    if family == "bracket":
        return bracket(rng)
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


def _planes_through(centres: np.ndarray, rng: np.random.Generator, k: int, quantiles: Tuple[float, float]):
    """k random planes through faces' `centres`: (the signed distance of each centre to each
    plane (faces, k)); each plane's offset at a quantile drawn in `quantiles` of the centres
    along its normal."""
    normals = rng.normal(size=(k, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    along = centres @ normals.T
    return along - np.array([np.quantile(along[:, j], rng.uniform(*quantiles)) for j in range(k)])


def open_cut(mesh, rng: np.random.Generator, keep_at_least: float = 0.4):
    """The part of a mesh on one side of a random plane through it (an open surface, as a scan
    that saw one side, or an open model), keeping at least `keep_at_least` of the area; the
    mesh itself when no draw of 8 keeps enough."""
    for _ in range(8):
        keep = _planes_through(mesh.triangles_center, rng, 1, (0.5, 0.9))[:, 0] < 0
        if mesh.area_faces[keep].sum() >= keep_at_least * mesh.area:
            part = mesh.submesh([np.nonzero(keep)[0]], append=True)
            if len(part.faces):
                return part
    return mesh


def fragment_cut(mesh, rng: np.random.Generator, planes: Tuple[int, int] = (2, 6),
                 gap: Tuple[float, float] = (0.01, 0.05), drop: float = 0.25, keep_at_least: float = 0.3):
    """The mesh broken into open pieces with gaps between them, as a scan of a built scene shows
    roofs, walls and ground apart: 2-6 (`planes`) random planes through the mesh each remove the
    faces whose centre lies within half a gap of it (the gap drawn in `gap`, shares of the
    bounding-box diagonal), and each cell the planes make is dropped with probability `drop`.
    The mesh itself when no draw of 8 keeps `keep_at_least` of the area."""
    diag = float(np.linalg.norm(mesh.extents))
    for _ in range(8):
        k = int(rng.integers(planes[0], planes[1] + 1))
        side = _planes_through(mesh.triangles_center, rng, k, (0.1, 0.9))
        keep = np.all(np.abs(side) > rng.uniform(*gap, size=k) * diag / 2, axis=1)
        cell = (side > 0).astype(np.int64) @ (1 << np.arange(k))
        cells = np.unique(cell)
        keep &= ~np.isin(cell, cells[rng.random(len(cells)) < drop])
        if keep.any() and mesh.area_faces[keep].sum() >= keep_at_least * mesh.area:
            return mesh.submesh([np.nonzero(keep)[0]], append=True)
    return mesh


def sdf_mesh(f: SDF, resolution: int = 72, extent: float = 1.2):
    """trimesh.Trimesh of the zero level set of f over [-extent, extent]^3, on a lattice of
    about `resolution` points per side, evaluated only near the surface (`sdf_lattice`)."""
    import torch
    import trimesh

    from ..render.extract import sdf_lattice, zero_level_mesh

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(f(x.double().numpy() * extent) / extent).float()

    values, mask = sdf_lattice(fn, resolution, chunk=1 << 18, show_progress=False)
    for axis in range(3):  # the box's faces cap what crosses them: march the outer layer too
        mask.index_fill_(axis, torch.tensor([0, mask.shape[axis] - 1]), True)
    values = torch.nn.functional.pad(values, (1, 1, 1, 1, 1, 1), value=max(float(values.max()), 1e-3))  # closed surfaces
    mask = torch.nn.functional.pad(mask, (1, 1, 1, 1, 1, 1), value=True)
    try:
        verts, faces = zero_level_mesh(values, mask)
    except ValueError:
        raise ValueError("the shape has no surface inside the box") from None
    res = values.shape[0] - 2
    index = (verts.astype(np.float64) + 1.0) * (res + 1) / 2 - 1.0  # zero_level_mesh spans the padded lattice over [-1, 1]
    return trimesh.Trimesh((index * 2.0 / (res - 1) - 1.0) * extent, faces, process=False)  # welded by marching cubes; merging near-coincident vertices would pinch edges


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


@dataclass
class RangeScan:
    """Scans as a depth camera sees a mesh (`range_scan`)."""
    views: Tuple[int, int] = (2, 8)
    """Cameras per scan (inclusive range)."""
    noise: Tuple[float, float] = (0.005, 0.02)
    """Gaussian sigma along each ray, as a share of the bounding-box diagonal."""
    outliers: Tuple[float, float] = (0.0, 0.05)
    pixels: int = 200
    """Rays per camera: pixels x pixels."""


def raycasting_scene(mesh):
    """Open3D's ray-casting scene (a BVH) of a trimesh mesh."""
    import open3d as o3d

    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(np.asarray(mesh.vertices, dtype=np.float64)),
        o3d.utility.Vector3iVector(np.asarray(mesh.faces, dtype=np.int32)))))
    return scene


def range_scan(mesh, views: int, sigma: float, n: int, rng: np.random.Generator,
               pixels: int = 200, scene=None, which: bool = False, power: float = 0.0):
    """(points (n, 3), cameras (views, 3)): what depth cameras see of the mesh. Each camera sits
    at a random direction 1.5 bounding-box diagonals from the box's centre, looking at it
    (pinhole, pixels x pixels, the bounding sphere filling the view); each ray's first hit gets
    Gaussian noise of `sigma` (world units) along the ray; n of all hits are drawn at random (all
    of them when there are fewer). Dense where the surface faces a camera, sparse where rays
    graze it, none where no camera sees (occluded parts, cavities). `scene`: the mesh's
    `raycasting_scene`, when the caller has it. which: also return each point's camera (its
    index into cameras), as a scanner's station is known (the same draws either way). power: the
    noise grows as (depth / 1.5 diagonals) ** power (a depth camera's: 2; 0, constant, draws the
    same numbers as before the option)."""
    import open3d as o3d

    scene = raycasting_scene(mesh) if scene is None else scene
    centre, diag = mesh.bounds.mean(0), float(np.linalg.norm(mesh.extents))
    fov = float(np.degrees(2 * np.arcsin(0.5 / 1.5)))  # the box's diagonal seen from 1.5 diagonals
    hits, cameras, seen_by = [], [], []
    for view in range(views):
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        up = [0.0, 0.0, 1.0] if abs(d[2]) < 0.9 else [1.0, 0.0, 0.0]
        cameras.append(centre + 1.5 * diag * d)
        rays = scene.create_rays_pinhole(fov, centre.tolist(), cameras[-1].tolist(), up, pixels, pixels).numpy().reshape(-1, 6)
        t = scene.cast_rays(o3d.core.Tensor(rays.astype(np.float32)))["t_hit"].numpy()
        ok = np.isfinite(t)
        length = np.linalg.norm(rays[ok, 3:], axis=1)  # t counts in units of the ray's direction vector
        noise = rng.normal(scale=sigma, size=int(ok.sum()))
        depth = t[ok] * length + (noise * (t[ok] * length / (1.5 * diag)) ** power if power else noise)
        hits.append(rays[ok, :3] + (depth / length)[:, None] * rays[ok, 3:])
        seen_by.append(np.full(int(ok.sum()), view))
    hits, seen_by = np.concatenate(hits).astype(np.float64), np.concatenate(seen_by)
    if len(hits) > n:
        pick = rng.choice(len(hits), n, replace=False)
        hits, seen_by = hits[pick], seen_by[pick]
    return (hits, np.array(cameras), seen_by) if which else (hits, np.array(cameras))


def visible(mesh, cameras: np.ndarray, points: np.ndarray, scene=None) -> np.ndarray:
    """(P,) bool: which surface points (P, 3) some camera sees (nothing of the mesh nearer on the
    line to it). Every point on the surface lies in `range_scan`'s views, so occlusion decides."""
    import open3d as o3d

    scene = raycasting_scene(mesh) if scene is None else scene
    tol = 1e-3 * float(np.linalg.norm(mesh.extents))
    seen = np.zeros(len(points), dtype=bool)
    for eye in cameras:
        d = points - eye
        dist = np.linalg.norm(d, axis=1)
        rays = np.concatenate([np.broadcast_to(eye, d.shape), d / dist[:, None]], 1).astype(np.float32)
        t = scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy()
        seen |= t >= dist - tol
    return seen


def add_outliers(pts: np.ndarray, share: float, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """pts with `share` of them replaced by points uniform in the box lo-hi enlarged by 5 %."""
    n_out = int(round(share * len(pts)))
    if n_out:
        pts = pts.copy()
        margin = 0.05 * (hi - lo)
        pts[rng.choice(len(pts), n_out, replace=False)] = rng.uniform(lo - margin, hi + margin, size=(n_out, 3))
    return pts


def scan_pair(mesh, n_clean: int, n_scan: int, rng: np.random.Generator, c: Optional[RangeScan] = None):
    """(noisy, clean): a range scan of n_scan points (`RangeScan`'s ranges) and n_clean surface
    points that its cameras see (the part of the surface the scan can show), or None when the
    scan saw too little (fewer than 100 hits or visible points)."""
    c = c or RangeScan()
    diag, scene = float(np.linalg.norm(mesh.extents)), raycasting_scene(mesh)  # one BVH for both
    noisy, cameras = range_scan(mesh, int(rng.integers(c.views[0], c.views[1] + 1)), float(rng.uniform(*c.noise)) * diag,
                                n_scan, rng, c.pixels, scene)
    surface = sample_surface(mesh, 2 * n_clean, rng)
    clean = surface[visible(mesh, cameras, surface, scene)][:n_clean]
    if len(noisy) < 100 or len(clean) < 100:
        return None
    return add_outliers(noisy, float(rng.uniform(*c.outliers)), *mesh.bounds, rng), clean


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
    return add_outliers(pts, float(rng.uniform(*c.outliers)), lo, hi, rng)
