"""E57 point clouds (ASTM E2807, the exchange format of terrestrial laser scanners: Leica, FARO,
Trimble and Riegl software export it) through pye57, the `e57` extra. Read only.

A file holds one or more scans, each in its own frame with a pose (a rotation quaternion and a
translation). Every scan is read in the file's common frame (its pose applied) and the scans
are joined, as a registered project exports them. Points a scanner marks invalid (a non-zero
cartesianInvalidState or sphericalInvalidState: no return) are left out, and scans stored as
range, azimuth and elevation become x, y, z. Colours (colorRed/Green/Blue) are scaled by the
maxima the scan's header declares (255 where it declares none); a file whose scans do not all
have colours reads without them. Normals (the `nor:` extension) are not read: pye57 does not
read that field. Where every scan is a stationary scanner's (stored as range, azimuth and
elevation, or on a row and column grid, as terrestrial scanners' software writes them), each
point's direction towards the station that scanned it (its scan pose's translation: where the
scanner stood) is given too: the side of the surface the scanner saw. Scans of cartesian points
only (a mobile mapper's, or a merged cloud) have no one station, and give none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from ..errors import InputError, first_line

E57_FORMATS = (".e57",)
_COLOURS = ("colorRed", "colorGreen", "colorBlue")


def _pye57(path: Path):
    from .. import _external

    try:
        return _external.pye57()
    except _external.MissingBackend as exc:
        raise InputError(path, f"E57 files need pye57: {exc}") from None


def read_e57(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """(points (N, 3) float64 in the file's common frame, colours (N, 3) in [0, 1] or None, unit
    vectors (N, 3) from each point towards its scan's station, or None: module docstring)."""
    pye57 = _pye57(path)
    try:
        e57 = pye57.E57(str(path), mode="r")
    except Exception as exc:  # libE57Format raises its own exception type for a bad or short file
        raise InputError(path, f"is not a readable E57 file ({first_line(exc)})") from None
    try:
        count = e57.scan_count
        if count == 0:
            raise InputError(path, "holds no scans")
        points, colours, stations = [], [], []
        for i in range(count):
            header = e57.get_header(i)
            has_colours = all(c in header.point_fields for c in _COLOURS)
            try:
                scan = e57.read_scan(i, colors=has_colours, transform=True, ignore_missing_fields=True)
            except Exception as exc:
                raise InputError(path, f"scan {i} could not be read ({first_line(exc)})") from None
            points.append(np.stack([np.asarray(scan[k], np.float64) for k in ("cartesianX", "cartesianY", "cartesianZ")], 1))
            fields = header.point_fields
            if "sphericalRange" in fields or ("rowIndex" in fields and "columnIndex" in fields):
                stations.append(np.asarray(header.translation, np.float64))  # the scan frame's origin: the scanner
            if has_colours:
                raw = np.stack([np.asarray(scan[c], np.float64) for c in _COLOURS], 1)
                colours.append(raw / _colour_maxima(header))
    finally:
        e57.close()
    colors = np.clip(np.concatenate(colours), 0.0, 1.0) if len(colours) == count else None
    towards = None
    if len(stations) == count:
        from .orientation import towards_station

        towards = np.concatenate([towards_station(p, station) for station, p in zip(stations, points)])
    return np.concatenate(points), colors, towards


def _colour_maxima(header) -> np.ndarray:
    """The scan header's colorRed/Green/BlueMaximum (255 each where it declares none)."""
    out = np.full(3, 255.0)
    if "colorLimits" in header.scan_fields:
        limits = header["colorLimits"]
        for j, c in enumerate(_COLOURS):
            name = f"{c}Maximum"
            if limits.isDefined(name) and float(limits[name].value()) > 0:
                out[j] = float(limits[name].value())
    return out
