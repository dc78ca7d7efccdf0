"""Render a fitted run's field at any resolution: images (`render-image`), videos (`render-video`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch

from .. import progress
from ..data.signal import grid_coords
from ..errors import InputError
from .outputs import write_image, write_video
from .run import load_run
from .signal_fit import SignalFitModule

MAX_PIXELS = 64_000_000
IMAGE_FORMATS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp")
VIDEO_FORMATS = (".mp4", ".gif")


def run_shape(run_dir: Path) -> list:
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file():
        raise InputError(run_dir, "has no metrics.json (the run did not finish)")
    return json.loads(metrics_path.read_text())["shape"]


def _field_values(module: SignalFitModule, shape, config, level: Optional[int], chunk: int = 1 << 18) -> torch.Tensor:
    """The field on a regular grid `shape`, in [0, 1], chunk by chunk (bounded memory)."""
    value_range = tuple(config["preset"]["train"]["value_range"])
    coords = grid_coords(shape)
    rows = [module.predict_values(part, value_range, (0.0, 1.0), level=level) for part in torch.split(coords, chunk)]
    return torch.cat(rows).view(*shape, -1)


def render_image(run_dir: Path, scale: float, out: Path, level: Optional[int] = None, device: str = "auto") -> Tuple[int, int]:
    """Render the run's image field on a grid `scale` times the training size. Returns the (H, W) written."""
    run_dir = Path(run_dir)
    if out.suffix.lower() not in IMAGE_FORMATS:
        raise InputError(out, "unsupported output image type (use .png, .jpg, .tif, .bmp or .webp)")
    module, config = load_run(run_dir, "image", SignalFitModule, device)
    shape = run_shape(run_dir)
    h, w = max(1, round(shape[0] * scale)), max(1, round(shape[1] * scale))
    if h * w > MAX_PIXELS:
        raise InputError(None, f"--scale {scale} asks for {w}x{h} pixels; the limit is {MAX_PIXELS:,}")
    if level is not None and not 0 <= level < module.field.num_levels:
        raise InputError(None, f"--level must be in [0, {module.field.num_levels - 1}]")
    img = _field_values(module, (h, w), config, level)
    if out.suffix.lower() in (".jpg", ".jpeg") and img.shape[-1] == 4:
        img = img[..., :3] * img[..., 3:] + (1 - img[..., 3:])
    out.parent.mkdir(parents=True, exist_ok=True)
    write_image(out, img, 8)
    return h, w


def render_video(run_dir: Path, out: Path, scale: float = 1.0, fps: Optional[float] = None, device: str = "auto"):
    """Render a fit-video run at `scale` times its frame size and `fps` frames per second
    (default: the source's; more frames than the source interpolate in time). Returns
    (frames, H, W, fps)."""
    run_dir = Path(run_dir)
    if out.suffix.lower() not in VIDEO_FORMATS:
        raise InputError(out, f"unsupported video type {out.suffix or '(none)'}; use .mp4 or .gif")
    if not out.parent.is_dir():
        raise InputError(out.parent, "no such folder")
    module, config = load_run(run_dir, "video", SignalFitModule, device)
    t, h, w = run_shape(run_dir)[:3]
    src_fps = float(json.loads((run_dir / "metrics.json").read_text()).get("fps", 25.0))
    fps = float(fps or src_fps)
    frames = max(2, round(t * fps / src_fps))
    h2, w2 = max(1, round(h * scale)), max(1, round(w * scale))
    if frames * h2 * w2 > MAX_PIXELS * 4:
        raise InputError(None, f"{frames} frames of {w2}x{h2} is over the limit of {MAX_PIXELS * 4:,} pixels")
    video = torch.cat([video_frame(module, config, k, frames, t, (h2, w2)) for k in progress.bar(range(frames), "frames", unit="frame")])
    rgb = video if video.shape[-1] == 3 else video[..., :1].expand(*video.shape[:-1], 3)
    hw = write_video(out, (rgb.clamp(0, 1).cpu().numpy() * 255 + 0.5).astype(np.uint8), fps)
    return frames, hw[0], hw[1], fps


def video_frame(module, config, k: int, frames: int, t_src: int, hw) -> torch.Tensor:
    """Frame k of `frames` spread over the source's time span: the source's frame centres
    (2 i + 1) / T - 1 map onto the new ones, so frame 0 and the last are the source's."""
    value_range = tuple(config["preset"]["train"]["value_range"])
    first, last = 1.0 / t_src - 1.0, 1.0 - 1.0 / t_src
    tc = first + (last - first) * (k / max(frames - 1, 1))
    yx = grid_coords(hw)
    coords = torch.cat([torch.full((len(yx), 1), tc), yx], -1)
    return module.predict_values(coords, value_range, (0.0, 1.0)).view(1, *hw, -1)
