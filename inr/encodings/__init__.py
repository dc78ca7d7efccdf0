"""Encodings: coordinates (N, in_dim) in [-1, 1] -> features (N, out_dim)."""

from . import (amplified, fourier, hashgrid, identity, learnable_fourier, positional, progressive, quantized,
               shifted_basis, spherical_harmonics)
from .base import ENCODINGS, Encoding

__all__ = ["ENCODINGS", "Encoding", "amplified", "fourier", "hashgrid", "identity", "learnable_fourier",
           "positional", "progressive", "quantized", "shifted_basis", "spherical_harmonics"]
