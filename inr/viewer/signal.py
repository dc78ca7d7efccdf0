"""The viewer of an image, audio or video fit: the run's reconstruction, error map and curve,
and a zoom that evaluates the field itself on any window at any resolution (the field is
continuous: zooming in shows what it holds between the training pixels)."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import torch

from ..data.signal import grid_coords
from ..tasks.render import run_shape, video_frame
from ..tasks.run import load_run
from ..tasks.signal_fit import SignalFitModule

FILES = {"image": ("reconstruction.png", "error.png", "curve.png"), "audio": ("audio.png", "curve.png"),
         "video": ("curve.png",)}


def window_coords(shape, centre, zoom: float, pixels: int) -> torch.Tensor:
    """Cell-centre coordinates of a `pixels`-row window of an (H, W) field, `zoom` times the
    training resolution, centred at `centre` (y, x) in [-1, 1]."""
    h, w = shape
    rows, cols = pixels, max(1, round(pixels * w / h))
    half_y, half_x = 1.0 / zoom, 1.0 / zoom  # the window spans 2 / zoom of each axis
    cy = float(np.clip(centre[0], -1 + half_y, 1 - half_y))
    cx = float(np.clip(centre[1], -1 + half_x, 1 - half_x))
    g = grid_coords((rows, cols))
    return torch.stack([cy + g[:, 0] * half_y, cx + g[:, 1] * half_x], -1), rows, cols


class SignalViewer:
    def __init__(self, server, run: Path, task: str, device: str = "auto") -> None:
        self.server, self.run, self.task = server, Path(run), task
        self.module, self.config = load_run(self.run, task, SignalFitModule, device)
        self.shape = run_shape(self.run)
        self.value_range = tuple(self.config["preset"]["train"]["value_range"])
        gui = server.gui
        gui.add_markdown(f"**{task} fit** `{self.run}`: preset `{self.config['preset'].get('name')}`")
        for name in FILES[task]:
            if (self.run / name).is_file():
                gui.add_image(iio.imread(self.run / name)[..., :3], label=name)
        self.zoom_image = None
        if task == "image":
            self.zoom = gui.add_slider("zoom", min=1.0, max=64.0, step=0.5, initial_value=1.0)
            self.centre = gui.add_vector2("centre (y, x) in [-1, 1]", initial_value=(0.0, 0.0), step=0.01)
            self.pixels = gui.add_slider("zoom rows", min=64, max=1024, step=32, initial_value=256)
            for handle in (self.zoom, self.centre, self.pixels):
                handle.on_update(lambda _: self._zoom())
            img = self._render_window()
            h, w = self.shape[:2]
            self.plane = server.scene.add_image("/field", img, render_width=w / max(h, w), render_height=h / max(h, w),
                                                wxyz=(0.7071068, 0.7071068, 0.0, 0.0))
            self.zoom_image = gui.add_image(img, label="field at the zoom")
        if task == "video":
            t = self.shape[0]
            self.frame = gui.add_slider("frame", min=0, max=max(t - 1, 1), step=1, initial_value=0)
            self.frame.on_update(lambda _: self._video_frame())
            img = self._frame_image(0)
            self.zoom_image = gui.add_image(img, label="field at this frame")

    @torch.no_grad()
    def _render_window(self) -> np.ndarray:
        zoom = float(self.zoom.value)
        coords, rows, cols = window_coords(self.shape[:2], self.centre.value, zoom, int(self.pixels.value))
        parts = [self.module.predict_values(c, self.value_range, (0.0, 1.0)) for c in torch.split(coords, 1 << 16)]
        img = torch.cat(parts).view(rows, cols, -1)[..., :3]
        img = img.expand(rows, cols, 3) if img.shape[-1] == 1 else img
        return (img.clamp(0, 1).cpu().numpy() * 255 + 0.5).astype(np.uint8)

    def _zoom(self) -> None:
        self.zoom_image.image = self._render_window()

    @torch.no_grad()
    def _frame_image(self, k: int) -> np.ndarray:
        t, h, w = self.shape[:3]
        img = video_frame(self.module, self.config, k, t, t, (h, w))[0][..., :3]
        img = img.expand(h, w, 3) if img.shape[-1] == 1 else img
        return (img.clamp(0, 1).cpu().numpy() * 255 + 0.5).astype(np.uint8)

    def _video_frame(self) -> None:
        self.zoom_image.image = self._frame_image(int(self.frame.value))

    def connect(self, client) -> None:
        client.camera.position, client.camera.look_at = (0.0, -1.6, 0.0), (0.0, 0.0, 0.0)
