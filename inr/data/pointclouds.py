"""Point-cloud files: PLY (ascii/binary) and PCD through open3d when it is installed; without
it PLY through trimesh (PCD needs open3d); PLY far from the origin written with float64
coordinates by `ply64` either way; NPY and text clouds (XYZ, TXT, ASC, CSV, PTS:
`text_clouds.py`) through numpy; LAS and LAZ through laspy (`las.py`); E57 through pye57
(`e57.py`); PTX (read only) through numpy (`ptx.py`).

Every problem with an input is an InputError naming the file: missing, unknown format, not a
point cloud, empty, a single point, NaN/Inf coordinates, 2D data, all points identical, and
exact duplicate points (unless the caller drops them).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

import numpy as np

from ..errors import InputError
from .e57 import E57_FORMATS, read_e57, write_e57
from .las import LAS_FORMATS, LasRecords, read_las, write_las
from .ply64 import write_ply_float64
from .ptx import PTX_FORMATS, read_ptx
from .text_clouds import INTENSITY_NAMES, TEXT_FORMATS, TEXT_WRITE_FORMATS, file_head, read_text_cloud, write_text_cloud

FORMATS = (".ply", ".pcd", ".npy") + TEXT_FORMATS + LAS_FORMATS + E57_FORMATS + PTX_FORMATS
WRITE_FORMATS = tuple(f for f in FORMATS
                      if (f not in TEXT_FORMATS or f in TEXT_WRITE_FORMATS) and f not in PTX_FORMATS)
INTENSITY_FORMATS = tuple(f for f in WRITE_FORMATS if f not in (".npy", ".xyz"))
"""The formats `write_cloud` writes intensities to."""


def _open3d(path: Optional[Path], what: str = "needs open3d"):
    from .. import _external

    try:
        return _external.open3d()
    except _external.MissingBackend as exc:
        raise InputError(path, f"{what}: {exc}") from None


def _has_open3d() -> bool:
    from .. import _external

    return _external.has_open3d()


def read_cloud(path, duplicates: str = "error") -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """(points (N, 3) float64, colours (N, 3) in [0, 1] or None) of a point-cloud file.

    duplicates: 'error' (an InputError when two points are equal) or 'drop' (keep the first).
    The file's normals are not read (zero or NaN ones, as some writers leave, are no error here).
    """
    points, colors, _ = read_oriented_cloud(path, duplicates, bad_normals="ignore")
    return points, colors


def read_oriented_cloud(path, duplicates: str = "error", bad_normals: str = "error") -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """`read_cloud` plus the file's normals ((N, 3) float64, or None when it has none: text
    clouds without Nx Ny Nz columns named in a header, NPY with fewer than 9 columns, PLY/PCD
    without nx ny nz, LAS/LAZ without NormalX-Z extra dimensions, E57, PTX).
    NPY columns: x y z [r g b [nx ny nz]] (with normals, all-zero colours read as none). bad_normals: 'error' (an InputError when a normal is
    zero, NaN or infinite, as some writers leave unknown ones) or 'ignore' (then those rows NaN, and
    None when no normal is known)."""
    return _read(path, duplicates, bad_normals)[:3]


class Scan(NamedTuple):
    """A scan as `read_scan` reads it (for `inr.data.surfaces.estimate_normals`'s `sides_from`,
    `towards` and `up`)."""

    points: np.ndarray
    colors: Optional[np.ndarray]
    normals: Optional[np.ndarray]
    """The file's normals, unit length; rows NaN where a normal is unknown (zero, NaN or infinite in
    the file, as some writers leave them); None when the file has none or knows none."""
    towards: Optional[np.ndarray]
    """For an E57 or PTX file, or a PCD whose viewpoint is a station (`pcd_station`), the unit
    vectors (N, 3) from each point towards the scanner station that saw it (its scan's pose):
    the side of the surface the station saw; else None."""
    up: Optional[np.ndarray]
    """The direction that is up where the format says so: +z for LAS/LAZ (the elevation), else None."""
    stations: Optional[np.ndarray] = None
    """Where `towards` is known, the position (N, 3) of the station that saw each point (for
    `inr.pointcloud.mixed`); else None."""
    cells: Optional[np.ndarray] = None
    """Where the file stores its scans as grids (PTX; E57 with rowIndex and columnIndex; an organized
    PCD), each point's scan, row and column (N, 3) int64 (row and column -1 in a scan stored without
    them; for `inr.pointcloud.mixed`); else None."""
    intensity: Optional[np.ndarray] = None
    """Each point's return intensity (N,) as the file stores it (LAS 0-65535, PTX and most E57 0-1,
    Leica's PTS -2048 to 2047; a PLY, PCD or text cloud's `intensity` or `scalar_intensity`), where
    the file has them; else None."""
    records: Optional[LasRecords] = None
    """A LAS/LAZ file's point records (classification, returns, GPS time, ...: `LasRecords`), for a
    LAS file written from this scan's points; else None."""
    withheld: int = 0
    """How many points of a LAS/LAZ file were left out as withheld (`read_las`)."""

    def subset(self, keep: np.ndarray) -> "Scan":
        """The scan of the points `keep` selects (a mask or indices); `up` is a direction, kept."""
        return self._replace(**{f: getattr(self, f)[keep] for f in ("points", "colors", "normals", "towards", "stations", "cells",
                                                                     "intensity", "records") if getattr(self, f) is not None})

    @property
    def complete_normals(self) -> Optional[np.ndarray]:
        """The file's normals where it knows every point's, else None."""
        return self.normals if self.normals is not None and not np.isnan(self.normals[:, 0]).any() else None


