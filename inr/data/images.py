"""Image reading: grayscale, RGB, RGBA, 8/16-bit and float images, as float32 in [0, 1]."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ..errors import InputError
from .signal import Signal


@dataclass
class ImageSignal(Signal):
    """values: (H, W, C) in [0, 1], C in {1, 3, 4}; `bit_depth` of the source (8, 16 or 32 for float)."""

    bit_depth: int = 8


def to_unit_range(arr: np.ndarray, path: str) -> tuple[np.ndarray, int]:
    """Integer images are divided by their type's maximum; float images are kept if in [0, 1],
    else rescaled by their min/max (an HDR or arbitrary float image)."""
    if arr.dtype == np.bool_:
        return arr.astype(np.float32), 8
    if np.issubdtype(arr.dtype, np.integer):
        info = np.iinfo(arr.dtype)
        bits = 16 if info.max > 255 else 8
        out = arr.astype(np.float32)
        out /= float(info.max)  # in place: one float copy of a large photo, not two
        return out, bits
    if np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
        if not np.isfinite(arr).all():
            raise InputError(path, "image has NaN or infinite pixel values")
        lo, hi = float(arr.min()), float(arr.max())
        if lo < 0.0 or hi > 1.0:
            arr = (arr - lo) / max(hi - lo, 1e-12)
        return arr, 32
    raise InputError(path, f"unsupported pixel type {arr.dtype}")


def read_image(path: str | Path, alpha: Literal["fit", "composite"] = "fit") -> ImageSignal:
    """Read an image file as (H, W, C) float32 in [0, 1].

    RGBA: `alpha='fit'` keeps 4 channels (the field learns transparency too);
    `alpha='composite'` composites onto white and fits RGB. Gray+alpha is handled the same way.
    """
    import imageio.v3 as iio

    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file")
    if p.is_dir():
        raise InputError(p, "is a directory, not an image file")
    if p.stat().st_size == 0:
        raise InputError(p, "file is empty (0 bytes)")
    try:
        with warnings.catch_warnings():  # imageio's plugin probing warns about deprecated plugins
            warnings.simplefilter("ignore")
            arr = np.asarray(iio.imread(p))
    except Exception as exc:  # imageio raises many types for unreadable files
        raise InputError(p, f"cannot be read as an image ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    if arr.ndim == 3 and arr.shape[0] in (1,) and arr.shape[-1] not in (1, 2, 3, 4):
        arr = arr[0]
    if arr.ndim == 4 or (arr.ndim == 3 and arr.shape[-1] not in (1, 2, 3, 4)):
        raise InputError(p, f"has {arr.shape} pixels: multi-frame or volume images are not supported")
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.ndim != 3:
        raise InputError(p, f"is not a 2D image (array of shape {arr.shape})")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(p, f"image has zero size ({arr.shape[0]}x{arr.shape[1]})")
    values, bits = to_unit_range(arr, str(p))
    if values.shape[-1] in (2, 4) and alpha == "composite":
        a = values[..., -1:]
        values = values[..., :-1] * a + (1.0 - a)
    return ImageSignal(values=torch.from_numpy(np.ascontiguousarray(values)), kind="image", path=str(p), bit_depth=bits)
