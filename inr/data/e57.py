"""E57 point clouds (ASTM E2807, the exchange format of terrestrial laser scanners: Leica, FARO,
Trimble and Riegl software export it) through pye57, the `e57` extra. Read, and written
(`write_e57`: cartesian points with colours, intensities and normals, one scan per station).

A file holds one or more scans, each in its own frame with a pose (a rotation quaternion and a
translation). Every scan is read in the file's common frame (its pose applied) and the scans
are joined, as a registered project exports them. Points a scanner marks invalid (a non-zero
cartesianInvalidState or sphericalInvalidState: no return) are left out, and scans stored as
range, azimuth and elevation become x, y, z. Colours (colorRed/Green/Blue) are scaled by the
maxima the scan's header declares (255 where it declares none); a file whose scans do not all
have colours reads without them; intensities are read as stored, where every scan has them.
Normals (the surface-normals extension's `nor:normalX/Y/Z` fields, which pye57's own readers
leave out) are read through libE57's buffers, the scan's invalid points left out and its pose's
rotation applied, when every scan has them. Where every
scan is a stationary scanner's (stored as range, azimuth and elevation, or on a row and column
grid, as terrestrial scanners' software writes them), each
point's direction towards the station that scanned it (its scan pose's translation: where the
scanner stood) is given too: the side of the surface the scanner saw. Scans of cartesian points
only (a mobile mapper's, or a merged cloud) have no one station, and give none. Where a scan
stores each point's row and column in its scanner's grid (rowIndex, columnIndex), those are given
too (`inr.pointcloud.mixed` takes its neighbours from them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from ..errors import InputError, first_line

E57_FORMATS = (".e57",)
_COLOURS = ("colorRed", "colorGreen", "colorBlue")
_NORMALS = ("nor:normalX", "nor:normalY", "nor:normalZ")
_CARTESIAN = ("cartesianX", "cartesianY", "cartesianZ")


def _pye57(path: Path):
    from .. import _external

    try:
        return _external.pye57()
    except _external.MissingBackend as exc:
        raise InputError(path, f"E57 files need pye57: {exc}") from None


def read_e57(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray],
                                   Optional[np.ndarray], Optional[np.ndarray]]:
    """(points (N, 3) float64 in the file's common frame, colours (N, 3) in [0, 1] or None, normals
    (N, 3) in the common frame as stored (not normalised) or None, each point's scan's station
    (N, 3), or None, each point's scan, row and column (N, 3) int64 (row and column -1 in a scan
    without them), or None where no scan has them, intensities (N,) or None: module docstring)."""
    pye57 = _pye57(path)
    try:
        e57 = pye57.E57(str(path), mode="r")
    except Exception as exc:  # libE57Format raises its own exception type for a bad or short file
        raise InputError(path, f"is not a readable E57 file ({first_line(exc)})") from None
    try:
        count = e57.scan_count
        if count == 0:
            raise InputError(path, "holds no scans")
        points, colours, normals, stations, cells, intensities = [], [], [], [], [], []
        for i in range(count):
            header = e57.get_header(i)
            has_colours = all(c in header.point_fields for c in _COLOURS)
            has_grid = "rowIndex" in header.point_fields and "columnIndex" in header.point_fields
            has_intensity = "intensity" in header.point_fields
            try:
                scan = e57.read_scan(i, colors=has_colours, intensity=has_intensity, transform=True,
                                     ignore_missing_fields=True)
            except Exception as exc:
                raise InputError(path, f"scan {i} could not be read ({first_line(exc)})") from None
            points.append(np.stack([np.asarray(scan[k], np.float64) for k in _CARTESIAN], 1))
            fields = header.point_fields
            if all(c in fields for c in _NORMALS):
                normals.append(_scan_normals(path, e57, header, pye57, i))
            if "sphericalRange" in fields or has_grid:
                stations.append(np.asarray(header.translation, np.float64))  # the scan frame's origin: the scanner
            n = len(points[-1])
            grid = (_scan_fields(path, e57, header, pye57, i, ("rowIndex", "columnIndex"), "rows and columns").astype(np.int64)
                    if has_grid else np.full((n, 2), -1))
            cells.append(np.concatenate([np.full((n, 1), i), grid], 1))
            if has_intensity:
                intensities.append(np.asarray(scan["intensity"], np.float64))
            if has_colours:
                raw = np.stack([np.asarray(scan[c], np.float64) for c in _COLOURS], 1)
                colours.append(raw / _colour_maxima(header))
    finally:
        e57.close()
    colors = np.clip(np.concatenate(colours), 0.0, 1.0) if len(colours) == count else None
    normal = np.concatenate(normals) if len(normals) == count else None
    origins = None
    if len(stations) == count:
        origins = np.concatenate([np.broadcast_to(station, p.shape) for station, p in zip(stations, points)])
    grids = np.concatenate(cells).astype(np.int64)
    intensity = np.concatenate(intensities) if len(intensities) == count else None
    return np.concatenate(points), colors, normal, origins, grids if (grids[:, 1] >= 0).any() else None, intensity


NORMALS_URI = "http://www.libe57.org/E57_NOR_surface_normals.txt"
"""The surface-normals extension's name, under which its `nor:` fields are declared."""


