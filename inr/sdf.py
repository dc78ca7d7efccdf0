"""Signed distance fields from oriented points: the frame they are fitted in, gradients of a field
(analytic through autograd, or central differences), and the loss terms of SIREN's SDF fit.

A field f: R^3 -> R is fitted so that f(x) = 0 and grad f(x) = n on the surface points (x, n),
|grad f| = 1 everywhere (eikonal) and |f| is not small away from the surface (exp(-alpha |f|)
on random points). Negative inside, positive outside: grad f points out of the shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import torch

FieldFn = Callable[[torch.Tensor], torch.Tensor]

BOX_HALF_EXTENT = 0.9
"""The surface points are fitted into [-0.9, 0.9]^3 of the field's [-1, 1]^3 box: a margin for
the closed surface around them and for the random points beyond it."""


@dataclass
class Frame:
    """x_field = (x - centre) * scale: the input's bounding box centred and its longest side
    scaled to 2 * BOX_HALF_EXTENT."""

    centre: Tuple[float, float, float]
    scale: float

    @classmethod
    def fit(cls, points: np.ndarray) -> "Frame":
        lo, hi = points.min(0), points.max(0)
        extent = float((hi - lo).max())
        if not extent > 0:
            raise ValueError("the points span no volume")
        return cls(tuple(float(c) for c in (lo + hi) / 2), 2 * BOX_HALF_EXTENT / extent)

    def to_field(self, x: np.ndarray) -> np.ndarray:
        return (x - np.asarray(self.centre)) * self.scale

    def to_world(self, x: np.ndarray) -> np.ndarray:
        return x / self.scale + np.asarray(self.centre)


def analytic_gradient(fn: FieldFn, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(f(x) (N,), grad f(x) (N, 3)) through autograd, differentiable again (create_graph) so
    that a loss on the gradient trains the field. Needs a field that is twice differentiable
    in torch (SIREN; not the native MLP, which has no double backward)."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        f = fn(x).reshape(-1)
        (g,) = torch.autograd.grad(f, x, torch.ones_like(f), create_graph=True)
    return f, g


def numerical_gradient(fn: FieldFn, x: torch.Tensor, step: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """(f(x) (N,), central-difference gradient (N, 3)): (f(x + h e_i) - f(x - h e_i)) / 2h, all
    seven evaluations in one call of fn. Differentiable once, as a function of the field's
    parameters (Neuralangelo's numerical gradients: no second derivatives of the network)."""
    n = x.shape[0]
    offsets = torch.cat([torch.zeros(1, 3, dtype=x.dtype, device=x.device),
                         step * torch.eye(3, dtype=x.dtype, device=x.device),
                         -step * torch.eye(3, dtype=x.dtype, device=x.device)])
    values = fn((x.unsqueeze(0) + offsets.unsqueeze(1)).reshape(-1, 3)).reshape(7, n)
    return values[0], (values[1:4] - values[4:7]).T / (2 * step)


@dataclass
class LossWeights:
    """SIREN's SDF loss weights and off-surface sharpness."""

    sdf: float = 3e3
    normal: float = 1e2
    eikonal: float = 5e1
    off_surface: float = 1e2
    alpha: float = 100.0
    sign: float = 0.0


def sdf_loss_terms(f_surface: torch.Tensor, g_surface: torch.Tensor, normals: torch.Tensor, f_space: torch.Tensor,
                   g_space: torch.Tensor, n_uniform: int, w: LossWeights,
                   space_sign: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
    """The weighted terms (each a scalar) of the SDF loss.

    f_surface, g_surface, normals: values, gradients and normals at the surface points;
    f_space, g_space: at the space points, of which the first n_uniform are uniform in the box
    and count in the off-surface term (near-surface samples only count in the eikonal);
    space_sign (M,): the side of the surface each space point is on (+1 outside, -1 inside, 0
    unknown), for the sign term w.sign * mean(relu(-sign * f)), which removes sheets of the
    zero level that the other terms allow (a field of the wrong sign in a whole region still
    has |grad f| = 1 and |f| large).
    """
    eik = torch.cat([g_surface, g_space]).norm(dim=-1)
    terms = {
        "sdf": w.sdf * f_surface.abs().mean(),
        "normal": w.normal * (1 - torch.nn.functional.cosine_similarity(g_surface, normals, dim=-1)).mean(),
        "eikonal": w.eikonal * (eik - 1).abs().mean(),
    }
    if n_uniform > 0:
        terms["off_surface"] = w.off_surface * torch.exp(-w.alpha * f_space[:n_uniform].abs()).mean()
    if w.sign > 0 and space_sign is not None:
        terms["sign"] = w.sign * torch.relu(-space_sign * f_space).mean()
    return terms


def winding_numbers(queries: np.ndarray, points: np.ndarray, normals: np.ndarray, k: int = 8, max_points: int = 3000,
                    chunk: int = 512, tree=None) -> np.ndarray:
    """Generalised winding numbers of an oriented point cloud at `queries` (Barill et al. 2018's
    point form): w(q) = sum_i a_i n_i . (p_i - q) / (4 pi |p_i - q|^3), with the area a_i of
    each point pi r_k^2 / k from its k-th neighbour distance r_k. w ~ 1 inside a closed surface
    and ~ 0 outside; a patch of flipped normals only dents it nearby, unlike the side of the
    nearest point. At most `max_points` points (a random subset, areas scaled up) are summed.
    tree: a scipy cKDTree of `points`, if the caller has one."""
    from scipy.spatial import cKDTree

    tree = cKDTree(points) if tree is None else tree
    r = tree.query(points, k=min(k + 1, len(points)), workers=-1)[0][:, -1]
    area = np.pi * r**2 / k
    if len(points) > max_points:
        keep = np.random.default_rng(0).choice(len(points), max_points, replace=False)
        points, normals, area = points[keep], normals[keep], area[keep] * (len(area) / max_points)
    P = torch.from_numpy(np.ascontiguousarray(points, np.float32))
    N = torch.from_numpy(np.ascontiguousarray(normals, np.float32)) * torch.from_numpy(area.astype(np.float32))[:, None]
    np_ = (P * N).sum(1)  # a_i n_i . p_i
    p2 = (P * P).sum(1)
    out = []
    for start in range(0, len(queries), chunk):  # small chunks, in-place: 6x faster than 8192 and pow(-1.5)
        Q = torch.from_numpy(np.ascontiguousarray(queries[start : start + chunk], np.float32))
        inv = torch.addmm(p2[None], Q, P.T, alpha=-2).add_((Q * Q).sum(1)[:, None]).clamp_min_(1e-8).rsqrt_()
        num = torch.addmm(np_[None], Q, N.T, alpha=-1)  # a_i n_i . (p_i - q)
        out.append(num.mul_(inv).mul_(inv).mul_(inv).sum(1) / (4 * np.pi))
    return torch.cat(out).numpy() if out else np.zeros(0, np.float32)


FAR = 0.1  # side_lattice: beyond this distance from the points, nearest points come from a subset


def _nearest(tree, points: np.ndarray, q: np.ndarray, k: int, bound: float, subset: int = 4096):
    """(dist, idx), each (len(q), k): the k nearest points to each query within `bound`, exact;
    for a query with fewer than k points within `bound`, its k nearest among a fixed random
    subset of `subset` points instead (a k-d tree query far from a dense cloud visits most of
    it: 6.5 s for a 64^3 lattice around 100,000 points, against 0.8 s this way)."""
    from scipy.spatial import cKDTree

    dist, idx = tree.query(q, k=k, distance_upper_bound=bound, workers=-1)
    dist, idx = dist.reshape(len(q), k), idx.reshape(len(q), k)
    far = ~np.isfinite(dist[:, -1])
    if far.any():
        keep = np.random.default_rng(0).choice(len(points), subset, replace=False) if len(points) > subset else np.arange(len(points))
        d, i = cKDTree(points[keep]).query(q[far], k=k, workers=-1)
        dist[far], idx[far] = d.reshape(-1, k), keep[i.reshape(-1, k)]
    return dist, idx


def side_lattice(points: np.ndarray, normals: np.ndarray, margin: float, resolution: int = 64,
                 votes: int = 1, winding: Optional[Tuple[float, float]] = (0.4, 0.6)) -> torch.Tensor:
    """(R, R, R) int8 over [-1, 1]^3: the side of the surface at each lattice point, +1 outside,
    -1 inside, 0 unknown. Where the generalised winding number (`winding_numbers`) is clear, it
    decides (< winding[0]: outside, > winding[1]: inside); elsewhere (open surfaces, holes) the
    point's side of its nearest surface point's tangent plane ((q - p) . n > 0: outside; with
    votes > 1 the majority over that many nearest points, a tie is 0; beyond FAR of the points,
    nearest among a subset). +1 beyond the points'
    bounding box grown by 2 x margin; 0 within margin + half a cell diagonal of the surface
    (there noise in points and normals, and the lookup's rounding, make the side unreliable).
    Computed once; `lookup_side` then costs an index per query. winding=None: nearest points
    only (a few flipped estimated normals then make whole regions of the wrong side)."""
    from scipy.spatial import cKDTree

    axis = np.linspace(-1.0, 1.0, resolution)
    q = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
    k = min(votes, len(points))
    tree = cKDTree(points)
    dist, idx = _nearest(tree, points, q, k, bound=max(FAR, 2 * (margin + 3**0.5 / (resolution - 1))))
    side = np.sign(np.sum(np.sign(np.sum((q[:, None] - points[idx]) * normals[idx], axis=2)), axis=1))
    near = dist[:, 0] < margin + 3**0.5 / (resolution - 1)
    beyond = ((q < points.min(0) - 2 * margin) | (q > points.max(0) + 2 * margin)).any(1)
    if winding is not None:
        ask = ~near & ~beyond
        w = winding_numbers(q[ask], points, normals, tree=tree)
        side[ask] = np.where(w < winding[0], 1.0, np.where(w > winding[1], -1.0, side[ask]))
    side[near] = 0
    side[beyond] = 1  # outside the points' bounding box: outside the surface, whatever nearby normals say
    return torch.from_numpy(side.astype(np.int8)).view(resolution, resolution, resolution)


def lookup_side(lattice: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(N,) float: the side lattice at the lattice point nearest to each x in [-1, 1]^3."""
    res = lattice.shape[0]
    i = ((x.clamp(-1, 1) + 1) * ((res - 1) / 2)).round().long()
    return lattice[i[:, 0], i[:, 1], i[:, 2]].to(x.dtype)


def median_spacing(points: np.ndarray) -> float:
    """The median distance from each point to its nearest other point."""
    from scipy.spatial import cKDTree

    return float(np.median(cKDTree(points).query(points, k=2, workers=-1)[0][:, 1]))


TRIM_PATCH_AREA = 50.0
"""`trim_to_points` drops a patch of faces beyond its reach only when the patch's area exceeds
this many squared reaches-units (see there): chosen on training meshes (`data/training-meshes`):
on clean 100,000-point scans the patches beyond 2 units are gaps between samples and sharp
edges, under 50; the closing sheets of open scans and the webs of noisy ones are larger."""


def trim_to_points(vertices: np.ndarray, faces: np.ndarray, points: np.ndarray, reach: float,
                   min_area: float) -> Tuple[np.ndarray, np.ndarray]:
    """The mesh without its large patches of faces away from the points: a face is away when one
    of its vertices lies farther than `reach` from every point; away faces that share a vertex
    form a patch, and a patch of area > min_area goes (a level set fitted to an open scan closes
    it with sheets where no point is; noisy scans grow webs between parts), while smaller ones
    (gaps between samples) stay, so the mesh gets no pinholes. Returns the kept vertices and
    faces (renumbered)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    near = np.isfinite(cKDTree(points).query(vertices, distance_upper_bound=reach, workers=-1)[0])
    away = np.nonzero(~near[faces].all(1))[0]
    if len(away):
        # faces and vertices as one graph (face f is node f, vertex v node len(faces) + v)
        rows = np.repeat(away, 3)
        cols = len(faces) + faces[away].ravel()
        n = len(faces) + len(vertices)
        graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        _, label = connected_components(graph, directed=False)
        a, b, c = (vertices[faces[away, i]] for i in range(3))
        area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
        patch_area = np.bincount(label[away], weights=area)
        drop = np.zeros(len(faces), bool)
        drop[away] = patch_area[label[away]] > min_area
        faces = faces[~drop]
    used = np.unique(faces)
    index = np.full(len(vertices), -1, dtype=np.int64)
    index[used] = np.arange(len(used))
    return vertices[used], index[faces]
