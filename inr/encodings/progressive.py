"""Progressive (PINs) positional bands: the NeRF encoding split into K disjoint level sets."""

from __future__ import annotations

from typing import List

import torch

from .base import Encoding, register_encoding
from .positional import band_frequencies, sin_cos


@register_encoding("progressive")
class ProgressiveEncoding(Encoding):
    """NeRF positional bands 2^0..2^(L-1), split low-to-high into `levels` disjoint sets.

    `forward` returns all levels concatenated (level 0 first, with x itself), so it works as a
    plain encoding; `level_dims` gives the width of each level's slice, which the `pins`
    network uses to feed band k to its level k.

    Args:
        num_freqs: L, total number of bands.
        levels: K, number of band sets (L need not be a multiple of K; earlier sets get the extra).
        include_input: put x in level 0.
    """

    def __init__(self, in_dim: int, num_freqs: int = 8, levels: int = 4, include_input: bool = True) -> None:
        super().__init__(in_dim)
        if not 1 <= levels <= num_freqs:
            raise ValueError(f"need 1 <= levels <= num_freqs, got levels={levels}, num_freqs={num_freqs}")
        self.include_input = bool(include_input)
        self.register_buffer("freqs", band_frequencies(num_freqs).float(), persistent=False)
        sizes = [num_freqs // levels + (1 if k < num_freqs % levels else 0) for k in range(levels)]
        self.bands_per_level: List[int] = sizes
        self.level_dims: List[int] = [2 * self.in_dim * s for s in sizes]
        if self.include_input:
            self.level_dims[0] += self.in_dim
        self.out_dim = sum(self.level_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # sin_cos is band-major, so consecutive bands give consecutive column blocks
        feats = sin_cos(x, self.freqs)
        return torch.cat([x, feats], dim=-1) if self.include_input else feats

    def split(self, features: torch.Tensor) -> List[torch.Tensor]:
        """(N, out_dim) -> one (N, level_dims[k]) tensor per level."""
        return list(torch.split(features, self.level_dims, dim=-1))