def write_e57(path: Path, tmp: Path, points: np.ndarray, colors: Optional[np.ndarray] = None,
              normals: Optional[np.ndarray] = None, intensity: Optional[np.ndarray] = None,
              stations: Optional[np.ndarray] = None) -> None:
    """Write `points` (N, 3) to `tmp` as an E57 file of cartesian scans, built with libE57's nodes
    (pye57's own writer stores coordinates as float32 and has no place for normals): one scan per
    station where each point's station (N, 3) is given (posed at the station with no rotation:
    where the scanner stood), else one posed at the points' box centre; each scan's points
    relative to its pose, as float64. Colours (in [0, 1]) as 8-bit, intensities as float32 with
    their range as the scan's limits, normals as the surface-normals extension's `nor:normalX/Y/Z`
    (float32), as CloudCompare and libE57 write them."""
    pye57 = _pye57(path)
    lib = pye57.libe57
    points = np.asarray(points, np.float64)
    if stations is None:
        groups = [((points.min(0) + points.max(0)) / 2, np.arange(len(points)))]
    else:
        where, which = np.unique(np.asarray(stations, np.float64), axis=0, return_inverse=True)
        groups = [(station, np.flatnonzero(which.reshape(-1) == k)) for k, station in enumerate(where)]
    # as stored, once for all scans
    rgb = None if colors is None else np.clip(np.round(np.asarray(colors, np.float64) * 255), 0, 255).astype(np.uint8)
    shine = None if intensity is None else np.asarray(intensity, np.float32)
    normals = None if normals is None else np.asarray(normals, np.float32)
    e57 = pye57.E57(str(tmp), mode="w")
    try:
        imf = e57.image_file
        if normals is not None:
            imf.extensionsAdd("nor", NORMALS_URI)
        for k, (origin, rows) in enumerate(groups):
            fields = {f"cartesian{a}": np.ascontiguousarray(points[rows, i] - origin[i]) for i, a in enumerate("XYZ")}
            if rgb is not None:
                fields.update({c: np.ascontiguousarray(rgb[rows, i]) for i, c in enumerate(_COLOURS)})
            if shine is not None:
                fields["intensity"] = np.ascontiguousarray(shine[rows])
            if normals is not None:
                fields.update({n: np.ascontiguousarray(normals[rows, i]) for i, n in enumerate(_NORMALS)})
            scan = _scan_node(lib, imf, f"scan {k}" if stations is not None else "cloud", origin, fields)
            e57.data3d.append(scan)
            buffers = lib.VectorSourceDestBuffer()
            for name, array in fields.items():
                buffers.append(lib.SourceDestBuffer(imf, name, array, len(array), True, True))
            writer = lib.CompressedVectorNode(scan.get("points")).writer(buffers)
            writer.write(len(rows))
            writer.close()
    finally:
        e57.close()


