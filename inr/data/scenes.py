"""Scene folders for NeRF: Blender-synthetic, instant-ngp / nerfstudio transforms.json, COLMAP
models (`colmap.py`), LLFF.

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
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..errors import InputError
from .cameras import LENS_MODELS, Lens, normalise_poses, undistort_image, valid_crop
from .images import read_image

SPLITS = ("train", "val", "test")
PINHOLE = Lens()


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
    extra: Dict[str, object] = field(default_factory=dict)
    points: Optional[np.ndarray] = None
    """(M, 3) sparse structure-from-motion points in the scene's (normalised) frame, if any."""


def read_json_object(path: Path) -> dict:
    """A JSON file holding an object, or an InputError naming the file."""
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


@dataclass
class FrameSpec:
    """One image of a scene before it is read: its file, its OpenGL camera-to-world pose, its
    camera as a function of the file's (width, height) -> (fx, fy, cx, cy) in that file's pixels,
    and its lens."""

    file: Path
    name: str
    c2w: np.ndarray
    camera: Callable[[int, int], Tuple[float, float, float, float]]
    lens: Lens = PINHOLE
    where: str = ""


def _frame_file(root: Path, json_path: Path, frame: dict, where: str, suffixes=("", ".png", ".jpg", ".jpeg", ".exr")) -> Path:
    rel = str(frame["file_path"])
    img_path = next((c for c in (root / (rel + s) for s in suffixes) if c.is_file()), None)
    if img_path is None:
        raise InputError(json_path, f"{where}: image '{rel}' not found under {root}")
    return img_path


def downscaled_copy(file: Path, factor: int) -> Optional[Path]:
    """nerfstudio's copies: images/x.png at 1/2, 1/4, 1/8 is images_2/x.png, images_4/x.png, ..."""
    if factor == 1:
        return None
    copy = file.parent.parent / f"{file.parent.name}_{factor}" / file.name
    return copy if copy.is_file() else None


def image_size(path: Path) -> Tuple[int, int]:
    """(width, height) from the file's header, without decoding it."""
    import imageio.v3 as iio

    try:
        shape = iio.improps(path).shape
    except Exception as exc:  # imageio raises many types for unreadable files
        raise InputError(path, f"cannot be read as an image ({exc})") from None
    return int(shape[1]), int(shape[0])


def _area_downscale(img: torch.Tensor, factor: int) -> torch.Tensor:
    """Mean over factor x factor blocks (the bottom/right remainder is cropped)."""
    if factor == 1:
        return img
    h, w, c = img.shape
    h2, w2 = h // factor, w // factor
    return img[: h2 * factor, : w2 * factor].reshape(h2, factor, w2, factor, c).mean(dim=(1, 3))


def _same_shape(spec: FrameSpec, img: torch.Tensor, shape) -> None:
    if tuple(img.shape) != tuple(shape):
        raise InputError(spec.file, f"{spec.where}: image is {img.shape[1]}x{img.shape[0]}x{img.shape[2]}, "
                         f"the first frame is {shape[1]}x{shape[0]}x{shape[2]}")


