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


HOLDOUTS = ("none", "even-odd")


def split_holdout(values: torch.Tensor, holdout: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(coords_train, values_train, coords_test, values_test) from a (*grid, C) signal.

    'none': train and test on every sample. 'even-odd' (Tancik et al.): train on the samples with
    even indices on every axis, test on the odd ones (for an image, the even and odd
    half-resolution pixel grids), so the test measures generalisation, not memorisation.
    """
    shape = values.shape[:-1]
    coords = grid_coords(shape).view(*shape, len(shape))
    if holdout == "none":
        flat_c, flat_v = coords.reshape(-1, len(shape)), values.reshape(-1, values.shape[-1])
        return flat_c, flat_v, flat_c, flat_v
    if holdout != "even-odd":
        raise ValueError(f"holdout must be one of {HOLDOUTS}, got {holdout!r}")
    if min(shape) < 2:
        raise ValueError("even-odd holdout needs at least 2 samples per axis")
    even = tuple(slice(0, None, 2) for _ in shape)
    odd = tuple(slice(1, None, 2) for _ in shape)
    c = values.shape[-1]
    return (
        coords[even].reshape(-1, len(shape)),
        values[even].reshape(-1, c),
        coords[odd].reshape(-1, len(shape)),
        values[odd].reshape(-1, c),
    )
