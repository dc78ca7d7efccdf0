"""Point clouds and meshes in the viewer: one file, or several side by side (`inr view noisy.ply
denoised.ply`: the same shape before and after, placed one box-width apart with a checkbox
each), with colours (a scan without them in grey by its intensities), normals on demand (a
cloud file's own, when it has them; else estimated and oriented as `denoise` writes them; a
mesh's vertex normals), the point size, for a scanner's scan (E57, PTX, a PCD with its
viewpoint) its mixed pixels on demand, in red, and for a LAS file of several classes its points
coloured by class on demand."""

from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from ..errors import InputError

MAX_POINTS = 2_000_000  # more are subsampled for the browser (shown in the panel)


def load_geometry(path: Path):
    """('mesh', trimesh) or ('points', `read_scan`'s Scan: points, colours, normals, towards, up, stations) of a file.
    Meshes are read as `fit-sdf` reads them (`read_mesh`: NaN vertices, faces cut short and
    empty meshes are refused); a PLY without faces is read as a cloud."""
    from ..data.surfaces import MESH_FORMATS, read_mesh

    if not path.is_file():
        raise InputError(path, "no such file")
    if path.suffix.lower() in MESH_FORMATS:
        mesh = read_mesh(path)
        if mesh is not None:
            return "mesh", mesh
    from ..data.pointclouds import LAS_FORMATS, read_scan

    return "points", read_scan(path, duplicates="drop", records=path.suffix.lower() in LAS_FORMATS)


