"""Camera rays in the Blender / NeRF (OpenGL) convention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch


@dataclass
class Rays:
    """origins, directions: (N, 3) in world units; directions have unit length."""

    origins: torch.Tensor
    directions: torch.Tensor

    def __len__(self) -> int:
        return int(self.origins.shape[0])

    def __getitem__(self, index) -> "Rays":
        return Rays(self.origins[index], self.directions[index])


Intrinsic = Union[float, torch.Tensor]


def pinhole_rays(c2w: torch.Tensor, fx: Intrinsic, fy: Intrinsic, cx: Intrinsic, cy: Intrinsic, pixels: torch.Tensor) -> Rays:
    """Rays through pixel centres of a pinhole camera.

    Camera space is OpenGL's: x right, y up, the camera looks along -z. Pixel (row i, column j)
    has its centre at image position (u, v) = (j + 0.5, i + 0.5), so its camera-space direction
    is ((u - cx) / fx, -(v - cy) / fy, -1).

    Args:
        c2w: (3, 4) or (4, 4) camera-to-world matrix [R | t], or (N, 3|4, 4) one per pixel.
        fx, fy, cx, cy: intrinsics in pixels, scalars or (N,) tensors (one camera per pixel).
        pixels: (N, 2) integer (row, column) indices.
    Returns:
        Rays with origins t and unit directions R d_cam.
    """
    i = pixels[:, 0].to(torch.float32) + 0.5
    j = pixels[:, 1].to(torch.float32) + 0.5
    d_cam = torch.stack([(j - cx) / fx, -(i - cy) / fy, -torch.ones_like(i)], dim=-1)
    R = c2w[..., :3, :3].to(torch.float32)
    t = c2w[..., :3, 3].to(torch.float32)
    if R.dim() == 2:
        dirs = d_cam @ R.t()
        origins = t.expand_as(dirs)
    else:
        dirs = torch.einsum("nij,nj->ni", R, d_cam)
        origins = t
    return Rays(origins.contiguous(), torch.nn.functional.normalize(dirs, dim=-1))


def look_at(eye: torch.Tensor, target: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """(4, 4) OpenGL camera-to-world matrix of a camera at `eye` looking at `target`, its image
    'up' as close to `up` as possible: columns x = right, y = up, z = -forward, t = eye."""
    forward = torch.nn.functional.normalize(target - eye, dim=0)
    right = torch.linalg.cross(forward, up)
    if right.norm() < 1e-8:
        raise ValueError("look_at: the view direction is parallel to up")
    right = right / right.norm()
    true_up = torch.linalg.cross(right, forward)
    c2w = torch.eye(4, dtype=eye.dtype, device=eye.device)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, true_up, -forward, eye
    return c2w