def read_scan(path, duplicates: str = "error", records: bool = False) -> Scan:
    """`read_oriented_cloud` with zero or NaN normals passed over (NaN rows; the others kept), and
    what the file says about the sides of its normals (`Scan`); a LAS file's point records only
    with `records` (they hold 20-60 bytes a point)."""
    from .orientation import towards_station

    points, colors, normals, stations, cells, intensity, kept, withheld = _read(path, duplicates, "ignore")
    up = np.array([0.0, 0.0, 1.0]) if Path(path).suffix.lower() in LAS_FORMATS else None
    towards = None if stations is None else towards_station(points, stations)
    return Scan(points, colors, normals, towards, up, stations, None if stations is None else cells, intensity,
                kept if records else None, withheld)


def without_mixed(scan: Scan, keep: bool = False) -> Tuple[Scan, int]:
    """(the scan without its mixed pixels, how many were left out): a stationary scanner's scan (one
    whose `stations` are known: E57, PTX, a PCD with its viewpoint) loses the returns that blend two
    surfaces at a depth edge (`inr.pointcloud.mixed`); other scans, or keep, come back as they are."""
    if keep or scan.stations is None:
        return scan, 0
    from ..pointcloud.mixed import mixed_pixels

    mixed = mixed_pixels(scan.points, scan.stations, scan.cells)
    if not mixed.any():
        return scan, 0
    return scan.subset(~mixed), int(mixed.sum())


