"""LAS and LAZ point clouds (airborne and terrestrial lidar, photogrammetry exports) through
laspy, with lazrs for the compressed LAZ.

A LAS file stores each coordinate as a 32-bit integer times a scale plus an offset, in float64
after reading, so georeferenced scans keep their detail. Colours are 16-bit (some writers put
8-bit values in them: a file whose colours never exceed 255 is read as 8-bit); a point format
with colour fields that are all zero has no colours. Normals are not part of any LAS point
format: they are read from, and written to, extra dimensions NormalX, NormalY, NormalZ (as PDAL
names them; nx/ny/nz and normal_x/... are read too). Intensities are read as stored (0-65535) and
written as 16-bit integers (`las_intensity`). The point records themselves (classification,
returns, GPS time, scan angle, user data, point source, extra dimensions) are kept as read
(`LasRecords`): a LAS file written from a LAS file's cloud gives each of its points a record of the
input's (the nearest point's, in the point-cloud commands), in the input's point format and version,
with its variable-length records (the coordinate system's among them: GeoTIFF keys, WKT) and
global encoding.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from ..errors import InputError

LAS_FORMATS = (".las", ".laz")
NORMAL_NAMES = ("NormalX", "NormalY", "NormalZ")
_NORMAL_SPELLINGS = (("normalx", "normaly", "normalz"), ("nx", "ny", "nz"), ("normal_x", "normal_y", "normal_z"))
INT_RANGE = 2.0e9
"""Written coordinates use at most this many scale steps either side of the offset (a LAS
integer is 32-bit signed), so the scale is the power of ten that fits the cloud's half-extent."""


def _laspy(path: Path, suffix: str):
    from .. import _external

    try:
        return _external.laspy(compressed=suffix == ".laz")
    except _external.MissingBackend as exc:
        raise InputError(path, f"{suffix[1:].upper()} files need laspy: {exc}") from None


ASPRS_CLASSES = {0: "never classified", 1: "unclassified", 2: "ground", 3: "low vegetation", 4: "medium vegetation",
                 5: "high vegetation", 6: "building", 7: "low noise", 9: "water", 10: "rail", 11: "road surface",
                 13: "guard wire", 14: "conductor wire", 15: "transmission tower", 16: "wire connector",
                 17: "bridge deck", 18: "high noise"}
"""The LAS 1.4 standard's names of its classes (ASPRS), for messages."""
NOISE_CLASSES = (7, 18)
"""The LAS classes of returns known to be wrong (low and high noise): a point the network or MLS
put on the surface takes its record from the nearest input point of another class
(`inr.tasks.pointcloud.process_file`); the network's commands and `pointcloud mesh` leave them out
first (`inr.tasks.pointcloud.split_by_class`)."""
NOT_SURFACE_CLASSES = (3, 4, 5, 13, 14, 15, 16)
"""The LAS classes of returns from things that are not surfaces (low, medium and high vegetation;
guard and conductor wires, transmission towers, wire connectors): the network's commands do not
give them to the network but write them as measured, less those isolated among themselves
(`inr.pointcloud.strays.isolated`), and `--keep-points` does not judge them by their offset from
the denoised surface (`inr.pointcloud.keep.on_surface`'s `not_surface`); `pointcloud mesh` leaves
them out."""


def class_label(code: int) -> str:
    """A LAS class code in words, for messages: "ground (class 2)", or "class 40" for one the
    standard does not name."""
    return f"{ASPRS_CLASSES[code]} (class {code})" if code in ASPRS_CLASSES else f"class {code}"


SHIFT_SHARE, SHIFT_RATIO = 0.05, 0.75
"""`class_shift` speaks of a class holding at least SHIFT_SHARE of the input's points whose share of
the output is under SHIFT_RATIO of that."""


def class_shift(before: np.ndarray, after: np.ndarray) -> Optional[str]:
    """Of the classes (LAS classification codes) of a command's input points `before` and of its
    output's `after`, the one that lost most of its share, relatively, if it held at least
    SHIFT_SHARE of the input and kept under SHIFT_RATIO of its share: "ground (class 2): 39% of
    the input's points, 19% of the output's"; else None."""
    if not len(before) or not len(after):
        return None
    top = int(max(before.max(), after.max())) + 1
    was = np.bincount(before, minlength=top) / len(before)
    now = np.bincount(after, minlength=top) / len(after)
    big = np.flatnonzero(was >= SHIFT_SHARE)
    ratio = now[big] / was[big]
    if not len(big) or ratio.min() >= SHIFT_RATIO:
        return None
    c = int(big[ratio.argmin()])
    return f"{class_label(c)}: {was[c]:.0%} of the input's points, {now[c]:.0%} of the output's"


LOSS_SHARE, LOSS_RATIO = 0.01, 0.05
"""`class_losses` speaks of the classes holding at least LOSS_SHARE of the input's points of which
at least LOSS_RATIO were left out."""


