"""Radiance fields for NeRF: position -> density and features, + view direction -> colour."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

from .._config import from_dict_strict
from ..fields import build_encoding, build_network
from .contraction import contract


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
    contraction: bool = False
    """Unbounded scenes: points are contracted (`inr.render.contraction`, the scene box being the
    inner region) before encoding, so the field covers all of space."""
    appearance_dim: int = 0
    """Length of a learned per-training-image appearance code fed to the colour network (NeRF in
    the Wild / nerfacto's appearance embedding: exposure and white balance that vary between
    photos); 0: none. Views that are not training images use the mean code."""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RadianceFieldConfig":
        return from_dict_strict(cls, data, "radiance field")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class RadianceField(nn.Module):
    """World points and unit view directions -> (sigma (N,), rgb (N, 3)).

    Points are mapped to [-1, 1]^3 over the box `aabb` before encoding; points outside get zero
    density. With `config.contraction` the box is the inner region of a contracted space
    instead, and every point has a density.

    n_images: training images, for the appearance codes (`config.appearance_dim` > 0).
    """

    def __init__(self, config: RadianceFieldConfig, aabb, n_images: int = 0) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("aabb", torch.as_tensor(aabb, dtype=torch.float32).reshape(6))
        self.encoding = build_encoding(config.encoding, 3, **config.encoding_options)
        self.density_net = build_network(config.density_network, self.encoding.out_dim, 1 + config.geo_features,
                                         **config.density_options)
        self.dir_encoding = build_encoding(config.direction_encoding, 3, **config.direction_options)
        dim = int(config.appearance_dim)
        if dim < 0 or (dim > 0 and n_images < 1):
            raise ValueError(f"appearance_dim {dim} needs >= 0 and training images (got {n_images})")
        self.appearance = nn.Embedding(n_images, dim) if dim else None
        if self.appearance is not None:
            nn.init.normal_(self.appearance.weight, std=0.01)
        self.color_net = build_network(config.color_network, self.dir_encoding.out_dim + config.geo_features + dim, 3,
                                       output_activation="sigmoid", **config.color_options)

    def normalize(self, points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        lo, hi = self.aabb[:3], self.aabb[3:]
        if self.config.contraction:
            x = contract((points - (lo + hi) * 0.5) / ((hi - lo) * 0.5)) * 0.5
            return x, torch.isfinite(x).all(-1)
        x = (points - lo) / (hi - lo) * 2.0 - 1.0
        return x, ((x > -1) & (x < 1)).all(-1)

    def appearance_codes(self, images: Optional[torch.Tensor], n: int, device) -> Optional[torch.Tensor]:
        """(n, appearance_dim) codes of training images `images` (n,), or the mean code for
        every ray when `images` is None; None without appearance codes."""
        if self.appearance is None:
            return None
        if images is None:
            return self.appearance.weight.mean(0, keepdim=True).expand(n, -1).to(device)
        return self.appearance(images)

    def _geometry(self, points: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x, inside = self.normalize(points)
        h = self.density_net(self.encoding(x.clamp(-1, 1)))
        # density activation: exp of a logit shifted by -1 so that an untrained field is thin
        sigma = trunc_exp(h[:, 0].float() - 1.0) * inside
        return sigma, h[:, 1:]

    def density(self, points: torch.Tensor) -> torch.Tensor:
        return self._geometry(points)[0]

    def forward(self, points: torch.Tensor, directions: torch.Tensor,
                codes: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """codes: (N, appearance_dim) appearance codes of the points' rays (default: the mean code)."""
        sigma, geo = self._geometry(points)
        parts = [self.dir_encoding(directions), geo]
        if self.appearance is not None:
            parts.append(codes if codes is not None else self.appearance_codes(None, len(points), points.device))
        rgb = self.color_net(torch.cat(parts, dim=-1))
        return sigma, rgb.float()
