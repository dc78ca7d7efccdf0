"""Real spherical harmonics of a direction (the view-direction encoding of Instant-NGP)."""

from __future__ import annotations

import torch

from .base import Encoding, register_encoding


def sh_basis(d: torch.Tensor, degree: int) -> torch.Tensor:
    """Real SH basis up to `degree` (1..4) of unit vectors d (N, 3) -> (N, degree^2).

    Constants and signs follow tiny-cuda-nn's SphericalHarmonics encoding; the basis is
    orthonormal on the unit sphere (integral of Y_i Y_j = delta_ij).
    """
    x, y, z = d.unbind(-1)
    out = [torch.full_like(x, 0.28209479177387814)]
    if degree > 1:
        out += [-0.48860251190291987 * y, 0.48860251190291987 * z, -0.48860251190291987 * x]
    if degree > 2:
        xy, xz, yz, x2, y2, z2 = x * y, x * z, y * z, x * x, y * y, z * z
        out += [
            1.0925484305920792 * xy,
            -1.0925484305920792 * yz,
            0.94617469575755997 * z2 - 0.31539156525251999,
            -1.0925484305920792 * xz,
            0.54627421529603959 * (x2 - y2),
        ]
    if degree > 3:
        out += [
            0.59004358992664352 * y * (y2 - 3.0 * x2),
            2.8906114426405538 * xy * z,
            0.45704579946446572 * y * (1.0 - 5.0 * z2),
            0.3731763325901154 * z * (5.0 * z2 - 3.0),
            0.45704579946446572 * x * (1.0 - 5.0 * z2),
            1.4453057213202769 * z * (x2 - y2),
            0.59004358992664352 * x * (3.0 * y2 - x2),
        ]
    return torch.stack(out, dim=-1)


@register_encoding("spherical_harmonics")
class SphericalHarmonics(Encoding):
    """Directions (N, 3) (normalised here) -> real SH coefficients (N, degree^2).

    Args:
        degree: number of bands, 1..4 (Instant-NGP uses 4: 16 features).
    """

    fixed_in_dim = 3

    def __init__(self, in_dim: int = 3, degree: int = 4) -> None:
        super().__init__(in_dim)
        if in_dim != 3:
            raise ValueError(f"spherical_harmonics encodes 3D directions, got in_dim={in_dim}")
        if not 1 <= degree <= 4:
            raise ValueError(f"degree must be in 1..4, got {degree}")
        self.degree = int(degree)
        self.out_dim = self.degree**2

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return sh_basis(torch.nn.functional.normalize(d, dim=-1), self.degree)
