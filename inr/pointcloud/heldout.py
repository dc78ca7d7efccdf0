"""Shapes outside the synthetic generator's families, for measuring generalisation.

The training generator (`shapes.py`) makes closed SDF solids: boxes, spheres, cylinders, tori,
capsules, cones, thin plates and rods, their (smooth) unions, twisted, bent or tapered. None of
the shapes here is of those families:
- tetrahedron, octahedron: flat triangular faces meeting at sharp, non-right angles (open3d);
- mobius: a one-sided, open strip (open3d);
- trefoil: a knotted tube, swept along the trefoil curve with rotation-minimising frames;
- star: a five-pointed star prism (concave corners);
- terrain: an open height-field patch with a crease, like a ground scan.

`lidar_scene` is apart (not in `heldout_meshes`): a site 100 units across, for scans whose noise
is far below their point spacing and whose density varies a hundredfold (laser scanners).
"""

from __future__ import annotations

from typing import Dict

import numpy as np


def _from_open3d(mesh):
    import trimesh

    return trimesh.Trimesh(np.asarray(mesh.vertices), np.asarray(mesh.triangles), process=True)


def _grid_faces(rows: int, cols: int, wrap_cols: bool, wrap_rows: bool = False) -> np.ndarray:
    """Two triangles per cell of a rows x cols vertex grid (row-major), optionally closed around."""
    faces = []
    for i in range(rows if wrap_rows else rows - 1):
        for j in range(cols if wrap_cols else cols - 1):
            a, b = i * cols + j, i * cols + (j + 1) % cols
            c, d = ((i + 1) % rows) * cols + j, ((i + 1) % rows) * cols + (j + 1) % cols
            faces += [(a, c, b), (b, c, d)]
    return np.array(faces)


def trefoil(tube: float = 0.5, segments: int = 240, sides: int = 20):
    import trimesh

    t = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    curve = np.stack([np.sin(t) + 2 * np.sin(2 * t), np.cos(t) - 2 * np.cos(2 * t), -np.sin(3 * t)], 1)
    tangent = np.roll(curve, -1, 0) - np.roll(curve, 1, 0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    normals = np.zeros_like(curve)
    n = np.cross(tangent[0], [0.0, 0.0, 1.0])
    for i in range(segments):  # parallel transport: remove the tangential part, renormalise
        n = n - n.dot(tangent[i]) * tangent[i]
        normals[i] = n = n / np.linalg.norm(n)
    # the transported frame comes back rotated by some angle: spread the correction along the loop
    end = normals[-1] - normals[-1].dot(tangent[0]) * tangent[0]
    miss = np.arctan2(np.cross(end, normals[0]).dot(tangent[0]), end.dot(normals[0]))
    binormals = np.cross(tangent, normals)
    angle = miss * np.arange(segments) / segments
    normals, binormals = (np.cos(angle)[:, None] * normals + np.sin(angle)[:, None] * binormals,
                          -np.sin(angle)[:, None] * normals + np.cos(angle)[:, None] * binormals)
    phi = np.linspace(0, 2 * np.pi, sides, endpoint=False)
    ring = np.cos(phi)[None, :, None] * normals[:, None] + np.sin(phi)[None, :, None] * binormals[:, None]
    verts = (curve[:, None] + tube * ring).reshape(-1, 3)
    mesh = trimesh.Trimesh(verts, _grid_faces(segments, sides, wrap_cols=True, wrap_rows=True), process=True)
    if mesh.volume < 0:  # faces wound inwards for this curve's orientation
        mesh.invert()
    return mesh


def star(points: int = 5, outer: float = 1.0, inner: float = 0.45, height: float = 0.5):
    import trimesh

    ang = np.pi / 2 + np.arange(2 * points) * np.pi / points
    rad = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    ring = np.stack([rad * np.cos(ang), rad * np.sin(ang)], 1)
    m = len(ring)
    verts = np.concatenate([np.c_[ring, np.zeros(m)], np.c_[ring, np.full(m, height)],
                            [[0, 0, 0], [0, 0, height]]])
    bottom, top = 2 * m, 2 * m + 1
    faces = []
    for j in range(m):
        k = (j + 1) % m
        faces += [(bottom, k, j), (top, m + j, m + k), (j, k, m + k), (j, m + k, m + j)]
    return trimesh.Trimesh(verts, np.array(faces), process=True)


def star_area(points: int = 5, outer: float = 1.0, inner: float = 0.45) -> float:
    """The star polygon's area: 2 * points triangles from the centre."""
    return 2 * points * 0.5 * outer * inner * np.sin(np.pi / points)


def terrain(size: int = 64):
    import trimesh

    x, y = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    z = 0.12 * np.sin(3 * x) * np.cos(2 * y) + 0.06 * np.sin(7 * x + 5 * y) - 0.25 * np.abs(x - 0.3 * y - 0.2)
    verts = np.stack([x, y, z], -1).reshape(-1, 3)
    return trimesh.Trimesh(verts, _grid_faces(size, size, wrap_cols=False), process=True)


def heldout_meshes() -> Dict[str, object]:
    import open3d as o3d

    g = o3d.geometry.TriangleMesh
    return {
        "tetrahedron": _from_open3d(g.create_tetrahedron(radius=1.0)),
        "octahedron": _from_open3d(g.create_octahedron(radius=1.0)),
        "mobius": _from_open3d(g.create_mobius(length_split=120, width_split=16, twists=1, radius=1.0, width=0.8)),
        "trefoil": trefoil(),
        "star": star(),
        "terrain": terrain(),
    }


def _ground_height(x, y):
    return 1.5 * np.sin(x / 13) * np.cos(y / 17) + 0.5 * np.sin(x / 5 + y / 7)


def lidar_scene(seed: int = 0, grid: int = 200):
    """A site like a laser scanner's (units: metres): 100 x 100 of rolling ground (height ±2),
    six boxes 6-15 across and 4-12 tall (buildings), ten poles 0.3 across and 8 tall, and a wall
    5 cm thick, 30 long and 2 tall. None of it is a shape of the training generator; its parts
    span 300x in size."""
    import trimesh

    rng = np.random.default_rng(seed)
    x, y = np.meshgrid(np.linspace(0, 100, grid), np.linspace(0, 100, grid), indexing="ij")
    ground = trimesh.Trimesh(np.stack([x, y, _ground_height(x, y)], -1).reshape(-1, 3),
                             _grid_faces(grid, grid, wrap_cols=False))
    parts = [ground]
    for _ in range(6):
        size = (*rng.uniform(6, 15, 2), rng.uniform(4, 12))
        px, py = rng.uniform(10, 90, 2)
        parts.append(trimesh.creation.box(size).apply_translation((px, py, _ground_height(px, py) + size[2] / 2 - 0.5)))
    for _ in range(10):
        px, py = rng.uniform(5, 95, 2)
        parts.append(trimesh.creation.cylinder(0.15, 8, sections=16).apply_translation((px, py, _ground_height(px, py) + 3.8)))
    parts.append(trimesh.creation.box((30, 0.05, 2.0)).apply_translation((50, 20, _ground_height(50, 20) + 0.8)))
    return trimesh.util.concatenate(parts)
