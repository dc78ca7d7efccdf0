"""Base class of every encoding: coordinates (N, in_dim) in [-1, 1] -> features (N, out_dim)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..registry import Registry


class Encoding(nn.Module):
    """An encoding maps coordinates in [-1, 1]^in_dim to `out_dim` features.

    Subclasses set `self.out_dim` in `__init__`. Encodings that act on [0, 1] (Fourier features,
    hash grid, shifted bases) map `u = (x + 1) / 2` internally, so every encoding takes the same
    coordinates and presets can swap them freely.
    """

    in_dim: int
    out_dim: int
    fixed_in_dim: Optional[int] = None
    """Set by encodings defined for one input size only (spherical harmonics: 3)."""

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        if in_dim < 1:
            raise ValueError(f"in_dim must be >= 1, got {in_dim}")
        self.in_dim = int(in_dim)

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}"


def to_unit(x: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> [0, 1]."""
    return (x + 1.0) * 0.5


ENCODINGS: Registry[Encoding] = Registry("encoding")
register_encoding = ENCODINGS.register
