"""Classical surface reconstruction from oriented points, through Open3D: screened Poisson
(Kazhdan & Hoppe 2013) and ball pivoting (Bernardini et al. 1999). The baselines of
`inr pointcloud mesh --method poisson|ball-pivoting` and of scripts/bench_surface.py. Both run
on the cloud taken relative to its box centre and put the mesh back: Open3D's Poisson octree
loses detail on coordinates far from the origin (georeferenced scans)."""

from __future__ import annotations

import numpy as np

POISSON_DEPTH = 8
BALL_RADII = (1.5, 3.0, 6.0)
"""Ball-pivoting radii, in multiples of the mean nearest-neighbour distance."""


def _cloud(points: np.ndarray, normals: np.ndarray):
    """(open3d, the cloud relative to its box centre, that centre)."""
    from .. import _external

    o3d = _external.open3d()
    points = np.asarray(points, np.float64)
    origin = (points.min(0) + points.max(0)) / 2
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points - origin))
    cloud.normals = o3d.utility.Vector3dVector(np.asarray(normals, np.float64))
    return o3d, cloud, origin


def _trimesh(mesh, origin: np.ndarray):
    import trimesh

    return trimesh.Trimesh(np.asarray(mesh.vertices) + origin, np.asarray(mesh.triangles), process=True)


def poisson(points: np.ndarray, normals: np.ndarray, depth: int = POISSON_DEPTH, trim: float = 0.0):
    """Screened Poisson surface (a trimesh) of an oriented cloud at octree `depth`; with trim > 0,
    the vertices whose Poisson density is below that quantile are removed (the usual cut of the
    surface Poisson invents where there are no points)."""
    o3d, cloud, origin = _cloud(points, normals)
    mesh, density = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(cloud, depth=int(depth))
    if trim > 0:
        density = np.asarray(density)
        mesh.remove_vertices_by_mask(density < np.quantile(density, trim))
    return _trimesh(mesh, origin)


def ball_pivoting(points: np.ndarray, normals: np.ndarray, radii=BALL_RADII):
    """Ball-pivoting surface (a trimesh) with balls of `radii` x the mean nearest-neighbour distance."""
    o3d, cloud, origin = _cloud(points, normals)
    spacing = float(np.asarray(cloud.compute_nearest_neighbor_distance()).mean())
    mesh = o3d.geometry.TriangleMesh.create_from_point_cloud_ball_pivoting(
        cloud, o3d.utility.DoubleVector([r * spacing for r in radii]))
    return _trimesh(mesh, origin)
