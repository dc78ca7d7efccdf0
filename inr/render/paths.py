"""Camera paths (no Lightning): an orbit around what the cameras look at, LLFF's spiral in front
of forward-facing cameras, and keyframes interpolated (positions linearly, rotations by slerp)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from .rays import look_at


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


def spiral_poses(c2w: torch.Tensor, n_frames: int, focus: float, rotations: float = 2.0, percentile: float = 90.0) -> torch.Tensor:
    """(n_frames, 4, 4) cameras on a spiral in front of forward-facing cameras (M, 4, 4) (LLFF's
    render path): about their mean pose, offsets (r_x cos a, r_y sin a, r_z sin(a / 2)) in its
    camera frame for a over `rotations` turns, radii the `percentile` of the cameras' offsets
    along each axis, every frame looking at the point `focus` ahead of the mean pose."""
    c2w = c2w.double()
    centre = c2w[:, :3, 3].mean(0)
    back = torch.nn.functional.normalize(c2w[:, :3, 2].sum(0), dim=0)
    up_mean = c2w[:, :3, 1].sum(0)
    right = torch.nn.functional.normalize(torch.linalg.cross(up_mean, back), dim=0)
    up = torch.linalg.cross(back, right)
    frame = torch.stack([right, up, back], 1)  # the mean pose's rotation
    local = (c2w[:, :3, 3] - centre) @ frame
    radii = torch.quantile(local.abs(), percentile / 100.0, dim=0).clamp_min(1e-6)
    target = centre - focus * back
    poses = []
    for k in range(n_frames):
        a = 2 * math.pi * rotations * k / n_frames
        offset = torch.tensor([math.cos(a), math.sin(a), math.sin(0.5 * a)], dtype=torch.float64, device=c2w.device) * radii
        poses.append(look_at((centre + frame @ offset).float(), target.float(), up.float()))
    return torch.stack(poses)
