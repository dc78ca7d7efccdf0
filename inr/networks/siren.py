"""Sine-activated networks: SIREN (Sitzmann et al. 2020) and SPDER (Shah & Sitawarin 2023).

Both are x -> act(w0 (W x + b)) layers with SIREN's initialisation and a linear head; they differ
only in the activation, so they share one implementation.
"""

from __future__ import annotations

import math
from typing import Callable, Dict

import torch
from torch import nn

from .base import Network, register_network
from .base import output_activation as make_output_activation

ACTIVATIONS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sine": torch.sin,
    # SPDER: sin(x) sqrt(|x|); the floor keeps the derivative of sqrt finite at 0
    "spder": lambda z: torch.sin(z) * torch.sqrt(z.abs() + 1e-8),
    # SPDER's audio variant
    "spder_arctan": lambda z: torch.sin(z) * torch.arctan(z),
}


class SineLayer(nn.Module):
    """y = act(w0 (W x + b)).

    SIREN init: first layer W ~ U(-1/n, 1/n); later layers W ~ U(-sqrt(6/n)/w0, sqrt(6/n)/w0),
    n = fan-in; biases keep torch's default U(-1/sqrt(n), 1/sqrt(n)) as the reference code does.
    """

    def __init__(self, in_dim: int, out_dim: int, w0: float, first: bool, activation: str) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim)
        self.w0 = float(w0)
        self.activation = activation
        bound = 1.0 / in_dim if first else math.sqrt(6.0 / in_dim) / self.w0
        with torch.no_grad():
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ACTIVATIONS[self.activation](self.w0 * self.linear(x))


@register_network("siren")
class Siren(Network):
    """SIREN: `layers` hidden sine layers of width `hidden` (plus the first), linear head.

    Args:
        hidden: width (256).
        layers: hidden layers after the first sine layer (3 in the paper's image setting).
        w0: frequency factor of hidden layers (30).
        first_w0: of the first layer (30 for images; 3000 for audio with t in [-1, 1]).
        activation: 'sine', 'spder' or 'spder_arctan'.
        output_activation: 'none' or 'sigmoid'.
    """

    default_activation = "sine"

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden: int = 256,
        layers: int = 3,
        w0: float = 30.0,
        first_w0: float | None = None,
        activation: str | None = None,
        output_activation: str = "none",
    ) -> None:
        super().__init__(in_dim, out_dim)
        activation = activation or self.default_activation
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        first_w0 = w0 if first_w0 is None else first_w0
        mods = [SineLayer(in_dim, hidden, first_w0, True, activation)]
        mods += [SineLayer(hidden, hidden, w0, False, activation) for _ in range(layers)]
        self.body = nn.Sequential(*mods)
        self.head = nn.Linear(hidden, out_dim)
        bound = math.sqrt(6.0 / hidden) / w0
        with torch.no_grad():
            self.head.weight.uniform_(-bound, bound)
        self.out_act = make_output_activation(output_activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_act(self.head(self.body(x)))


@register_network("spder")
class Spder(Siren):
    """SPDER: SIREN with activation sin(x) sqrt(|x|); paper: 1 input + 5 hidden layers of 256."""

    default_activation = "spder"

    def __init__(self, in_dim: int, out_dim: int, hidden: int = 256, layers: int = 5, **options) -> None:
        super().__init__(in_dim, out_dim, hidden=hidden, layers=layers, **options)
