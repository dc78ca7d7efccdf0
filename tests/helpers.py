"""Tiny signals for end-to-end tests."""

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import soundfile as sf


def smooth_image(path: Path, size: int = 16, channels: int = 3) -> Path:
    """A smooth colour image: gradients and a blob (every preset can fit it)."""
    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    blob = np.exp(-((x - 0.6) ** 2 + (y - 0.4) ** 2) / 0.05)
    img = np.stack([x, y, blob], -1)[..., :channels]
    iio.imwrite(path, (img * 255).astype(np.uint8))
    return path


def tone(path: Path, seconds: float = 0.1, rate: int = 8000, channels: int = 1) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    sig = np.stack([0.5 * np.sin(2 * np.pi * (220 * (c + 1)) * t) * np.exp(-3 * t) for c in range(channels)], -1)
    sf.write(path, sig, rate)
    return path


def run_without_native(code: str) -> str:
    """stdout of `python -c code` in a fresh process with the native kernels turned off."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "INR_NATIVE": "0"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


NAN_TETRAHEDRON = "v 0 0 0\nv nan 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 3 4\nf 1 2 4\nf 2 3 4\n"
"""An OBJ tetrahedron whose vertex 1 (of 0-3) is NaN: trimesh's processing would drop it and
three faces quietly; the mesh readers must refuse it."""
