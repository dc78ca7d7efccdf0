"""Volume rendering of packed samples: weights by transmittance, accumulation along rays.

Samples are *packed*: one flat list of every ray's samples, sorted by ray and, within a ray,
by distance, each tagged with its ray's index (nerfacc's layout). CPU twin of nerfacc's
`render_weight_from_density` and `accumulate_along_rays` for packed inputs, whose compiled
versions need CUDA.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch


def _exclusive_segment_sum(values: torch.Tensor, ray_indices: torch.Tensor) -> torch.Tensor:
    """sum of the earlier samples of the same ray, for every sample (packed, sorted by ray).

    A float64 global cumulative sum minus its value at each ray's first sample: exact to
    ~1e-16 relative, where a float32 global sum would lose digits over millions of samples.
    """
    n = values.shape[0]
    if n == 0:
        return values.clone()
    cs = torch.cumsum(values.double(), 0)
    exclusive = cs - values.double()
    first = torch.ones(n, dtype=torch.bool, device=values.device)
    first[1:] = ray_indices[1:] != ray_indices[:-1]
    start_index = torch.cummax(torch.where(first, torch.arange(n, device=values.device), 0), 0).values
    return (exclusive - exclusive[start_index]).to(values.dtype)


def render_weights(
    t_starts: torch.Tensor, t_ends: torch.Tensor, sigmas: torch.Tensor, ray_indices: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rendering weights of packed samples.

    alpha_i = 1 - exp(-sigma_i (t_end_i - t_start_i)), T_i = exp(-sum_{j<i, same ray} sigma_j dt_j),
    w_i = T_i alpha_i.

    Args:
        t_starts, t_ends, sigmas, ray_indices: (S,) each; sorted by ray, then by t.
    Returns:
        (weights, transmittances, alphas), each (S,).
    """
    sd = sigmas * (t_ends - t_starts)
    trans = torch.exp(-_exclusive_segment_sum(sd, ray_indices))
    alphas = 1.0 - torch.exp(-sd)
    return trans * alphas, trans, alphas


def accumulate(weights: torch.Tensor, ray_indices: torch.Tensor, n_rays: int, values: Optional[torch.Tensor] = None) -> torch.Tensor:
    """sum_i w_i v_i per ray via index_add_: (S,) weights, (S, C) values -> (n_rays, C)
    (values None: the opacity sum_i w_i, as (n_rays, 1))."""
    src = weights[:, None] if values is None else weights[:, None] * values
    out = torch.zeros(n_rays, src.shape[-1], dtype=src.dtype, device=src.device)
    return out.index_add_(0, ray_indices, src)
