"""A sampled signal on a regular grid, and its coordinates in [-1, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import torch


def grid_coords(shape: Sequence[int]) -> torch.Tensor:
    """Cell-centre coordinates of a regular grid in [-1, 1]: shape (n1, ..., nd) -> (prod, d).

    Axis order follows `shape` (for an image (H, W): column 0 is the row coordinate y, column 1
    the column coordinate x). Sample i of n sits at (2 i + 1) / n - 1, so a grid of any
    resolution covers the same square and `render-image --scale` samples the same field.
    """
    axes = [(torch.arange(n, dtype=torch.float32) * 2 + 1) / n - 1 for n in shape]
    mesh = torch.meshgrid(*axes, indexing="ij")
    return torch.stack(mesh, dim=-1).reshape(-1, len(shape))


@dataclass
class Signal:
    """values: (*grid_shape, C) float32; `kind` is 'image' or 'audio'."""

    values: torch.Tensor
    kind: str
    path: str

    @property
    def grid_shape(self) -> Tuple[int, ...]:
        return tuple(self.values.shape[:-1])

    @property
    def channels(self) -> int:
        return int(self.values.shape[-1])

    @property
    def in_dim(self) -> int:
        return len(self.grid_shape)