def read_frames(specs: List[FrameSpec], downscale: int, path: Path):
    """Read every frame already at 1 / downscale (an `images_N` copy if there is one, else the
    original, block-averaged at once), undistort it, crop the lens's invalid border (one size for
    all), so memory holds one original image at a time besides the scaled set (pinhole frames go
    straight into the output tensor; distorted ones are cropped, then stacked).

    Returns images (N, H, W, C), c2w (N, 4, 4), intrinsics (N, 4), names.
    """
    if not specs:
        raise InputError(path, "has no frames")
    pinhole = all(spec.lens.is_pinhole for spec in specs)
    out: Optional[torch.Tensor] = None
    images, intr, valids = [], [], []
    for n, spec in enumerate(specs):
        copy = downscaled_copy(spec.file, downscale)
        if copy is not None:
            img = read_image(copy).values
            full = image_size(spec.file) if spec.file.is_file() else (img.shape[1] * downscale, img.shape[0] * downscale)
            sx, sy = img.shape[1] / full[0], img.shape[0] / full[1]
        else:
            img = read_image(spec.file).values
            full = (int(img.shape[1]), int(img.shape[0]))
            img = _area_downscale(img, downscale)
            sx = sy = 1.0 / downscale
        fx, fy, cx, cy = spec.camera(*full)
        k = (fx * sx, fy * sy, cx * sx, cy * sy)
        intr.append(k)
        if pinhole:
            if out is None:
                out = torch.empty((len(specs),) + tuple(img.shape), dtype=img.dtype)
            _same_shape(spec, img, out.shape[1:])
            out[n] = img
            continue
        valid = None
        if not spec.lens.is_pinhole:
            img, valid = undistort_image(img, k, spec.lens)
        images.append(img)
        valids.append(valid)
    if not pinhole:
        try:
            rects = [valid_crop(v, k[2], k[3]) if v is not None else (0, 0, im.shape[1], im.shape[0])
                     for v, k, im in zip(valids, intr, images)]
        except ValueError as exc:
            raise InputError(path, f"the lens distortion leaves no usable image: {exc}") from None
        w = min(r[2] - r[0] for r in rects)
        h = min(r[3] - r[1] for r in rects)
        images = [im[y0 : y0 + h, x0 : x0 + w] for im, (x0, y0, _, _) in zip(images, rects)]
        intr = [(fx, fy, cx - x0, cy - y0) for (fx, fy, cx, cy), (x0, y0, _, _) in zip(intr, rects)]
        for spec, img in zip(specs, images):
            _same_shape(spec, img, images[0].shape)
        out = torch.stack(images)
    c2w = torch.tensor(np.stack([s.c2w for s in specs]), dtype=torch.float32)
    return out, c2w, torch.tensor(intr, dtype=torch.float32), [s.name for s in specs]


def _json_specs(root: Path, json_path: Path, frames: list, camera, lens=lambda k, f: PINHOLE) -> List[FrameSpec]:
    specs = []
    for k, frame in enumerate(frames):
        where = f"frame {k}"
        for key in ("file_path", "transform_matrix"):
            if key not in frame:
                raise InputError(json_path, f"{where}: missing key '{key}'")
        specs.append(FrameSpec(_frame_file(root, json_path, frame, where), str(frame["file_path"]),
                               check_pose(frame["transform_matrix"], where, json_path), camera(k, frame), lens(k, frame), where))
    if not specs:
        raise InputError(json_path, "has no frames")
    return specs


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
        data = read_json_object(path)
        if "camera_angle_x" not in data:
            raise InputError(path, "missing key 'camera_angle_x'")
        tan = math.tan(0.5 * float(data["camera_angle_x"]))
        camera = lambda k, f: lambda w, h: (0.5 * w / tan, 0.5 * w / tan, w / 2, h / 2)  # noqa: E731
        specs = _json_specs(root, path, list(data.get("frames", [])), camera)
        splits[split] = SceneSplit(*read_frames(specs, downscale, path))
        aabb = data.get("aabb", aabb)
    box = torch.tensor(aabb if aabb is not None else [-1.5, -1.5, -1.5, 1.5, 1.5, 1.5], dtype=torch.float32).reshape(6)
    return Scene(str(root), "blender", _fill_splits(splits), box)


SPLIT_LISTS = {"train": "train_filenames", "val": "val_filenames", "test": "test_filenames"}


def _clean(rel: str) -> str:
    return str(Path(rel).as_posix()).removeprefix("./")


