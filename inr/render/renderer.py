"""The functional renderer: rays -> colour, opacity and depth through an occupancy grid and a
radiance field. Training, evaluation, export, benchmarks (and a viewer) all render through
these two functions; the Lightning module only supplies its field and grid.

    >>> out = render_rays(field, grid, rays, background, RenderSettings(step_size=0.01))
    >>> out.color.shape   # (N, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Tuple

import torch

from .occupancy import OccupancyGrid, march
from .rays import Rays
from .volume import accumulate, render_weights

FieldFn = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]
"""(points (S, 3), unit directions (S, 3)) -> (sigma (S,), rgb (S, 3))."""
DensityFn = Callable[[torch.Tensor], torch.Tensor]
"""points (S, 3) -> sigma (S,), without gradient."""


class RenderOut(NamedTuple):
    color: torch.Tensor
    """(N, 3) composited over the background."""
    opacity: torch.Tensor
    """(N, 1) sum of weights."""
    depth: torch.Tensor
    """(N, 1) expected distance sum_i w_i t_i / opacity (0 where nothing was hit)."""
    n_samples: int


@dataclass
class RenderSettings:
    """How rays are marched (see `march`)."""

    step_size: float
    near: float = 0.0
    far: float = 1e4
    """Where rays end on a contracted (unbounded) grid; a bounded grid ends them at its box."""
    early_stop_eps: float = 1e-4
    alpha_thre: float = 0.0
    stratified: bool = False
    """Jitter each ray's sample lattice (applied in grad mode, i.e. training, only)."""
    prepass: bool = True
    """Evaluate densities first to drop invisible samples (always on without gradient)."""


def render_rays(field: FieldFn, grid: OccupancyGrid, rays: Rays, background: torch.Tensor, settings: RenderSettings,
                density_fn: Optional[DensityFn] = None, codes: Optional[torch.Tensor] = None) -> RenderOut:
    """Colours of `rays` over `background` (N, 3), their opacity and depth; differentiable in
    grad mode. `density_fn` serves the pre-pass (default: the field's sigma without gradient).
    codes: (N, C) per-ray appearance codes, passed to the field as its third argument."""
    o, d = rays.origins, rays.directions
    training = torch.is_grad_enabled()
    if density_fn is None:
        def density_fn(p):
            with torch.no_grad():
                return field(p, torch.zeros_like(p))[0]

    def sigma_fn(t0, t1, ri):
        return density_fn(o[ri] + d[ri] * ((t0 + t1) * 0.5)[:, None])

    use_prepass = settings.prepass or not training
    ri, t0, t1 = march(rays, grid, settings.step_size, near=settings.near, far=settings.far, sigma_fn=sigma_fn if use_prepass else None,
                       early_stop_eps=settings.early_stop_eps, alpha_thre=settings.alpha_thre,
                       stratified=settings.stratified and training)
    mids = (t0 + t1) * 0.5
    points = o[ri] + d[ri] * mids[:, None]
    sigma, rgb = field(points, d[ri]) if codes is None else field(points, d[ri], codes[ri])
    w, _, _ = render_weights(t0, t1, sigma, ri)
    color = accumulate(w, ri, len(rays), rgb)
    opacity = accumulate(w, ri, len(rays))
    depth = accumulate(w, ri, len(rays), mids[:, None]) / opacity.clamp(min=1e-10)
    return RenderOut(color + (1.0 - opacity) * background, opacity, depth, int(ri.numel()))


@torch.no_grad()
def render_rays_chunked(field: FieldFn, grid: OccupancyGrid, rays: Rays, background: float, settings: RenderSettings,
                        density_fn: Optional[DensityFn] = None, chunk: int = 8192) -> RenderOut:
    """render_rays of many rays without gradient, `chunk` rays at a time (bounded memory). The
    rays may be on any device: they are rendered on the grid's, the results come back on theirs."""
    dev, home = grid.occs.device, rays.origins.device
    parts = []
    for k in range(0, len(rays), chunk):
        part = Rays(rays.origins[k : k + chunk].to(dev), rays.directions[k : k + chunk].to(dev))
        r = render_rays(field, grid, part, torch.full((len(part), 3), float(background), device=dev), settings, density_fn)
        parts.append(RenderOut(r.color.to(home), r.opacity.to(home), r.depth.to(home), r.n_samples))
    if not parts:
        empty = torch.zeros(0, 3, device=home)
        return RenderOut(empty, empty[:, :1], empty[:, :1], 0)
    return RenderOut(*(torch.cat(x) for x in list(zip(*parts))[:3]), sum(p.n_samples for p in parts))


def without_grad_in_chunks(fn: Callable, *inputs: torch.Tensor, chunk: int = 1 << 16, compiled: bool = False):
    """fn(*inputs) without gradient, `chunk` rows at a time; a tuple output is concatenated part
    by part.

    compiled: fn is a torch.compile'd callable. Inductor fuses the hash-grid gather badly under
    no_grad (one CPU loop ~10x slower than eager, torch 2.13), while the graph it compiles for
    autograd splits the index maths from the gather and runs ~6x faster than eager; so compiled
    callables run in grad mode, chunk by chunk, and their graphs are dropped.
    """
    outs = []
    with torch.enable_grad() if compiled else torch.no_grad():
        for k in range(0, max(len(inputs[0]), 1), chunk):
            out = fn(*(x[k : k + chunk] for x in inputs))
            outs.append(tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach())
    if isinstance(outs[0], tuple):
        return tuple(torch.cat(parts) for parts in zip(*outs))
    return torch.cat(outs)
