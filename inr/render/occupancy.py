"""Occupancy grid and ray marching with empty-space skipping and early termination.

The CPU twin of nerfacc's `OccGridEstimator` (whose `sampling` needs CUDA): a binary grid of
which cells may hold density, refreshed every few steps from an exponential moving average of
the field's density, and a marcher that takes uniform steps along each ray, keeps the samples
whose cell is occupied, and drops those behind the point where the transmittance falls below
`early_stop_eps`. It keeps the same samples as nerfacc's `sampling` (see `march`).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch
from torch import nn

from .. import _external
from .contraction import contract, s_of_t, stretch, t_of_s, uncontract
from .rays import Rays
from .volume import render_weights


def ray_aabb(rays: Rays, aabb: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Slab test: entry and exit distances (N,) of each ray through the box aabb = (xmin, ymin,
    zmin, xmax, ymax, zmax); a miss gives t_far < t_near."""
    inv = 1.0 / torch.where(rays.directions.abs() < 1e-12, torch.full_like(rays.directions, 1e-12), rays.directions)
    t0 = (aabb[:3] - rays.origins) * inv
    t1 = (aabb[3:] - rays.origins) * inv
    t_near = torch.minimum(t0, t1).amax(-1)
    t_far = torch.maximum(t0, t1).amin(-1)
    return t_near, t_far


