"""`inr nerf render|export`: camera-path videos, coloured meshes and point clouds of a trained run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch

from .. import progress
from ..data.pointclouds import WRITE_FORMATS, write_cloud
from ..errors import InputError
from ..render.extract import extract_mesh
from ..render.paths import orbit_poses, spiral_poses
from ..render.rays import pinhole_rays
from .nerf import BACKGROUNDS, NerfModule
from .nerf_fit import load_nerf_run
from .outputs import MESH_FORMATS, check_suffix, write_mesh, write_video  # noqa: F401  (re-exported)

VIDEO_FORMATS = (".mp4", ".gif")
POINT_FORMATS = tuple(f for f in WRITE_FORMATS if f != ".npy")  # files other tools open


PATHS = ("orbit", "spiral")


def render_path(run_dir: Path, out: Path, path: str = "orbit", frames: int = 120, fps: Optional[float] = None,
                device: str = "auto", path_frame: Optional[Path] = None) -> Dict[str, Any]:
    """Render a camera path of a trained run into a video: "orbit" (a circle around what the
    training cameras look at, `orbit_poses`), "spiral" (LLFF's, in front of forward-facing
    cameras, focused at the median depth of the sparse points or at the box centre,
    `spiral_poses`), or a nerfstudio camera_path JSON file (its size, field of view and fps
    unless given). `frames` applies to orbit and spiral. path_frame: nerfstudio's
    dataparser_transforms.json of the run the camera path was made in: the path's poses are
    taken from that run's frame to this scene's (`from_nerfstudio_frame`)."""
    from ..data.camera_path import from_nerfstudio_frame, read_camera_path, read_dataparser_transform

    check_suffix(out, VIDEO_FORMATS, "video")
    if path not in PATHS and Path(path).suffix.lower() != ".json":
        raise InputError(None, f"--path must be orbit, spiral or a camera_path .json file, got {path!r}")
    cam_path = read_camera_path(path) if path not in PATHS else None  # bad files fail before the run loads
    if path_frame is not None and cam_path is None:
        raise InputError(None, "--path-frame applies to a camera_path .json file, not to orbit or spiral")
    frame = read_dataparser_transform(path_frame) if path_frame is not None else None
    module, scene, config = load_nerf_run(run_dir, device)
    train = scene.splits["train"]
    view = scene.splits["test"] if len(scene.splits["test"]) else train
    h, w = view.images.shape[1:3]
    fx, fy, cx, cy = view.intrinsics[0].tolist()
    bg = BACKGROUNDS.get(config["preset"]["train"].get("eval_background", "white"), 1.0)
    centre = (scene.aabb[:3] + scene.aabb[3:]) / 2
    if path == "orbit":
        poses = orbit_poses(train.c2w, frames, centre)
        intr = torch.tensor([[fx, fy, cx, cy]]).repeat(len(poses), 1)
    elif path == "spiral":
        c2w = train.c2w.double()
        back = torch.nn.functional.normalize(c2w[:, :3, 2].sum(0), dim=0)
        pts = torch.from_numpy(scene.points).double() if scene.points is not None and len(scene.points) else centre[None].double()
        focus = float(((pts - c2w[:, :3, 3].mean(0)) @ -back).median())
        poses = spiral_poses(train.c2w, frames, max(focus, 1e-3))
        intr = torch.tensor([[fx, fy, cx, cy]]).repeat(len(poses), 1)
    else:
        poses = cam_path.poses
        if frame is not None:
            poses = from_nerfstudio_frame(poses, *frame, scene.extra.get("normalisation"))
        if cam_path.size is not None:
            h, w = cam_path.size
        f = torch.full((len(poses),), fy * h / view.images.shape[1])
        if cam_path.fov_y is not None:
            f = torch.from_numpy(0.5 * h / np.tan(np.radians(cam_path.fov_y) / 2)).float()
        intr = torch.stack([f, f, torch.full_like(f, w / 2), torch.full_like(f, h / 2)], 1)
        fps = fps or cam_path.fps
    fps = fps or 30
    images = render_poses(module, poses, (h, w), intr, bg)
    h, w = write_video(out, images, fps)  # odd sizes are padded to even ones for H.264
    return {"frames": len(poses), "width": w, "height": h, "fps": fps}


def render_poses(module: NerfModule, poses: torch.Tensor, size, intrinsics, background: float) -> np.ndarray:
    """(F, H, W, 3) uint8 frames of the field seen from each (4, 4) pose, with `size` (H, W) and
    `intrinsics` (fx, fy, cx, cy) shared, or one row per pose ((F, 4))."""
    h, w = size
    ii, jj = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    pixels = torch.stack([ii, jj], -1).reshape(-1, 2)
    intr = torch.as_tensor(intrinsics, dtype=torch.float32).reshape(-1, 4).expand(len(poses), 4)
    images = []
    for c2w, k in progress.bar(list(zip(poses, intr)), "frames", unit="frame"):
        rgb = module.render_view(pinhole_rays(c2w, *k.tolist(), pixels), background).view(h, w, 3)
        images.append((rgb.cpu().numpy() * 255 + 0.5).astype(np.uint8))
    return np.stack(images)


def _masked_density(module: NerfModule):
    """The field's density, zero in cells the occupancy grid marks empty (unseen space can hold
    any density; the grid knows where the training rays found nothing)."""

    def fn(points: torch.Tensor) -> torch.Tensor:
        return module.density(points) * module.grid.occupied(points)

    return fn


def export_mesh(run_dir: Path, out: Path, resolution: int = 256, threshold: Optional[float] = None, loaded=None,
                device: str = "auto") -> Dict[str, Any]:
    """Marching cubes on the density over the scene box, vertex colours from the field; written
    with trimesh (.ply, .obj, .glb). `loaded`: load_nerf_run(run_dir) when the caller has it."""
    check_suffix(out, MESH_FORMATS, "mesh")
    if resolution < 8:
        raise InputError(None, f"--resolution must be >= 8, got {resolution}")
    module, scene, _ = loaded or load_nerf_run(run_dir, device)
    try:
        mesh = mesh_of(module, resolution, threshold)
    except ValueError as exc:
        raise InputError(run_dir, f"cannot extract a mesh: {exc}") from None
    level = default_threshold(module) if threshold is None else float(threshold)
    write_mesh(out, mesh)
    return {"vertices": len(mesh.vertices), "faces": len(mesh.faces), "threshold": level, "resolution": resolution,
            "watertight": bool(mesh.is_watertight)}


def mesh_of(module: NerfModule, resolution: int, threshold: Optional[float] = None, crop: Optional[torch.Tensor] = None):
    """The trimesh of marching cubes on the density over the scene box (or the `crop` box, (6,)
    min and max corners), vertex colours from the field. ValueError when nothing is dense."""
    import trimesh

    level = default_threshold(module) if threshold is None else float(threshold)

    def color_fn(points, dirs):
        return module.query("field", points, dirs)[1]

    box = module.field.aabb if crop is None else crop.to(module.field.aabb)
    verts, faces, colors = extract_mesh(_masked_density(module), box, resolution, level, color_fn)
    return trimesh.Trimesh(verts, faces, vertex_colors=(colors * 255 + 0.5).astype(np.uint8), process=False)


def default_threshold(module: NerfModule) -> float:
    """The density at which a sample of the marching step is half opaque: 1 - exp(-sigma dt) = 0.5."""
    return float(np.log(2.0) / module.step_size)


def export_points(run_dir: Path, out: Path, n_points: int = 200_000, min_opacity: float = 0.9, seed: int = 0,
                  loaded=None, device: str = "auto") -> Dict[str, Any]:
    """Surface points with colours: rays through random pixels of the training views, each
    ending at its expected depth where the ray is nearly opaque; written with open3d."""
    check_suffix(out, POINT_FORMATS, "point cloud")
    module, scene, _ = loaded or load_nerf_run(run_dir, device)
    try:
        pts, colors = points_of(module, scene, n_points, min_opacity, seed)
    except ValueError as exc:
        raise InputError(run_dir, str(exc)) from None
    write_cloud(out, pts, colors)
    return {"points": len(pts), "rays": n_points, "min_opacity": min_opacity}


def points_of(module: NerfModule, scene, n_points: int, min_opacity: float, seed: int = 0,
              crop: Optional[torch.Tensor] = None):
    """(points (M, 3), colours (M, 3)) float64 arrays: the expected surface points of rays
    through random training pixels that became `min_opacity` opaque (inside `crop` when given).
    ValueError when none did."""
    split = scene.splits["train"]
    n_img, h, w = split.images.shape[:3]
    gen = torch.Generator().manual_seed(seed)
    img = torch.randint(0, n_img, (n_points,), generator=gen)
    pix = torch.stack([torch.randint(0, h, (n_points,), generator=gen), torch.randint(0, w, (n_points,), generator=gen)], -1)
    fx, fy, cx, cy = split.intrinsics[img].unbind(-1)
    rays = pinhole_rays(split.c2w[img], fx, fy, cx, cy, pix)
    r = module.render_many(rays, 0.0)
    keep = r.opacity[:, 0] >= min_opacity
    pts = rays.origins + rays.directions * r.depth
    if crop is not None:
        crop = crop.to(pts)
        keep &= ((pts >= crop[:3]) & (pts <= crop[3:])).all(-1)
    if not bool(keep.any()):
        raise ValueError(f"none of {n_points:,} rays became {min_opacity:g} opaque{' in the crop box' if crop is not None else ''}: "
                         "no surface to export (train longer?)")
    colors = (r.color[keep] / r.opacity[keep]).clamp(0, 1)  # un-premultiplied from the black background
    return pts[keep].double().cpu().numpy(), colors.double().cpu().numpy()

