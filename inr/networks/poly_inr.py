"""Poly-INR (Singh et al. CVPR 2023), single-signal version."""

from __future__ import annotations

import torch
from torch import nn

from .base import Network, register_network
from .base import output_activation as make_output_activation


@register_network("poly_inr")
class PolyINR(Network):
    """A polynomial of the coordinates built level by level, with no positional encoding.

    h_0 = A_0 c + a_0;  h_i = LeakyReLU(W_i h_{i-1} + b_i) * (A_i c + a_i), i = 1..L;  y = W_o h_L.

    Each level multiplies by one more affine function of the input coordinates c, so the degree
    grows by one per level. The published model is a GAN generator whose per-level affines come
    from a mapping network; for fitting one signal they are free parameters here. Features are
    clamped to [-clamp, clamp] after every level (the generator's conv clamp) so that a deep
    product cannot overflow.

    Args:
        hidden: width (256).
        levels: L (10 in the paper's generator; 6-8 suffice for one image).
        negative_slope: of the LeakyReLU (0.2).
        clamp: feature clamp (256).
        output_activation: 'none' or 'sigmoid'.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden: int = 256,
        levels: int = 8,
        negative_slope: float = 0.2,
        clamp: float = 256.0,
        output_activation: str = "none",
    ) -> None:
        super().__init__(in_dim, out_dim)
        # all L + 1 coordinate affines in one matmul: (N, in_dim) -> (N, (L + 1) * hidden)
        self.affine = nn.Linear(in_dim, (levels + 1) * hidden)
        self.linears = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(levels))
        self.act = nn.LeakyReLU(negative_slope)
        self.head = nn.Linear(hidden, out_dim)
        self.hidden, self.levels, self.clamp = int(hidden), int(levels), float(clamp)
        self.out_act = make_output_activation(output_activation)

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        affines = self.affine(c).view(c.shape[0], self.levels + 1, self.hidden)
        h = affines[:, 0]
        for i, lin in enumerate(self.linears, start=1):
            h = torch.clamp(self.act(lin(h)) * affines[:, i], -self.clamp, self.clamp)
        return self.out_act(self.head(h))
