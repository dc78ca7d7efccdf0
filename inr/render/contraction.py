"""Scene contraction for unbounded scenes (Mip-NeRF 360's, with the max-norm).

Coordinates are first normalised to the scene's inner box, x = (p - centre) / half_extent, so
that the box is [-1, 1]^3. Inside it nothing changes; outside, with n = max_i |x_i|,

    contract(x) = (2 - 1/n) x / n,

so all of space fits in (-2, 2)^3 and a point at infinity lands on the cube's surface. Fields,
occupancy grids and the marcher of an unbounded scene work in these contracted coordinates.

Along a ray, samples are spaced uniformly in s = S(t) with S(t) = t up to a knee distance k and
S(t) = 2k - k^2 / t beyond it (steps grow as t^2, like the contracted space's cells: a ray
reaches infinity in a bounded number of steps). T is S's inverse.

The float32 operations, and their order, match inr/native/march.cpp (the C++ marcher gives the
same samples bit for bit).
"""

from __future__ import annotations

import torch


def contract(x: torch.Tensor) -> torch.Tensor:
    """(..., 3) normalised points -> contracted points in (-2, 2)^3."""
    n = x.abs().amax(-1, keepdim=True)
    scale = torch.where(n > 1, (2.0 - 1.0 / n) / n, torch.ones_like(n))
    return x * scale


def uncontract(y: torch.Tensor, limit: float = 2.0 - 1e-6) -> torch.Tensor:
    """Inverse of `contract` for (..., 3) points in [-2, 2]^3 (the cube's surface, infinity,
    is pulled in to max-norm `limit`)."""
    m = y.abs().amax(-1, keepdim=True).clamp(max=limit)
    scale = torch.where(m > 1, 1.0 / ((2.0 - m) * m), torch.ones_like(m))
    return y * scale


def stretch(x: torch.Tensor) -> torch.Tensor:
    """(...,) how much longer a radial step is in normalised space than in contracted space,
    max(1, n)^2, for (..., 3) normalised points: opacities of contracted grid cells use it."""
    return x.abs().amax(-1).clamp(min=1.0) ** 2


def s_of_t(t, knee: float):
    """The sample spacing's coordinate S(t) (see the module docstring), of a tensor or a float."""
    if not isinstance(t, torch.Tensor):
        return t if t <= knee else 2.0 * knee - knee * knee / t
    return torch.where(t <= knee, t, 2.0 * knee - knee * knee / t.clamp(min=1e-30))


def t_of_s(s: torch.Tensor, knee: float) -> torch.Tensor:
    """T(s), the inverse of S: infinite from s = 2 knee on. Float32 operations as in march.cpp."""
    kk = torch.tensor(knee * knee, dtype=s.dtype, device=s.device)
    two_k = torch.tensor(2.0 * knee, dtype=s.dtype, device=s.device)
    far = torch.where(s < two_k, kk / (two_k - s), torch.full_like(s, float("inf")))
    return torch.where(s <= knee, s, far)
