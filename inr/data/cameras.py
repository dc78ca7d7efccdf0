"""Camera maths for scene folders: lens distortion as COLMAP and nerfstudio write it, images
undistorted by resampling, and the normalisation of a capture's poses (no Lightning).

Distortion acts on normalised camera coordinates (x, y) = ((u - cx) / fx, (v - cy) / fy) in
OpenCV's axes (y down), pixel centres at (j + 0.5, i + 0.5):
- OPENCV (also SIMPLE_RADIAL, RADIAL): x_d = x (1 + k1 r^2 + k2 r^4 + k3 r^6)
  + 2 p1 x y + p2 (r^2 + 2 x^2), and y_d likewise with p1 (r^2 + 2 y^2) + 2 p2 x y;
- OPENCV_FISHEYE: theta = atan(r), theta_d = theta (1 + k1 theta^2 + k2 theta^4 + k3 theta^6
  + k4 theta^8), (x_d, y_d) = theta_d / r (x, y).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

LENS_MODELS = ("OPENCV", "OPENCV_FISHEYE")


@dataclass(frozen=True)
class Lens:
    """A distortion model and its coefficients; k are radial (k1..k4), p tangential (p1, p2)."""

    model: str = "OPENCV"
    k: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    p: Tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        if self.model not in LENS_MODELS:
            raise ValueError(f"unknown lens model {self.model!r} (known: {', '.join(LENS_MODELS)})")

    @property
    def is_pinhole(self) -> bool:
        return self.model == "OPENCV" and not any(self.k) and not any(self.p)

    @staticmethod
    def from_values(model: str, values: dict) -> "Lens":
        """From nerfstudio's keys k1..k4, p1, p2 (missing keys are 0)."""
        get = lambda key: float(values.get(key, 0.0) or 0.0)  # noqa: E731
        return Lens(model, (get("k1"), get("k2"), get("k3"), get("k4")), (get("p1"), get("p2")))


def distort(xy: torch.Tensor, lens: Lens) -> torch.Tensor:
    """(..., 2) normalised undistorted camera coordinates -> distorted ones (the lens's forward map)."""
    x, y = xy[..., 0], xy[..., 1]
    r2 = x * x + y * y
    k1, k2, k3, k4 = lens.k
    if lens.model == "OPENCV_FISHEYE":
        r = r2.sqrt()
        theta = torch.atan(r)
        t2 = theta * theta
        theta_d = theta * (1 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))))
        # theta_d / r -> 1 as r -> 0
        ratio = torch.where(r > 1e-9, theta_d / r.clamp_min(1e-9), torch.ones_like(r))
        return xy * ratio[..., None]
    radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
    p1, p2 = lens.p
    xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
    yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
    return torch.stack([xd, yd], -1)


def undistort_image(image: torch.Tensor, intrinsics: Sequence[float], lens: Lens) -> Tuple[torch.Tensor, torch.Tensor]:
    """The pinhole image with the same size and intrinsics (fx, fy, cx, cy) as a distorted one.

    Every output pixel centre is mapped through the lens into the distorted image and sampled
    there bilinearly (the outer half pixel takes the edge pixel). Returns the image (H, W, C) and
    a (H, W) bool mask of the pixels whose sample lies inside the distorted image (the rest are 0).
    """
    h, w = image.shape[:2]
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    dev = image.device
    v, u = torch.meshgrid(torch.arange(h, device=dev, dtype=torch.float64) + 0.5,
                          torch.arange(w, device=dev, dtype=torch.float64) + 0.5, indexing="ij")
    xy = torch.stack([(u - cx) / fx, (v - cy) / fy], -1)
    d = distort(xy, lens)
    su, sv = d[..., 0] * fx + cx, d[..., 1] * fy + cy
    # inside the distorted image's area (between its outer pixel centres and edges, the edge pixel is used)
    valid = (su >= 0) & (su <= w) & (sv >= 0) & (sv <= h) & torch.isfinite(su) & torch.isfinite(sv)
    grid = torch.stack([su / w * 2 - 1, sv / h * 2 - 1], -1).to(torch.float32)  # align_corners=False: pixel edges at +-1
    grid = torch.where(valid[..., None], grid, torch.zeros_like(grid))
    out = torch.nn.functional.grid_sample(image.permute(2, 0, 1)[None].float(), grid[None], mode="bilinear",
                                          padding_mode="border", align_corners=False)[0].permute(1, 2, 0)
    out = torch.where(valid[..., None], out, torch.zeros_like(out))
    return out.to(image.dtype).contiguous(), valid


