"""Scene folders for NeRF: Blender-synthetic, instant-ngp / nerfstudio transforms.json, LLFF.

Every loader returns the same thing: per split, images (N, H, W, C) in [0, 1] (C = 4 keeps
alpha for compositing on a background), camera-to-world matrices in the OpenGL / Blender
convention (x right, y up, camera looking along -z), pinhole intrinsics, and a scene box.
Problems are reported as InputError naming the file (and frame).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from ..errors import InputError
from .images import read_image

SPLITS = ("train", "val", "test")
DISTORTION_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")


@dataclass
class SceneSplit:
    """images: (N, H, W, C); c2w: (N, 4, 4); intrinsics: (N, 4) as fx, fy, cx, cy in pixels."""

    images: torch.Tensor
    c2w: torch.Tensor
    intrinsics: torch.Tensor
    names: List[str]

    def __len__(self) -> int:
        return int(self.images.shape[0])


@dataclass
class Scene:
    path: str
    format: str
    splits: Dict[str, SceneSplit]
    aabb: torch.Tensor
    """(6,) scene box xmin, ymin, zmin, xmax, ymax, zmax in world units."""
    near: float = 0.0
    extra: Dict[str, float] = field(default_factory=dict)


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise InputError(path, "no such file")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(path, f"cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def check_pose(matrix, where: str, path: Path) -> np.ndarray:
    """A finite 4x4 (or 3x4) camera-to-world matrix with a rotation part (orthonormal, det +1)."""
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(path, f"{where}: transform_matrix is not a numeric matrix") from None
    if m.shape == (3, 4):
        m = np.vstack([m, [0, 0, 0, 1]])
    if m.shape != (4, 4):
        raise InputError(path, f"{where}: transform_matrix has shape {m.shape}, expected 4x4")
    if not np.isfinite(m).all():
        raise InputError(path, f"{where}: transform_matrix has NaN or infinite entries")
    R = m[:3, :3]
    if np.abs(R.T @ R - np.eye(3)).max() > 1e-3 or abs(np.linalg.det(R) - 1) > 1e-3:
        raise InputError(path, f"{where}: transform_matrix is not rigid (its 3x3 part is not a rotation)")
    return m


def _load_frames(root: Path, json_path: Path, frames: list, suffixes=("", ".png", ".jpg", ".jpeg", ".exr")):
    images, poses, names = [], [], []
    shape = None
    for k, frame in enumerate(frames):
        where = f"frame {k}"
        for key in ("file_path", "transform_matrix"):
            if key not in frame:
                raise InputError(json_path, f"{where}: missing key '{key}'")
        rel = str(frame["file_path"])
        candidates = [root / (rel + s) for s in suffixes]
        img_path = next((c for c in candidates if c.is_file()), None)
        if img_path is None:
            raise InputError(json_path, f"{where}: image '{rel}' not found under {root}")
        img = read_image(img_path).values
        if shape is None:
            shape = img.shape
        elif img.shape != shape:
            raise InputError(img_path, f"{where}: image is {img.shape[1]}x{img.shape[0]}x{img.shape[2]}, "
                             f"the first frame is {shape[1]}x{shape[0]}x{shape[2]}")
        poses.append(check_pose(frame["transform_matrix"], where, json_path))
        images.append(img)
        names.append(rel)
    if not images:
        raise InputError(json_path, "has no frames")
    return torch.stack(images), torch.tensor(np.stack(poses), dtype=torch.float32), names


def _downscale(split: SceneSplit, factor: int) -> SceneSplit:
    if factor == 1:
        return split
    n, h, w, c = split.images.shape
    if h % factor or w % factor:
        h2, w2 = h // factor * factor, w // factor * factor
        imgs = split.images[:, :h2, :w2]
    else:
        h2, w2, imgs = h, w, split.images
    # area average over factor x factor blocks (exact for integer factors)
    imgs = imgs.reshape(n, h2 // factor, factor, w2 // factor, factor, c).mean(dim=(2, 4))
    return SceneSplit(imgs, split.c2w, split.intrinsics / factor, split.names)


def load_blender(root: Path, downscale: int = 1) -> Scene:
    """transforms_{train,val,test}.json with camera_angle_x; frames' file_path without extension.
    Scene box: the file's 'aabb' if present, else NeRF-synthetic's [-1.5, 1.5]^3."""
    splits: Dict[str, SceneSplit] = {}
    aabb: Optional[list] = None
    for split in SPLITS:
        path = root / f"transforms_{split}.json"
        if not path.is_file():
            if split == "train":
                raise InputError(path, "no such file (a Blender scene needs transforms_train.json)")
            continue
        data = _read_json(path)
        if "camera_angle_x" not in data:
            raise InputError(path, "missing key 'camera_angle_x'")
        images, c2w, names = _load_frames(root, path, list(data.get("frames", [])))
        h, w = images.shape[1:3]
        focal = 0.5 * w / math.tan(0.5 * float(data["camera_angle_x"]))
        intr = torch.tensor([[focal, focal, w / 2, h / 2]], dtype=torch.float32).repeat(len(images), 1)
        splits[split] = _downscale(SceneSplit(images, c2w, intr, names), downscale)
        aabb = data.get("aabb", aabb)
    box = torch.tensor(aabb if aabb is not None else [-1.5, -1.5, -1.5, 1.5, 1.5, 1.5], dtype=torch.float32).reshape(6)
    return Scene(str(root), "blender", _fill_splits(splits), box)


def load_transforms(root: Path, downscale: int = 1, holdout_every: int = 8) -> Scene:
    """instant-ngp / nerfstudio transforms.json: fl_x, fl_y, cx, cy, w, h per file or per frame.

    Poses are used as OpenGL camera-to-world matrices in world units (as nerfstudio does); the
    scene box is [-1.5, 1.5]^3 times aabb_scale (instant-ngp's unit cube at scale 0.33). Lens
    distortion is refused (undistort the images first). Every `holdout_every`-th frame is the
    test split when the file has no split lists.
    """
    path = root / "transforms.json"
    data = _read_json(path)
    frames = list(data.get("frames", []))
    intr = []
    for k, frame in enumerate(frames):
        merged = {**data, **frame}
        for key in DISTORTION_KEYS:
            if abs(float(merged.get(key, 0.0) or 0.0)) > 0:
                raise InputError(path, f"frame {k}: lens distortion ({key}={merged[key]}) is not supported; undistort the images first")
        if "fl_x" not in merged and "camera_angle_x" not in merged:
            raise InputError(path, f"frame {k}: missing key 'fl_x' (or 'camera_angle_x')")
        intr.append(merged)
    images, c2w, names = _load_frames(root, path, frames)
    h, w = images.shape[1:3]
    rows = []
    for m in intr:
        fx = float(m["fl_x"]) if "fl_x" in m else 0.5 * w / math.tan(0.5 * float(m["camera_angle_x"]))
        fy = float(m.get("fl_y", fx))
        sx, sy = w / float(m.get("w", w)), h / float(m.get("h", h))  # images may be resized copies
        rows.append([fx * sx, fy * sy, float(m.get("cx", w / 2)) * sx, float(m.get("cy", h / 2)) * sy])
    intrinsics = torch.tensor(rows, dtype=torch.float32)
    idx = np.arange(len(images))
    test = idx % holdout_every == 0 if len(images) > 1 else np.zeros(len(images), bool)
    splits = {
        "train": SceneSplit(images[~test], c2w[~test], intrinsics[~test], [n for n, t in zip(names, test) if not t]),
        "test": SceneSplit(images[test], c2w[test], intrinsics[test], [n for n, t in zip(names, test) if t]),
    }
    splits = {k: _downscale(v, downscale) for k, v in splits.items() if len(v)}
    s = 1.5 * float(data.get("aabb_scale", 1.0))
    return Scene(str(root), "transforms", _fill_splits(splits), torch.tensor([-s, -s, -s, s, s, s]))


def load_llff(root: Path, downscale: int = 1, holdout_every: int = 8) -> Scene:
    """poses_bounds.npy (N x 17: 3x5 [R | t | (h, w, f)] in LLFF's (down, right, back) axes, then
    near and far) + images/. Poses are turned into OpenGL axes; the box encloses every camera's
    frustum between the nearest and farthest bound."""
    path = root / "poses_bounds.npy"
    if not path.is_file():
        raise InputError(path, "no such file")
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError/OSError/EOFError for bad files
        raise InputError(path, f"cannot be read as a .npy array ({exc})") from None
    if arr.ndim != 2 or arr.shape[1] != 17:
        raise InputError(path, f"has shape {arr.shape}, expected (N, 17)")
    img_dir = root / "images"
    files = sorted(p for p in img_dir.glob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg")) if img_dir.is_dir() else []
    if len(files) != len(arr):
        raise InputError(img_dir, f"holds {len(files)} images but poses_bounds.npy has {len(arr)} poses")
    poses = arr[:, :15].reshape(-1, 3, 5)
    bounds = arr[:, 15:]
    frames = []
    for k, p in enumerate(poses):
        m = np.concatenate([p[:, 1:2], -p[:, 0:1], p[:, 2:3], p[:, 3:4]], axis=1)  # (down, right, back) -> (right, up, back)
        frames.append({"file_path": str(files[k].relative_to(root)), "transform_matrix": m.tolist()})
    images, c2w, names = _load_frames(root, path, frames)
    h, w = images.shape[1:3]
    hwf = poses[:, :, 4]
    focal = hwf[:, 2] * (w / hwf[:, 1])
    intrinsics = torch.tensor(np.stack([focal, focal, np.full_like(focal, w / 2), np.full_like(focal, h / 2)], -1), dtype=torch.float32)
    near, far = float(bounds.min()), float(bounds.max())
    corners = np.array([[0, 0], [0, w], [h, 0], [h, w]], dtype=np.float64)
    pts = []
    for m, f in zip(c2w.numpy().astype(np.float64), focal):
        d = np.stack([(corners[:, 1] - w / 2) / f, -(corners[:, 0] - h / 2) / f, -np.ones(4)], -1) @ m[:3, :3].T
        pts += [m[:3, 3] + d * near, m[:3, 3] + d * far]
    pts = np.concatenate(pts)
    box = torch.tensor(np.concatenate([pts.min(0), pts.max(0)]), dtype=torch.float32)
    idx = np.arange(len(images))
    test = idx % holdout_every == 0
    splits = {
        "train": SceneSplit(images[~test], c2w[~test], intrinsics[~test], [n for n, t in zip(names, test) if not t]),
        "test": SceneSplit(images[test], c2w[test], intrinsics[test], [n for n, t in zip(names, test) if t]),
    }
    return Scene(str(root), "llff", _fill_splits({k: _downscale(v, downscale) for k, v in splits.items()}), box, near=near * 0.9)


def _fill_splits(splits: Dict[str, SceneSplit]) -> Dict[str, SceneSplit]:
    """val and test fall back on each other, then on train, so every split exists."""
    out = dict(splits)
    out.setdefault("test", out.get("val", out["train"]))
    out.setdefault("val", out["test"])
    return out


def load_scene(path, downscale: int = 1) -> Scene:
    """Detect the format of a scene folder and load it."""
    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such scene folder")
    if not root.is_dir():
        raise InputError(root, "is not a folder (a scene is a folder with transforms*.json or poses_bounds.npy)")
    if downscale < 1:
        raise InputError(None, f"--downscale must be >= 1, got {downscale}")
    if (root / "transforms_train.json").is_file():
        return load_blender(root, downscale)
    if (root / "transforms.json").is_file():
        return load_transforms(root, downscale)
    if (root / "poses_bounds.npy").is_file():
        return load_llff(root, downscale)
    raise InputError(root, "is not a scene folder: no transforms_train.json (Blender), transforms.json "
                     "(instant-ngp / nerfstudio) or poses_bounds.npy (LLFF)")
