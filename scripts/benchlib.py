"""Shared helpers of the benchmark scripts: timing medians, reference images, result files."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import torch

RESULTS = Path("bench-results")


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _resized(name: str, size: int) -> Path:
    """scikit-image's sample `name` resized (antialiased) to size x size, under bench-results/."""
    import imageio.v3 as iio
    import skimage.data
    from skimage.transform import resize

    path = RESULTS / f"{name}{size}.png"
    if not path.exists():
        RESULTS.mkdir(exist_ok=True)
        img = resize(getattr(skimage.data, name)() / 255.0, (size, size), anti_aliasing=True)
        iio.imwrite(path, (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
    return path


def cameraman(size: int) -> Path:
    """The 512^2 grayscale cameraman (SIREN's image), resized."""
    return _resized("camera", size)


def astronaut(size: int) -> Path:
    """The 512^2 RGB astronaut photo (also the bundled sample), resized."""
    return _resized("astronaut", size)


def save(name: str, rows: List[Dict]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")


def table(rows: List[Dict], cols: List[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:,.3g}" if isinstance(v, float) and abs(v) >= 1000 else (f"{v:.3g}" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_image_tensor(path: Path) -> torch.Tensor:
    import imageio.v3 as iio

    a = iio.imread(path).astype(np.float32) / 255.0
    return torch.from_numpy(a if a.ndim == 3 else a[..., None])
