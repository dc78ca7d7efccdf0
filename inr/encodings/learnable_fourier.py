"""Learnable Fourier features (Li et al., NeurIPS 2021)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import Encoding, register_encoding, to_unit


@register_encoding("learnable_fourier")
class LearnableFourierFeatures(Encoding):
    """F = [cos(X W^T), sin(X W^T)] / sqrt(|F|), then Y = GELU(F W1 + b1) W2 + b2.

    X = (x + 1) / 2 in [0, 1]. The paper initialises W ~ N(0, gamma^-2); here the width is given
    as `sigma` in Gaussian-RFF units (W = 2 pi B with B ~ N(0, sigma^2), i.e. gamma = 1/(2 pi
    sigma)), so a learnable and a frozen mapping can be compared at the same sigma. Positions form
    G groups of M = in_dim / G dimensions; each group has its own W and MLP and the group outputs
    are concatenated.

    Args:
        num_features: |F| (cos and sin halves together), per group.
        hidden: |H| of the modulating MLP.
        out_features: D, the total output size (D / G per group).
        sigma: initial frequency scale in RFF units.
        groups: G; must divide in_dim and out_features.
        seed: seed for the initial W.
    """

    def __init__(
        self,
        in_dim: int,
        num_features: int = 256,
        hidden: int = 256,
        out_features: int = 256,
        sigma: float = 10.0,
        groups: int = 1,
        seed: int = 0,
    ) -> None:
        super().__init__(in_dim)
        if num_features % 2 or in_dim % groups or out_features % groups:
            raise ValueError("num_features must be even; groups must divide in_dim and out_features")
        self.groups = int(groups)
        m = in_dim // groups
        gen = torch.Generator().manual_seed(int(seed))
        self.W = nn.Parameter(2 * math.pi * float(sigma) * torch.randn(groups, num_features // 2, m, generator=gen))
        self.norm = 1.0 / math.sqrt(num_features)
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(num_features, hidden), nn.GELU(), nn.Linear(hidden, out_features // groups))
            for _ in range(groups)
        )
        self.out_dim = int(out_features)

    def fourier(self, x: torch.Tensor) -> torch.Tensor:
        """The unmodulated features: (N, in_dim) -> (N, G, |F|)."""
        X = to_unit(x).view(x.shape[0], self.groups, -1)  # (N, G, M)
        proj = torch.einsum("ngm,gfm->ngf", X, self.W)
        return torch.cat([torch.cos(proj), torch.sin(proj)], dim=-1) * self.norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F = self.fourier(x)
        return torch.cat([mlp(F[:, g]) for g, mlp in enumerate(self.mlps)], dim=-1)
