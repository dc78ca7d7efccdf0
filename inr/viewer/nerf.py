"""The viewer of a NeRF run: the field rendered progressively from the browser's camera (RGB,
depth or accumulation), the training cameras as frustums with their images, the scene box and a
crop box, and buttons that render an orbit video or export a mesh / points inside the crop box.
The same class serves a finished run (`inr view DIR`) and a training run (`nerf train
--viewer`, see live.py)."""

from __future__ import annotations

import io
import math
import tempfile
import threading
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch

from ..render.paths import orbit_poses
from ..render.renderer import render_rays_chunked
from .camera import c2w_to_viewer, view_rays, viewer_to_c2w
from .progressive import Progressive

MODES = ("rgb", "depth", "accumulation")
MAX_FRUSTUMS = 120


def colorize_depth(depth: np.ndarray, opacity: np.ndarray) -> np.ndarray:
    """(H, W) distances -> (H, W, 3) uint8 with matplotlib's turbo map over the 1st-99th
    percentile of the opaque pixels; empty pixels black."""
    import matplotlib

    seen = opacity > 0.5
    lo, hi = (np.percentile(depth[seen], [1, 99]) if seen.any() else (0.0, 1.0))
    t = np.clip((depth - lo) / max(hi - lo, 1e-6), 0, 1)
    rgb = matplotlib.colormaps["turbo"](t)[..., :3] * seen[..., None]
    return (rgb * 255 + 0.5).astype(np.uint8)


