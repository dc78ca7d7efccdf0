"""ReLU MLP, the baseline network for every encoding."""

from __future__ import annotations

import torch
from torch import nn

from .base import Network, register_network
from .base import output_activation as make_output_activation


@register_network("mlp")
class MLP(Network):
    """`layers` hidden Linear+ReLU layers of width `hidden`, then a linear head.

    Tancik et al.: 3 x 256 hidden (4 linear layers), sigmoid out. Instant-NGP image: 2 x 64.

    Args:
        hidden: width.
        layers: number of hidden layers (0 = a single linear map).
        output_activation: 'none' or 'sigmoid'.
    """

    def __init__(self, in_dim: int, out_dim: int, hidden: int = 256, layers: int = 3, output_activation: str = "none") -> None:
        super().__init__(in_dim, out_dim)
        dims = [in_dim] + [hidden] * layers
        body = []
        for a, b in zip(dims[:-1], dims[1:]):
            body += [nn.Linear(a, b), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*body)
        self.head = nn.Linear(dims[-1], out_dim)
        self.out_act = make_output_activation(output_activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_act(self.head(self.body(x)))

