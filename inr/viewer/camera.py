"""Between the browser's camera (viser: OpenCV axes, x right, y down, looking along +z; a unit
quaternion wxyz for camera-to-world rotation; vertical field of view) and the toolkit's cameras
(OpenGL axes, x right, y up, looking along -z; 4x4 camera-to-world; pixel intrinsics)."""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np
import torch

from ..render.rays import Rays, pinhole_rays

GL_FROM_CV = np.diag([1.0, -1.0, -1.0])  # flips y and z: the same for both directions


def quat_to_matrix(wxyz) -> np.ndarray:
    w, x, y, z = np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(R) -> np.ndarray:
    """The unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method)."""
    R = np.asarray(R, dtype=np.float64)
    trace = np.trace(R)
    if trace > 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = [0.0] * 4
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    return q if q[0] >= 0 else -q


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


def slerp(q0, q1, t: float) -> np.ndarray:
    """Spherical interpolation of unit quaternions (the shorter way round)."""
    q0, q1 = np.asarray(q0, float), np.asarray(q1, float)
    dot = float(np.dot(q0, q1))
    if dot < 0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
    else:
        theta = math.acos(dot)
        q = (math.sin((1 - t) * theta) * q0 + math.sin(t * theta) * q1) / math.sin(theta)
    return q / np.linalg.norm(q)


def keyframe_path(keyframes, frames: int) -> torch.Tensor:
    """(frames, 4, 4) OpenGL camera-to-world poses through `keyframes` ((4, 4) poses, >= 2) at a
    constant rate per segment: positions interpolated linearly, rotations by slerp; the first
    and last frames are the first and last keyframes."""
    keys = [np.asarray(k, float) for k in keyframes]
    if len(keys) < 2:
        raise ValueError("a camera path needs at least 2 keyframes")
    quats = [matrix_to_quat(k[:3, :3]) for k in keys]
    out = []
    for f in range(frames):
        s = f / max(frames - 1, 1) * (len(keys) - 1)
        i = min(int(s), len(keys) - 2)
        t = s - i
        pose = np.eye(4)
        pose[:3, :3] = quat_to_matrix(slerp(quats[i], quats[i + 1], t))
        pose[:3, 3] = (1 - t) * keys[i][:3, 3] + t * keys[i + 1][:3, 3]
        out.append(pose)
    return torch.from_numpy(np.stack(out)).float()
