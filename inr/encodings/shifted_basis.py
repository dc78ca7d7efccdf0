"""Shifted-basis embeddings (Zheng, Ramasinghe, Lucey 2021) and their diagnostics."""

from __future__ import annotations

import math
from typing import Callable, Dict

import torch

from .base import Encoding, register_encoding, to_unit


def _gaussian(d: torch.Tensor, sigma: float) -> torch.Tensor:
    return torch.exp(-(d * d) / (2.0 * sigma * sigma))


def _triangle(d: torch.Tensor, sigma: float) -> torch.Tensor:
    return torch.clamp(1.0 - d.abs() / sigma, min=0.0)


def _square(d: torch.Tensor, sigma: float) -> torch.Tensor:
    return (d.abs() <= sigma).to(d.dtype)


def _sinc(d: torch.Tensor, sigma: float) -> torch.Tensor:
    return torch.sinc(d / sigma)  # sin(pi t) / (pi t)


BASES: Dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "gaussian": _gaussian,
    "triangle": _triangle,
    "square": _square,
    "sinc": _sinc,
}


@register_encoding("shifted_basis")
class ShiftedBasis(Encoding):
    """psi_i(u) = phi(u - t_i), t_i = i / D, per axis on u = (x + 1) / 2, axes concatenated.

    The embedding is divided by its largest row norm over [0, 1]^d (found on a fine grid at
    construction), so every row has norm <= 1 whatever sigma and D are.

    Args:
        num_centres: D per axis (the paper used 500 per axis in 2D, 10,000 in 1D).
        sigma: width of phi in units of u (narrow memorises, wide interpolates).
        basis: gaussian (exp(-d^2 / 2 sigma^2)), triangle (max(0, 1 - |d|/sigma)),
            square (|d| <= sigma), sinc (sinc(d / sigma)).
    """

    def __init__(self, in_dim: int, num_centres: int = 256, sigma: float = 0.01, basis: str = "gaussian") -> None:
        super().__init__(in_dim)
        if basis not in BASES:
            raise ValueError(f"unknown basis {basis!r}; available: {', '.join(BASES)}")
        if sigma <= 0 or num_centres < 1:
            raise ValueError("sigma must be > 0 and num_centres >= 1")
        self.basis, self.sigma, self.num_centres = basis, float(sigma), int(num_centres)
        self.register_buffer("centres", torch.arange(num_centres, dtype=torch.float32) / num_centres, persistent=False)
        grid = torch.linspace(0.0, 1.0, 8 * num_centres + 1, dtype=torch.float64)[:, None]
        axis_norm = self._raw_axis(grid, torch.float64).norm(dim=-1).max().item()
        # rows are concatenations of in_dim axis embeddings: the largest norm is sqrt(d) * axis max
        self.scale = 1.0 / (math.sqrt(self.in_dim) * max(axis_norm, 1e-12))
        self.out_dim = self.in_dim * self.num_centres

    def _raw_axis(self, u: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """u (N, d) -> (N, d * D) unnormalised."""
        d = u[:, :, None] - self.centres.to(dtype)[None, None, :]
        return BASES[self.basis](d, self.sigma).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._raw_axis(to_unit(x), x.dtype) * self.scale

    @torch.no_grad()
    def kernel(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Induced kernel k(x, y) = <psi(x), psi(y)>: (N, d), (M, d) -> (N, M)."""
        return self(x) @ self(y).t()


@torch.no_grad()
def stable_rank(matrix: torch.Tensor) -> float:
    """Stable rank sum(s^2) / max(s)^2 of a (N, F) matrix (e.g. embedded coordinates)."""
    s = torch.linalg.svdvals(matrix.double())
    return float((s * s).sum() / (s[0] * s[0]))
