"""Point clouds as text: a line per point, as scanners and tools export them (.xyz, .txt, .asc,
.csv, and Leica's .pts).

Numbers are split by spaces or tabs, commas or semicolons (as the first point's line has them).
Comment lines (# or //) and blank lines are skipped. A header naming the columns, either a line
of words before the first point (`X,Y,Z,Intensity`) or a comment line that names as many
columns as the points have (CloudCompare's `//X Y Z R G B Nx Ny Nz`), says where x y z, the
colours (R G B or Red Green Blue), the normals (Nx Ny Nz) and the intensity (Intensity, or
CloudCompare's Scalar_Intensity) are. Without one, x y z are the
first three columns and further columns are ignored, since the file does not say whether they
are colours, intensity or normals; a .pts file is the exception, whose format fixes them
(x y z, then intensity, then R G B). A line holding a single whole number gives the count of
the points that follow (.pts files start with one, once per scan); the points must add up to it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from ..errors import InputError

TEXT_FORMATS = (".xyz", ".txt", ".asc", ".csv", ".pts")
TEXT_WRITE_FORMATS = (".xyz", ".txt", ".asc", ".csv")
COMMENTS = ("#", "//")
_COORDS = ("x", "y", "z")
_COLOURS = (("r", "g", "b"), ("red", "green", "blue"))
_NORMALS = (("nx", "ny", "nz"), ("normal_x", "normal_y", "normal_z"), ("normalx", "normaly", "normalz"))
INTENSITY_NAMES = ("intensity", "scalar_intensity")
"""The names (any case) an intensity column or property goes by (CloudCompare adds `scalar_`)."""
_HEAD_BYTES = 65536


def _names(line: str) -> List[str]:
    """The column names of a header line, lower case, without comment marks or quotes."""
    line = line.strip().lstrip("#/").strip()
    return [t.strip("\"'").lower() for t in re.split(r"[,;\s]+", line) if t.strip("\"'")]


def _columns(names: List[str], *spellings) -> Optional[List[int]]:
    for spelling in spellings:
        if all(n in names for n in spelling):
            return [names.index(n) for n in spelling]
    return None


def file_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a file."""
    with path.open("rb") as f:
        return f.read(size)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def read_text_cloud(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """(points (N, 3) float64, colours in [0, 1] or None, normals or None, intensities (N,) or None)
    of a text point cloud."""
    kind = path.suffix[1:].upper()
    kind = ("an " if kind in ("XYZ", "ASC") else "a ") + kind
    head = file_head(path, _HEAD_BYTES)
    try:
        lines = head[: head.rfind(b"\n") + 1 or len(head)].decode("utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise InputError(path, f"is not {kind} point cloud (not text)") from None
    rows = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(COMMENTS)]
    counted = bool(rows) and lines[rows[0]].strip().isdigit()
    at = int(counted)
    header = None
    if at < len(rows) and not all(_is_number(t) for t in re.split(r"[,;\s]+", lines[rows[at]].strip()) if t):
        header, at = lines[rows[at]], at + 1  # a line of column names
    if at >= len(rows):
        return np.zeros((0, 3)), None, None, None
    point_line = lines[rows[at]]
    delimiter = "," if "," in point_line else ";" if ";" in point_line else None
    width = len([t for t in point_line.split(delimiter) if t.strip()])
    before = [line for line in lines[: rows[0]] if line.strip()]
    if header is None and before and len(_names(before[-1])) == width and _columns(_names(before[-1]), _COORDS):
        header = before[-1]  # a comment line naming each column
    try:
        if counted:
            data, declared = _counted_rows(path, delimiter, header, width)
        else:  # usecols: a delimiter that ends each line (1,2,3,) adds no empty column
            data = np.loadtxt(path, delimiter=delimiter, comments=COMMENTS, skiprows=rows[at], ndmin=2,
                              dtype=np.float64, encoding="utf-8-sig", usecols=range(width))
            declared = None
    except ValueError as exc:
        raise InputError(path, f"is not {kind} point cloud (expected lines of 3 or more numbers: {exc})") from None
    if not data.size:
        return np.zeros((0, 3)), None, None, None
    if declared is not None and len(data) != declared:
        raise InputError(path, f"holds {len(data)} points where its count lines declare {declared} (cut short?)")
    if data.shape[1] < 3:
        raise InputError(path, f"holds {data.shape[1]} numbers per line; {kind} point cloud needs x y z")
    coords, colours, normals, intensity = [0, 1, 2], None, None, None
    names = None if header is None else _names(header)
    if names is not None and len(names) == data.shape[1] and _columns(names, _COORDS):
        coords = _columns(names, _COORDS)
        colours, normals = _columns(names, *_COLOURS), _columns(names, *_NORMALS)
        intensity = _columns(names, *[(n,) for n in INTENSITY_NAMES])
    elif path.suffix.lower() == ".pts" and data.shape[1] in (4, 6, 7):  # x y z [intensity] [r g b]
        colours = list(range(data.shape[1] - 3, data.shape[1])) if data.shape[1] > 4 else None
        intensity = [3] if data.shape[1] != 6 else None
    rgb = None
    if colours is not None:
        rgb = data[:, colours]
        rgb = rgb / 255.0 if rgb.max(initial=0) > 1 else rgb
    return (data[:, coords], rgb, None if normals is None else data[:, normals],
            None if intensity is None else data[:, intensity[0]])


def _counted_rows(path: Path, delimiter: Optional[str], header: Optional[str], width: int) -> Tuple[np.ndarray, int]:
    """The points of a file whose count lines (a single whole number) head each block, and the
    sum of those counts."""
    declared, points = 0, []
    with path.open(encoding="utf-8-sig") as f:
        for line in f:
            text = line.strip()
            if not text or text.startswith(COMMENTS) or (header is not None and line.rstrip("\r\n") == header):
                continue
            if text.isdigit():
                declared += int(text)
            else:
                points.append(text)
    if not points:
        return np.zeros((0, 3)), declared
    return np.loadtxt(points, delimiter=delimiter, ndmin=2, dtype=np.float64, usecols=range(width)), declared


def write_text_cloud(tmp: Path, suffix: str, points: np.ndarray, colors: Optional[np.ndarray],
                     normals: Optional[np.ndarray], intensity: Optional[np.ndarray] = None) -> None:
    """A line per point, 15 significant digits (float64 detail far from the origin). XYZ holds
    x y z only; .txt and .asc name their columns in a CloudCompare header (`//X Y Z R G B Nx Ny
    Nz Intensity`, colours 0-255), .csv in a first line of names with commas between the numbers."""
    columns, names, formats = [np.asarray(points, np.float64)], ["X", "Y", "Z"], ["%.15g"] * 3
    if suffix != ".xyz":
        if colors is not None:
            columns.append(np.round(np.clip(np.asarray(colors, np.float64), 0, 1) * 255))
            names, formats = names + ["R", "G", "B"], formats + ["%d"] * 3
        if normals is not None:
            columns.append(np.asarray(normals, np.float64))
            names, formats = names + ["Nx", "Ny", "Nz"], formats + ["%.8g"] * 3
        if intensity is not None:
            columns.append(np.asarray(intensity, np.float64)[:, None])
            names, formats = names + ["Intensity"], formats + ["%.8g"]
    data = np.concatenate(columns, 1)
    if suffix == ".xyz":
        np.savetxt(tmp, data, fmt=formats)
    elif suffix == ".csv":
        np.savetxt(tmp, data, fmt=formats, delimiter=",", header=",".join(names), comments="")
    else:
        np.savetxt(tmp, data, fmt=formats, header="//" + " ".join(names), comments="")