def _read(path, duplicates: str, bad_normals: str):
    """(points, colours, normals, each point's scanner station (E57, PTX, PCD) or None, each point's
    scan, row and column in its scanner's grid (PTX, E57, an organized PCD) or None, intensities
    (`Scan.intensity`) or None, a LAS file's point records or None, how many withheld points a LAS
    file had, left out): `read_oriented_cloud`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file")
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(path, f"unsupported point-cloud format {suffix or '(none)'}; use one of {', '.join(FORMATS)}")
    colors = normals = stations = cells = intensity = records = None
    withheld = 0
    if suffix == ".npy":
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(path, f"is not a readable .npy array ({exc})") from None
        if data.ndim != 2 or not np.issubdtype(data.dtype, np.number):
            raise InputError(path, f"expected an (N, 3) numeric array, got shape {data.shape} of {data.dtype}")
        if data.shape[1] < 3:
            raise InputError(path, f"holds {data.shape[1]}D points; point clouds need 3 coordinates (x, y, z)")
        points = data[:, :3].astype(np.float64)
        if data.shape[1] >= 6:
            c = data[:, 3:6].astype(np.float64)
            colors = c / 255.0 if c.max(initial=0) > 1 else c
        if data.shape[1] >= 9:
            normals = data[:, 6:9].astype(np.float64)
            if not colors.any():  # the columns write_cloud fills when a cloud has normals and no colours
                colors = None
    else:
        if suffix == ".ply" and file_head(path, 3) != b"ply":
            raise InputError(path, "is not a PLY point cloud")
        counts, props = ply_header(path) if suffix == ".ply" else ({}, {})
        declared = counts.get("vertex")
        if suffix in TEXT_FORMATS:
            points, colors, normals, intensity = read_text_cloud(path)
        elif suffix == ".pcd":
            points, colors, normals, cells, intensity = _read_pcd(path)
            station = pcd_station(path)
            if station is not None:
                stations = np.broadcast_to(station, points.shape)
        elif suffix in LAS_FORMATS:
            points, colors, normals, intensity, records, withheld = read_las(path)
        elif suffix in E57_FORMATS:
            points, colors, normals, stations, cells, intensity = read_e57(path)
        elif suffix in PTX_FORMATS:
            points, colors, stations, cells, intensity = read_ptx(path)
        elif declared == 0:
            points = np.zeros((0, 3))  # open3d calls that a failed read
        elif _has_open3d() and not _open3d_misreads(props):
            o3d = _open3d(path)
            with _native_read(path, suffix):
                cloud = o3d.io.read_point_cloud(str(path), format=suffix[1:], print_progress=False)
            points = np.asarray(cloud.points, dtype=np.float64)
            if cloud.has_colors():
                colors = np.asarray(cloud.colors, dtype=np.float64)
            if cloud.has_normals():
                normals = np.asarray(cloud.normals, dtype=np.float64)
            intensity = _ply_intensity(path, props, len(points))
        else:
            points, colors, normals, intensity = _read_without_open3d(path, declared)
    check_points(points, path, duplicates)
    if normals is not None:
        length = np.linalg.norm(normals, axis=1)
        good = np.isfinite(length) & (length >= 1e-12)
        if good.all():
            normals = normals / length[:, None]
        elif bad_normals == "error":
            raise InputError(path, f"{int((~good).sum())} of {len(points)} normals are zero, NaN or infinite")
        elif good.any():  # unknown ones NaN, the others kept
            normals = np.where(good[:, None], normals / np.where(good, length, 1.0)[:, None], np.nan)
        else:
            normals = None
    if duplicates == "drop":
        _, first = np.unique(points, axis=0, return_index=True)
        keep = np.sort(first)
        points = points[keep]
        colors, normals, stations, cells, intensity, records = (None if a is None else a[keep]
                                                                for a in (colors, normals, stations, cells, intensity, records))
    return points, colors, normals, stations, cells, intensity, records, withheld


_READ_FAILED = re.compile(r"failed|error|unexpected end", re.IGNORECASE)


@contextlib.contextmanager
def _native_read(path: Path, suffix: str):
    """Runs an open3d read with the process's stdout and stderr caught. open3d reports a file it
    cannot parse (a PCD header it does not understand, a PLY cut short) only by printing, on
    stdout (its own warnings) and stderr (RPly's), and returns a cloud anyway: a truncated PLY
    comes back with its full point count, the missing points zero. A printed failure becomes an
    InputError naming the file; anything else printed is passed on to stderr."""
    lines: List[str] = []
    with _caught_output(lines):
        yield
    messages = [m for m in dict.fromkeys(_plain(line) for line in lines) if m]
    failures = [m for m in messages if _READ_FAILED.search(m)]
    if failures:
        detail = "; ".join(failures[:3])
        raise InputError(path, f"is not a readable {suffix[1:].upper()} point cloud, or is cut short (open3d: {detail})")
    for m in messages:
        print(m, file=sys.stderr)


def _plain(line: str) -> str:
    """An open3d/RPly message without colour codes, its [Open3D WARNING] tag and trailing dots."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
    return re.sub(r"^\[Open3D [A-Z]+\]\s*", "", line).rstrip(".")


@functools.lru_cache(maxsize=1)
def _c_library():
    """The process's C library (to flush C's stdio buffers), or None where ctypes cannot name it."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # Windows names no library for None
        return None


@contextlib.contextmanager
def _caught_output(lines: List[str]):
    """Collects, line by line, what is printed while the block runs: by native code to file
    descriptors 1 and 2 (RPly), and through Python's sys.stdout/sys.stderr (open3d's logger
    prints there), whatever those are at the time. The descriptors are the process's: what
    other threads print meanwhile is caught too, and may be taken for a read failure."""
    libc = _c_library()

    def flush_all():
        sys.stdout.flush()
        sys.stderr.flush()
        if libc is not None:
            libc.fflush(None)

    flush_all()
    saved = [os.dup(1), os.dup(2)]
    python = io.StringIO()
    with tempfile.TemporaryFile() as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            with contextlib.redirect_stdout(python), contextlib.redirect_stderr(python):
                yield
        finally:
            flush_all()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())
            lines.extend(python.getvalue().splitlines())


def check_points(points: np.ndarray, path, duplicates: str = "error") -> None:
    if points.ndim != 2 or points.shape[1] != 3:
        raise InputError(path, f"expected (N, 3) points, got shape {points.shape}")
    n = len(points)
    if n == 0:
        raise InputError(path, "holds no points (empty, or not a point-cloud file)")
    if n == 1:
        raise InputError(path, "holds a single point; a cloud needs at least 2")
    bad = ~np.isfinite(points).all(axis=1)
    if bad.any():
        raise InputError(path, f"{int(bad.sum())} of {n} points have NaN or infinite coordinates (first: point {int(np.argmax(bad))})")
    if (points == points[0]).all():
        raise InputError(path, f"all {n} points are identical")
    if duplicates == "error":
        dup = n - len(np.unique(points, axis=0))
        if dup:
            raise InputError(path, f"{dup} of {n} points repeat an earlier point exactly; remove them (--drop-duplicates)")


def check_write_format(path: Path) -> None:
    """An InputError unless `path`'s suffix is one `write_cloud` writes."""
    if path.suffix.lower() not in WRITE_FORMATS:
        raise InputError(path, f"unsupported point-cloud format {path.suffix or '(none)'} to write; use one of {', '.join(WRITE_FORMATS)}")