def load_transforms(root: Path, downscale: int = 1, holdout_every: int = 8, poses: Optional[str] = None) -> Scene:
    """instant-ngp / nerfstudio transforms.json: fl_x, fl_y, cx, cy, w, h, k1-k4, p1, p2 and
    camera_model (OPENCV or OPENCV_FISHEYE) per file or per frame.

    Splits: nerfstudio's train_filenames / val_filenames / test_filenames lists when the file has
    them, else every `holdout_every`-th frame is a test view. Poses (`poses`, default "normalise")
    are oriented, centred and scaled as nerfstudio does (`normalise_poses`): the box is then
    aabb_scale x [-1, 1]^3. With "keep" they are used as given and the box is 1.5 x aabb_scale.
    Distorted images are undistorted once while loading (`read_frames`).
    """
    path = root / "transforms.json"
    data = read_json_object(path)
    frames = list(data.get("frames", []))

    def merged(k):
        m = {**data, **frames[k]}
        if "fl_x" not in m and "camera_angle_x" not in m:
            raise InputError(path, f"frame {k}: missing key 'fl_x' (or 'camera_angle_x')")
        return m

    def camera(k, frame):
        m = merged(k)

        def intrinsics(w, h):
            fx = float(m["fl_x"]) if "fl_x" in m else 0.5 * w / math.tan(0.5 * float(m["camera_angle_x"]))
            sx, sy = w / float(m.get("w", w)), h / float(m.get("h", h))  # the files may be resized copies
            return fx * sx, float(m.get("fl_y", fx)) * sy, float(m.get("cx", w / 2)) * sx, float(m.get("cy", h / 2)) * sy
        return intrinsics

    def lens(k, frame):
        m = merged(k)
        model = str(m.get("camera_model", "OPENCV"))
        if model in ("PINHOLE", "SIMPLE_PINHOLE"):
            model = "OPENCV"
        if model not in LENS_MODELS:
            raise InputError(path, f"frame {k}: camera_model {model} is not supported (OPENCV, OPENCV_FISHEYE, PINHOLE)")
        return Lens.from_values(model, m)

    specs = _json_specs(root, path, frames, camera, lens)
    mode = _pose_mode(poses)
    box_scale = float(data.get("aabb_scale", 1.0))
    points = _sparse_points(root, path, data)
    norm = None
    if mode == "normalise":
        norm = normalise_poses(np.stack([s.c2w for s in specs]))
        for spec, m in zip(specs, norm.poses(np.stack([s.c2w for s in specs]))):
            spec.c2w = m
        points = None if points is None else norm.points(points)
        s = box_scale
    else:
        s = 1.5 * box_scale
    near = 0.0
    if points is not None:
        from .colmap import near_and_box

        near = near_and_box(points, np.stack([s.c2w for s in specs]))[0]
    lists = {split: data[key] for split, key in SPLIT_LISTS.items() if isinstance(data.get(key), list)}
    if lists:
        index = {_clean(spec.name): k for k, spec in enumerate(specs)}
        chosen = {}
        for split, names in lists.items():
            missing = [n for n in names if _clean(str(n)) not in index]
            if missing:
                raise InputError(path, f"{SPLIT_LISTS[split]} names '{missing[0]}', which no frame has")
            chosen[split] = [index[_clean(str(n))] for n in names]
        if "train" not in chosen:
            held = {k for ks in chosen.values() for k in ks}
            chosen["train"] = [k for k in range(len(specs)) if k not in held]
    else:
        test = [k for k in range(len(specs)) if k % holdout_every == 0] if len(specs) > 1 else []
        chosen = {"train": [k for k in range(len(specs)) if k not in set(test)], "test": test}
    splits = {split: SceneSplit(*read_frames([specs[k] for k in ks], downscale, path)) for split, ks in chosen.items() if ks}
    if "train" not in splits:
        raise InputError(path, "no frame is left for training")
    return Scene(str(root), "transforms", _fill_splits(splits), torch.tensor([-s, -s, -s, s, s, s]), near=near,
                 extra={"poses": mode, "normalisation": norm if mode == "normalise" else None,
                        **({"process": data["inr_process"]} if isinstance(data.get("inr_process"), dict) else {})},
                 points=None if points is None else points.astype(np.float32))


def _sparse_points(root: Path, path: Path, data: dict) -> Optional[np.ndarray]:
    """nerfstudio's `ply_file_path`: the sparse structure-from-motion points, if the file names them."""
    rel = data.get("ply_file_path")
    if not rel:
        return None
    from .pointclouds import read_cloud

    ply = root / str(rel)
    if not ply.is_file():
        raise InputError(path, f"ply_file_path '{rel}' not found under {root}")
    return np.asarray(read_cloud(ply, duplicates="drop")[0], np.float64)


POSE_MODES = ("normalise", "keep")