def normal_segments(points: np.ndarray, normals, length: float, at_most: int = 20_000, scan=None) -> np.ndarray:
    """(M, 2, 3) float32 line segments from at most about `at_most` of the points along their
    normals (`normals`: a file's or a mesh's), or, when None, along normals estimated and oriented
    on those points as `denoise` writes them (`inr.data.surfaces.scan_normals`, with what `scan`,
    `read_scan`'s, says of their sides: the file's known normals, the stations of an E57, PTX or organized PCD
    scan, LAS's up)."""
    from ..data.pointclouds import Scan
    from ..data.surfaces import scan_normals

    step = max(1, len(points) // at_most)
    pts = points[::step]
    if normals is None:
        n = scan_normals(pts, scan if scan is not None else Scan(points, None, None, None, None))
    else:
        n = np.asarray(normals)[::step]
    return np.stack([pts, pts + length * n], 1).astype(np.float32)


def point_colours(colors, intensity, blue=(60, 110, 200)) -> np.ndarray:
    """uint8 colours of points to draw: (M, 3) from `colors` in [0, 1]; else grey by `intensity` (M,),
    its 1st to 99th percentile stretched from black to white (beyond them clipped; all equal: mid
    grey), as scanner software shows a scan; else one colour (3,)."""
    if colors is not None:
        return (np.clip(colors, 0, 1) * 255 + 0.5).astype(np.uint8)
    if intensity is None or len(intensity) == 0:
        return np.array(blue, np.uint8)
    lo, hi = np.percentile(intensity, [1, 99])
    level = np.clip((intensity - lo) / (hi - lo), 0, 1) if hi > lo else np.full(len(intensity), 0.5)
    return np.repeat((level * 255 + 0.5).astype(np.uint8)[:, None], 3, 1)


def point_size_range(diag: float):
    """(min, max, step, initial) of the point-size slider, in the scene's units, for a scene whose
    boxes span `diag`: from a power of ten near diag / 5,000 (also the step) to ~diag / 50 (before
    session 59 fixed at 0.0005-0.05, so that a scan 100 m across could not show its points larger
    than 5 cm), starting at ~diag / 250."""
    import math

    power = math.floor(math.log10(max(diag, 1e-12) / 5000))
    step = 10.0 ** power

    def steps(n: float) -> float:  # n steps, without binary fractions' tails (0.0138, not 0.013800000000000002)
        return round(n * step, max(0, -power))

    high = steps(max(round(diag / 50 / step), 2))
    return steps(1), high, steps(1), min(steps(max(round(diag / 250 / step), 1)), high)


CLASS_COLOURS = {0: (160, 160, 160), 1: (200, 200, 200), 2: (150, 100, 50), 3: (150, 220, 110), 4: (60, 180, 60),
                 5: (20, 110, 30), 6: (220, 60, 40), 7: (255, 0, 255), 9: (40, 90, 230), 10: (120, 70, 160),
                 11: (90, 90, 90), 13: (255, 220, 0), 14: (255, 160, 0), 15: (250, 120, 120), 16: (200, 160, 0),
                 17: (110, 60, 20), 18: (255, 0, 150)}
"""Colours of the LAS standard's classes (`inr.data.las.ASPRS_CLASSES`): ground brown, vegetation
green by height, buildings red, water blue, noise magenta, unclassified grey."""


def class_colours(classes: np.ndarray) -> np.ndarray:
    """uint8 (M, 3) colours of LAS class codes (M,): CLASS_COLOURS', others from a fixed spread of hues
    (the same code, the same colour)."""
    import colorsys

    codes = np.asarray(classes, np.int64)
    table = np.zeros((max(int(codes.max(initial=0)) + 1, 256), 3), np.uint8)
    for c in range(len(table)):
        rgb = colorsys.hsv_to_rgb((c * 0.618034) % 1.0, 0.75, 0.95)
        table[c] = CLASS_COLOURS.get(c, tuple(int(v * 255 + 0.5) for v in rgb))
    return table[codes]


class CloudViewer:
    def __init__(self, server, paths: List[Path]) -> None:
        self.server, self.items = server, []
        boxes = []
        loaded = [(p, *load_geometry(p)) for p in paths]
        for _, kind, data in loaded:
            pts = np.asarray(data.vertices if kind == "mesh" else data[0])
            boxes.append((pts.min(0), pts.max(0)))
        width = max(float(hi[0] - lo[0]) for lo, hi in boxes)
        self.diag = max(float(np.linalg.norm(hi - lo)) for lo, hi in boxes)
        gui = server.gui
        low, high, step, initial = point_size_range(self.diag)
        self.size = gui.add_slider("point size", min=low, max=high, step=step, initial_value=initial)
        self.show_normals = gui.add_checkbox("normals (the file's, else estimated and oriented)", initial_value=False)
        # the scene is shown about the boxes' centre: the browser draws in float32, which would
        # round a georeferenced scan (millions of units from the origin) to a coarse grid
        origin = (np.min([b[0] for b in boxes], 0) + np.max([b[1] for b in boxes], 0)) / 2
        for i, (path, kind, data) in enumerate(loaded):
            offset = np.array([1.2 * width * i, 0.0, 0.0]) - origin
            self.items.append(self._add(f"/{i}_{path.stem}", path, kind, data, offset))
        self.size.on_update(lambda _: self._resize())
        self.show_normals.on_update(lambda _: self._normals())
        lo = np.min([b[0] for b in boxes], 0)
        hi = np.max([b[1] for b in boxes], 0) + np.array([1.2 * width * (len(paths) - 1), 0, 0])
        self.centre, self.extent = (lo + hi) / 2 - origin, float(np.linalg.norm(hi - lo))

    def _add(self, name: str, path: Path, kind: str, data, offset: np.ndarray) -> dict:
        gui, scene = self.server.gui, self.server.scene
        item = {"name": name, "kind": kind, "offset": offset, "normals": None, "own_normals": None, "scan": None}
        classes = None
        if kind == "mesh":
            mesh = data.copy()
            mesh.apply_translation(offset)
            item["handle"] = scene.add_mesh_trimesh(name, mesh)
            item["points"], item["own_normals"] = np.asarray(mesh.vertices), np.asarray(mesh.vertex_normals)
            label = f"{path.name}: mesh, {len(mesh.vertices):,} vertices, {len(mesh.faces):,} faces"
        else:
            points, colors = data.points, data.colors
            if data.records is not None:  # a LAS file's: only its classes are drawn (the records hold 20-60 bytes a point)
                classes, data = np.asarray(data.records.points.classification), data._replace(records=None)
            shown = np.arange(len(points))
            if len(points) > MAX_POINTS:
                shown = np.random.default_rng(0).choice(len(points), MAX_POINTS, replace=False)
            pts = points[shown] + offset
            rgb = point_colours(None if colors is None else colors[shown],
                                None if data.intensity is None else data.intensity[shown])
            item["handle"] = scene.add_point_cloud(name, pts.astype(np.float32), rgb, point_size=float(self.size.value),
                                                   point_shape="circle")
            item["points"] = pts
            shown_scan = data.subset(shown)
            item["scan"] = shown_scan._replace(points=pts, colors=None, stations=None if data.stations is None
                                               else shown_scan.stations + offset)
            item["own_normals"] = item["scan"].complete_normals
            label = (f"{path.name}: {len(points):,} points" + (f" (showing {MAX_POINTS:,})" if len(points) > MAX_POINTS else "")
                     + (", with normals" if data.complete_normals is not None
                        else ", with some normals" if data.normals is not None else "")
                     + (", grey by intensity" if colors is None and data.intensity is not None else "")
                     + (f" ({data.withheld:,} withheld left out)" if data.withheld else ""))
        box = gui.add_checkbox(label, initial_value=True)
        box.on_update(lambda _: setattr(item["handle"], "visible", bool(box.value)))
        kinds = 0 if classes is None else len(np.unique(classes))
        if kinds > 1:  # a LAS file's classes, on demand
            item["colours"] = rgb if rgb.ndim == 2 else np.tile(rgb, (len(shown), 1))  # one colour: per point
            item["by_class"] = class_colours(classes[shown])
            item["class_box"] = gui.add_checkbox(f"{path.name}: colour by class ({kinds} classes)", initial_value=False)
            item["class_box"].on_update(lambda _: setattr(item["handle"], "colors", item["by_class"]
                                                          if item["class_box"].value else item["colours"]))
        if kind == "points" and data.stations is not None:  # a scanner's scan: its blends at depth edges, on demand
            item["mixed_box"] = gui.add_checkbox(f"{path.name}: mixed pixels in red (the pointcloud commands leave them out)",
                                                 initial_value=False)
            item["mixed"], item["full"] = None, data
            item["mixed_box"].on_update(lambda _: self._mixed(item))
        return item

    def _mixed(self, item: dict) -> None:
        """Shows (found the first time: `inr.pointcloud.mixed`) or hides a scan's mixed pixels."""
        if item["mixed"] is None and item["mixed_box"].value:
            from ..pointcloud.mixed import mixed_pixels

            scan = item["full"]
            found = mixed_pixels(scan.points, scan.stations, scan.cells)
            pts = (scan.points[found] + item["offset"]).astype(np.float32)
            item["mixed"] = self.server.scene.add_point_cloud(f"{item['name']}_mixed", pts, np.array([255, 0, 0], np.uint8),
                                                              point_size=1.5 * float(self.size.value), point_shape="circle")
            self.server.gui.add_markdown(f"{item['name'][1:]}: {int(found.sum()):,} mixed pixels of {len(found):,} points")
        if item["mixed"] is not None:
            item["mixed"].visible = bool(item["mixed_box"].value)

    def _resize(self) -> None:
        for item in self.items:
            if item["kind"] == "points":
                item["handle"].point_size = float(self.size.value)
                if item.get("mixed") is not None:
                    item["mixed"].point_size = 1.5 * float(self.size.value)

    def _normals(self) -> None:
        for item in self.items:
            if not self.show_normals.value:
                if item["normals"] is not None:
                    item["normals"].visible = False
                continue
            if item["normals"] is None:
                segments = normal_segments(item["points"], item["own_normals"], 0.02 * self.diag, scan=item["scan"])
                item["normals"] = self.server.scene.add_line_segments(f"{item['name']}_normals", segments, colors=(220, 60, 60))
            item["normals"].visible = True

    def connect(self, client) -> None:
        client.camera.position = tuple((self.centre + np.array([0.0, -0.8, 0.45]) * self.extent).tolist())
        client.camera.look_at = tuple(self.centre.tolist())
