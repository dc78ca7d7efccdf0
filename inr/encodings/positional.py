"""NeRF positional encoding (Mildenhall et al. 2020)."""

from __future__ import annotations

import math

import torch

from .base import Encoding, register_encoding


def band_frequencies(num_freqs: int, max_freq_log2: float | None = None) -> torch.Tensor:
    """Frequencies 2^k, k log-linearly spaced on [0, max_freq_log2] (default num_freqs - 1)."""
    if num_freqs < 0:
        raise ValueError(f"num_freqs must be >= 0, got {num_freqs}")
    top = float(num_freqs - 1) if max_freq_log2 is None else float(max_freq_log2)
    return 2.0 ** torch.linspace(0.0, top, num_freqs, dtype=torch.float64)


def sin_cos(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """[sin(pi f x), cos(pi f x)] for each frequency f, grouped per band.

    x: (N, d); freqs: (L,) -> (N, L * 2 * d), band-major: [sin f0 x, cos f0 x, sin f1 x, ...].
    """
    arg = math.pi * x[:, None, :] * freqs.to(x.dtype)[None, :, None]  # (N, L, d)
    return torch.cat([torch.sin(arg), torch.cos(arg)], dim=-1).flatten(1)


@register_encoding("positional")
class PositionalEncoding(Encoding):
    """gamma(x) = [x, sin(2^k pi x), cos(2^k pi x)] for k = 0..L-1, on x in [-1, 1].

    Args:
        num_freqs: L, the number of frequency bands (NeRF: 10 for xyz, 4 for directions).
        max_freq_log2: space the L exponents log-linearly on [0, max_freq_log2] instead of
            0, 1, ..., L-1. With L = 256 and max_freq_log2 = log2(10) this is Tancik et al.'s
            "positional" mapping (frequencies sigma^(j/m), sigma = 10), since
            2 pi sigma^(j/m) v with v = (x + 1) / 2 equals pi sigma^(j/m) x plus a phase.
        include_input: prepend x itself.
    """

    def __init__(
        self,
        in_dim: int,
        num_freqs: int = 8,
        max_freq_log2: float | None = None,
        include_input: bool = True,
    ) -> None:
        super().__init__(in_dim)
        self.include_input = bool(include_input)
        self.register_buffer("freqs", band_frequencies(num_freqs, max_freq_log2).float(), persistent=False)
        self.out_dim = self.in_dim * (2 * num_freqs + int(self.include_input))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = sin_cos(x, self.freqs)
        return torch.cat([x, feats], dim=-1) if self.include_input else feats