def class_losses(before: np.ndarray, kept: np.ndarray) -> Optional[str]:
    """Of a command's input classes `before` (LAS classification codes) and those of the points it
    kept, `kept`, the classes (see LOSS_SHARE) that lost most, most first: "high vegetation
    (class 5) 32%, building (class 6) 15%"; None where none lost that much."""
    if not len(before):
        return None
    top = int(before.max()) + 1
    was = np.bincount(before, minlength=top)
    left = 1 - np.bincount(kept, minlength=top)[:top] / np.maximum(was, 1)
    said = [c for c in np.argsort(-left, kind="stable") if was[c] >= LOSS_SHARE * len(before) and left[c] >= LOSS_RATIO]
    return ", ".join(f"{class_label(int(c))} {left[c]:.0%}" for c in said) or None


class LasRecords:
    """A LAS file's point records (laspy's, every dimension of its point format, extra ones
    included) and what else of the file a copy keeps: its version, global encoding, variable-length
    records and extended ones, but those that describe the file's own layout (the extra bytes',
    which laspy writes from the point format; COPC's octree, which laspy does not write) or data a
    copy does not hold (waveform packets). Indexing takes rows (a mask or indices), as a Scan's
    arrays are subset."""

    def __init__(self, points, version, global_encoding=None, vlrs=(), evlrs=()) -> None:
        self.points, self.version, self.global_encoding = points, version, global_encoding
        self.vlrs, self.evlrs = list(vlrs), list(evlrs)

    @classmethod
    def of(cls, las) -> "LasRecords":
        """Those of a file laspy read."""
        from laspy.vlrs.known import ExtraBytesVlr, WaveformPacketVlr

        def kept(v) -> bool:
            return not isinstance(v, (ExtraBytesVlr, WaveformPacketVlr)) and v.user_id.rstrip("\0").lower() != "copc"

        encoding = copy.deepcopy(las.header.global_encoding)
        encoding.waveform_data_packets_internal = encoding.waveform_data_packets_external = False
        return cls(las.points, las.header.version, encoding, [v for v in las.header.vlrs if kept(v)],
                   [v for v in (las.evlrs or ()) if kept(v)])

    def __getitem__(self, keep) -> "LasRecords":
        return LasRecords(self.points[np.asarray(keep)], self.version, self.global_encoding, self.vlrs, self.evlrs)

    def __len__(self) -> int:
        return len(self.points)


def read_las(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray], LasRecords,
                                   int]:
    """(points (N, 3) float64, colours (N, 3) in [0, 1] or None, normals (N, 3) or None, intensities
    (N,) or None where they are all zero: the writer stored none, the point records, how many points
    were left out as withheld). Points whose withheld flag is set are left out: the LAS
    specification says they are not to be processed (synonymous with deleted)."""
    suffix = path.suffix.lower()
    laspy = _laspy(path, suffix)
    try:
        las = laspy.read(path)
    except Exception as exc:  # laspy, lazrs and numpy raise their own types for bad or short files
        raise InputError(path, f"is not a readable {suffix[1:].upper()} point cloud, or is cut short ({exc})") from None
    points = np.stack([np.asarray(las.x, np.float64), np.asarray(las.y, np.float64), np.asarray(las.z, np.float64)], 1)
    declared = int(las.header.point_count)
    if len(points) < declared:  # laspy reads what an uncompressed file still holds without a word
        raise InputError(path, f"holds {len(points)} of the {declared} points its header declares (cut short?)")
    names = {name.lower(): name for name in las.point_format.dimension_names}
    colors = None
    if all(c in names for c in ("red", "green", "blue")):
        raw = np.stack([np.asarray(las[names[c]], np.float64) for c in ("red", "green", "blue")], 1)
        if raw.max(initial=0) > 0:
            colors = raw / (65535.0 if raw.max() > 255 else 255.0)
    normals = None
    for spelling in _NORMAL_SPELLINGS:
        if all(n in names for n in spelling):
            normals = np.stack([np.asarray(las[names[n]], np.float64) for n in spelling], 1)
            break
    intensity = np.asarray(las.intensity, np.float64)
    records = LasRecords.of(las)
    withheld = np.asarray(las.withheld, bool)
    if withheld.all() and len(points):
        raise InputError(path, f"all {len(points):,} of its points are marked withheld (not to be processed)")
    if withheld.any():
        keep = ~withheld
        points, colors, normals, intensity, records = (None if a is None else a[keep]
                                                        for a in (points, colors, normals, intensity, records))
    return points, colors, normals, intensity if intensity.any() else None, records, int(withheld.sum())