def valid_crop(valid: torch.Tensor, cx: float, cy: float) -> Tuple[int, int, int, int]:
    """The largest rectangle of valid pixels that scales the image about its principal point:
    rows y0:y1 and columns x0:x1 with x0 ~ s cx, x1 ~ cx + s (W - cx) for the largest s in (0, 1]."""
    h, w = valid.shape
    v = valid.cpu()

    def rect(s: float) -> Tuple[int, int, int, int]:
        x0, x1 = math.ceil(cx - s * cx - 1e-9), math.floor(cx + s * (w - cx) + 1e-9)
        y0, y1 = math.ceil(cy - s * cy - 1e-9), math.floor(cy + s * (h - cy) + 1e-9)
        return max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)

    def ok(s: float) -> bool:
        x0, y0, x1, y1 = rect(s)
        return x1 > x0 and y1 > y0 and bool(v[y0:y1, x0:x1].all())

    if ok(1.0):
        return 0, 0, w, h
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    if lo == 0.0 or not ok(lo):
        raise ValueError("no pixel of the undistorted image is inside the distorted one")
    return rect(lo)


@dataclass
class PoseNormalisation:
    """world' = scale * R (world - centre): the capture's mean up direction becomes +z, the
    cameras' mean position the origin, and the farthest camera lies at distance 1."""

    rotation: np.ndarray
    centre: np.ndarray
    scale: float

    def poses(self, c2w: np.ndarray) -> np.ndarray:
        out = np.array(c2w, dtype=np.float64, copy=True)
        out[:, :3, :3] = self.rotation @ out[:, :3, :3]
        out[:, :3, 3] = self.points(out[:, :3, 3])
        return out

    def points(self, xyz: np.ndarray) -> np.ndarray:
        return self.scale * (np.asarray(xyz, np.float64) - self.centre) @ self.rotation.T


def rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation R with R a = b (unit vectors)."""
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    v, c = np.cross(a, b), float(a @ b)
    if c < -1 + 1e-12:  # opposite: half a turn about any axis orthogonal to a
        axis = np.cross(a, [1.0, 0, 0]) if abs(a[0]) < 0.9 else np.cross(a, [0, 1.0, 0])
        axis /= np.linalg.norm(axis)
        return 2 * np.outer(axis, axis) - np.eye(3)
    vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + vx + vx @ vx / (1 + c)


def normalise_poses(c2w: np.ndarray, up: Optional[np.ndarray] = None) -> PoseNormalisation:
    """nerfstudio's "up" orientation and "poses" centring with auto scale, for OpenGL c2w (N, 4, 4):
    the mean of the cameras' up axes (or `up`) turns to +z, the mean camera position moves to the
    origin, and the scale puts the farthest camera at distance 1."""
    c2w = np.asarray(c2w, np.float64)
    mean_up = c2w[:, :3, 1].mean(0) if up is None else np.asarray(up, np.float64)
    R = rotation_between(mean_up, np.array([0.0, 0.0, 1.0])) if np.linalg.norm(mean_up) > 1e-9 else np.eye(3)
    centre = c2w[:, :3, 3].mean(0)
    radius = float(np.linalg.norm(c2w[:, :3, 3] - centre, axis=1).max())
    return PoseNormalisation(R, centre, 1.0 / radius if radius > 1e-9 else 1.0)


def align_similarity(src: np.ndarray, dst: np.ndarray) -> Tuple[float, np.ndarray, np.ndarray]:
    """Umeyama's least-squares similarity: (s, R, t) minimising sum |s R src_i + t - dst_i|^2 for
    (N, 3) point sets (N >= 3, not collinear)."""
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    U, S, Vt = np.linalg.svd(b.T @ a / len(src))
    D = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        D[2, 2] = -1
    R = U @ D @ Vt
    s = float(np.trace(np.diag(S) @ D) / (a**2).sum(1).mean())
    return s, R, mu_d - s * R @ mu_s


def pose_errors(c2w: np.ndarray, truth: np.ndarray) -> dict:
    """Camera errors of estimated OpenGL poses against the truth after the similarity that best
    maps the estimated centres onto the true ones: rotation (degrees) and position (in the
    truth's units, and as a share of the true cameras' extent)."""
    s, R, t = align_similarity(c2w[:, :3, 3], truth[:, :3, 3])
    pos = np.linalg.norm((s * c2w[:, :3, 3] @ R.T + t) - truth[:, :3, 3], axis=1)
    rel = np.einsum("nji,njk->nik", R @ c2w[:, :3, :3], truth[:, :3, :3])  # (R R_est)^T R_true
    ang = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1, 1)))
    extent = float(np.linalg.norm(truth[:, :3, 3].max(0) - truth[:, :3, 3].min(0)))
    return {"rotation_deg_mean": float(ang.mean()), "rotation_deg_max": float(ang.max()),
            "position_mean": float(pos.mean()), "position_max": float(pos.max()),
            "position_max_share": float(pos.max() / max(extent, 1e-12))}
