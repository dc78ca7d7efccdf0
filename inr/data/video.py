"""Video reading through imageio: MP4 (ffmpeg), GIF, or a folder of frames, as (T, H, W, C) in [0, 1]."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from .images import read_image, to_unit_range
from .signal import Signal

FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_SUFFIXES = (".mp4", ".mov", ".avi", ".mkv", ".webm", ".gif")


@dataclass
class VideoSignal(Signal):
    """values: (T, H, W, C) in [0, 1]; fps of the source (frames folders: 25)."""

    fps: float = 25.0


def read_video(path: str | Path, max_frames: int | None = None) -> VideoSignal:
    """Read a video file or a folder of frames (sorted by name; all the same size)."""
    import imageio.v3 as iio

    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    fps = 25.0
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in FRAME_SUFFIXES)
        if not files:
            raise InputError(p, f"holds no frames ({', '.join(FRAME_SUFFIXES)})")
        frames = []
        for f in files[:max_frames]:
            img = read_image(f, alpha="composite").values
            if frames and img.shape != frames[0].shape:
                raise InputError(f, f"frame is {img.shape[1]}x{img.shape[0]}x{img.shape[2]}, the first is "
                                 f"{frames[0].shape[1]}x{frames[0].shape[0]}x{frames[0].shape[2]}")
            frames.append(img)
        values = torch.stack(frames)
    else:
        if p.suffix.lower() not in VIDEO_SUFFIXES:
            raise InputError(p, f"unsupported video type {p.suffix or '(none)'}; use {', '.join(VIDEO_SUFFIXES)} or a folder of frames")
        if p.stat().st_size == 0:
            raise InputError(p, "file is empty (0 bytes)")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arr = np.asarray(iio.imread(p, index=None))
                meta = iio.immeta(p, **({"exclude_applied": False} if p.suffix.lower() != ".gif" else {}))
        except Exception as exc:  # imageio/ffmpeg raise many types for unreadable files
            raise InputError(p, f"cannot be read as a video ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
        if arr.ndim == 3:  # one gray frame sequence, or a single RGB image
            arr = arr[..., None] if arr.shape[-1] not in (3, 4) else arr[None]
        if arr.ndim != 4 or arr.shape[-1] not in (1, 3, 4):
            raise InputError(p, f"is not a video (decoded array of shape {arr.shape})")
        arr = arr[:max_frames]
        duration = meta.get("duration")  # GIF: milliseconds per frame
        fps = float(meta.get("fps") or (1000.0 / duration if duration else 25.0))
        values, _ = to_unit_range(arr, str(p))
        if values.shape[-1] == 4:  # GIF transparency: composite onto white
            values = values[..., :3] * values[..., 3:] + (1.0 - values[..., 3:])
        values = torch.from_numpy(np.ascontiguousarray(values))
    if values.shape[0] < 2:
        raise InputError(p, f"has {values.shape[0]} frame; a video needs at least 2")
    if min(values.shape[1:3]) < 2:
        raise InputError(p, f"frames are {values.shape[2]}x{values.shape[1]}; at least 2x2 are needed")
    return VideoSignal(values=values.float(), kind="video", path=str(p), fps=fps)
