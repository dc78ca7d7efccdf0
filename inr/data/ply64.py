"""Binary PLY files with float64 coordinates, for geometry far from the origin (a georeferenced
scan, `pointclouds.float32_loses`). trimesh, which the toolkit writes PLY files with, stores
vertices as float32 only, and open3d (which writes doubles) is an optional extra; this writer
keeps such files exact on a plain install. trimesh and open3d read what it writes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np


def write_ply_float64(path: Path, vertices: np.ndarray, faces: Optional[np.ndarray] = None,
                      colors: Optional[np.ndarray] = None, normals: Optional[np.ndarray] = None) -> None:
    """Write a binary little-endian PLY: vertices x y z (double), then normals nx ny nz (double)
    and colours red green blue (uchar, from [0, 1] floats or 0-255 integers) when given, then
    triangles (uchar count, int vertex indices) when `faces` is an (F, 3) array."""
    vertices = np.asarray(vertices, np.float64)
    fields = [("x", "<f8"), ("y", "<f8"), ("z", "<f8")]
    if normals is not None:
        fields += [("nx", "<f8"), ("ny", "<f8"), ("nz", "<f8")]
    if colors is not None:
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
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
    header = ["ply", "format binary_little_endian 1.0", f"element vertex {len(rows)}"]
    header += [f"property {'double' if kind == '<f8' else 'uchar'} {name}" for name, kind in fields]
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