class NerfViewer:
    def __init__(self, server, module, scene, background: float, run_dir: Optional[Path] = None) -> None:
        self.server, self.module, self.scene, self.background = server, module, scene, background
        self.run_dir = run_dir
        self.lock = threading.Lock()  # one render at a time: the field and grid are shared
        aabb = module.field.aabb.detach().cpu().double().numpy()
        self.aabb = aabb
        self.progressive = Progressive(self.render_frame, lambda: int(self.resolution.value))
        self._add_gui()
        self._add_scene()

    # ---- scene and controls ---------------------------------------------------------------
    def _add_gui(self) -> None:
        gui = self.server.gui
        self.status = gui.add_markdown("")
        self.mode = gui.add_dropdown("output", MODES, initial_value="rgb")
        self.resolution = gui.add_slider("resolution (rows)", min=64, max=1024, step=16, initial_value=256)
        self.show_cameras = gui.add_checkbox("training cameras", initial_value=True)
        lo, hi = self.aabb[:3], self.aabb[3:]
        self.crop_min = gui.add_vector3("crop min", initial_value=tuple(lo), step=0.01)
        self.crop_max = gui.add_vector3("crop max", initial_value=tuple(hi), step=0.01)
        self.frames = gui.add_slider("orbit frames", min=12, max=240, step=12, initial_value=60)
        self.orbit_button = gui.add_button("render orbit video (MP4)")
        self.keyframes: list = []
        self.key_button = gui.add_button("add keyframe (this view)")
        self.clear_button = gui.add_button("clear keyframes")
        self.path_button = gui.add_button("render keyframe path video (MP4)")
        self.mesh_button = gui.add_button("export mesh in the crop box (PLY)")
        self.points_button = gui.add_button("export points in the crop box (PLY)")
        for handle in (self.mode, self.crop_min, self.crop_max):
            handle.on_update(lambda _: self._changed())
        self.show_cameras.on_update(lambda _: self._toggle_cameras())
        self.orbit_button.on_click(lambda event: self._download(event.client, "orbit.mp4", self._orbit_video))
        self.key_button.on_click(lambda event: self._add_keyframe(event.client))
        self.clear_button.on_click(lambda event: self._clear_keyframes())
        self.path_button.on_click(lambda event: self._download(event.client, "path.mp4", self._path_video))
        self.mesh_button.on_click(lambda event: self._download(event.client, "mesh.ply", self._mesh))
        self.points_button.on_click(lambda event: self._download(event.client, "points.ply", self._points))

    def _add_scene(self) -> None:
        lo, hi = self.aabb[:3], self.aabb[3:]
        self.server.scene.add_box("/scene_box", color=(90, 90, 90), dimensions=tuple(hi - lo), wireframe=True,
                                  position=tuple((lo + hi) / 2))
        self.crop_box = self.server.scene.add_box("/crop_box", color=(230, 120, 20), dimensions=tuple(hi - lo),
                                                  wireframe=True, position=tuple((lo + hi) / 2))
        split = self.scene.splits["train"]
        up = -split.c2w[:, :3, 1].mean(0)  # OpenGL y is up in camera space; viser wants world up
        self.server.scene.set_up_direction(tuple((-up).tolist()) if float(up.norm()) > 0.5 else (0.0, 0.0, 1.0))
        self.frustums = []
        step = max(1, math.ceil(len(split) / MAX_FRUSTUMS))
        diag = float(np.linalg.norm(hi - lo))
        for k in range(0, len(split), step):
            h, w = split.images.shape[1:3]
            fy = float(split.intrinsics[k, 1])
            thumb = split.images[k, :: max(1, h // 48), :: max(1, w // 48), :3].clamp(0, 1)
            wxyz, pos = c2w_to_viewer(split.c2w[k].cpu().numpy())
            self.frustums.append(self.server.scene.add_camera_frustum(
                f"/cameras/{k}", fov=2 * math.atan(h / (2 * fy)), aspect=w / h, scale=0.015 * diag,
                image=(thumb.cpu().numpy() * 255).astype(np.uint8), wxyz=wxyz, position=pos))

    def _toggle_cameras(self) -> None:
        for f in self.frustums:
            f.visible = bool(self.show_cameras.value)

    def _changed(self) -> None:
        lo, hi = self.crop()
        self.crop_box.position, self.crop_box.dimensions = tuple((lo + hi) / 2), tuple(np.maximum(hi - lo, 1e-6))
        self.progressive.refresh()

    def crop(self) -> Tuple[np.ndarray, np.ndarray]:
        lo, hi = np.asarray(self.crop_min.value, float), np.asarray(self.crop_max.value, float)
        return np.minimum(lo, hi), np.maximum(lo, hi)

    def crop_tensor(self) -> torch.Tensor:
        lo, hi = self.crop()
        return torch.tensor(np.concatenate([lo, hi]), dtype=torch.float32, device=self.module.device)

    def connect(self, client) -> None:
        """A new browser: start behind the first training camera (its frustum in view), then
        render for it."""
        split = self.scene.splits["train"]
        c2w = split.c2w[0].cpu().double().numpy().copy()
        centre = (self.aabb[:3] + self.aabb[3:]) / 2
        c2w[:3, 3] += 0.2 * (c2w[:3, 3] - centre)  # 20 % further from the scene's centre
        wxyz, pos = c2w_to_viewer(c2w)
        h, fy = split.images.shape[1], float(split.intrinsics[0, 1])
        client.camera.wxyz, client.camera.position = wxyz, pos
        client.camera.fov = 2 * math.atan(h / (2 * fy))
        client.camera.look_at = tuple(((self.aabb[:3] + self.aabb[3:]) / 2).tolist())
        self.progressive.attach(client)

    # ---- rendering ------------------------------------------------------------------------
    def _inside(self, points: torch.Tensor) -> torch.Tensor:
        box = self.crop_tensor()
        return ((points >= box[:3]) & (points <= box[3:])).all(-1).to(points.dtype)

    @torch.no_grad()
    def render_frame(self, camera, height: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """The browser camera's view: (H, W, 3) uint8 and the depth along its view axis."""
        m = self.module
        c2w = viewer_to_c2w(camera.wxyz, camera.position).to(m.device)
        rays, h, w = view_rays(c2w, float(camera.fov), float(camera.aspect), height)

        def field(points, dirs):
            sigma, rgb = m.query("field", points, dirs)
            return sigma * self._inside(points), rgb

        def density(points):
            return m.density(points) * self._inside(points)

        with self.lock:
            out = render_rays_chunked(field, m.grid, rays, self.background, m.render_settings, density)
        opacity = out.opacity.view(h, w).cpu().numpy()
        forward = -c2w[:3, 2]
        z = (out.depth.view(-1) * (rays.directions @ forward)).view(h, w).cpu().numpy()
        mode = self.mode.value
        if mode == "depth":
            image = colorize_depth(out.depth.view(h, w).cpu().numpy(), opacity)
        elif mode == "accumulation":
            image = np.repeat((opacity[..., None] * 255 + 0.5).clip(0, 255).astype(np.uint8), 3, -1)
        else:
            image = (out.color.view(h, w, 3).clamp(0, 1).cpu().numpy() * 255 + 0.5).astype(np.uint8)
        return image, np.where(opacity > 0.5, z, 1e3).astype(np.float32)

    # ---- buttons ---------------------------------------------------------------------------
    def _download(self, client, name: str, make) -> None:
        if client is None:
            return
        note = client.add_notification(title=f"making {name}", body="", loading=True, with_close_button=False)
        try:
            data = make()
        except Exception as exc:  # shown to the person who clicked, who can change the crop box
            note.title, note.body, note.loading, note.color = f"{name} failed", str(exc), False, "red"
            return
        note.remove()
        client.send_file_download(name, data)

    def _add_keyframe(self, client) -> None:
        if client is None:
            return
        c2w = viewer_to_c2w(client.camera.wxyz, client.camera.position)
        self.keyframes.append(c2w.numpy())
        wxyz, pos = c2w_to_viewer(c2w.numpy())
        diag = float(np.linalg.norm(self.aabb[3:] - self.aabb[:3]))
        self.server.scene.add_camera_frustum(f"/keyframes/{len(self.keyframes) - 1}", fov=float(client.camera.fov),
                                             aspect=float(client.camera.aspect), scale=0.05 * diag, color=(230, 120, 20),
                                             wxyz=wxyz, position=pos)

    def _clear_keyframes(self) -> None:
        self.keyframes = []
        self.server.scene.remove_by_name("/keyframes")

    def _path_video(self) -> bytes:
        from ..render.paths import keyframe_path

        if len(self.keyframes) < 2:
            raise ValueError("add at least 2 keyframes first (move the camera, press 'add keyframe')")
        return self._video(keyframe_path(self.keyframes, int(self.frames.value)))

    def _orbit_video(self) -> bytes:
        split = self.scene.splits["train"]
        return self._video(orbit_poses(split.c2w, int(self.frames.value), torch.as_tensor((self.aabb[:3] + self.aabb[3:]) / 2)))

    def _video(self, poses: torch.Tensor) -> bytes:
        """An MP4 of the field along `poses`, at the first training camera's size and intrinsics."""
        from ..tasks.nerf_export import render_poses
        from ..tasks.outputs import write_video

        split = self.scene.splits["train"]
        with self.lock:
            frames = render_poses(self.module, poses, split.images.shape[1:3], split.intrinsics[0].tolist(), self.background)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "video.mp4"
            write_video(path, frames, 30)
            return path.read_bytes()

    def _mesh(self) -> bytes:
        from ..tasks.nerf_export import mesh_of

        with self.lock:
            mesh = mesh_of(self.module, 256, None, crop=self.crop_tensor())
        buf = io.BytesIO()
        mesh.export(buf, file_type="ply")
        return buf.getvalue()

    def _points(self) -> bytes:
        from ..tasks.nerf_export import points_of

        from ..data.pointclouds import write_cloud

        with self.lock:
            pts, colors = points_of(self.module, self.scene, 200_000, 0.9, 0, crop=self.crop_tensor())
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "points.ply"
            write_cloud(path, pts, colors)
            return path.read_bytes()
