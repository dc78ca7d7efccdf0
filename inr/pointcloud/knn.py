"""k-nearest-neighbour search: on a grid of cells in C++ (`inr/native/knn.cpp`, where the native
kernels build; 30 neighbours of each of a million scan points 2.3 s against the KD-trees' ~7 s on
2 cores), or through a KD-tree: open3d's batched, multi-threaded one
(`open3d.core.nns.NearestNeighborSearch`) when open3d is installed, else scipy's cKDTree (the
same neighbours; ties may be ordered differently). Any is ~100x faster than a dense
`torch.cdist` + `topk` on 2 cores at 10^4 points, and its memory grows with the points, not with
their product, so it serves 10^6-point inputs. Indices carry no gradient; callers recompute
distances in torch. The search runs in float32 on coordinates taken relative to the points' box
centre (computed in the inputs' own precision): a scan in georeferenced coordinates (millions of
units from the origin) keeps its local detail, which float32 of the raw coordinates would round
to a grid of a quarter unit or more (the grid search: in float64). `knn_chunks` searches the
queries a chunk at a time against one structure built once (`native.KnnIndex`), for callers
that use each chunk's neighbours and drop them: a 10-million-point scan's 30 neighbours each
take 3.6 GB at once.
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import numpy as np
import torch


NATIVE_AT_LEAST = 50_000
"""'auto' searches on the grid from this many points up and for 4 or more neighbours, else on the
KD-tree: in the network's pass over 5,000-point scans the grid lost (training meshes, median per
cloud: evenly spread 0.38 s KD-tree against 0.41 s grid, range scans 0.85 against 1.25 s), most
of it in nearest-point queries (k = 1) from one output to another (cheese's range scan: 48,000
queries among 66,000 points, 0.027 s KD-tree, 0.32 s grid: queries off the cloud read many rings
of small cells, or fall back to the KD-tree)."""
MAX_RINGS = 6
"""Rings of cells the grid search reads around a query before it leaves the query to the KD-tree
(a query far from the cloud)."""


KNN_CHUNK = 1 << 18
"""Queries `knn_chunks` searches at once: at k = 30 their neighbours take ~95 MB, where a 10-million
point scan's all at once took 3.6 GB. `knn` searches more queries than this (of another cloud) in
chunks of it too, into its one result."""


def knn(queries: torch.Tensor, points: torch.Tensor, k: int, backend: str = "auto") -> Tuple[torch.Tensor, torch.Tensor]:
    """For each query (Q, 3), its min(k, N) nearest points among points (N, 3), nearest first:
    (indices (Q, k') int64, squared distances (Q, k') float32). backend: 'native' (the grid),
    'kdtree' (open3d's or scipy's), or 'auto' (the grid where the native kernels build, for
    NATIVE_AT_LEAST points or more and k >= 4)."""
    return KnnSearch(points, k, backend)(queries)


def knn_chunks(queries: torch.Tensor, points: torch.Tensor, k: int, chunk: Optional[int] = None,
               backend: str = "auto") -> Iterator[Tuple[int, torch.Tensor, torch.Tensor]]:
    """`knn` of the queries `chunk` rows (default KNN_CHUNK) at a time, the search structure built
    once: (the chunk's first row, its indices, its squared distances) per chunk, in order. The same
    neighbours as `knn` (ties aside), in bounded memory."""
    yield from KnnSearch(points, k, backend).chunks(queries, chunk)


class KnnSearch:
    """`knn`'s search of one cloud for min(k, N) neighbours, to query any number of times: the grid
    (`native.KnnIndex`) or a KD-tree, built on the first query, on coordinates relative to the
    points' box centre."""

    def __init__(self, points: torch.Tensor, k: int, backend: str = "auto") -> None:
        from .. import _external

        if len(points) == 0:
            raise ValueError("knn needs at least one point to search")
        k = min(int(k), len(points))
        self.points, self.k = points, k
        p64 = points.detach().cpu().numpy()
        self.origin = (p64.min(0) + p64.max(0)) / 2  # in the inputs' precision: float64 stays exact here
        self.native = (backend != "auto" or (len(points) >= NATIVE_AT_LEAST and k >= 4)) and _external.uses_native(
            backend, "k-nearest-neighbour search", twin="kdtree")
        self.grid = self.tree = self.fallback = None

    def _local(self, x: torch.Tensor, dtype) -> np.ndarray:
        return np.ascontiguousarray(x.detach().cpu().numpy() - self.origin, dtype=dtype)

    def __call__(self, queries: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """`knn` of the queries: (indices (Q, k) int64, squared distances (Q, k) float32)."""
        if queries is self.points or len(queries) <= KNN_CHUNK:
            return self._query(queries, same=queries is self.points)
        # other queries a chunk at a time into the result: a search's own copies of its queries (float32,
        # the KD-tree's tensors, int32 indices) took ~150 bytes each, 5.8 GB in all for 35 million at k = 1
        idx = torch.empty(len(queries), self.k, dtype=torch.long, device=queries.device)
        d2 = torch.empty(len(queries), self.k, device=queries.device)
        for start, i, d in self.chunks(queries):
            idx[start:start + len(i)], d2[start:start + len(i)] = i, d
        return idx, d2

    def chunks(self, queries: torch.Tensor, chunk: Optional[int] = None) -> Iterator[Tuple[int, torch.Tensor, torch.Tensor]]:
        """`knn_chunks` against this search."""
        chunk = chunk or KNN_CHUNK
        for start in range(0, len(queries), chunk):
            yield (start, *self._query(queries[start:start + chunk]))

    def _query(self, queries: torch.Tensor, same: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        """(indices, squared distances) of the queries' k nearest; `same`: the queries are the points."""
        dev, k = queries.device, self.k
        if len(queries) == 0:
            return torch.zeros(0, k, dtype=torch.long, device=dev), torch.zeros(0, k, device=dev)
        if self.native:
            from .. import native

            if self.grid is None:
                pn = torch.from_numpy(self._local(self.points, np.float64))
                if same:  # one search: the grid's own order (cache hits), no object kept
                    idx, d2, found = native.knn_grid(pn, pn, k, max(4.0, k / 2), MAX_RINGS)
                    return self._rest(queries, idx, d2, found, dev)
                # cells of about k / 2 points (the fastest at 1M points, k 16-64), at least 4
                self.grid = native.KnnIndex(pn, max(4.0, k / 2))
            idx, d2, found = self.grid.query(torch.from_numpy(self._local(queries, np.float64)), k, MAX_RINGS)
            return self._rest(queries, idx, d2, found, dev)
        q, o3d = self._local(queries, np.float32), _open3d()
        if self.tree is None:
            p = self._local(self.points, np.float32)
            if o3d is not None:
                self.tree = o3d.core.nns.NearestNeighborSearch(o3d.core.Tensor(p))
                self.tree.knn_index()
            else:
                from scipy.spatial import cKDTree

                self.tree = cKDTree(p)
        if o3d is not None:
            idx, d2 = self.tree.knn_search(o3d.core.Tensor(q), k)
            idx, d2 = idx.numpy().astype(np.int64), d2.numpy()
        else:
            dist, idx = self.tree.query(q, k=k, workers=-1)
            idx, d2 = idx.reshape(len(q), k).astype(np.int64), (dist.reshape(len(q), k) ** 2).astype(np.float32)
        return torch.from_numpy(idx).to(dev), torch.from_numpy(np.ascontiguousarray(d2)).to(dev)

    def _rest(self, queries, idx, d2, found, dev) -> Tuple[torch.Tensor, torch.Tensor]:
        if not bool(found.all()):  # far from the cloud: the KD-tree's (built once, for every chunk)
            rest = (~found).nonzero()[:, 0]
            if self.fallback is None:
                self.fallback = KnnSearch(self.points.cpu(), self.k, "kdtree")
            idx[rest], d2[rest] = self.fallback._query(queries[rest.to(dev)].cpu())
        return idx.to(dev), d2.to(dev)


def _open3d():
    """open3d where it is installed, else None."""
    from .. import _external

    return _external.open3d() if _external.has_open3d() else None


def nearest(queries: np.ndarray, points: np.ndarray, k: int, backend: str = "auto") -> Tuple[np.ndarray, np.ndarray]:
    """`knn` on NumPy arrays: (squared distances (Q, k') float32, indices (Q, k') int64), nearest
    first. A query array that is the points array itself is searched as such (the grid sorts it
    once). backend: `knn`'s."""
    p = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64))
    q = p if queries is points else torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float64))
    idx, d2 = knn(q, p, k, backend)
    return d2.numpy(), idx.numpy()


