"""No mapping: the raw coordinates (the 'relu' baseline of Tancik et al.)."""

from __future__ import annotations

import torch

from .base import Encoding, register_encoding


@register_encoding("identity")
class Identity(Encoding):
    """gamma(x) = x. out_dim = in_dim."""

    def __init__(self, in_dim: int) -> None:
        super().__init__(in_dim)
        self.out_dim = self.in_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