def _scan_node(lib, imf, name: str, origin: np.ndarray, fields: dict):
    """A scan's node (before its points are written): its name, a pose at `origin` with no rotation,
    bounds and limits, and a prototype of `fields` (name: the values it will hold)."""
    import uuid

    scan = lib.StructureNode(imf)
    scan.set("guid", lib.StringNode(imf, "{%s}" % uuid.uuid4()))
    scan.set("name", lib.StringNode(imf, name))
    pose, rotation, translation = lib.StructureNode(imf), lib.StructureNode(imf), lib.StructureNode(imf)
    for axis, value in zip("wxyz", (1.0, 0.0, 0.0, 0.0)):
        rotation.set(axis, lib.FloatNode(imf, value))
    for axis, value in zip("xyz", origin):
        translation.set(axis, lib.FloatNode(imf, float(value)))
    pose.set("rotation", rotation)
    pose.set("translation", translation)
    scan.set("pose", pose)
    bounds = lib.StructureNode(imf)
    for i, axis in enumerate("xyz"):
        values = fields[f"cartesian{axis.upper()}"]
        bounds.set(f"{axis}Minimum", lib.FloatNode(imf, float(values.min() + origin[i])))
        bounds.set(f"{axis}Maximum", lib.FloatNode(imf, float(values.max() + origin[i])))
    scan.set("cartesianBounds", bounds)
    prototype = lib.StructureNode(imf)
    for name, values in fields.items():
        if values.dtype == np.uint8:  # colours
            prototype.set(name, lib.IntegerNode(imf, 0, 0, 255))
            continue
        precision = lib.FloatPrecision.E57_DOUBLE if values.dtype == np.float64 else lib.FloatPrecision.E57_SINGLE
        low, high = (-1.0, 1.0) if name in _NORMALS else (float(values.min()), float(values.max()))
        prototype.set(name, lib.FloatNode(imf, low, precision, low, high))
    if "intensity" in fields:
        limits = lib.StructureNode(imf)
        limits.set("intensityMinimum", lib.FloatNode(imf, float(fields["intensity"].min())))
        limits.set("intensityMaximum", lib.FloatNode(imf, float(fields["intensity"].max())))
        scan.set("intensityLimits", limits)
    if _COLOURS[0] in fields:
        limits = lib.StructureNode(imf)
        for c in _COLOURS:
            limits.set(f"{c}Minimum", lib.IntegerNode(imf, 0))
            limits.set(f"{c}Maximum", lib.IntegerNode(imf, 255))
        scan.set("colorLimits", limits)
    scan.set("points", lib.CompressedVectorNode(imf, prototype, lib.VectorNode(imf, True)))
    return scan


def _scan_normals(path: Path, e57, header, pye57, i: int) -> np.ndarray:
    """Scan i's normals (N, 3) in the file's common frame, its invalid points left out as pye57's
    read_scan leaves them out."""
    out = _scan_fields(path, e57, header, pye57, i, _NORMALS, "normals")
    return out @ np.asarray(header.rotation_matrix, np.float64).T if header.has_pose() else out


def _scan_fields(path: Path, e57, header, pye57, i: int, names, what: str) -> np.ndarray:
    """Scan i's fields `names` (N, len(names)) float64, read through libE57's buffers (float64: exact
    for row and column numbers, which pye57's own uint16 buffers would cut at 65,535), its invalid
    points left out as pye57's read_scan leaves them out (the invalid-state field of the scan's
    coordinates, where it has one)."""
    fields, n = header.point_fields, header.point_count
    state = "cartesianInvalidState" if all(c in fields for c in _CARTESIAN) else "sphericalInvalidState"
    arrays = {name: np.empty(n, np.float64) for name in names}
    if state in fields:
        arrays[state] = np.empty(n, np.int8)
    try:
        buffers = pye57.libe57.VectorSourceDestBuffer()
        for name, array in arrays.items():
            buffers.append(pye57.libe57.SourceDestBuffer(e57.image_file, name, array, n, True, True))
        header.points.reader(buffers).read()
    except Exception as exc:
        raise InputError(path, f"scan {i}'s {what} could not be read ({first_line(exc)})") from None
    out = np.stack([arrays[name] for name in names], 1)
    return out[arrays[state] == 0] if state in arrays else out


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
