"""Quantized coordinates (CQ-NIR, Jiang et al. ICCV 2023), a wrapper around any encoding."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from .base import ENCODINGS, Encoding, register_encoding, to_unit


def quantize(x: torch.Tensor, resolution: int) -> torch.Tensor:
    """Snap x in [-1, 1] to the centre of its cell on a `resolution`-point lattice.

    u = (x + 1) / 2, c = 1 / (resolution - 1), cell = floor(u / c) (clamped to the last cell),
    u' = cell * c + c / 2, mapped back to [-1, 1]. The value is the cell centre, and the gradient
    w.r.t. x is the inner encoding's gradient evaluated at the centre (straight-through): floor()
    has no useful derivative, and normals / eikonal terms need one.
    """
    if resolution < 2:
        raise ValueError(f"resolution must be >= 2, got {resolution}")
    c = 1.0 / (resolution - 1)
    cell = torch.clamp(torch.floor(to_unit(x) / c), 0, resolution - 2)
    centre = (cell * c + 0.5 * c) * 2.0 - 1.0
    return x + (centre - x).detach()


@register_encoding("quantized")
class QuantizedEncoding(Encoding):
    """gamma_q(x) = inner(quantize(x)).

    Args:
        resolution: lattice points per axis over [-1, 1] (NeuS used 25,600 over its scene box).
        inner: name of the wrapped encoding.
        inner_options: its options.
    """

    def __init__(
        self,
        in_dim: int,
        resolution: int = 4096,
        inner: str = "positional",
        inner_options: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(in_dim)
        if inner == "quantized":
            raise ValueError("quantized cannot wrap itself")
        self.resolution = int(resolution)
        self.inner = ENCODINGS.get(inner)(in_dim, **(inner_options or {}))
        self.out_dim = self.inner.out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(quantize(x, self.resolution))
