"""Networks: features (N, in_dim) -> values (N, out_dim)."""

from . import mlp, pins, poly_inr, siren
from .base import NETWORKS, Network, count_parameters

__all__ = ["NETWORKS", "Network", "count_parameters", "mlp", "pins", "poly_inr", "siren"]