class OccupancyGrid(nn.Module):
    """A resolution^3 grid over `aabb` of cell occupancies (EMA of opacity) and their binary mask.

    Args:
        aabb: (6,) box (xmin, ymin, zmin, xmax, ymax, zmax).
        contracted: the grid covers all of space in contracted coordinates (`contraction`,
            the box being the inner region): cell (i, j, k) spans contracted points
            -2 + 4 (i, j, k) / resolution + [0, 4 / resolution)^3.
        resolution: cells per side (nerfacc: 128).
        ema_decay: occs <- max(occs * decay, new) at every update.
        threshold: a cell is occupied when its occupancy exceeds min(threshold, mean occupancy)
            (the mean over the inner box's cells on a contracted grid, as instant-ngp takes its
            innermost cascade's: the far cells' stretched opacities would raise it so far that a
            young field's inner region, thin everywhere, would be culled whole).
        warmup_steps: before this step every cell is re-evaluated; afterwards a random quarter
            of the cells plus every occupied one (nerfacc caps those at a quarter too).
    """

    def __init__(self, aabb, resolution: int = 128, ema_decay: float = 0.95, threshold: float = 0.01, warmup_steps: int = 256,
                 contracted: bool = False) -> None:
        super().__init__()
        self.register_buffer("aabb", torch.as_tensor(aabb, dtype=torch.float32).reshape(6))
        self.contracted = bool(contracted)
        # where a contracted grid's sample spacing starts to grow (`contraction.t_of_s`): twice the
        # inner box's largest half extent, so rays see the whole inner box at the base step (a
        # float kept here: reading it from the buffer would wait for the device at every march)
        self.knee = 2.0 * float(self.half.max())
        self.resolution = int(resolution)
        self.ema_decay, self.threshold, self.warmup_steps = float(ema_decay), float(threshold), int(warmup_steps)
        n = self.resolution**3
        self.register_buffer("occs", torch.zeros(n))
        self.register_buffer("binaries", torch.ones(n, dtype=torch.bool))
        r = torch.arange(self.resolution)
        cells = torch.stack(torch.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3)
        self.register_buffer("cells", cells.to(torch.int32), persistent=False)

    @property
    def centre(self) -> torch.Tensor:
        return (self.aabb[:3] + self.aabb[3:]) * 0.5

    @property
    def half(self) -> torch.Tensor:
        return (self.aabb[3:] - self.aabb[:3]) * 0.5


    def to_unit(self, points: torch.Tensor) -> torch.Tensor:
        """World points -> grid coordinates, [0, 1)^3 on the grid (float32 operations as march.cpp's)."""
        if self.contracted:
            return (contract((points - self.centre) / self.half) + 2.0) * 0.25
        return (points - self.aabb[:3]) / (self.aabb[3:] - self.aabb[:3])

    def from_unit(self, u: torch.Tensor) -> torch.Tensor:
        """Grid coordinates -> world points (the inverse of `to_unit`)."""
        if self.contracted:
            return self.centre + self.half * uncontract(u * 4.0 - 2.0)
        return self.aabb[:3] + u * (self.aabb[3:] - self.aabb[:3])

    def mean_occupancy(self) -> float:
        """The occupancies' mean (a contracted grid's: over the cells inside the inner box)."""
        if not self.contracted:
            return float(self.occs.mean())
        r = self.resolution
        lo, hi = r // 4, r - r // 4  # contracted [-1, 1] spans the middle half of each axis
        return float(self.occs.view(r, r, r)[lo:hi, lo:hi, lo:hi].mean())

    def cell_index(self, points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Flat cell index (N,) of each point and whether it lies on the grid."""
        u = self.to_unit(points)
        inside = ((u >= 0) & (u < 1)).all(-1)
        ijk = (u.clamp(0, 1 - 1e-6) * self.resolution).long()
        return (ijk[:, 0] * self.resolution + ijk[:, 1]) * self.resolution + ijk[:, 2], inside

    def occupied(self, points: torch.Tensor) -> torch.Tensor:
        idx, inside = self.cell_index(points)
        return self.binaries[idx] & inside

    @torch.no_grad()
    def update(self, step: int, occupancy_fn: Callable[[torch.Tensor], torch.Tensor], generator: Optional[torch.Generator] = None,
               chunk: int = 1 << 16) -> None:
        """Refresh the grid: occupancy_fn maps (M, 3) world points to (M,) opacities
        (density x step size, as nerfacc's occ_eval_fn), called on at most `chunk` points at once.
        A contracted grid scales them by the step's growth there (`contraction.stretch`)."""
        n = self.occs.shape[0]
        if step < self.warmup_steps:
            idx = torch.arange(n, device=self.occs.device)
        else:
            rand = torch.randint(0, n, (n // 4,), device=self.occs.device, generator=generator)
            # every occupied cell, where nerfacc takes at most as many as random ones: in the few
            # hundred steps of a CPU run, stale occupied cells would otherwise linger
            idx = torch.cat([rand, self.binaries.nonzero()[:, 0]]).unique()
        jitter = torch.rand(idx.shape[0], 3, device=self.occs.device, generator=generator)
        points = self.from_unit((self.cells[idx].float() + jitter) / self.resolution)
        new = torch.cat([occupancy_fn(points[k : k + chunk]).reshape(-1).float() for k in range(0, len(points), chunk)])
        if self.contracted:  # far cells are crossed in longer world steps: their opacity is larger
            new = new * stretch((points - self.centre) / self.half)
        self.occs[idx] = torch.maximum(self.occs[idx] * self.ema_decay, new)
        thresh = min(self.threshold, self.mean_occupancy())
        self.binaries.copy_(self.occs > thresh)


@torch.no_grad()
def march(
    rays: Rays,
    grid: OccupancyGrid,
    step_size: float,
    near: float = 0.0,
    far: float = 1e4,
    sigma_fn: Optional[Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = None,
    early_stop_eps: float = 1e-4,
    alpha_thre: float = 0.0,
    stratified: bool = False,
    generator: Optional[torch.Generator] = None,
    backend: str = "auto",
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed samples (ray_indices, t_starts, t_ends) along rays inside the grid's box.

    The samples of nerfacc's `OccGridEstimator.sampling` (one grid level, no cone angle):
    - every ray's samples lie on the lattice t = near + k * step_size (+ one random offset in
      [0, step_size) per ray when `stratified`), and a sample [t, t + step_size] is kept when
      its midpoint lies in the box (entry <= mid < exit) and in an occupied cell;
    - with `sigma_fn(t_starts, t_ends, ray_indices) -> sigmas`, the densities of those samples
      are evaluated once (no gradient) and a sample stays if its transmittance is
      >= `early_stop_eps` and, when alpha_thre > 0, its alpha is >= min(alpha_thre, the grid's
      mean occupancy) (nerfacc lowers the threshold so that a thin scene keeps its samples).
      So the costly colour evaluation only sees samples that matter.

    A contracted grid (`OccupancyGrid(contracted=True)`) covers all of space: rays start at
    `near`, and their samples [T(s), T(s + step_size)] lie on the lattice
    s = S(near) + k * step_size of the spacing S (`contraction.s_of_t`, knee `grid.knee`): the
    base step inside the scene, growing as t^2 beyond it, up to the last step before
    s = 2 knee (t ~ knee^2 / step_size: the grid's outermost cells) or `far`, whichever is
    nearer. A sample is kept when its midpoint is before `far` and in an occupied cell. nerfacc has no such grid: CUDA rays take the torch
    path.

    backend: 'torch' (this function's own code, any device), 'nerfacc' (nerfacc's CUDA
    `OccGridEstimator.sampling` on this grid's cells; CUDA rays only), 'native' (the toolkit's
    C++ candidate walk, inr/native/march.cpp: the same samples, bit for bit; CPU float32 rays)
    or 'auto' (nerfacc for CUDA rays, native for CPU rays, each where usable, else torch with
    one warning).
    """
    if backend not in ("auto", "torch", "nerfacc", "native"):
        raise ValueError(f"backend must be auto, torch, nerfacc or native, got {backend!r}")
    if grid.contracted and backend in ("auto", "nerfacc") and rays.origins.is_cuda:
        backend = "torch"
    if backend == "auto" and rays.origins.is_cuda:
        backend = _external.resolve_backend("auto", "nerfacc", "occupancy-grid marcher", _external.why_not(_external.nerfacc))
    elif backend == "auto" and rays.origins.device.type == "cpu":
        backend = _external.resolve_backend("auto", "native", "occupancy-grid marcher", _external.why_not(_external.native_cpu))
    if backend == "native" and not (rays.origins.device.type == "cpu" and rays.origins.dtype == torch.float32):
        backend = "torch"  # float64 or non-CPU rays: the twin computes the same samples
    if backend == "nerfacc":
        return _march_nerfacc(rays, grid, step_size, near, sigma_fn, early_stop_eps, alpha_thre, stratified)
    if grid.contracted:
        return _march_contracted(rays, grid, step_size, near, far, sigma_fn, early_stop_eps, alpha_thre, stratified,
                                 generator, backend)
    dev = rays.origins.device
    t_near, t_far = ray_aabb(rays, grid.aabb)
    start = torch.full_like(t_near, float(near))
    if stratified:
        start = start + torch.rand(start.shape, device=dev, generator=generator) * step_size
    # first lattice step whose midpoint is at or after the entry point
    k0 = torch.ceil((torch.maximum(t_near, start) - start) / step_size - 0.5).clamp(min=0)
    t_first = start + k0 * step_size
    hit = t_far > t_first + 0.5 * step_size
    span = torch.where(hit, t_far - t_first, torch.zeros_like(t_first))
    n_steps = int(torch.ceil(span.max() / step_size).item()) if len(rays) else 0
    if n_steps == 0:
        empty = torch.zeros(0, device=dev)
        return empty.long(), empty, empty
    if backend == "native":
        ray_idx, starts = _external.native_cpu().march_candidates(
            rays.origins, rays.directions, t_first, t_far, hit, float(step_size), n_steps, grid.aabb, grid.binaries,
            grid.resolution)
        return _early_stop(ray_idx, starts, starts + step_size, grid, sigma_fn, early_stop_eps, alpha_thre)
    t_starts = t_first[:, None] + step_size * torch.arange(n_steps, device=dev)[None, :]
    t_mids = t_starts + 0.5 * step_size
    valid = hit[:, None] & (t_mids < t_far[:, None])
    ray_idx, step_idx = valid.nonzero(as_tuple=True)
    mids = t_mids[ray_idx, step_idx]
    points = rays.origins[ray_idx] + rays.directions[ray_idx] * mids[:, None]
    keep = grid.occupied(points)
    ray_idx, starts = ray_idx[keep], t_starts[ray_idx[keep], step_idx[keep]]
    return _early_stop(ray_idx, starts, starts + step_size, grid, sigma_fn, early_stop_eps, alpha_thre)


def _march_contracted(rays, grid, step_size, near, far, sigma_fn, early_stop_eps, alpha_thre, stratified, generator,
                      backend):
    dev = rays.origins.device
    knee = grid.knee
    s_far = s_of_t(float(far), knee)
    s_near = s_of_t(float(near), knee)
    s0 = torch.full((len(rays),), s_near, device=dev)
    if stratified:
        s0 = s0 + torch.rand(s0.shape, device=dev, generator=generator) * step_size
    # jitter only moves the lattice on: counting from S(near) bounds every ray's steps
    n_steps = int(math.ceil((s_far - s_near) / step_size)) + 1 if len(rays) else 0
    if n_steps <= 1:
        empty = torch.zeros(0, device=dev)
        return empty.long(), empty, empty
    if backend == "native":
        ray_idx, starts, ends = _external.native_cpu().march_contracted_candidates(
            rays.origins, rays.directions, s0, float(step_size), n_steps, float(knee), float(far), grid.aabb,
            grid.binaries, grid.resolution)
        return _early_stop(ray_idx, starts, ends, grid, sigma_fn, early_stop_eps, alpha_thre)
    parts = []
    for r0 in range(0, len(rays), 4096):  # bounded memory: (rays x steps) per block
        o, d, s_blk = rays.origins[r0 : r0 + 4096], rays.directions[r0 : r0 + 4096], s0[r0 : r0 + 4096]
        s = s_blk[:, None] + step_size * torch.arange(n_steps + 1, device=dev, dtype=s0.dtype)[None, :]
        t = t_of_s(s, knee)
        t_a, t_b = t[:, :-1], t[:, 1:]
        mids = (t_a + t_b) * 0.5
        valid = (s[:, 1:] < 2.0 * knee) & (mids < far)  # s and mids grow along a ray: a prefix, as the C++ walk
        ray_idx, step_idx = valid.nonzero(as_tuple=True)
        points = o[ray_idx] + d[ray_idx] * mids[ray_idx, step_idx][:, None]
        keep = grid.occupied(points)
        ray_idx, step_idx = ray_idx[keep], step_idx[keep]
        parts.append((ray_idx + r0, t_a[ray_idx, step_idx], t_b[ray_idx, step_idx]))
    ray_idx, starts, ends = (torch.cat(x) for x in zip(*parts))
    return _early_stop(ray_idx, starts, ends, grid, sigma_fn, early_stop_eps, alpha_thre)


def _early_stop(ray_idx, starts, ends, grid, sigma_fn, early_stop_eps, alpha_thre):
    """The candidates that matter: transmittance and alpha rules of `march` (when sigma_fn is given)."""
    if sigma_fn is not None and ray_idx.numel() and (early_stop_eps > 0 or alpha_thre > 0):
        sigmas = sigma_fn(starts, ends, ray_idx)
        _, trans, alphas = render_weights(starts, ends, sigmas, ray_idx)
        keep = trans >= early_stop_eps
        if alpha_thre > 0:
            keep &= alphas >= min(alpha_thre, grid.mean_occupancy())
        ray_idx, starts, ends = ray_idx[keep], starts[keep], ends[keep]
    return ray_idx, starts, ends


def _march_nerfacc(rays, grid, step_size, near, sigma_fn, early_stop_eps, alpha_thre, stratified):
    """march() through nerfacc's CUDA estimator, reading this grid's cells (same x-major layout,
    one level; `tests/test_nerfacc_parity.py` checks the layout on CPU)."""
    nerfacc = _external.nerfacc()
    est = grid.__dict__.get("_nerfacc")
    if est is None or est.aabbs.device != grid.occs.device:
        est = nerfacc.OccGridEstimator(roi_aabb=grid.aabb.tolist(), resolution=grid.resolution, levels=1).to(grid.occs.device)
        grid.__dict__["_nerfacc"] = est  # outside the module tree: not in state dicts
    r = grid.resolution
    est.binaries = grid.binaries.view(1, r, r, r)
    est.occs = grid.occs
    ri, t0, t1 = est.sampling(rays.origins, rays.directions, sigma_fn=sigma_fn, near_plane=near,
                              render_step_size=step_size, early_stop_eps=early_stop_eps, alpha_thre=alpha_thre,
                              stratified=stratified)
    return ri.long(), t0, t1
