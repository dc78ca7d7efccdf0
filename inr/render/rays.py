"""Camera rays in the Blender / NeRF (OpenGL) convention."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

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


def orbit_poses(c2w: torch.Tensor, n_frames: int, fallback_centre: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(n_frames, 4, 4) cameras on a circle around the point the given cameras (M, 4, 4) look at.

    The orbit's axis is the cameras' mean 'up' vector, its centre the point nearest (least
    squares) to every camera's optical axis (`fallback_centre`, else the cameras' mean position,
    when the axes are all parallel), and its height and radius the cameras' mean offset from that
    centre along and across the axis; the first frame is nearest the first camera, and every
    frame looks at the centre.
    """
    c2w = c2w.double()
    dev = c2w.device
    origins, forwards = c2w[:, :3, 3], -c2w[:, :3, 2]
    up = torch.nn.functional.normalize(c2w[:, :3, 1].mean(0), dim=0)
    # centre = argmin_p sum_k |(I - f_k f_k^T)(p - o_k)|^2
    proj = torch.eye(3, dtype=torch.float64, device=dev) - forwards[:, :, None] * forwards[:, None, :]
    a, b = proj.sum(0), (proj @ origins[:, :, None]).sum(0)[:, 0]
    if torch.linalg.matrix_rank(a) == 3:
        centre = torch.linalg.lstsq(a, b).solution
    else:
        centre = origins.mean(0) if fallback_centre is None else fallback_centre.double().to(dev)
    offsets = origins - centre
    height = float((offsets @ up).mean())
    radius = float((offsets - (offsets @ up)[:, None] * up).norm(dim=-1).mean())
    e1 = offsets[0] - (offsets[0] @ up) * up
    e1 = e1 / e1.norm() if e1.norm() > 1e-8 else torch.nn.functional.normalize(torch.linalg.cross(up, torch.tensor([1.0, 0, 0], dtype=torch.float64, device=dev)), dim=0)
    e2 = torch.linalg.cross(up, e1)
    poses = []
    for k in range(n_frames):
        angle = 2 * math.pi * k / n_frames
        eye = centre + height * up + radius * (math.cos(angle) * e1 + math.sin(angle) * e2)
        poses.append(look_at(eye.float(), centre.float(), up.float()))
    return torch.stack(poses)
