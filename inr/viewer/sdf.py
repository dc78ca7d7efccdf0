"""The viewer of a fit-sdf run: the zero level set as a mesh, re-extracted from the field at any
resolution (trimmed to the input as the run's mesh.ply was, or whole) or at another level
(offset surfaces), the input points beside it, and a slice of the field on a movable plane
(blue inside, orange outside, black at the zero level)."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import torch

from ..tasks.run import load_run
from ..tasks.sdf import mesh_of, run_input, run_input_surface, sdf_slice, trim_mesh
from ..tasks.sdf_fit import SdfFitModule

MAX_INPUT_POINTS = 200_000


class SdfViewer:
    def __init__(self, server, run: Path, device: str = "auto") -> None:
        self.server, self.run = server, Path(run)
        self.module, self.config = load_run(self.run, "sdf", SdfFitModule, device)
        self.scale = float(self.module.frame["scale"])
        self.centre = np.asarray(self.module.frame["centre"], np.float64)
        # the scene is drawn about the field's centre: the browser draws in float32, which would
        # round a georeferenced scan (millions of units from the origin) to a coarse grid
        gui, scene = server.gui, server.scene
        gui.add_markdown(f"**SDF fit** `{self.run}`: preset `{self.config['preset'].get('name')}`")
        if (self.run / "curve.png").is_file():
            gui.add_image(iio.imread(self.run / "curve.png")[..., :3], label="curve")
        self.resolution = gui.add_slider("mesh resolution", min=32, max=512, step=32, initial_value=128)
        self.level = gui.add_slider("level (input units)", min=-0.1 / self.scale, max=0.1 / self.scale,
                                    step=0.002 / self.scale, initial_value=0.0)
        # the run's input, read as the run read it (once: shown, and it trims re-extracted meshes
        # as mesh.ply was, and colours them when it has colours)
        self.trim = float(self.module.train_cfg.mesh_trim)
        self.surface = None
        source = run_input(self.config)
        can_trim = self.trim > 0 and bool(source) and Path(source).is_file()
        self.trimmed = gui.add_checkbox(f"trim to the input ({self.trim:g} units, as mesh.ply)",
                                        initial_value=can_trim, disabled=not can_trim)
        self.extract = gui.add_button("extract the level set")
        self.status = gui.add_markdown("")
        self.slice_z = gui.add_slider("slice height (field box, -1..1)", min=-1.0, max=1.0, step=0.02, initial_value=0.0)
        self.show_slice = gui.add_checkbox("slice plane", initial_value=True)
        self.mesh_handle = None
        saved = self.run / "mesh.ply"
        if saved.is_file():
            import trimesh

            self._show_mesh(trimesh.load(saved, process=False), "mesh.ply")
        else:
            self._extract()
        self._add_input(scene)
        self.slice_image = gui.add_image(self._slice_array(), label="slice")
        self.plane = None
        self._slice()
        self.extract.on_click(lambda _: self._extract())
        self.slice_z.on_update(lambda _: self._slice())
        self.show_slice.on_update(lambda _: setattr(self.plane, "visible", bool(self.show_slice.value)))

    def _add_input(self, scene) -> None:
        self.input_handle = None
        surface = self._input()
        if surface is None:
            return
        pts = surface.points
        if len(pts) > MAX_INPUT_POINTS:
            pts = pts[np.random.default_rng(0).choice(len(pts), MAX_INPUT_POINTS, replace=False)]
        size = float(np.linalg.norm(pts.max(0) - pts.min(0))) / 400
        self.input_handle = scene.add_point_cloud("/input", (pts - self.centre).astype(np.float32), np.array([40, 160, 60], np.uint8),
                                                  point_size=size, point_shape="circle", visible=False)
        box = self.server.gui.add_checkbox(f"input points ({len(surface.points):,})", initial_value=False)
        box.on_update(lambda _: setattr(self.input_handle, "visible", bool(box.value)))

    def _show_mesh(self, mesh, what: str) -> None:
        if self.mesh_handle is not None:
            self.mesh_handle.remove()
        self.mesh = mesh
        if getattr(mesh.visual, "kind", None) == "vertex":  # a coloured cloud's fit
            local = mesh.copy()
            local.vertices = np.asarray(mesh.vertices) - self.centre
            self.mesh_handle = self.server.scene.add_mesh_trimesh("/surface", local)
        else:
            self.mesh_handle = self.server.scene.add_mesh_simple(
                "/surface", (np.asarray(mesh.vertices) - self.centre).astype(np.float32), np.asarray(mesh.faces, np.int32),
                color=(200, 200, 210))
        self.status.content = f"{what}: {len(mesh.vertices):,} vertices, {len(mesh.faces):,} faces"

    def _extract(self) -> None:
        resolution, level = int(self.resolution.value), float(self.level.value)
        try:
            mesh = mesh_of(self.module, resolution, level=level * self.scale)
        except ValueError as exc:
            self.status.content = f"no surface at this level: {exc}"
            return
        what = f"level {level:+.4g}, resolution {resolution}"
        if self.trimmed.value and level == 0.0:  # an offset surface lies away from the input by design
            if self._input() is None:
                self.status.content = "the run's input is gone: untick the trim box for the whole level set"
                return
            try:
                mesh, dropped = trim_mesh(mesh, self.module, resolution, self.surface.points, self.trim)
                what += f", trimmed ({dropped:,} faces dropped)"
            except ValueError as exc:
                self.status.content = f"trimming leaves nothing: {exc}"
                return
        else:
            what += ", untrimmed"
        if self._input() is not None and self.surface.colors is not None:
            from ..tasks.outputs import paint_mesh

            paint_mesh(mesh, self.surface.points, self.surface.colors)
        self._show_mesh(mesh, what)

    def _input(self):
        """The run's input as the run read it (`run_input_surface`, read once), or None when it is gone."""
        if self.surface is None:
            self.surface = run_input_surface(self.config)
        return self.surface

    def _slice_array(self) -> np.ndarray:
        img = sdf_slice(self.module, 256, z=float(self.slice_z.value))
        return (img.cpu().numpy() * 255 + 0.5).astype(np.uint8)

    def _slice(self) -> None:
        img = self._slice_array()
        self.slice_image.image = img
        if self.plane is not None:
            self.plane.remove()
        z = float(self.slice_z.value)
        position = np.array([0.0, 0.0, z / self.scale])  # about the centre, as everything drawn
        side = 2.0 / self.scale
        self.plane = self.server.scene.add_image("/slice", img, render_width=side, render_height=side,
                                                 position=tuple(position.tolist()), visible=bool(self.show_slice.value))

    def connect(self, client) -> None:
        lo, hi = self.mesh.bounds - self.centre
        centre, extent = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
        client.camera.position = tuple((centre + np.array([0.0, -0.9, 0.5]) * extent).tolist())
        client.camera.look_at = tuple(centre.tolist())
