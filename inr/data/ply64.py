"""Binary PLY files with float64 coordinates, for geometry far from the origin (a georeferenced
scan, `pointclouds.float32_loses`). trimesh, which the toolkit writes PLY files with, stores
vertices as float32 only, and open3d (which writes doubles) is an optional extra; this writer
keeps such files exact on a plain install. trimesh and open3d read what it writes. It writes
float32 coordinates too when asked (`double=False`), for clouds with intensities, which neither
library's point-cloud writer used here carries."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np


def write_ply_float64(path: Path, vertices: np.ndarray, faces: Optional[np.ndarray] = None,
                      colors: Optional[np.ndarray] = None, normals: Optional[np.ndarray] = None,
                      intensity: Optional[np.ndarray] = None, double: bool = True) -> None:
    """Write a binary little-endian PLY: vertices x y z (double, or float with `double` off), then
    normals nx ny nz (the same type), colours red green blue (uchar, from [0, 1] floats or 0-255
    integers) and intensity (float) when given, then triangles (uchar count, int vertex indices)
    when `faces` is an (F, 3) array."""
    vertices = np.asarray(vertices, np.float64)
    real = "<f8" if double else "<f4"
    fields = [("x", real), ("y", real), ("z", real)]
    if normals is not None:
        fields += [("nx", real), ("ny", real), ("nz", real)]
    if colors is not None:
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    if intensity is not None:
        fields += [("intensity", "<f4")]
    rows = np.zeros(len(vertices), dtype=fields)
    for axis, name in enumerate("xyz"):
        rows[name] = vertices[:, axis]
        if normals is not None:
            rows["n" + name] = np.asarray(normals, np.float64)[:, axis]
    if colors is not None:
        colors = np.asarray(colors)
        rgb = colors[:, :3] if colors.dtype == np.uint8 else np.clip(colors[:, :3] * 255.0 + 0.5, 0, 255)
        for axis, name in enumerate(("red", "green", "blue")):
            rows[name] = rgb[:, axis]
    if intensity is not None:
        rows["intensity"] = intensity
    header = ["ply", "format binary_little_endian 1.0", f"element vertex {len(rows)}"]
    types = {"<f8": "double", "<f4": "float", "u1": "uchar"}
    header += [f"property {types[kind]} {name}" for name, kind in fields]
    if faces is not None:
        header += [f"element face {len(faces)}", "property list uchar int vertex_indices"]
    with Path(path).open("wb") as f:
        f.write(("\n".join(header + ["end_header"]) + "\n").encode("ascii"))
        f.write(rows.tobytes())
        if faces is not None:
            tri = np.zeros(len(faces), dtype=[("count", "u1"), ("index", "<i4", (3,))])
            tri["count"] = 3
            tri["index"] = faces
            f.write(tri.tobytes())
