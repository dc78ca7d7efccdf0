"""Amplified positional encoding (Deep Point Cloud Reconstruction, Choe et al. 2022)."""

from __future__ import annotations

import torch
from torch import nn

from .base import Encoding, register_encoding
from .positional import band_frequencies, sin_cos


@register_encoding("amplified")
class AmplifiedEncoding(Encoding):
    """gamma_a(d) = s(d) * [sin(2^k pi d / r), cos(2^k pi d / r)]_k, s(d) = 1 + alpha ||d|| / r.

    d is a neighbour's position relative to a point (in scene units), r the voxel size. The
    sinusoids alone have unit magnitude wherever d is; the factor s grows with the distance, so
    a downstream attention layer can tell near from far neighbours. The exact amplification of
    the paper is not public: this linear form is a documented choice, and `alpha` may be learned.
    With alpha = 0 it is the plain sinusoidal encoding (the ablation baseline).

    Args:
        num_freqs: bands k = 0..L-1.
        voxel_size: r.
        alpha: amplification slope.
        learn_alpha: make alpha a parameter.
    """

    def __init__(
        self,
        in_dim: int,
        num_freqs: int = 6,
        voxel_size: float = 1.0,
        alpha: float = 1.0,
        learn_alpha: bool = False,
    ) -> None:
        super().__init__(in_dim)
        if voxel_size <= 0:
            raise ValueError(f"voxel_size must be > 0, got {voxel_size}")
        self.voxel_size = float(voxel_size)
        self.register_buffer("freqs", band_frequencies(num_freqs).float(), persistent=False)
        a = torch.tensor(float(alpha))
        if learn_alpha:
            self.alpha = nn.Parameter(a)
        else:
            self.register_buffer("alpha", a)
        self.out_dim = 2 * num_freqs * self.in_dim

    def amplification(self, d: torch.Tensor) -> torch.Tensor:
        """s(d): (N, in_dim) -> (N, 1)."""
        return 1.0 + self.alpha * d.norm(dim=-1, keepdim=True) / self.voxel_size

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return self.amplification(d) * sin_cos(d / self.voxel_size, self.freqs)
