"""A field = an encoding followed by a network, built from one typed config."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ._config import from_dict_strict
from .encodings import ENCODINGS, Encoding
from .networks import NETWORKS, Network


def build_encoding(name: str, in_dim: int, **options: Any) -> Encoding:
    """Build the encoding `name` for `in_dim`-dimensional coordinates in [-1, 1].

    >>> enc = build_encoding("positional", 2, num_freqs=4)
    >>> enc(torch.zeros(5, 2)).shape
    torch.Size([5, 18])
    """
    return ENCODINGS.get(name)(in_dim, **options)


def build_network(name: str, in_dim: int, out_dim: int, **options: Any) -> Network:
    """Build the network `name` mapping (N, in_dim) features to (N, out_dim) values.

    >>> net = build_network("siren", 2, 3, hidden=32, layers=1)
    >>> net(torch.zeros(4, 2)).shape
    torch.Size([4, 3])
    """
    return NETWORKS.get(name)(in_dim, out_dim, **options)


def available_encodings() -> list[str]:
    return ENCODINGS.names()


def available_networks() -> list[str]:
    return NETWORKS.names()


@dataclass
class FieldConfig:
    """What a field is made of. Sizes of the signal (in_dim, out_dim) are passed at build time."""

    encoding: str = "identity"
    """Encoding name (see `available_encodings()`)."""
    encoding_options: Dict[str, Any] = field(default_factory=dict)
    """Keyword options of the encoding."""
    network: str = "mlp"
    """Network name (see `available_networks()`)."""
    network_options: Dict[str, Any] = field(default_factory=dict)
    """Keyword options of the network."""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "FieldConfig":
        cfg = from_dict_strict(cls, data, "field")
        ENCODINGS.get(cfg.encoding)
        NETWORKS.get(cfg.network)
        return cfg

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class Field(nn.Module):
    """coordinates (N, in_dim) in [-1, 1] -> values (N, out_dim).

    A `pins` network after a `progressive` encoding is given the encoding's band layout, so
    that level k of the network sees band set k; `forward(x, level=k)` then evaluates the coarse
    representation made of levels 0..k.
    """

    def __init__(self, in_dim: int, out_dim: int, config: FieldConfig) -> None:
        super().__init__()
        self.config = config
        self.encoding = build_encoding(config.encoding, in_dim, **config.encoding_options)
        net_options = dict(config.network_options)
        if config.network == "pins" and hasattr(self.encoding, "level_dims"):
            net_options.setdefault("level_dims", list(self.encoding.level_dims))
        self.network = build_network(config.network, self.encoding.out_dim, out_dim, **net_options)
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)

    @property
    def num_levels(self) -> int:
        return int(getattr(self.network, "num_levels", 1))

    def forward(self, x: torch.Tensor, level: Optional[int] = None) -> torch.Tensor:
        feats = self.encoding(x)
        if level is None:
            return self.network(feats)
        if self.num_levels == 1:
            if level != 0:
                raise ValueError(f"this field has one level; got level={level}")
            return self.network(feats)
        return self.network(feats, level=level)

    def all_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        """Every level's output (coarse to fine); a one-level field gives [forward(x)]."""
        if self.num_levels == 1:
            return [self(x)]
        return self.network.all_levels(self.encoding(x))


@torch.no_grad()
def evaluate(field: nn.Module, coords: torch.Tensor, chunk: int = 1 << 16, level: Optional[int] = None) -> torch.Tensor:
    """field(coords) in chunks of `chunk` rows (bounded memory for large renders), no grad."""
    was_training = field.training
    param = next(iter(field.parameters()), None)
    device = param.device if param is not None else coords.device
    field.eval()
    try:
        parts = []
        for c in torch.split(coords, chunk):
            c = c.to(device)
            parts.append((field(c) if level is None else field(c, level=level)).float().to(coords.device))
    finally:
        field.train(was_training)
    return torch.cat(parts)
