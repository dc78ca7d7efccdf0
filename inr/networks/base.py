"""Base class and registry of networks: features (N, in_dim) -> values (N, out_dim)."""

from __future__ import annotations

from torch import nn

from ..registry import Registry


class Network(nn.Module):
    in_dim: int
    out_dim: int

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        if in_dim < 1 or out_dim < 1:
            raise ValueError(f"in_dim and out_dim must be >= 1, got {in_dim}, {out_dim}")
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)


OUTPUT_ACTIVATIONS = {"none": nn.Identity, "sigmoid": nn.Sigmoid}


def output_activation(name: str) -> nn.Module:
    if name not in OUTPUT_ACTIVATIONS:
        raise ValueError(f"output_activation must be one of {sorted(OUTPUT_ACTIVATIONS)}, got {name!r}")
    return OUTPUT_ACTIVATIONS[name]()


NETWORKS: Registry[Network] = Registry("network")
register_network = NETWORKS.register


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


