"""Hierarchical progressive MLP of PINs (Landgraf et al. 2022)."""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from torch import nn

from .base import Network, register_network
from .base import output_activation as make_output_activation


@register_network("pins")
class PinsMLP(Network):
    """Level k: h_k = MLP_k([h_{k-1}, band_k]); y_k = y_{k-1} + head_k(h_k); level 0 has no h_{-1}.

    Every level is a usable representation at its own resolution: `forward(f, level=k)` runs
    levels 0..k only (a smaller network on the low bands). Training supervises the last level.

    Args:
        level_dims: widths of the input slices per level (the `progressive` encoding's
            `level_dims`); default: in_dim split into `levels` near-equal parts.
        levels: used only when level_dims is not given (at most in_dim).
        hidden: width of every level's hidden features.
        layers_per_level: Linear+ReLU layers in each level's block.
        output_activation: applied to each level's cumulative output.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        level_dims: Optional[Sequence[int]] = None,
        levels: int = 4,
        hidden: int = 128,
        layers_per_level: int = 2,
        output_activation: str = "none",
    ) -> None:
        super().__init__(in_dim, out_dim)
        if level_dims is None:  # in_dim split into near-equal parts, at most one level per input feature
            levels = max(1, min(int(levels), in_dim))
            level_dims = [in_dim // levels + (1 if k < in_dim % levels else 0) for k in range(levels)]
        if sum(level_dims) != in_dim or min(level_dims) < 1:
            raise ValueError(f"level_dims {list(level_dims)} must be positive and sum to in_dim={in_dim}")
        self.level_dims: List[int] = [int(d) for d in level_dims]
        self.blocks = nn.ModuleList()
        self.heads = nn.ModuleList()
        for k, d in enumerate(self.level_dims):
            width_in = d + (hidden if k else 0)
            mods: List[nn.Module] = []
            for j in range(layers_per_level):
                mods += [nn.Linear(width_in if j == 0 else hidden, hidden), nn.ReLU(inplace=True)]
            self.blocks.append(nn.Sequential(*mods))
            self.heads.append(nn.Linear(hidden, out_dim))
        self.out_act = make_output_activation(output_activation)

    @property
    def num_levels(self) -> int:
        return len(self.level_dims)

    def forward(self, features: torch.Tensor, level: Optional[int] = None) -> torch.Tensor:
        last = self.num_levels - 1 if level is None else int(level)
        if not 0 <= last < self.num_levels:
            raise ValueError(f"level must be in [0, {self.num_levels - 1}], got {level}")
        return self.all_levels(features, last)[-1]

    def all_levels(self, features: torch.Tensor, last: Optional[int] = None) -> List[torch.Tensor]:
        """The outputs of levels 0..last (default: all), each with the output activation."""
        last = self.num_levels - 1 if last is None else last
        bands = torch.split(features, self.level_dims, dim=-1)
        outputs: List[torch.Tensor] = []
        h: Optional[torch.Tensor] = None
        y: Optional[torch.Tensor] = None
        for k in range(last + 1):
            h = self.blocks[k](bands[k] if h is None else torch.cat([h, bands[k]], dim=-1))
            r = self.heads[k](h)
            y = r if y is None else y + r
            outputs.append(self.out_act(y))
        return outputs