SPREAD_NEIGHBOURS, SPREAD_QUERIES = 8, 20_000
"""`spacing_spread`: the neighbour whose distance is a point's local spacing, and how many points
(a random subset of larger clouds) it is read at."""


def spacing_spread(points: np.ndarray, seed: int = 0) -> float:
    """How much the point spacing varies over a cloud: the 90th over the 10th percentile of the
    distance from a point to its SPREAD_NEIGHBOURS-th nearest other point (read at SPREAD_QUERIES
    random points of the whole cloud). 1 on a regular grid; evenly spread random points ~1.6;
    a terrestrial laser scan, dense at the station and sparse far away, 10 or more. NaN with
    fewer than SPREAD_NEIGHBOURS + 1 points."""
    points = np.asarray(points, dtype=np.float64)
    if len(points) <= SPREAD_NEIGHBOURS:
        return float("nan")
    queries = points
    if len(points) > SPREAD_QUERIES:
        queries = points[np.random.default_rng(seed).choice(len(points), SPREAD_QUERIES, replace=False)]
    d2, _ = nearest(queries, points, SPREAD_NEIGHBOURS + 1)  # the first is the query itself
    h = np.sqrt(d2[:, -1].astype(np.float64))
    lo, hi = np.percentile(h, [10, 90])
    return float(hi / lo) if lo > 0 else float("inf")
