"""Between the browser's camera (viser: OpenCV axes, x right, y down, looking along +z; a unit
quaternion wxyz for camera-to-world rotation; vertical field of view) and the toolkit's cameras
(OpenGL axes, x right, y up, looking along -z; 4x4 camera-to-world; pixel intrinsics)."""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np
import torch

from ..render.paths import matrix_to_quat, quat_to_matrix
from ..render.rays import Rays, pinhole_rays

GL_FROM_CV = np.diag([1.0, -1.0, -1.0])  # flips y and z: the same for both directions


def viewer_to_c2w(wxyz, position) -> torch.Tensor:
    """(4, 4) OpenGL camera-to-world of the browser's camera."""
    c2w = np.eye(4)
    c2w[:3, :3] = quat_to_matrix(wxyz) @ GL_FROM_CV
    c2w[:3, 3] = np.asarray(position, dtype=np.float64)
    return torch.from_numpy(c2w).float()


def c2w_to_viewer(c2w) -> Tuple[np.ndarray, np.ndarray]:
    """(wxyz, position) for viser of an OpenGL camera-to-world matrix."""
    m = np.asarray(c2w, dtype=np.float64)
    return matrix_to_quat(m[:3, :3] @ GL_FROM_CV), m[:3, 3].copy()


def view_size(fov_y: float, aspect: float, height: int) -> Tuple[int, int, float]:
    """(H, W, focal in pixels) of a render `height` rows high."""
    h = max(1, int(height))
    w = max(1, round(h * aspect))
    return h, w, 0.5 * h / math.tan(0.5 * fov_y)


def view_rays(c2w: torch.Tensor, fov_y: float, aspect: float, height: int) -> Tuple[Rays, int, int]:
    """Rays through every pixel (row-major) of an (H, W) render of the camera, on c2w's device."""
    h, w, f = view_size(fov_y, aspect, height)
    ii, jj = torch.meshgrid(torch.arange(h, device=c2w.device), torch.arange(w, device=c2w.device), indexing="ij")
    pixels = torch.stack([ii, jj], -1).reshape(-1, 2)
    return pinhole_rays(c2w, f, f, w / 2, h / 2, pixels), h, w
