"""Camera paths from files: nerfstudio's camera_path JSON (what its viewer's render panel
saves), either as rendered cameras (`camera_path`: row-major `camera_to_world`, vertical `fov`
in degrees, `aspect`) or as keyframes only (`keyframes`: three.js `matrix` strings, column-major,
and `fov`), which are interpolated over `seconds` x `fps` frames."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch

from ..errors import InputError


@dataclass
class CameraPath:
    poses: torch.Tensor
    """(F, 4, 4) OpenGL camera-to-world."""
    fov_y: Optional[np.ndarray]
    """(F,) vertical field of view in degrees, if the file gives it."""
    size: Optional[Tuple[int, int]]
    """(H, W) of the render, if the file gives it."""
    fps: Optional[float]


def _matrix(value, where: str, path: Path, column_major: bool) -> np.ndarray:
    try:
        if isinstance(value, str):
            value = json.loads(value)
        m = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(path, f"{where}: not a numeric matrix") from None
    if m.size != 16 or not np.isfinite(m).all():
        raise InputError(path, f"{where}: expected 16 finite numbers, got {m.size}")
    m = m.reshape(4, 4)
    return m.T if column_major else m


def read_camera_path(path) -> CameraPath:
    from ..render.paths import keyframe_path
    from .scenes import read_json_object

    path = Path(path)
    data = read_json_object(path)
    size = None
    if data.get("render_height") and data.get("render_width"):
        size = (int(data["render_height"]), int(data["render_width"]))
    fps = float(data["fps"]) if data.get("fps") else None
    cams = data.get("camera_path")
    if isinstance(cams, list) and cams:
        poses = np.stack([_matrix(c.get("camera_to_world"), f"camera_path[{k}].camera_to_world", path, False)
                          for k, c in enumerate(cams)])
        fov = np.array([float(c["fov"]) for c in cams]) if all("fov" in c for c in cams) else None
        return CameraPath(torch.from_numpy(poses).float(), fov, size, fps)
    keys = data.get("keyframes")
    if isinstance(keys, list) and len(keys) >= 2:
        mats = [_matrix(k.get("matrix"), f"keyframes[{i}].matrix", path, True) for i, k in enumerate(keys)]
        frames = int(round(float(data.get("seconds") or 4.0) * (fps or 30.0)))
        poses = keyframe_path(mats, max(frames, 2))
        fov = None
        if all("fov" in k for k in keys):
            s = np.linspace(0, len(keys) - 1, len(poses))
            fov = np.interp(s, np.arange(len(keys)), [float(k["fov"]) for k in keys])
        return CameraPath(poses, fov, size, fps)
    raise InputError(path, "has no camera_path list and fewer than 2 keyframes (nerfstudio's camera path format)")


def read_dataparser_transform(path) -> Tuple[np.ndarray, float]:
    """nerfstudio's dataparser_transforms.json (written beside each of its runs): the (3, 4)
    `transform` and the `scale` that took the scene file's poses to the frame its viewer and
    camera paths use: c2w' = [T_R R | scale (T_R t + T_t)]."""
    from .scenes import read_json_object

    path = Path(path)
    data = read_json_object(path)
    try:
        transform = np.asarray(data["transform"], np.float64)
        scale = float(data["scale"])
    except (KeyError, TypeError, ValueError):
        raise InputError(path, "needs 'transform' (3x4) and 'scale' (nerfstudio's dataparser_transforms.json)") from None
    if transform.shape != (3, 4) or not np.isfinite(transform).all() or not (np.isfinite(scale) and scale > 0):
        raise InputError(path, "'transform' must be a finite 3x4 matrix and 'scale' > 0")
    if not np.allclose(transform[:, :3] @ transform[:, :3].T, np.eye(3), atol=1e-4):
        raise InputError(path, "'transform' is not a rotation and translation")
    return transform, scale


def from_nerfstudio_frame(poses: torch.Tensor, transform: np.ndarray, scale: float, normalisation=None) -> torch.Tensor:
    """(F, 4, 4) OpenGL cameras in a nerfstudio run's frame -> the scene as `inr` loads it:
    back to the scene file's frame (undoing `transform` and `scale`), then through the
    scene's own pose normalisation (`Scene.extra['normalisation']`, None for poses kept)."""
    c2w = poses.double().numpy().copy()
    R, t = transform[:, :3], transform[:, 3]
    out = c2w.copy()
    out[:, :3, :3] = R.T @ c2w[:, :3, :3]
    out[:, :3, 3] = (c2w[:, :3, 3] / scale - t) @ R  # R^T (x / scale - t), row-wise
    if normalisation is not None:
        out = normalisation.poses(out)
    return torch.from_numpy(out).to(poses.dtype)
