"""Fourier feature mappings of Tancik et al. 2020: 'basic' and Gaussian random features."""

from __future__ import annotations

import math

import torch

from .base import Encoding, register_encoding, to_unit


def fourier_features(u: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """[sin(2 pi B u), cos(2 pi B u)]: u (N, d) in [0, 1], B (m, d) -> (N, 2m)."""
    proj = 2.0 * math.pi * (u @ B.t())
    return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)


@register_encoding("fourier")
class GaussianFourierFeatures(Encoding):
    """gamma(v) = [sin(2 pi B v), cos(2 pi B v)], B (m x d) ~ N(0, sigma^2), frozen.

    v = (x + 1) / 2 in [0, 1], so `sigma` has the paper's meaning (10 for natural photos, 14 for
    text images, m = 256 -> 512 features). B is a buffer: saved with checkpoints, never trained.

    Args:
        num_features: m.
        sigma: standard deviation of B.
        seed: seed of the generator that draws B (reproducible without touching global RNG).
    """

    def __init__(self, in_dim: int, num_features: int = 256, sigma: float = 10.0, seed: int = 0) -> None:
        super().__init__(in_dim)
        gen = torch.Generator().manual_seed(int(seed))
        B = torch.randn(num_features, self.in_dim, generator=gen) * float(sigma)
        self.register_buffer("B", B)
        self.sigma = float(sigma)
        self.out_dim = 2 * num_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fourier_features(to_unit(x), self.B)


@register_encoding("basic")
class BasicFourierFeatures(Encoding):
    """Tancik's 'basic' mapping: gamma(v) = [sin(2 pi v), cos(2 pi v)] (B = identity)."""

    def __init__(self, in_dim: int) -> None:
        super().__init__(in_dim)
        self.register_buffer("B", torch.eye(self.in_dim), persistent=False)
        self.out_dim = 2 * self.in_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fourier_features(to_unit(x), self.B)