def _pose_mode(poses: Optional[str]) -> str:
    mode = poses or "normalise"
    if mode not in POSE_MODES:
        raise InputError(None, f"--poses must be one of {', '.join(POSE_MODES)}, got {poses!r}")
    return mode


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
    specs = []
    for k, p in enumerate(poses):
        m = np.concatenate([p[:, 1:2], -p[:, 0:1], p[:, 2:3], p[:, 3:4]], axis=1)  # (down, right, back) -> (right, up, back)
        where = f"pose {k}"
        hwf = p[:, 4]  # height, width, focal of the images the poses were made for
        camera = lambda w, h, hwf=hwf: (hwf[2] * w / hwf[1], hwf[2] * w / hwf[1], w / 2, h / 2)  # noqa: E731
        specs.append(FrameSpec(files[k], str(files[k].relative_to(root)), check_pose(m.tolist(), where, path), camera, where=where))
    near, far = float(bounds.min()), float(bounds.max())
    idx = np.arange(len(specs))
    test = idx % holdout_every == 0
    splits = {name: SceneSplit(*read_frames([specs[k] for k in idx[sel]], downscale, path))
              for name, sel in (("train", ~test), ("test", test))}
    pts = []
    for split in splits.values():
        h, w = split.images.shape[1:3]
        corners = np.array([[0, 0], [0, w], [h, 0], [h, w]], dtype=np.float64)
        for m, (fx, fy, cx, cy) in zip(split.c2w.numpy().astype(np.float64), split.intrinsics.numpy().astype(np.float64)):
            d = np.stack([(corners[:, 1] - cx) / fx, -(corners[:, 0] - cy) / fy, -np.ones(4)], -1) @ m[:3, :3].T
            pts += [m[:3, 3] + d * near, m[:3, 3] + d * far]
    pts = np.concatenate(pts)
    box = torch.tensor(np.concatenate([pts.min(0), pts.max(0)]), dtype=torch.float32)
    return Scene(str(root), "llff", _fill_splits(splits), box, near=near * 0.9)


def _fill_splits(splits: Dict[str, SceneSplit]) -> Dict[str, SceneSplit]:
    """val and test fall back on each other, then on train, so every split exists."""
    out = dict(splits)
    out.setdefault("test", out.get("val", out["train"]))
    out.setdefault("val", out["test"])
    return out


def capture_kind(path) -> Optional[str]:
    """Why the scene folder at `path` looks like a real-world (unbounded) capture, or None:
    made by `inr nerf process`, a nerfstudio capture with sparse points, or a COLMAP model
    folder (the Mip-NeRF 360 layout). Reads no images; unreadable folders give None (loading
    reports them)."""
    from .colmap import model_folder

    root = Path(path)
    if not root.is_dir() or (root / "transforms_train.json").is_file():
        return None
    if (root / "transforms.json").is_file():
        try:
            data = json.loads((root / "transforms.json").read_text())
        except (OSError, ValueError):
            return None
        if isinstance(data, dict) and isinstance(data.get("inr_process"), dict):
            return "a scene made by `inr nerf process`"
        if isinstance(data, dict) and data.get("ply_file_path"):
            return "a capture with structure-from-motion points"
        return None
    if model_folder(root) is not None:
        return "a COLMAP model folder"
    return None


def load_scene(path, downscale: int = 1, poses: Optional[str] = None) -> Scene:
    """Detect the format of a scene folder and load it. `poses` ("normalise" or "keep", default
    normalise) applies to transforms.json and COLMAP scenes; Blender and LLFF scenes keep theirs."""
    from .colmap import load_colmap, model_folder

    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such scene folder")
    if not root.is_dir():
        raise InputError(root, "is not a folder (a scene is a folder with transforms*.json, a COLMAP model or poses_bounds.npy)")
    if downscale < 1:
        raise InputError(None, f"--downscale must be >= 1, got {downscale}")
    _pose_mode(poses)
    if (root / "transforms_train.json").is_file():
        return load_blender(root, downscale)
    if (root / "transforms.json").is_file():
        return load_transforms(root, downscale, poses=poses)
    if model_folder(root) is not None:
        return load_colmap(root, downscale, poses=poses)
    if (root / "poses_bounds.npy").is_file():
        return load_llff(root, downscale)
    raise InputError(root, "is not a scene folder: no transforms_train.json (Blender), transforms.json "
                     "(instant-ngp / nerfstudio), COLMAP model (sparse/0/cameras.bin ...) or poses_bounds.npy (LLFF)")
