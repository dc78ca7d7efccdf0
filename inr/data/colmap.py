"""COLMAP model folders as NeRF scenes (the Mip-NeRF 360 layout): `images/` beside
`sparse/0/{cameras,images,points3D}.{bin,txt}`, read with pycolmap.

COLMAP stores world-to-camera poses in OpenCV axes (x right, y down, z forward); they become
OpenGL camera-to-world matrices. Camera models: SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL,
OPENCV, OPENCV_FISHEYE (the distorted ones are undistorted while loading).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch

from ..errors import InputError, first_line
from .cameras import Lens, normalise_poses

MODEL_FILES = ("cameras", "images", "points3D")


def model_folder(root: Path) -> Optional[Path]:
    """The COLMAP model folder of a scene folder: sparse/0, sparse, or the folder itself."""
    for d in (root / "sparse" / "0", root / "sparse", root):
        if all((d / f"{name}.bin").is_file() for name in MODEL_FILES) or all((d / f"{name}.txt").is_file() for name in MODEL_FILES):
            return d
    return None


def camera_of(cam, where: Path) -> Tuple[Tuple[float, float, float, float], Lens]:
    """(fx, fy, cx, cy) in the camera's pixels and its lens, from a pycolmap Camera."""
    name = cam.model.name
    p = [float(v) for v in cam.params]
    if name == "SIMPLE_PINHOLE":
        return (p[0], p[0], p[1], p[2]), Lens()
    if name == "PINHOLE":
        return (p[0], p[1], p[2], p[3]), Lens()
    if name == "SIMPLE_RADIAL":
        return (p[0], p[0], p[1], p[2]), Lens("OPENCV", (p[3], 0.0, 0.0, 0.0))
    if name == "RADIAL":
        return (p[0], p[0], p[1], p[2]), Lens("OPENCV", (p[3], p[4], 0.0, 0.0))
    if name == "OPENCV":
        return (p[0], p[1], p[2], p[3]), Lens("OPENCV", (p[4], p[5], 0.0, 0.0), (p[6], p[7]))
    if name == "OPENCV_FISHEYE":
        return (p[0], p[1], p[2], p[3]), Lens("OPENCV_FISHEYE", (p[4], p[5], p[6], p[7]))
    raise InputError(where, f"camera {cam.camera_id}: model {name} is not supported "
                     "(SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV, OPENCV_FISHEYE)")


def c2w_of(image) -> np.ndarray:
    """(4, 4) OpenGL camera-to-world of a registered pycolmap Image (COLMAP keeps world-to-camera
    in OpenCV axes)."""
    cfw = image.cam_from_world() if callable(image.cam_from_world) else image.cam_from_world
    w2c = np.eye(4)
    w2c[:3] = np.asarray(cfw.matrix(), np.float64)
    c2w = np.linalg.inv(w2c)
    c2w[:3, 1:3] *= -1  # OpenCV (y down, z forward) -> OpenGL (y up, z back)
    return c2w


def near_and_box(points: np.ndarray, c2w: np.ndarray) -> Tuple[float, np.ndarray]:
    """From sparse points and OpenGL cameras: near = 0.9 x the 0.5th percentile of the depths of
    the points within 45 degrees of each camera's axis (0 without points); box (6,) = the cameras and the central
    98 % of the points, grown by 10 %."""
    centres = c2w[:, :3, 3]
    near = 0.0
    lo, hi = centres.min(0), centres.max(0)
    if len(points):
        rel = [points - m[:3, 3] for m in c2w]
        depth = np.concatenate([r @ -m[:3, 2] for r, m in zip(rel, c2w)])
        # points a camera can see: within 45 degrees of its axis (beside it, depths say nothing)
        seen = np.concatenate([r @ -m[:3, 2] > 0.7 * np.linalg.norm(r, axis=1) for r, m in zip(rel, c2w)])
        depth = depth[seen]
        near = 0.9 * float(np.percentile(depth, 0.5)) if len(depth) else 0.0
        lo = np.minimum(np.percentile(points, 1, axis=0), lo)
        hi = np.maximum(np.percentile(points, 99, axis=0), hi)
    grow = 0.1 * (hi - lo) + 1e-3
    return near, np.concatenate([lo - grow, hi + grow])


def load_colmap(root: Path, downscale: int = 1, holdout_every: int = 8, poses: Optional[str] = None):
    """A scene from a COLMAP model: registered images sorted by name, every `holdout_every`-th a
    test view (Mip-NeRF 360's protocol); poses normalised by default (`normalise_poses`, the
    sparse points with them); near and box from the points (`near_and_box`)."""
    from .scenes import FrameSpec, Scene, SceneSplit, _fill_splits, _pose_mode, read_frames

    model = model_folder(root)
    if model is None:
        raise InputError(root, "has no COLMAP model (sparse/0/cameras, images, points3D .bin or .txt)")
    try:
        import pycolmap
    except ImportError:
        raise InputError(model, "reading a COLMAP model needs pycolmap (pip install pycolmap)") from None
    try:
        rec = pycolmap.Reconstruction(str(model))
    except Exception as exc:  # pycolmap raises RuntimeError/ValueError on bad files
        raise InputError(model, f"cannot be read as a COLMAP model ({first_line(exc)})") from None
    img_dir = root / "images"
    registered = sorted((img for img in rec.images.values() if img.has_pose), key=lambda im: im.name)
    if not registered:
        raise InputError(model, "has no registered images")
    specs = []
    for img in registered:
        file = img_dir / img.name
        if not file.is_file() and not any((img_dir.parent / f"images_{d}" / img.name).is_file() for d in (2, 4, 8)):
            raise InputError(model, f"image '{img.name}' not found under {img_dir}")
        cam = rec.cameras[img.camera_id]
        (fx, fy, cx, cy), lens = camera_of(cam, model)
        W, H = int(cam.width), int(cam.height)
        camera = lambda w, h, k=(fx, fy, cx, cy), W=W, H=H: (k[0] * w / W, k[1] * h / H, k[2] * w / W, k[3] * h / H)  # noqa: E731
        specs.append(FrameSpec(file, img.name, c2w_of(img), camera, lens, where=f"image '{img.name}'"))
    points = np.array([p.xyz for p in rec.points3D.values()], np.float64).reshape(-1, 3)
    mode = _pose_mode(poses)
    if mode == "normalise":
        norm = normalise_poses(np.stack([s.c2w for s in specs]))
        for spec, m in zip(specs, norm.poses(np.stack([s.c2w for s in specs]))):
            spec.c2w = m
        points = norm.points(points)
    idx = np.arange(len(specs))
    test = idx % holdout_every == 0 if len(specs) > 1 else np.zeros(len(specs), bool)
    splits = {name: SceneSplit(*read_frames([specs[k] for k in idx[sel]], downscale, model))
              for name, sel in (("train", ~test), ("test", test)) if sel.any()}
    near, box = near_and_box(points, np.stack([s.c2w for s in specs]))
    return Scene(str(root), "colmap", _fill_splits(splits), torch.tensor(box, dtype=torch.float32), near=near,
                 extra={"poses": mode, "registered": len(specs), "cameras": len(rec.cameras),
                        "normalisation": norm if mode == "normalise" else None},
                 points=points.astype(np.float32))