def write_cloud(path, points: np.ndarray, colors: Optional[np.ndarray] = None, normals: Optional[np.ndarray] = None,
                intensity: Optional[np.ndarray] = None, records: Optional[LasRecords] = None,
                stations: Optional[np.ndarray] = None) -> None:
    """Write atomically (a temporary file in the same folder, then renamed). Normals go to
    PLY/PCD (nx ny nz; PLY through open3d, or trimesh without it, or with float64
    coordinates where float32 would round them: `float32_loses`), LAS/LAZ (extra dimensions NormalX-Z), TXT/ASC/CSV
    (named columns) and NPY (columns 7-9, colours then being 4-6, zero when there are none);
    XYZ has no place for them (nor for colours). Intensities (N,) go to PLY and PCD (a float
    `intensity` property; PLY then through `ply64`), LAS/LAZ (16-bit: `las_intensity`) and
    TXT/ASC/CSV (an Intensity column); NPY and XYZ have no place for them. `records`, a LAS file's
    point records (one per point), go to LAS/LAZ (`write_las`: their format, colours and
    intensities); other formats leave them out. E57 (`write_e57`) takes colours, normals and
    intensities, and a scan per station where each point's station (N, 3) is given. PTS and PTX
    files are read, not written."""
    path = Path(path)
    suffix = path.suffix.lower()
    check_write_format(path)
    if not path.parent.is_dir():
        raise InputError(path.parent, "no such folder")
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        if suffix == ".npy":
            cols = [points] if colors is None and normals is None else [
                points, np.zeros_like(points) if colors is None else colors]
            data = np.concatenate(cols + ([] if normals is None else [normals]), 1)
            with tmp.open("wb") as f:
                np.save(f, data.astype(np.float64))  # float32 would round coordinates far from the origin
        elif suffix == ".pcd":
            _write_pcd(path, tmp, points, colors, normals, intensity)
        elif suffix in E57_FORMATS:
            write_e57(path, tmp, points, colors, normals, intensity, stations)
        elif suffix in LAS_FORMATS:
            write_las(path, tmp, points, colors, normals, intensity, records)
        elif suffix in TEXT_WRITE_FORMATS:
            write_text_cloud(tmp, suffix, points, colors, normals, intensity)
        elif suffix == ".ply" and (intensity is not None or float32_loses(points)):
            double = intensity is None or float32_loses(points)  # without intensities only float32_loses led here
            write_ply_float64(tmp, points, colors=colors, normals=normals, intensity=intensity, double=double)
        elif suffix == ".ply" and not _has_open3d():
            _write_without_open3d(tmp, np.asarray(points, np.float64), colors, normals)
        else:
            o3d = _open3d(path)
            cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
            if colors is not None:
                cloud.colors = o3d.utility.Vector3dVector(np.asarray(colors, np.float64))
            if normals is not None:
                cloud.normals = o3d.utility.Vector3dVector(np.asarray(normals, np.float64))
            if not o3d.io.write_point_cloud(str(tmp), cloud, format=suffix[1:]):
                raise InputError(path, "open3d could not write it")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read_pcd(path: Path):
    """(points, colours or None, normals or None, each point's scan (0), row and column where the
    cloud is organized (HEIGHT > 1: an image's pixels, row by row) or None, intensities or None) of a PCD file, through
    open3d's tensor reader: the legacy one misreads PCD files whose coordinates are stored as
    doubles (F 8), which georeferenced scans need."""
    o3d = _open3d(path, "PCD files need open3d")
    with _native_read(path, ".pcd"):
        cloud = o3d.t.io.read_point_cloud(str(path))
    fields = set(cloud.point)
    if "positions" not in fields:
        return np.zeros((0, 3)), None, None, None, None
    points = cloud.point.positions.numpy().astype(np.float64)
    colors = normals = None
    if "colors" in fields:
        raw = cloud.point.colors.numpy()
        colors = raw.astype(np.float64) / (255.0 if np.issubdtype(raw.dtype, np.integer) else 1.0)
    if "normals" in fields:
        normals = cloud.point.normals.numpy().astype(np.float64)
    intensity = _intensity_of(cloud)
    cells = None
    header = _pcd_header(path)
    width, height = (header.get("WIDTH") or ["0"])[0], (header.get("HEIGHT") or ["1"])[0]
    if width.isdigit() and height.isdigit() and int(height) > 1 and int(width) * int(height) == len(points):
        at = np.arange(len(points))
        cells = np.stack([np.zeros_like(at), at // int(width), at % int(width)], 1).astype(np.int64)
    returned = ~np.isnan(points).all(1)  # PCL's organized clouds (depth cameras) mark pixels with no return NaN
    if not returned.all():
        points, colors, normals, cells, intensity = (None if a is None else a[returned]
                                                     for a in (points, colors, normals, cells, intensity))
    return points, colors, normals, cells, intensity


def _intensity_of(cloud) -> Optional[np.ndarray]:
    """The (N,) float64 intensities of an open3d tensor point cloud (an attribute named as
    INTENSITY_NAMES, any case), or None."""
    name = next((k for k in cloud.point if k.lower() in INTENSITY_NAMES), None)
    return None if name is None else cloud.point[name].numpy().astype(np.float64).reshape(len(cloud.point.positions), -1)[:, 0]


def _ply_intensity(path: Path, props: dict, count: int) -> Optional[np.ndarray]:
    """A PLY file's intensities (`Scan.intensity`), which open3d's legacy reader leaves out, through its
    tensor reader; None where the header declares none."""
    if not any(p.lower() in INTENSITY_NAMES for p in props):
        return None
    with _native_read(path, ".ply"):
        intensity = _intensity_of(_open3d(path).t.io.read_point_cloud(str(path)))
    if intensity is None or len(intensity) != count:
        raise InputError(path, "its intensities could not be read")
    return intensity


PCD_DEFAULT_VIEWPOINT = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)


def _pcd_header(path: Path) -> dict:
    """A PCD header's fields (upper-case names: their values split at spaces), up to DATA."""
    values = {}
    for line in file_head(path, 65536).decode("latin-1").splitlines():
        key, _, rest = line.strip().partition(" ")
        if key.upper() == "DATA":
            break
        values[key.upper()] = rest.split()
    return values


def pcd_station(path: Path) -> Optional[np.ndarray]:
    """The sensor's position (3,) a PCD header gives where it is one, else None. VIEWPOINT (tx ty
    tz qw qx qy qz) is the acquisition viewpoint, its translation the sensor's place among the
    points (PCL turns normals towards it); every writer writes one, the identity by default.
    Taken where the cloud is organized (HEIGHT > 1: one depth image, from one sensor, as depth
    cameras' drivers save them) or the viewpoint was set (not the identity); an unorganized cloud
    with the identity says nothing of where it was seen from (a merged or cut-out scan)."""
    values = _pcd_header(path)
    try:
        viewpoint = tuple(float(v) for v in values.get("VIEWPOINT", PCD_DEFAULT_VIEWPOINT))
        height = int(values.get("HEIGHT", ["1"])[0])
    except ValueError:
        return None  # a header open3d read but this does not: no station
    if len(viewpoint) != 7 or not np.isfinite(viewpoint).all() or (height <= 1 and viewpoint == PCD_DEFAULT_VIEWPOINT):
        return None
    return np.array(viewpoint[:3])


FLOAT32_ERROR = 1e-7
"""Files whose format usually stores coordinates as float32 (PCD, PLY meshes) get float64 where
rounding to float32 would move a point by more than this share of the bounding-box diagonal:
geometry far from the origin, such as a georeferenced scan, whose float32 coordinates would lie
on a grid of a quarter unit or coarser."""


def float32_loses(points: np.ndarray) -> bool:
    """Whether float32 would move one of the (N, 3) points by more than FLOAT32_ERROR of their diagonal."""
    points = np.asarray(points, np.float64)
    if len(points) == 0:
        return False
    diag = float(np.linalg.norm(np.ptp(points, axis=0)))
    return float(np.abs(points.astype(np.float32) - points).max()) > FLOAT32_ERROR * diag


def _write_pcd(path: Path, tmp: Path, points: np.ndarray, colors: Optional[np.ndarray], normals: Optional[np.ndarray],
               intensity: Optional[np.ndarray] = None) -> None:
    o3d = _open3d(path, "PCD files need open3d")
    points = np.asarray(points, np.float64)
    dtype = np.float64 if float32_loses(points) else np.float32
    cloud = o3d.t.geometry.PointCloud(o3d.core.Tensor(points.astype(dtype)))
    if colors is not None:
        cloud.point.colors = o3d.core.Tensor(np.asarray(colors, np.float32))
    if normals is not None:
        cloud.point.normals = o3d.core.Tensor(np.asarray(normals, dtype))  # open3d's header goes wrong when they differ
    if intensity is not None:
        cloud.point.intensity = o3d.core.Tensor(np.asarray(intensity, np.float32)[:, None])
    if not o3d.t.io.write_point_cloud(str(tmp), cloud):
        raise InputError(path, "open3d could not write it")


def _read_without_open3d(path: Path, declared: Optional[int]):
    """(points, colours or None, normals or None, intensities or None) of a PLY file, through trimesh; `declared`: the
    vertex count its header declares (None when it does not say). Normals are the vertex
    properties nx ny nz (or normal_x normal_y normal_z, as PCL writes them), read from what
    trimesh's PLY reader keeps (its point clouds have no normals)."""
    import trimesh

    try:
        geom = trimesh.load(path, file_type="ply", process=False)
    except Exception as exc:  # trimesh raises many types for bad files
        raise InputError(path, f"cannot be read as a PLY point cloud ({type(exc).__name__})") from None
    points = np.asarray(geom.vertices, dtype=np.float64)
    if declared is not None and len(points) < declared:  # trimesh reads what an ASCII file holds
        raise InputError(path, f"holds {len(points)} of the {declared} points its header declares (cut short?)")
    if isinstance(geom, trimesh.PointCloud):
        raw = getattr(geom, "colors", None)
    else:  # a mesh's vertices
        raw = geom.visual.vertex_colors if getattr(geom.visual, "kind", None) == "vertex" else None
    colors = None
    if raw is not None and len(raw) == len(points) and np.asarray(raw).size:
        colors = np.asarray(raw, dtype=np.float64)[:, :3] / 255.0
    table = geom.metadata.get("_ply_raw", {}).get("vertex", {}).get("data")  # binary: a record array; ASCII: a dict
    names = set(table.keys() if isinstance(table, dict) else getattr(getattr(table, "dtype", None), "names", None) or ())
    normals = None
    for axes in (("nx", "ny", "nz"), ("normal_x", "normal_y", "normal_z")):
        if names.issuperset(axes):
            normals = np.stack([np.asarray(table[n], np.float64).reshape(-1) for n in axes], 1)
            break
    name = next((n for n in names if n.lower() in INTENSITY_NAMES), None)
    intensity = None if name is None else np.asarray(table[name], np.float64).reshape(-1)
    return points, colors, normals, intensity


def ply_element_counts(path: Path) -> dict:
    """{element name: count} as a PLY file's header declares them ({} when it has no header)."""
    return ply_header(path)[0]


def ply_header(path: Path) -> Tuple[dict, dict]:
    """({element name: count}, {vertex property name: its type}) as a PLY file's header declares
    them (empty when it has no header)."""
    counts, props, element = {}, {}, None
    with Path(path).open("rb") as f:
        for raw in f:
            line = raw.decode("ascii", "replace").split()
            if len(line) == 3 and line[0] == "element" and line[2].isdigit():
                counts[line[1]] = int(line[2])
                element = line[1]
            elif len(line) == 3 and line[0] == "property" and element == "vertex":
                props[line[2]] = line[1]
            elif line[:1] == ["end_header"]:
                return counts, props
    return {}, {}


def _open3d_misreads(props: dict) -> bool:
    """Whether open3d's PLY reader would get these vertex properties wrong: colours other than
    8-bit (it divides floats in [0, 1] and 16-bit values alike by 255) or normals named normal_x
    (it reads nx only)."""
    wide_colours = any(props.get(c, "uchar") not in ("uchar", "uint8") for c in ("red", "green", "blue"))
    return wide_colours or ("normal_x" in props and "nx" not in props)


def check_ply_faces(path: Path, faces: int) -> None:
    """An InputError when a PLY file's header declares more faces than the `faces` read from it:
    trimesh reads what an ASCII file cut short still holds."""
    declared = ply_element_counts(path).get("face", 0)
    if faces < declared:
        raise InputError(path, f"holds {faces} of the {declared} faces its header declares (cut short?)")


def _write_without_open3d(tmp: Path, points: np.ndarray, colors: Optional[np.ndarray],
                          normals: Optional[np.ndarray]) -> None:
    """A binary PLY through trimesh, whose coordinates are float32 (written here only where that
    rounds nothing: `float32_loses`); with normals as a mesh of no faces, which carries vertex
    normals where trimesh's point cloud does not."""
    import trimesh

    rgba = None if colors is None else np.concatenate(
        [(np.clip(colors, 0, 1) * 255 + 0.5).astype(np.uint8), np.full((len(points), 1), 255, np.uint8)], 1)
    if normals is None:
        trimesh.PointCloud(points, colors=rgba).export(tmp, file_type="ply")
        return
    cloud = trimesh.Trimesh(points, np.zeros((0, 3), np.int64), vertex_normals=np.asarray(normals, np.float64),
                            vertex_colors=rgba, process=False)
    cloud.export(tmp, file_type="ply", vertex_normal=True)
