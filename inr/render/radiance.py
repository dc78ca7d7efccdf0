"""Radiance fields for NeRF: position -> density and features, + view direction -> colour."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Tuple

import torch
from torch import nn

from .._config import from_dict_strict
from ..fields import build_encoding, build_network


class _TruncExp(torch.autograd.Function):
    """exp(x) whose gradient uses exp(min(x, 15)): density logits can spike early in training
    without overflowing the backward pass (Instant-NGP / nerfacc practice)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.exp(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.exp(x.clamp(max=15.0))


def trunc_exp(x: torch.Tensor) -> torch.Tensor:
    return _TruncExp.apply(x)


@dataclass
class RadianceFieldConfig:
    """A NeRF field: encoding(position) -> density network -> (density, geometry features);
    [direction encoding, features] -> colour network -> RGB."""

    encoding: str = "hashgrid"
    encoding_options: Dict[str, Any] = field(default_factory=lambda: {"n_levels": 16, "n_features": 2, "log2_table": 19,
                                                                         "base_resolution": 16, "max_resolution": 2048})
    density_network: str = "mlp"
    density_options: Dict[str, Any] = field(default_factory=lambda: {"hidden": 64, "layers": 1})
    geo_features: int = 15
    """Features passed from the density network to the colour network."""
    direction_encoding: str = "spherical_harmonics"
    direction_options: Dict[str, Any] = field(default_factory=lambda: {"degree": 4})
    color_network: str = "mlp"
    color_options: Dict[str, Any] = field(default_factory=lambda: {"hidden": 64, "layers": 2})

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RadianceFieldConfig":
        return from_dict_strict(cls, data, "radiance field")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class RadianceField(nn.Module):
    """World points inside `aabb` and unit view directions -> (sigma (N,), rgb (N, 3)).

    Points are mapped to [-1, 1]^3 over the box before encoding; points outside get zero
    density.
    """

    def __init__(self, config: RadianceFieldConfig, aabb) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("aabb", torch.as_tensor(aabb, dtype=torch.float32).reshape(6))
        self.encoding = build_encoding(config.encoding, 3, **config.encoding_options)
        self.density_net = build_network(config.density_network, self.encoding.out_dim, 1 + config.geo_features,
                                         **config.density_options)
        self.dir_encoding = build_encoding(config.direction_encoding, 3, **config.direction_options)
        self.color_net = build_network(config.color_network, self.dir_encoding.out_dim + config.geo_features, 3,
                                       output_activation="sigmoid", **config.color_options)

    def normalize(self, points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        lo, hi = self.aabb[:3], self.aabb[3:]
        x = (points - lo) / (hi - lo) * 2.0 - 1.0
        return x, ((x > -1) & (x < 1)).all(-1)

    def _geometry(self, points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x, inside = self.normalize(points)
        h = self.density_net(self.encoding(x.clamp(-1, 1)))
        # density activation: exp of a logit shifted by -1 so that an untrained field is thin
        sigma = trunc_exp(h[:, 0].float() - 1.0) * inside
        return sigma, h[:, 1:]

    def density(self, points: torch.Tensor) -> torch.Tensor:
        return self._geometry(points)[0]

    def forward(self, points: torch.Tensor, directions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        sigma, geo = self._geometry(points)
        rgb = self.color_net(torch.cat([self.dir_encoding(directions), geo], dim=-1))
        return sigma, rgb.float()
