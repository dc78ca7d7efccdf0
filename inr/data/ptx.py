"""PTX point clouds (Leica's text export of terrestrial laser scans; Cyclone, Register 360 and
most scanner software write it). Read only, with numpy.

A file holds one or more scans, each a header and a grid of points:

    columns
    rows
    sx sy sz            the scanner's position, registered (in the common frame)
    three lines         the scanner's axes, registered (not needed here)
    four lines of four  a 4x4 transform, rotation rows over a translation row (r11 r12 r13 0 ...
                        tx ty tz 1): a point p of the scan goes to p R + t in the common frame
    columns x rows lines: x y z intensity [r g b]

Cells where the scanner had no return hold 0 0 0 and are left out. Colours are 0-255 and kept
only when every scan has them; intensities (most writers: 0-1) are kept as written. Each point's
scanner's position is returned too: the side of the surface the scanner saw (`read_scan`'s
sides), and where its mixed pixels lie
(`inr.pointcloud.mixed`), and its cell: its scan, row and column (the grid is stored a column at
a time: a column's rows, then the next column's)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from ..errors import InputError

PTX_FORMATS = (".ptx",)


def read_ptx(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """(points (N, 3) float64 in the common frame, colours (N, 3) in [0, 1] or None, each point's
    scanner's position (N, 3), each point's scan, row and column (N, 3) int64, intensities (N,))."""
    points: List[np.ndarray] = []
    intensities: List[np.ndarray] = []
    colours: List[Optional[np.ndarray]] = []
    stations: List[np.ndarray] = []
    cells: List[np.ndarray] = []
    with Path(path).open(encoding="utf-8-sig") as f:
        while True:
            header = _header(f, path, len(points) + 1)
            if header is None:
                break
            count, rows, station, transform = header
            try:
                grid = np.loadtxt(itertools.islice(f, count), ndmin=2, dtype=np.float64) if count else np.zeros((0, 4))
            except ValueError as exc:
                raise InputError(path, f"scan {len(points) + 1}: a point line is not 4 or 7 numbers ({exc})") from None
            if len(grid) < count:
                raise InputError(path, f"scan {len(points) + 1} holds {len(grid)} of the {count} points its header declares (cut short?)")
            if grid.shape[1] not in (4, 7):
                raise InputError(path, f"scan {len(points) + 1}: {grid.shape[1]} numbers per point; PTX has 4 or 7 (x y z intensity [r g b])")
            seen = np.any(grid[:, :3] != 0, axis=1)  # 0 0 0: no return
            p = grid[seen, :3] @ transform[:3, :3] + transform[3, :3]
            points.append(p)
            intensities.append(grid[seen, 3])
            colours.append(grid[seen, 4:7] / 255.0 if grid.shape[1] == 7 else None)
            stations.append(np.broadcast_to(np.asarray(station, np.float64), p.shape))
            at = np.flatnonzero(seen)
            cells.append(np.stack([np.full(len(at), len(cells)), at % max(rows, 1), at // max(rows, 1)], 1))
    if not points:
        return np.zeros((0, 3)), None, np.zeros((0, 3)), np.zeros((0, 3), np.int64), np.zeros(0)
    rgb = None if any(c is None for c in colours) else np.clip(np.concatenate(colours), 0.0, 1.0)
    return (np.concatenate(points), rgb, np.concatenate(stations), np.concatenate(cells).astype(np.int64),
            np.concatenate(intensities))


def _header(f, path: Path, scan: int):
    """(points in the grid, its rows, the scanner's position (3,), the 4x4 transform) of the next scan, or
    None at the end of the file."""
    lines = []
    for line in f:
        if line.strip() or lines:
            lines.append(line.split())
        if len(lines) == 10:
            break
    if not lines:
        return None
    widths = [len(t) for t in lines]
    if widths != [1, 1, 3, 3, 3, 3, 4, 4, 4, 4]:
        raise InputError(path, f"scan {scan}: not a PTX header (columns, rows, the scanner's position and axes, "
                         "a 4x4 transform: lines of 1, 1, 3, 3, 3, 3, 4, 4, 4, 4 numbers)")
    try:
        columns, rows = int(lines[0][0]), int(lines[1][0])
        station = np.array(lines[2], np.float64)
        transform = np.array(lines[6:10], np.float64)
    except ValueError:
        raise InputError(path, f"scan {scan}: its header holds a value that is not a number") from None
    if columns < 0 or rows < 0:
        raise InputError(path, f"scan {scan}: a grid of {columns} x {rows} points")
    return columns * rows, rows, station, transform
