"""Normal orientation from visibility: a second opinion beside the neighbour-graph orientation.

Graph orientation (open3d's `orient_normals_consistent_tangent_plane`) propagates one side
along a tree of neighbours; where a part is thin, a neighbour on the other side of it can pass
the wrong side on, and a whole branch comes out flipped. Visibility says which side is outside
for the points a camera sees: seen from outside, a surface faces the camera. `visible_sides`:
1. VIEWS cameras on a sphere VIEW_DISTANCE bounding-box diagonals from the cloud's centre
   (Fibonacci directions), each with open3d's hidden point removal, on at most VOTE_AT_MOST
   points; a point seen by a camera votes for the side facing it; a point's vote is the mean
   of its votes (0: unseen, or seen from both sides as much).
2. The votes spread along the tangent neighbour graph (DIFFUSE_NEIGHBOURS neighbours, the
   edges that run along the surface, not across it, each signed by whether the two normals
   agree): DIFFUSE_STEPS steps of f <- DIFFUSE_VOTE * vote + (1 - DIFFUSE_VOTE) * (mean of
   the neighbours' signed f); a point takes the side of its f's sign.
On an open surface seen from both sides the votes disagree from place to place, and the result
can break a good orientation into patches. So `prefer_visible` keeps whichever of the two has
the smaller `seam`: the tangent edges whose two normals point to opposite sides.
Chosen on range and evenly spread scans of the training meshes (not the held-out ones); see the
README's "Normals" table."""

from __future__ import annotations

import numpy as np

VIEWS, VIEW_DISTANCE = 14, 3.0
VOTE_AT_MOST = 20_000
"""Hidden point removal costs about 0.1 s per view on 20k points and 3 s on 200k: larger clouds
vote on a subset, and the votes reach the other points through the neighbour graph."""
DIFFUSE_NEIGHBOURS, DIFFUSE_STEPS, DIFFUSE_VOTE = 10, 60, 0.1
TANGENT = 0.5
"""An edge runs along the surface when the offset between its points makes less than this
cosine with both normals (across a thin part the offset lies along them)."""


def view_directions(m: int) -> np.ndarray:
    """(m, 3) unit vectors spread evenly over the sphere (a Fibonacci lattice)."""
    i = np.arange(m) + 0.5
    polar, azimuth = np.arccos(1 - 2 * i / m), np.pi * (1 + 5**0.5) * i
    return np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], 1)


def tangent_edges(points: np.ndarray, normals: np.ndarray, k: int = DIFFUSE_NEIGHBOURS):
    """(i, j, n_i . n_j) over the k-nearest-neighbour edges that run along the surface."""
    from scipy.spatial import cKDTree

    k = min(k, len(points) - 1)
    _, near = cKDTree(points).query(points, k + 1, workers=-1)
    i, j = np.repeat(np.arange(len(points)), k), near[:, 1:].ravel()
    offset = points[j] - points[i]
    length = np.linalg.norm(offset, axis=1) + 1e-12
    along = (np.abs(np.sum(normals[i] * offset, 1)) < TANGENT * length) & (np.abs(np.sum(normals[j] * offset, 1)) < TANGENT * length)
    return i[along], j[along], np.sum(normals[i[along]] * normals[j[along]], 1)


def seam(points: np.ndarray, normals: np.ndarray) -> float:
    """How much the oriented normals disagree along the surface: the sum of |n_i . n_j| over the
    tangent edges whose normals point to opposite sides, per tangent edge."""
    return _seam(tangent_edges(points, normals)[2])


def _seam(c: np.ndarray) -> float:
    return float(np.sum(-c[c < 0]) / max(len(c), 1))


def votes(o3d, points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """(N,) in [-1, 1]: the mean visibility vote for each normal's side (module docstring, 1)."""
    lo, hi = points.min(0), points.max(0)
    centre, diag = (lo + hi) / 2, float(np.linalg.norm(hi - lo)) or 1.0
    rows = np.arange(len(points))
    if len(points) > VOTE_AT_MOST:
        rows = np.sort(np.random.default_rng(0).choice(len(points), VOTE_AT_MOST, replace=False))
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[rows]))
    total, seen = np.zeros(len(points)), np.zeros(len(points))
    for d in view_directions(VIEWS):
        camera = centre + VIEW_DISTANCE * diag * d
        _, idx = cloud.hidden_point_removal(camera, 100 * VIEW_DISTANCE * diag)
        idx = rows[np.asarray(idx, dtype=np.int64)]
        total[idx] += np.sign(np.sum(normals[idx] * (camera - points[idx]), 1))
        seen[idx] += 1
    return np.where(seen > 0, total / np.maximum(seen, 1), 0.0)


def visible_sides(o3d, points: np.ndarray, normals: np.ndarray, edges=None) -> np.ndarray:
    """(N,) +1 or -1: the side of each normal that visibility and its neighbours agree on
    (`edges`: `tangent_edges(points, normals)`, when the caller has them)."""
    from scipy.sparse import csr_matrix

    vote = votes(o3d, points, normals)
    i, j, c = tangent_edges(points, normals) if edges is None else edges
    graph = csr_matrix((c, (i, j)), shape=(len(points),) * 2)
    graph = graph + graph.T
    weight = np.asarray(abs(graph).sum(1)).ravel() + 1e-12
    f = vote.copy()
    for _ in range(DIFFUSE_STEPS):
        f = DIFFUSE_VOTE * vote + (1 - DIFFUSE_VOTE) * (graph @ f) / weight
    return np.where(f < 0, -1.0, 1.0)


def prefer_visible(o3d, points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """`normals` (consistently oriented), or them turned to the sides of `visible_sides` where
    that leaves a smaller `seam`. The tangent edges do not depend on the normals' signs, so
    both seams come from one neighbour search. Clouds that hidden point removal cannot take
    (qhull fails on degenerate ones, e.g. all points on a line) keep `normals`."""
    if len(points) <= DIFFUSE_NEIGHBOURS + 1:
        return normals
    i, j, c = edges = tangent_edges(points, normals)
    try:
        sides = visible_sides(o3d, points, normals, edges)
    except RuntimeError:
        return normals
    return normals * sides[:, None] if _seam(c * sides[i] * sides[j]) < _seam(c) else normals
