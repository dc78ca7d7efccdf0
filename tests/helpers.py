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


def ptx_scan(local, station, rotation_rows, translation, colours=None, empty=(), columns=1, intensity=None):
    """A PTX scan's text: a grid of `local` points in `columns` columns (a column's rows, then the
    next column's; points listed in `empty` written as 0 0 0, no return), the scanner's
    registered position and axes, the transform's rows; each point's intensity 0.5 unless given."""
    def numbers(values):
        return " ".join(f"{float(v):.17g}" for v in values)

    lines = [str(columns), str(len(local) // columns), numbers(station)]
    lines += [numbers(axis) for axis in rotation_rows]
    lines += [numbers(list(row) + [0.0]) for row in rotation_rows]
    lines.append(numbers(list(translation) + [1.0]))
    for i, p in enumerate(local):
        xyz = "0 0 0" if i in empty else numbers(p)
        shine = " 0.5" if intensity is None else f" {float(intensity[i]):.17g}"
        lines.append(xyz + shine + ("" if colours is None else " " + " ".join(str(int(c)) for c in colours[i])))
    return "\n".join(lines) + "\n"
