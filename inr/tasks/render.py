"""Load a fitted run and render its field (images at any resolution)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import torch
import yaml

from ..data.signal import grid_coords
from ..errors import InputError
from .fit import NATIVE_RANGE, load_checkpoint_module
from .outputs import write_image
from .signal_fit import SignalFitModule

MAX_PIXELS = 64_000_000


def load_run(run_dir: Path) -> Tuple[SignalFitModule, dict]:
    """The fitted module of a run folder (checkpoint read with weights_only=True) and its config."""
    cfg_path, ckpt_path = run_dir / "config.yaml", run_dir / "checkpoints" / "last.ckpt"
    if not cfg_path.is_file() or not ckpt_path.is_file():
        raise InputError(run_dir, "is not a finished run folder (needs config.yaml and checkpoints/last.ckpt)")
    config = yaml.safe_load(cfg_path.read_text())
    return load_checkpoint_module(ckpt_path, SignalFitModule), config


def render_image(run_dir: Path, scale: float, out: Path, level: Optional[int] = None, chunk: int = 1 << 16) -> Tuple[int, int]:
    """Render the run's image field on a grid `scale` times the training size; memory is bounded
    by `chunk` (field evaluations at once). Returns the (H, W) written."""
    module, config = load_run(run_dir)
    opts = config["options"]
    if opts["kind"] != "image":
        raise InputError(run_dir, f"holds a {opts['kind']} run; render-image needs a fit-image run")
    metrics_path = run_dir / "metrics.json"
    import json

    shape = json.loads(metrics_path.read_text())["shape"] if metrics_path.is_file() else None
    if shape is None:
        raise InputError(run_dir, "has no metrics.json (the run did not finish)")
    h, w = max(1, round(shape[0] * scale)), max(1, round(shape[1] * scale))
    if h * w > MAX_PIXELS:
        raise InputError(None, f"--scale {scale} asks for {w}x{h} pixels; the limit is {MAX_PIXELS:,}")
    if out.suffix.lower() not in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"):
        raise InputError(out, "unsupported output image type (use .png, .jpg, .tif, .bmp or .webp)")
    if level is not None and not 0 <= level < module.field.num_levels:
        raise InputError(None, f"--level must be in [0, {module.field.num_levels - 1}]")
    value_range = tuple(config["preset"]["train"]["value_range"])
    native = NATIVE_RANGE["image"]
    rows = []
    coords_all = grid_coords((h, w))
    for part in torch.split(coords_all, chunk * 4):
        rows.append(module.predict_values(part, value_range, native, level=level))
    img = torch.cat(rows).view(h, w, -1)
    if out.suffix.lower() in (".jpg", ".jpeg") and img.shape[-1] == 4:
        img = img[..., :3] * img[..., 3:] + (1 - img[..., 3:])
    out.parent.mkdir(parents=True, exist_ok=True)
    write_image(out, img, 8)
    return h, w