def las_intensity(values: np.ndarray) -> np.ndarray:
    """Intensities as LAS's 16-bit integers: whole numbers within 0-65535 (a LAS file's) as they are;
    else values within [0, 1] (PTX's, most E57 files') times 65535; else (Leica's PTS: -2048 to
    2047) their range stretched over 0-65535, as the LAS specification asks of a sensor's range."""
    values = np.asarray(values, np.float64)
    lo, hi = (float(values.min()), float(values.max())) if len(values) else (0.0, 0.0)
    if lo >= 0 and hi <= 65535 and np.array_equal(values, np.round(values)):
        return values.astype(np.uint16)
    if lo >= 0 and hi <= 1:
        return np.round(values * 65535).astype(np.uint16)
    return np.round((values - lo) / ((hi - lo) or 1.0) * 65535).astype(np.uint16)


def _on_grid(points: np.ndarray, scales, offsets) -> bool:
    """Whether every point is within a thousandth of a step of the grid (scales, offsets) and its
    steps fit a LAS integer (32-bit signed)."""
    if scales is None or offsets is None or not len(points):
        return False
    scales, offsets = np.asarray(scales, np.float64), np.asarray(offsets, np.float64)
    steps = np.round((points - offsets) / scales)
    return bool(np.abs(steps).max() < 2 ** 31 - 1 and np.all(np.abs(steps * scales + offsets - points) <= 1e-3 * scales))


def write_las(path: Path, tmp: Path, points: np.ndarray, colors: Optional[np.ndarray], normals: Optional[np.ndarray],
              intensity: Optional[np.ndarray] = None, records: Optional[LasRecords] = None) -> None:
    """Write LAS 1.2 (point format 2 with colours, 0 without; normals as float32 extra dimensions;
    intensities as `las_intensity`) to `tmp`, compressed when `path` ends in .laz. The offset is
    the box centre and the scale the power of ten that fits the half-extent in INT_RANGE steps: a
    point moves by at most half a step, under 3e-9 of the extent. With `records` (one per point, of a LAS file's), the file
    takes their point format and version and each point its record, only its coordinates (and
    its normal, where given) replaced: colours and intensities are then the records' own, as
    stored (`colors` and `intensity` are not used); and where every point lies on the records'
    own grid (the input's points themselves, as `denoise --keep-points` writes them), their scale
    and offset too, so that the stored integers are the input's (`_on_grid`)."""
    suffix = path.suffix.lower()
    laspy = _laspy(path, suffix)
    points = np.asarray(points, np.float64)
    centre = (points.min(0) + points.max(0)) / 2 if len(points) else np.zeros(3)
    reach = float(np.abs(points - centre).max()) if len(points) else 0.0
    scale = 10.0 ** np.ceil(np.log10(max(reach, 1e-300) / INT_RANGE))
    if records is not None:
        header = laspy.LasHeader(point_format=copy.deepcopy(records.points.point_format), version=records.version)
        header.vlrs.extend(records.vlrs)
        if records.global_encoding is not None:
            header.global_encoding = copy.deepcopy(records.global_encoding)
    else:
        header = laspy.LasHeader(point_format=0 if colors is None else 2, version="1.2")
    header.offsets, header.scales = centre, np.full(3, scale)
    if records is not None and _on_grid(points, records.points.scales, records.points.offsets):
        header.offsets, header.scales = np.array(records.points.offsets), np.array(records.points.scales)
    names = {name.lower(): name for name in header.point_format.dimension_names}
    normal_names = next(([names[n] for n in spelling] for spelling in _NORMAL_SPELLINGS if all(n in names for n in spelling)),
                        None)
    if normals is not None and normal_names is None:
        header.add_extra_dims([laspy.ExtraBytesParams(name=n, type=np.float32) for n in NORMAL_NAMES])
        normal_names = list(NORMAL_NAMES)
    las = laspy.LasData(header)
    if records is not None:
        rows = np.zeros(len(records), header.point_format.dtype())  # with the normals' dimensions where added
        for name in records.points.array.dtype.names:
            rows[name] = records.points.array[name]
        if "wavepacket_index" in rows.dtype.names:
            rows["wavepacket_index"] = 0  # no waveform: the packets are not written
        las.points = laspy.ScaleAwarePointRecord(rows, header.point_format, scales=header.scales, offsets=header.offsets)
        if records.evlrs:
            from laspy.vlrs.vlrlist import VLRList

            las.evlrs = VLRList(records.evlrs)
        colors = intensity = None  # the records' own
    las.x, las.y, las.z = points[:, 0], points[:, 1], points[:, 2]
    if colors is not None:
        rgb = (np.clip(np.asarray(colors, np.float64), 0, 1) * 65535 + 0.5).astype(np.uint16)
        las.red, las.green, las.blue = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    if normals is not None:
        for i, name in enumerate(normal_names):
            las[name] = np.asarray(normals[:, i], las[name].dtype)
    if intensity is not None:
        las.intensity = las_intensity(intensity)
    las.write(tmp, do_compress=suffix == ".laz")
