"""Normal orientation from visibility: a second opinion beside the neighbour-graph orientation.

Graph orientation (`inr.data.surfaces.graph_consistent`, Hoppe et al.'s, the graph made as
open3d's `orient_normals_consistent_tangent_plane` makes it) propagates one side along a tree of
neighbours; where a part is thin, a neighbour on the other side of it can pass
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
A third check runs last, once the normals point outwards as a whole: on a closed cloud, a part
whose normals all point inwards (the graph passed the wrong side into a leg) makes the
generalised winding number negative just off it; `turn_inverted_parts` turns such parts back.
Where a file's format says which way is up (LAS: z), `face_up` turns an open cloud seen from
above to face up.
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
    from ..pointcloud.knn import nearest

    k = min(k, len(points) - 1)
    _, near = nearest(points, points, k + 1)
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


WINDING_AT_MOST = 5_000
"""`turn_inverted_parts` probes at most this many points (a random subset); the others follow
their WINDING_NEAREST nearest probed points. A round of probes took 0.15 s at 5,000 on this
2-core machine (the sums grow with the square of the count: 0.5 s at 10,000), and up to
WINDING_ROUNDS + 1 rounds run (one where nothing is inverted)."""
WINDING_PROBE = 2.0
"""The probes' distance from their point along its normal, in median nearest-point spacings of
the probed points."""
INVERTED_OUT, INVERTED_IN = -0.6, 0.4
"""A point is inverted when its outer probe reads below INVERTED_OUT and its inner one below
INVERTED_IN (oriented right: about 0 and 1)."""
CLOSED_AREA, CLOSED_OUT, CLOSED_IN = 0.25, 0.2, 0.7
"""A cloud is probed only when its vector area (the sum of its points' areas times their normals)
is under CLOSED_AREA of its area (0 for a closed surface, small with noise or a part turned
inwards; training meshes: closed 0.03-0.15, open terrains and reliefs 0.47-0.75, a hemisphere
0.5), and its turns are kept only when afterwards the median outer probe lies within CLOSED_OUT
of 0 and the median inner one above CLOSED_IN, as on a closed surface oriented outwards (an
open sheet reads about -1/2 and +1/2)."""
WINDING_ROUNDS, WINDING_NEAREST = 3, 5
UNCLEAR = 0.5
"""Where a turned part meets the rest, a band of inverted points only dents the winding number
(a flipped patch among right ones): its inner probe reads less than UNCLEAR above its outer
one (rightly oriented points about 1 above), and `_border` turns it."""


def turn_inverted_parts(points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """`normals` (oriented outwards) with the parts that point inwards turned back, on a closed
    cloud. Graph orientation can pass the wrong side along a thin part (a leg, a tail), and the
    whole part then points inwards; it is consistent with its neighbours, so neither the graph
    nor the seam sees it. The generalised winding number does (`inr.sdf.winding_numbers`): of a
    closed surface oriented outwards it is ~1 just inside and ~0 just outside; where a closed
    part's normals point inwards, that part counts -1 inside itself, so just off such a point on
    its normal's side (inside the part) it reads about -1 and on the other side (outside) about
    0. Probes at ±WINDING_PROBE spacings along each normal; inverted points (INVERTED_OUT,
    INVERTED_IN) are turned, and the probes read again, up to WINDING_ROUNDS rounds (the points
    near a part's joint read clearly once the part is turned). The inverted part may be the larger
    one (a body whose far legs and antlers won the outward turn as a whole). Negative readings
    come only from inverted sides, so a rightly oriented closed cloud is left as it is; open
    clouds (CLOSED_AREA, CLOSED_OUT, CLOSED_IN) are left alone."""
    from scipy.spatial import cKDTree

    from ..sdf import winding_numbers

    if len(points) < 4 * DIFFUSE_NEIGHBOURS:
        return normals
    rows = np.arange(len(points))
    if len(points) > WINDING_AT_MOST:
        rows = np.sort(np.random.default_rng(0).choice(len(points), WINDING_AT_MOST, replace=False))
    p, n = points[rows], normals[rows].copy()
    tree = cKDTree(p)
    spacing = tree.query(p, 9, workers=-1)[0]
    step, area = WINDING_PROBE * float(np.median(spacing[:, 1])), spacing[:, -1] ** 2
    if np.linalg.norm(area @ n) > CLOSED_AREA * area.sum():
        return normals  # open: no inside to read
    turned = np.zeros(len(p), bool)
    for attempt in range(WINDING_ROUNDS + 1):
        w = winding_numbers(np.concatenate([p + step * n, p - step * n]), p, n, max_points=len(p), tree=tree)
        outer, inner = w[:len(p)], w[len(p):]
        bad = (outer < INVERTED_OUT) & (inner < INVERTED_IN)
        if not bad.any() or attempt == WINDING_ROUNDS:
            break
        n[bad], turned[bad] = -n[bad], ~turned[bad]
    if not turned.any() or abs(np.median(outer)) > CLOSED_OUT or np.median(inner) < CLOSED_IN:
        return normals  # nothing turned, or the turns did not make it read as a closed surface
    turned = _border(p, n, turned, inner - outer < UNCLEAR)
    if len(rows) == len(points):
        return np.where(turned[:, None], -normals, normals)
    _, near = tree.query(points, WINDING_NEAREST, workers=-1)
    return np.where((turned[near].mean(1) > 0.5)[:, None], -normals, normals)


def _border(points: np.ndarray, normals: np.ndarray, turned: np.ndarray, unclear: np.ndarray,
            rounds: int = 20) -> np.ndarray:
    """`turned` grown over the band where a turned part meets the rest (`normals` as turned so
    far): a point joins when it is `unclear` (UNCLEAR) and, along a tangent edge, points to the
    other side from a turned point (it agreed with that point before the turn: the same
    inverted part). Rightly oriented points read clearly and stop the growth."""
    i, j, c = tangent_edges(points, normals)
    sign = np.ones(len(points))  # turns made here, on top of `normals`
    grown = turned.copy()
    for _ in range(rounds):
        against = grown[j] & (sign[i] * sign[j] * c < -TANGENT)
        join = np.zeros(len(points), bool)
        join[i[against]] = True
        join &= unclear & ~grown
        if not join.any():
            break
        sign[join], grown[join] = -1.0, True
    return grown


UP_ALONG = 0.5
"""`face_up` turns a cloud when its normals' mean lies within 60 degrees of the up axis (its
component along it at least UP_ALONG of its length): a terrain, a roof, a floor, not a facade."""


def face_up(normals: np.ndarray, up: np.ndarray) -> np.ndarray:
    """`normals`, or all of them turned, so that an open cloud seen from above faces up: where
    the file's format says which way is up (LAS: z is the elevation) and the cloud is open (the
    normals' mean is over CLOSED_AREA long, as in `turn_inverted_parts`) and lies along the up
    axis (UP_ALONG), the side whose mean points up; airborne lidar sees surfaces from above, and
    the outward turn of a terrain (away from its centroid) can point a valley's normals down.
    Closed clouds and facades are left as they are."""
    mean = normals.mean(0)
    length = float(np.linalg.norm(mean))
    along = float(mean @ up)
    if length > CLOSED_AREA and abs(along) >= UP_ALONG * length and along < 0:
        return -normals
    return normals


SIDES_NEAREST, SIDES_CHUNK = 8, 65_536
"""Points of a cloud with known sides (`estimate_normals(..., sides_from=)`: the input a scanner
gave normals) whose normals a point's side follows (the sign of their sum projected on it), and
the points voted on at once. Chosen on the training meshes (their scans with the true normals
given, `denoise` and `reconstruct` outputs, 112 clouds): mean flipped share 2.5 / 2.5 / 2.4 /
2.5 / 2.8 % with the 1 / 4 / 8 / 16 / 32 nearest (`reconstruct`; the estimate's own sides 6.1 %)."""


def side_votes(points: np.ndarray, normals: np.ndarray, known_points: np.ndarray, known: np.ndarray,
               k: int = SIDES_NEAREST) -> np.ndarray:
    """(N,) each normal's vote for its side: the sum of the `known` vectors (normals with the right
    sides, or directions towards the stations) of its k nearest `known_points`, projected on it."""
    from scipy.spatial import cKDTree

    k = min(k, len(known_points))
    tree, votes = cKDTree(known_points), np.empty(len(points))
    for start in range(0, len(points), SIDES_CHUNK):
        part = slice(start, start + SIDES_CHUNK)
        near = tree.query(points[part], k, workers=-1)[1].reshape(-1, k)
        votes[part] = np.einsum("nd,nd->n", known[near].sum(1), normals[part])
    return votes


def sides_like(points: np.ndarray, normals: np.ndarray, known_points: np.ndarray, known: np.ndarray) -> np.ndarray:
    """`normals` (sides arbitrary) each turned to the side its `side_votes` say."""
    return np.where(side_votes(points, normals, known_points, known)[:, None] < 0, -normals, normals)


KNOWN_NEAREST, KNOWN_SHARE = 16, 0.25
"""A scan whose normals are known on some points only (the others zero or NaN in the file): a point
of the cloud takes its side from the known normals among its KNOWN_NEAREST nearest scan points
where at least KNOWN_SHARE of them are known (`sides_where_known`). Chosen on the training meshes
(112 clouds, `denoise` outputs, true normals known on a random share or on the half below the
median x; mean flipped share, the estimate's own sides 6.5 %): the 8 nearest known normals
wherever they lie, as for a scan known everywhere, 3.1 / 4.0 / 6.0 / 13.0 / 12.0 % for known
shares 0.5 / 0.25 / 0.1 / 0.02 / the half (worse than the estimate by over a point on 0 / 4 / 32
/ 72 / 88 clouds: sparse known points vote across thin parts, and an open sheet's estimate
facing the other way is turned only where they are); this rule 3.1 / 4.4 / 5.8 / 6.2 / 4.9 %
(0 / 0 / 1 / 0 / 0 worse by over a point); with a share of 0.5, 4.2 / 5.9 / 5.9 / 6.2 / 5.0 %."""


def sides_where_known(points: np.ndarray, normals: np.ndarray, seen_points: np.ndarray,
                      seen_normals: np.ndarray) -> np.ndarray:
    """`normals` (oriented by the estimate) with the sides of a scan's normals that are known on
    some of its points only (`seen_normals`: rows NaN where unknown): the cloud turned as a whole
    to the side the known ones vote for (as `face_stations`), then each point turned to the side
    of the known normals among its KNOWN_NEAREST nearest `seen_points` where at least KNOWN_SHARE of
    them are known (elsewhere the estimate's side holds)."""
    from scipy.spatial import cKDTree

    known = ~np.isnan(seen_normals[:, 0])
    normals = face_stations(points, normals, seen_points[known], seen_normals[known])
    filled = np.where(known[:, None], seen_normals, 0.0)
    k = min(KNOWN_NEAREST, len(seen_points))
    tree, out = cKDTree(seen_points), normals.copy()
    for start in range(0, len(points), SIDES_CHUNK):
        part = slice(start, start + SIDES_CHUNK)
        near = tree.query(points[part], k, workers=-1)[1].reshape(-1, k)
        votes = np.einsum("nd,nd->n", filled[near].sum(1), normals[part])
        turn = (known[near].mean(1) >= KNOWN_SHARE) & (votes < 0)
        out[part][turn] *= -1
    return out


def face_stations(points: np.ndarray, normals: np.ndarray, seen_points: np.ndarray, towards: np.ndarray) -> np.ndarray:
    """`normals` (oriented), or all of them turned, whichever faces the scanner stations: the sign
    of the sum of all `side_votes` (directions `towards` the station of each of `seen_points`)
    decides. A station sees a surface from the side it stands on, but the orientation steps know
    no station: a room scanned from inside comes out facing outwards, away from the scanner. For
    scans from several stations the whole cloud turns, not each point: with stations all around an
    object each side of a thin part is seen from its own station, and the nearest points'
    directions mix them (training meshes' range scans from 6 cameras, flipped share of
    `reconstruct`'s normals: the estimate 5.5 %, point by point 2.8 % on closed meshes, but 4.6 →
    19.1 % on open ones; as a whole 3.8 % and 4.6 %). From one station, point by point
    (`one_station`; closed training meshes 7.0 → 1.1 %)."""
    return -normals if side_votes(points, normals, seen_points, towards).sum() < 0 else normals


def towards_station(points: np.ndarray, station: np.ndarray) -> np.ndarray:
    """(N, 3) unit vectors from each point towards a scanner `station` (3,), or each point's own
    (N, 3), that saw it (zero for a point at the station itself): the side of the surface the
    station saw."""
    away = np.asarray(station, np.float64) - points
    return away / np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-300)


def one_station(seen_points: np.ndarray, towards: np.ndarray) -> bool:
    """Whether the lines from the points along their `towards` directions all meet at one point
    (one scanner station saw the whole cloud): the least-squares meeting point of the lines lies
    within 1e-6 of the cloud's extent from every one of them."""
    if len(seen_points) == 0:
        return False
    local = seen_points - seen_points.mean(0)  # about the cloud: georeferenced coordinates lose no digits
    # the sum over the lines of (I - d d^T) (m - p) = 0, without an (N, 3, 3) array
    lhs = len(local) * np.eye(3) - towards.T @ towards
    rhs = local.sum(0) - towards.T @ np.einsum("nd,nd->n", towards, local)
    meet = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    v = meet - local
    off = v - np.einsum("nd,nd->n", v, towards)[:, None] * towards
    extent = float(np.linalg.norm(np.ptp(seen_points, axis=0))) or 1.0
    return float(np.linalg.norm(off, axis=1).max()) < 1e-6 * extent
