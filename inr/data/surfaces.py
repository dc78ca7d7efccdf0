"""Surfaces as oriented points: a mesh file (points sampled on its faces, with the face normals)
or a point-cloud file (its normals, or normals estimated and oriented: with open3d, or without
it by the PCA and spanning-tree twin `plain_normals`).

Every problem with an input is an InputError naming the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import InputError
from .pointclouds import FORMATS as CLOUD_FORMATS
from .pointclouds import Scan, check_ply_faces, read_scan, without_mixed

MESH_FORMATS = (".ply", ".obj", ".off", ".stl", ".glb", ".gltf")
NORMAL_NEIGHBOURS = 30
"""Neighbours of the PCA normal estimate (open3d's KNN search)."""
ORIENT_NEIGHBOURS = 14
"""Neighbours of the graph along which normals are made consistent (`graph_consistent`; open3d's
k = 15 counts the point itself)."""
NEAREST_RING = 6
"""`graph_consistent` leaves each point's nearest this many out of the graph (bar the Euclidean
spanning tree's edges)."""
JOIN_AT_MOST, JOIN_SAMPLE, JOIN_PAIRS = 64, 4096, 8
"""`_join_parts`: the most parts turned to agree, the points of each that look for the closest
pairs, and the pairs that vote."""
FINER_CHUNK = 1 << 18
"""Points whose finer-or-wider normal `_finer_or_wider` decides at once (all at once, a 10-million-
point scan's temporaries took 1.3 GB)."""
PCA_CHUNK = 65_536
"""Points whose covariances `_pca` decomposes at once (and whose neighbourhoods the twin holds:
47 MB of float64)."""
ORIENT_AT_MOST = 200_000
"""Larger clouds are made consistent on a random subset of at most this many points (chosen when
open3d's graph orientation took 10-15 s for 100k points on 2 cores and 246 s for 1M; our own,
`graph_consistent`, takes about 1 s for the 125k subset of 1M points):
the wider scale's subset (WIDER), its normals oriented; every other point then takes the side
that its SUBSET_NEAREST nearest subset points agree on."""
WIDER = 8
"""The wider scale of the normals: PCA over the NORMAL_NEIGHBOURS neighbours of each point of a
random subset of 1/WIDER of the cloud (at most ORIENT_AT_MOST points), a neighbourhood about
WIDER times the count; a point takes it where its own is noisier (`_finer_or_wider`)."""
MIN_WIDE = 5_000
"""No wider scale for clouds whose subset would have fewer points."""
SUBSET_NEAREST = 5
"""Subset points whose wide normals a point follows (`_finer_or_wider`)."""


@dataclass
class Surface:
    """Oriented surface points (float64) and where they came from."""

    points: np.ndarray
    normals: Optional[np.ndarray]
    source: str
    """'mesh' (sampled on faces) or 'points'."""
    normals_from: str
    """'faces', 'file', 'estimated', 'estimated, their sides from the file's' (a file that knows
    some of its normals), 'estimated, facing the scanner' (E57, PTX and organized PCD scans: the
    side their stations saw) or 'none' (read_surface(..., normals=False) of a cloud without them)."""
    path: str
    strays: int = 0
    """Far stray points of the cloud left out (`inr.pointcloud.strays`)."""
    mixed: int = 0
    """Mixed pixels of a scan whose stations are known left out (`inr.pointcloud.mixed`)."""
    colors: Optional[np.ndarray] = None
    """The points' colours (N, 3) in [0, 1]: a cloud's, or a mesh's (vertex or face colours, or
    its texture) at the sampled points; None when the file has none."""
    withheld: int = 0
    """Points a LAS/LAZ file marks withheld, left out (`inr.data.las.read_las`)."""


def read_mesh(path) -> "object":
    """A trimesh.Trimesh with at least one face, or None when the file holds points only
    (a PLY point cloud). Other problems are InputErrors."""
    import trimesh

    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file")
    suffix = path.suffix.lower()
    if suffix not in MESH_FORMATS:
        raise InputError(path, f"unsupported mesh format {suffix or '(none)'}; use one of {', '.join(MESH_FORMATS)}")
    try:
        geom = trimesh.load(path, process=False)  # processing would drop NaN vertices and their faces quietly
    except Exception as exc:  # trimesh raises many types for bad files
        raise InputError(path, f"cannot be read as a mesh ({type(exc).__name__}: {exc})") from None
    if isinstance(geom, trimesh.Scene):
        geom = geom.to_geometry() if geom.geometry else None
    if geom is None or isinstance(geom, trimesh.PointCloud) or not hasattr(geom, "faces") or len(geom.faces) == 0:
        if suffix == ".ply":
            return None
        raise InputError(path, "holds no faces")
    bad = ~np.isfinite(geom.vertices).all(1)
    if bad.any():
        raise InputError(path, f"{int(bad.sum())} of {len(bad)} vertices have NaN or infinite coordinates (first: vertex {int(np.argmax(bad))})")
    geom.process()  # merge duplicate vertices, as loading with process=True does
    if suffix == ".ply":
        check_ply_faces(path, len(geom.faces))
    if geom.area <= 0:
        raise InputError(path, "has faces of zero total area")
    return geom


def estimate_normals(points: np.ndarray, orient_at_most: int = ORIENT_AT_MOST, sides_from=None, towards=None,
                     up=None) -> np.ndarray:
    """Unit normals of a cloud: PCA over NORMAL_NEIGHBOURS neighbours, or over a subset's
    neighbours where that wider scale is the flatter one (noisy parts, `_finer_or_wider`, WIDER),
    made consistent along a neighbour graph (`graph_consistent`; through a subset for clouds over
    `orient_at_most` points, see ORIENT_AT_MOST), or by visibility where that leaves fewer seams
    (`inr.data.orientation`), then turned outwards as a whole (pointing away from the centroid on
    average); on a closed cloud, parts left pointing inwards are turned back by the winding
    number (`inr.data.orientation.turn_inverted_parts`). Thin or open parts may come out
    flipped: give normals when the scanner has them.
    sides_from: (points, normals) of a cloud whose normals have the right sides (the scan a
    denoised cloud came from, with its scanner's normals): the sides come from them instead
    (`inr.data.orientation.sides_like`), and none of the orientation steps runs. Rows NaN where
    a normal is unknown: then the orientation steps run, and the known ones turn the cloud as a
    whole and the points where they are dense (`inr.data.orientation.sides_where_known`).
    towards: (points, unit vectors towards the scanner station that saw each point: an E57, PTX or PCD
    scan's). From one station (`inr.data.orientation.one_station`), each normal takes the side
    its 8 nearest points' directions agree on, as with sides_from; from several, after the
    orientation steps the cloud as a whole takes the side the stations saw
    (`inr.data.orientation.face_stations`; a room scanned from inside faces inwards).
    up: the direction that is up where the file's format says so (LAS: +z), which an open cloud
    seen from above then faces (`inr.data.orientation.face_up`).
    Without open3d: `plain_normals`."""
    from .. import _external

    return _estimate(points, _external.open3d() if _external.has_open3d() else None, orient_at_most, sides_from,
                     towards, up)


def plain_normals(points: np.ndarray, orient_at_most: int = ORIENT_AT_MOST, sides_from=None, towards=None,
                  up=None) -> np.ndarray:
    """`estimate_normals` without open3d (scipy only): the same PCA and graph orientation, with no
    visibility check (it needs open3d's hidden point removal): thin parts come out flipped more
    often."""
    return _estimate(points, None, orient_at_most, sides_from, towards, up)


def _estimate(points: np.ndarray, o3d, orient_at_most: int, sides_from=None, towards=None, up=None) -> np.ndarray:
    """`estimate_normals` with open3d (`o3d`, the module) or without it (None)."""
    from .orientation import (face_stations, face_up, one_station, prefer_visible, sides_like, sides_where_known,
                              turn_inverted_parts)

    points = np.asarray(points, np.float64)
    centre = (points.min(0) + points.max(0)) / 2 if len(points) else np.zeros(3)
    if sides_from is not None and np.isnan(np.asarray(sides_from[1])[:, 0]).any():  # known on some points only
        oriented = _estimate(points, o3d, orient_at_most, None, towards, up)
        return sides_where_known(points - centre, oriented, np.asarray(sides_from[0], np.float64) - centre,
                                 np.asarray(sides_from[1], np.float64))
    points = points - centre  # normals do not move with the cloud; open3d's
    # covariances and orientation lose the detail of coordinates far from the origin (georeferenced scans)
    if len(points) < 3:
        return np.tile([0.0, 0.0, 1.0], (len(points), 1))
    if towards is not None and sides_from is None and one_station(*towards):
        sides_from, towards = towards, None  # one station sees each surface from one side: point by point
    if sides_from is not None:
        known = (np.asarray(sides_from[0], np.float64) - centre, np.asarray(sides_from[1], np.float64))

        def orient(p: np.ndarray, n: np.ndarray) -> np.ndarray:
            return sides_like(p, n, *known)
    elif o3d is None:
        orient = graph_consistent
    else:
        def orient(p: np.ndarray, n: np.ndarray) -> np.ndarray:
            return prefer_visible(o3d, p, graph_consistent(p, n))
    normals, variation = _pca(points, o3d)
    large = len(points) > orient_at_most  # oriented through the subset
    size = min(len(points) // WIDER, orient_at_most)
    if size >= MIN_WIDE or large:  # else too few points for a wider scale
        subset = np.sort(np.random.default_rng(0).choice(len(points), size, replace=False))
        wide, wide_variation = _pca(points[subset], o3d)
        if large:
            wide = orient(points[subset], wide)
        near = _nearest_of_subset(points, subset)
        normals = _finer_or_wider(normals, variation, near, wide, wide_variation, oriented=large)
    if not large:
        normals = orient(points, normals)
    if sides_from is not None:
        return normals
    normals = turn_inverted_parts(points, orient_outwards(points, normals))
    if towards is not None:
        normals = face_stations(points, normals, np.asarray(towards[0], np.float64) - centre, np.asarray(towards[1], np.float64))
    return normals if up is None else face_up(normals, np.asarray(up, np.float64))


def _nearest_of_subset(points: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """Each point's SUBSET_NEAREST nearest points of points[subset], as int32 rows into the subset,
    searched a chunk at a time (`knn_chunks`; with their distances, as int64, a 10-million-point
    scan's took 570 MB)."""
    import torch

    from ..pointcloud.knn import knn_chunks

    cloud = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
    near = np.empty((len(points), min(SUBSET_NEAREST, len(subset))), np.int32)
    for start, idx, _ in knn_chunks(cloud, cloud[torch.from_numpy(subset)], SUBSET_NEAREST):
        near[start:start + len(idx)] = idx.numpy()
    return near


def _finer_or_wider(normals: np.ndarray, variation: np.ndarray, near: np.ndarray, wide: np.ndarray,
                    wide_variation: np.ndarray, oriented: bool) -> np.ndarray:
    """Each point's normal at the finer or the wider scale: its own, or the mean of its
    SUBSET_NEAREST nearest subset points' (`near`) wide normals, estimated over the subset's own
    neighbours (a neighbourhood about len(normals)/len(wide) times larger), whichever region is
    flatter: surface variation (the smallest eigenvalue's share) grows with the neighbourhood on
    a smooth curved surface but falls on a noisy one, whose dense neighbourhoods lie inside the
    noise; there the own PCA normals scatter (a 1M-point scan with noise of 0.25 % of its
    diagonal: 12 % of them flipped, 38 degrees off on average), the wider ones do not. The
    region: the mean own variation of the points nearest to each subset point, averaged over
    the SUBSET_NEAREST (one point's own variation is itself noisy). oriented: the wide normals
    have their sides, and the own normals take the side their subset points agree on; else the
    5 wide normals take the side of the nearest before they are averaged (orientation follows).
    Rows go FINER_CHUNK at a time (each holds a few (rows, 3) arrays)."""
    counts = np.bincount(near[:, 0], minlength=len(wide))
    fine = np.bincount(near[:, 0], variation, len(wide)) / np.maximum(counts, 1)
    out = np.empty_like(normals)
    for start in range(0, len(normals), FINER_CHUNK):
        rows = near[start:start + FINER_CHUNK]
        own = normals[start:start + FINER_CHUNK]
        first = wide[rows[:, 0]]
        mean, fine_sum, wide_sum = np.zeros_like(own), np.zeros(len(own)), np.zeros(len(own))
        for j in range(rows.shape[1]):  # (n, 3) at a time: an (N, k, 3) gather cost 2 s of 1M points' 10
            w = wide[rows[:, j]]
            if not oriented:
                w *= np.sign(np.einsum("nd,nd->n", w, first) + 1e-12)[:, None]
            mean += w
            fine_sum += fine[rows[:, j]]
            wide_sum += wide_variation[rows[:, j]]
        if oriented:
            own = np.where((np.einsum("nd,nd->n", mean, own) < 0)[:, None], -own, own)
        length = np.linalg.norm(mean, axis=1, keepdims=True)
        use_own = (fine_sum <= wide_sum) | (length[:, 0] < 1e-6)
        out[start:start + FINER_CHUNK] = np.where(use_own[:, None], own, mean / np.maximum(length, 1e-12))
    return out


def _pca(points: np.ndarray, o3d, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Unit normals by PCA over each point's NORMAL_NEIGHBOURS nearest points (side arbitrary: the
    covariance's eigenvector of the smallest eigenvalue) and the surface variation, that
    eigenvalue's share of their sum (0 on a plane, 1/3 for an isotropic blob). In C++ where the
    native kernels build (`inr.pointcloud.knn`'s grid search, `native.pca_normals`: a million
    points 2.6 s against open3d's 5.5 s), else the covariances from open3d's KNN search, or
    without it (None) from scipy's k-d tree, eigendecomposed by NumPy (backend: 'native', 'numpy'
    for those, or 'auto')."""
    from .. import _external

    if len(points) and _external.uses_native(backend, "PCA normals", twin="numpy"):
        import torch

        from .. import native
        from ..pointcloud.knn import knn_chunks

        cloud = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
        parts = [native.pca_normals(cloud, idx) for _, idx, _ in knn_chunks(cloud, cloud, NORMAL_NEIGHBOURS)]
        return torch.cat([n for n, _ in parts]).numpy(), torch.cat([v for _, v in parts]).numpy()
    normals, variation = np.empty_like(points), np.empty(len(points))

    def from_covariances(part: slice, cov: np.ndarray) -> None:
        values, vectors = np.linalg.eigh(cov)
        normals[part], variation[part] = vectors[:, :, 0], values[:, 0] / np.maximum(values.sum(1), 1e-300)

    if o3d is not None:
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        cloud.estimate_covariances(o3d.geometry.KDTreeSearchParamKNN(NORMAL_NEIGHBOURS))
        cov = np.asarray(cloud.covariances)
        for start in range(0, len(points), PCA_CHUNK):
            from_covariances(slice(start, start + PCA_CHUNK), cov[start:start + PCA_CHUNK])
        return normals, variation
    from scipy.spatial import cKDTree

    tree, k = cKDTree(points), min(NORMAL_NEIGHBOURS, len(points))
    for start in range(0, len(points), PCA_CHUNK):  # (chunk, k, 3) neighbourhoods at a time
        part = slice(start, start + PCA_CHUNK)
        hood = points[tree.query(points[part], k, workers=-1)[1]]
        hood -= hood.mean(1, keepdims=True)
        from_covariances(part, np.einsum("nki,nkj->nij", hood, hood))
    return normals, variation


def graph_consistent(points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """The normals, each kept or flipped so that neighbours agree: Hoppe et al.'s (1992) propagation
    along a minimum spanning tree of a neighbour graph weighted by 1 - |n_i . n_j|, each connected
    part started from its highest point facing up (+z), the parts then turned to agree where they
    come closest (`_join_parts`). The graph, as in open3d's
    orient_normals_consistent_tangent_plane: the Euclidean minimum spanning tree (here of the
    ORIENT_NEIGHBOURS-nearest-neighbour graph, open3d's from a Delaunay triangulation) and the
    neighbour edges past the nearest ring (rank > NEAREST_RING; open3d leaves out the Delaunay
    ones, mostly the same). Across a thin part a point's nearest neighbours include the other
    side, where opposite normals weigh ~0: such edges would pass the wrong side on. Without the
    triangulation, 2-3x faster than open3d's (which it replaced, 2026-12-06, session 48: the
    README's Normals)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    from ..pointcloud.knn import nearest

    n = len(points)
    k = min(ORIENT_NEIGHBOURS, n - 1)
    if k < 1:
        return normals.copy()
    d2, near = nearest(points, points, k + 1)
    i, j = np.repeat(np.arange(n), k), near[:, 1:].ravel()
    # explicit zeros are no edge to scipy: coincident points and parallel normals weigh a little
    span = minimum_spanning_tree(coo_matrix((np.sqrt(d2[:, 1:].ravel().astype(np.float64)) + 1e-300, (i, j)),
                                                 shape=(n, n))).tocoo()
    far = np.tile(np.arange(1, k + 1), n) > NEAREST_RING
    key = np.unique(np.concatenate([_edge_key(span.row, span.col, n), _edge_key(i[far], j[far], n)]))
    i, j = key // n, key % n  # each edge once (coo sums repeats)
    weight = 1.0 - np.abs(np.einsum("nd,nd->n", normals[i], normals[j])) + 1e-9
    tree = minimum_spanning_tree(coo_matrix((weight, (i, j)), shape=(n, n))).tocoo()
    signs, part = _tree_signs(points, normals, tree.row, tree.col)
    return _join_parts(points, normals * signs[:, None], part)


def _join_parts(points: np.ndarray, normals: np.ndarray, part: np.ndarray) -> np.ndarray:
    """normals, with each part of the neighbour graph after the largest turned to agree with the
    larger parts where they come closest (as open3d's spanning tree bridges the gap between
    separate sheets with its shortest edge): the sum of n_a . n_b over the JOIN_PAIRS closest
    pairs between the part (at most JOIN_SAMPLE of its points) and the larger parts decides.
    Parts past the JOIN_AT_MOST largest keep their own sides (their highest point facing up)."""
    from scipy.spatial import cKDTree

    sizes = np.bincount(part)
    if len(sizes) < 2:
        return normals
    order = np.argsort(-sizes, kind="stable")
    normals, done = normals.copy(), part == order[0]
    rng = np.random.default_rng(0)
    for q in order[1:JOIN_AT_MOST]:
        mine = np.nonzero(part == q)[0]
        if len(mine) > JOIN_SAMPLE:
            mine = rng.choice(mine, JOIN_SAMPLE, replace=False)
        others = np.nonzero(done)[0]
        gap, near = cKDTree(points[others]).query(points[mine], 1, workers=-1)
        pairs = np.argsort(gap)[:JOIN_PAIRS]
        if np.einsum("nd,nd->", normals[mine[pairs]], normals[others[near[pairs]]]) < 0:
            normals[part == q] *= -1
        done |= part == q
    return normals


def _edge_key(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(i, j).astype(np.int64) * n + np.maximum(i, j)


def _tree_signs(points: np.ndarray, normals: np.ndarray, i: np.ndarray, j: np.ndarray):
    """(N,) +-1: each normal's sign so that it agrees with its parent's along the forest (i, j),
    each tree's root (its highest point) facing up. One breadth-first pass from a node joined to
    every root (up, (0, 0, 1)), then the signs multiplied up to the roots by pointer jumping
    (log2 of the trees' depth rounds of NumPy, no loop over points). And (N,) each point's tree."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n = len(points)
    forest = coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)).tocsr()
    count, part = connected_components(forest, directed=False)
    by_part = np.lexsort((points[:, 2], part))
    roots = by_part[np.r_[np.nonzero(np.diff(part[by_part]))[0], n - 1]]  # each part's highest point
    i, j = np.r_[i, roots], np.r_[j, np.full(count, n)]
    _, parent = breadth_first_order(coo_matrix((np.ones(len(i)), (i, j)), shape=(n + 1, n + 1)).tocsr(), n,
                                    directed=False)
    parent[n] = n
    ends = np.vstack([normals, [0.0, 0.0, 1.0]])
    sign = np.where(np.einsum("nd,nd->n", ends, ends[parent]) < 0, -1, 1).astype(np.int8)  # against the parent's
    while (parent != n).any():
        sign, parent = sign * sign[parent], parent[parent]
    return sign[:n], part


def orient_outwards(points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """normals, or all of them flipped, whichever points away from the centroid on average."""
    outward = float(np.sum((points - points.mean(0)) * normals))
    return normals if outward >= 0 else -normals


def mesh_colours(mesh, faces: np.ndarray, bary: np.ndarray) -> Optional[np.ndarray]:
    """(N, 3) colours in [0, 1] of points on a trimesh mesh, given by their faces and barycentric
    weights (of the faces' three vertices): vertex colours interpolated, a face's colour, or the
    texture image at the interpolated UV (bilinear); None when the mesh has none of these."""
    from trimesh.visual.color import uv_to_interpolated_color

    visual = mesh.visual
    if visual.kind == "vertex":
        rgb = np.asarray(visual.vertex_colors, np.float64)[:, :3] / 255
        return np.einsum("nv,nvc->nc", bary, rgb[mesh.faces[faces]])
    if visual.kind == "face":
        return np.asarray(visual.face_colors, np.float64)[faces, :3] / 255
    if visual.kind == "texture" and getattr(visual, "uv", None) is not None:
        material = visual.material
        image = getattr(material, "image", None) or getattr(material, "baseColorTexture", None)
        if image is not None:
            uv = np.einsum("nv,nvc->nc", bary, np.asarray(visual.uv, np.float64)[mesh.faces[faces]])
            return np.asarray(uv_to_interpolated_color(uv, image), np.float64)[:, :3] / 255
    return None


def read_surface(path, mesh_points: int = 100_000, seed: int = 0, duplicates: str = "drop",
                 normals: bool = True) -> Surface:
    """The oriented points of a mesh (mesh_points samples, area-uniform, with face normals) or of
    a point cloud (all its points but far strays, `inr.pointcloud.strays`, and a stationary
    scanner's mixed pixels, `inr.pointcloud.mixed`; normals from the file,
    or estimated, facing the scanner stations of an E57 or PTX terrestrial scan or an organized PCD;
    zero or NaN normals, as some writers leave unknown ones, count as unknown: where some are
    known, all are estimated and the known ones give the sides). normals=False: a cloud without
    complete normals gets none (for callers that need only the points: no estimate to pay)."""
    want_normals = normals
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file")
    suffix = path.suffix.lower()
    if suffix not in set(MESH_FORMATS) | set(CLOUD_FORMATS):
        raise InputError(path, f"unsupported format {suffix or '(none)'}; meshes: {', '.join(MESH_FORMATS)}; "
                         f"point clouds: {', '.join(CLOUD_FORMATS)}")
    mesh = read_mesh(path) if suffix in MESH_FORMATS else None
    if mesh is not None:
        import trimesh

        pts, faces, bary = trimesh.sample.sample_surface(mesh, int(mesh_points), seed=seed, return_barycentric=True)
        return Surface(np.asarray(pts, np.float64), np.asarray(mesh.face_normals[faces], np.float64), "mesh", "faces",
                       str(path), colors=mesh_colours(mesh, faces, bary))
    scan, mixed = without_mixed(read_scan(path, duplicates))  # returns blended across a depth edge
    from ..pointcloud.strays import strays

    far = strays(scan.points)
    if far.any():  # they would set the box the field is fitted in
        scan = scan.subset(~far)
    far = int(far.sum())
    points, colors = scan.points, scan.colors
    if len(points) < 10:
        raise InputError(path, f"holds {len(points)} points; a surface needs at least 10")
    if scan.complete_normals is not None:
        return Surface(points, scan.complete_normals, "points", "file", str(path), far, mixed, colors, scan.withheld)
    if not want_normals:
        return Surface(points, None, "points", "none", str(path), far, mixed, colors, scan.withheld)
    how = ("estimated" + (", their sides from the file's" if scan.normals is not None  # the file knows some
                          else ", facing the scanner" if scan.towards is not None else ""))
    return Surface(points, scan_normals(points, scan), "points", how, str(path), far, mixed, colors, scan.withheld)


def scan_normals(points: np.ndarray, scan: Scan) -> np.ndarray:
    """`estimate_normals` of `points` (a scan's own, or a cloud made from them: denoised, fewer)
    with what the scan (`read_scan`) says of their sides: its normals give each point's side, its
    stations (E57, PTX, PCD viewpoint) and its up (LAS) the whole cloud's or each point's, as `estimate_normals`
    takes them."""
    return estimate_normals(points, sides_from=None if scan.normals is None else (scan.points, scan.normals),
                            towards=None if scan.towards is None else (scan.points, scan.towards), up=scan.up)


def surface_metrics(points: np.ndarray, normals: Optional[np.ndarray], ref_points: np.ndarray,
                    ref_normals: Optional[np.ndarray], threshold: float) -> dict:
    """Chamfer-L1, F-score (`inr.pointcloud.metrics.compare`) of points against ref_points, and,
    with both normal sets, normal consistency: the mean over both directions of |n . n'| between
    each point and its nearest point of the other set (1 = parallel, orientation ignored)."""
    from ..pointcloud.metrics import compare

    out = compare(points, ref_points, threshold)
    if normals is not None and ref_normals is not None:
        from scipy.spatial import cKDTree

        _, to_ref = cKDTree(ref_points).query(points, k=1, workers=-1)
        _, to_pts = cKDTree(points).query(ref_points, k=1, workers=-1)
        a = np.abs(np.sum(normals * ref_normals[to_ref], 1)).mean()
        b = np.abs(np.sum(ref_normals * normals[to_pts], 1)).mean()
        out["normal_consistency"] = float((a + b) / 2)
    return out
