"""Photos with known cameras for testing capture tools (structure from motion, scene loading):
a textured cube on the floor of a textured room, ray cast exactly. Every face carries a
different picture from scikit-image's data set, so no texture repeats (repeated textures fool
structure from motion into globally wrong but self-consistent solutions)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np

CUBE = (np.array([-0.5, -0.5, -0.5]), np.array([0.5, 0.5, 0.5]))
ROOM = (np.array([-3.0, -3.0, -0.5]), np.array([3.0, 3.0, 3.0]))
# cube faces (-x, +x, -y, +y, -z, +z), then room faces in the same order; gray pictures get a tint
TEXTURES = ["astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "camera",
            "grass", "coins", "moon", "clock", "gravel", "page"]
TINTS = [(1.0, 0.85, 0.6), (0.6, 0.9, 1.0), (0.9, 1.0, 0.7), (1.0, 0.7, 0.8), (0.8, 0.8, 1.0), (1.0, 1.0, 0.8)]


def _textures() -> List[np.ndarray]:
    from skimage import data

    out = []
    for k, name in enumerate(TEXTURES):
        img = np.asarray(getattr(data, name)(), np.float32) / 255.0
        if img.ndim == 2:
            img = img[..., None] * np.array(TINTS[k % len(TINTS)], np.float32)
        out.append(img[..., :3])
    return out


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenGL camera-to-world (x right, y up, looking along -z), float64 (`inr.render.rays.look_at`)."""
    import torch

    from ..render.rays import look_at as look_at_t

    return look_at_t(*(torch.as_tensor(np.asarray(v, np.float64)) for v in (eye, target, up))).numpy()


def ring_poses(n: int, radius: float = 2.0, height: float = 0.6, target=(0.0, 0.0, 0.0), turns: float = 1.0) -> np.ndarray:
    """(n, 4, 4) cameras on a circle around the z axis, looking at `target`; the height wobbles a
    little so that the cameras do not all lie in one plane."""
    out = []
    for k in range(n):
        a = 2 * np.pi * turns * k / n
        z = height + 0.15 * np.sin(3 * a)
        out.append(look_at((radius * np.cos(a), radius * np.sin(a), z), target))
    return np.stack(out)


def _box_faces(o, d, lo, hi, inside: bool):
    """Per ray: the distance to the box (entry from outside, exit from inside), the face index
    (axis * 2 + side) and a hit flag."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (lo - o) / d, (hi - o) / d
    near, far = np.minimum(t1, t2), np.maximum(t1, t2)
    if inside:
        axis = np.argmin(far, 1)
        t = far[np.arange(len(o)), axis]
        side = (d[np.arange(len(o)), axis] > 0).astype(int)
        return t, axis * 2 + side, np.isfinite(t) & (t > 0)
    axis = np.argmax(near, 1)
    t = near[np.arange(len(o)), axis]
    hit = (t <= far.min(1)) & (t > 0)
    side = (d[np.arange(len(o)), axis] < 0).astype(int)  # entering through the face facing the ray
    return t, axis * 2 + side, hit


def render(c2w: np.ndarray, size: Tuple[int, int], focal: float, textures=None, samples: int = 2) -> np.ndarray:
    """(H, W, 3) float32 image of the scene from an OpenGL camera; `samples`^2 rays per pixel."""
    from scipy.ndimage import map_coordinates

    textures = textures if textures is not None else _textures()
    w, h = size
    # sub-pixel centres, in pixel units (pixel (i, j) spans [j, j + 1] x [i, i + 1])
    v, u = np.meshgrid((np.arange(h * samples) + 0.5) / samples, (np.arange(w * samples) + 0.5) / samples, indexing="ij")
    d_cam = np.stack([(u - w / 2) / focal, -(v - h / 2) / focal, -np.ones_like(u)], -1).reshape(-1, 3)
    d = d_cam @ c2w[:3, :3].T
    o = np.broadcast_to(c2w[:3, 3], d.shape)
    t_room, f_room, _ = _box_faces(o, d, *ROOM, inside=True)
    t_cube, f_cube, hit = _box_faces(o, d, *CUBE, inside=False)
    t = np.where(hit, t_cube, t_room)
    face = np.where(hit, f_cube, 6 + f_room)
    p = o + t[:, None] * d
    out = np.zeros((len(p), 3), np.float32)
    for k in range(12):
        sel = face == k
        if not sel.any():
            continue
        lo, hi = CUBE if k < 6 else ROOM
        axis = (k % 6) // 2
        a, b = [i for i in range(3) if i != axis]
        s = (p[sel, a] - lo[a]) / (hi[a] - lo[a])
        r = (p[sel, b] - lo[b]) / (hi[b] - lo[b])
        tex = textures[k]
        rows, cols = (1 - r) * (tex.shape[0] - 1), s * (tex.shape[1] - 1)
        for c in range(3):
            out[sel, c] = map_coordinates(tex[..., c], [rows, cols], order=1, mode="nearest")
    return out.reshape(h, samples, w, samples, 3).mean((1, 3)).astype(np.float32)


def write_photos(folder: Path, poses: np.ndarray, size=(320, 240), focal: float = 280.0, quality: int = 92) -> List[Path]:
    """JPEG photos of the scene from every pose (names photo_000.jpg, ...)."""
    import imageio.v3 as iio

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    textures = _textures()
    files = []
    for k, m in enumerate(poses):
        img = (render(m, size, focal, textures) * 255 + 0.5).clip(0, 255).astype(np.uint8)
        files.append(folder / f"photo_{k:03d}.jpg")
        iio.imwrite(files[-1], img, quality=quality)
    return files


def write_video(path: Path, poses: np.ndarray, size=(320, 240), focal: float = 280.0, fps: int = 10) -> None:
    """An MP4 of the camera moving through `poses` (one frame each)."""
    import imageio.v3 as iio

    textures = _textures()
    frames = np.stack([(render(m, size, focal, textures) * 255 + 0.5).clip(0, 255).astype(np.uint8) for m in poses])
    iio.imwrite(path, frames, fps=fps, codec="libx264", quality=8, macro_block_size=1, plugin="FFMPEG")
