"""`inr fit-sdf`: a signed distance field fitted to an oriented point cloud or a mesh, its zero
level set as a mesh (`mesh.ply`, and `inr extract-mesh DIR --resolution R` at any resolution),
scored against the input."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch

from ..errors import InputError
from .base import Task, TaskOptions, positive_int, register_task
from .outputs import MESH_FORMATS, check_suffix, plot_curve, write_mesh

CURVE_POINTS = 20_000
"""Input points whose mean |f| is the training curve."""
METRIC_POINTS = 100_000
"""At most this many points sampled on the mesh (and of the input) for metrics.json."""
F_SCORE_SHARE = 0.01
"""F-score threshold: this share of the input's bounding-box diagonal (as `inr pointcloud eval`)."""


@dataclass
class SdfOptions(TaskOptions):
    mesh_points: int = 100_000
    """Mesh inputs: oriented points sampled on the faces to fit."""


@register_task("sdf")
class SdfTask(Task):
    default_preset = "hashgrid_sdf"
    Options = SdfOptions
    main_metric, curve_name = "chamfer_l1", "mean |SDF|"
    input_help = ("a mesh (.ply .obj .off .stl .glb) or a point cloud (.ply .pcd .npy .las .laz .e57 .ptx .xyz .txt .asc .csv .pts); a cloud's normals are "
                  "used when it has them, else estimated and oriented (open3d)")
    outputs_help = "mesh.ply (the zero level set, in the input's units), curve.png, slice.png"
    log_every = 20

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--mesh-points", type=positive_int, metavar="N",
                            help="mesh inputs: oriented points sampled on the faces (default 100000)")

    @classmethod
    def options_from_args(cls, args) -> Dict[str, Any]:
        return {"mesh_points": getattr(args, "mesh_points", None)}

    def load(self) -> None:
        from ..data.surfaces import read_surface
        from ..sdf import Frame

        if self.opts.input is None:
            raise InputError(None, "fit-sdf needs an input mesh or point cloud (or --resume DIR)")
        self.surface = read_surface(self.opts.input, self.options.mesh_points, self.opts.seed)
        if self.surface.mixed:
            print(f"inr: {self.opts.input}: left out {self.surface.mixed:,} mixed pixels (returns between two surfaces "
                  "at depth edges)", flush=True)
        if self.surface.withheld:
            print(f"inr: {self.opts.input}: left out {self.surface.withheld:,} points the file marks withheld (not to be "
                  "processed)", flush=True)
        if self.surface.strays:
            print(f"inr: {self.opts.input}: left out {self.surface.strays:,} stray points far from the rest "
                  f"(of {len(self.surface.points) + self.surface.strays:,})", flush=True)
        try:
            self.frame = Frame.fit(self.surface.points)
        except ValueError as exc:
            raise InputError(self.opts.input, str(exc)) from None
        pts = torch.from_numpy(self.frame.to_field(self.surface.points)).float()
        self.adapt_resolution(pts.numpy())
        self.points, self.normals = pts, torch.from_numpy(self.surface.normals).float()
        pick = torch.randperm(len(pts), generator=torch.Generator().manual_seed(self.opts.seed))[:CURVE_POINTS]
        self.curve_points = pts[pick]

    def adapt_resolution(self, points) -> None:
        """train.adapt_resolution: cap the hash grid's finest resolution by the input's spacing
        (the preset saved in config.yaml holds the capped value; a resumed run caps it again
        to the same)."""
        cfg, field = self.preset.train, self.preset.field
        if cfg.adapt_resolution <= 0 or field.encoding != "hashgrid":
            return
        from ..sdf import median_spacing

        spacing = median_spacing(points)
        options = field.encoding_options
        cap = int(cfg.adapt_resolution / max(spacing, 1e-9))
        current = int(options.get("max_resolution", 2048))
        base = int(options.get("base_resolution", 16))
        if cap < current and "per_level_scale" not in options:
            options["max_resolution"] = max(cap, base * 2)

    def build_module(self):
        from .sdf_fit import SdfFitModule

        return SdfFitModule(self.preset.field.to_dict(), self.preset.train.to_dict(), asdict(self.frame))

    def build_data(self):
        from .sdf_fit import SdfData

        return SdfData(self.points, self.normals, self.preset.train, self.opts.seed)

    def measure(self, module) -> float:
        """Mean |f| on input points, in the input's units."""
        return float(module.sdf_eval(self.curve_points).abs().mean()) / self.frame.scale

    def sample_render(self, module):
        return sdf_slice(module)

    def write_outputs(self, out: Path, module, steps: int, seconds: float, history) -> Dict[str, Any]:
        from .outputs import write_image

        cfg = self.preset.train
        try:
            mesh, trimmed = trim_mesh(mesh_of(module, cfg.mesh_resolution), module, cfg.mesh_resolution,
                                      self.surface.points, cfg.mesh_trim)
        except ValueError as exc:
            raise InputError(self.opts.input, f"the fitted field has no surface: {exc}; the fit is kept in {out} "
                             f"(`inr extract-mesh {out} --trim 0` writes its whole level set, if it has one)") from None
        s = self.surface
        if s.colors is not None:  # a coloured input gives a coloured mesh
            from .outputs import paint_mesh

            paint_mesh(mesh, s.points, s.colors)
        write_mesh(out / "mesh.ply", mesh)
        write_image(out / "slice.png", sdf_slice(module))
        result: Dict[str, Any] = {
            "input": s.path,
            "input_points": int(len(s.points)),
            "input_source": s.source,
            "normals": s.normals_from,
            "mesh_vertices": int(len(mesh.vertices)),
            "mesh_faces": int(len(mesh.faces)),
            "watertight": bool(mesh.is_watertight),
            "coloured": s.colors is not None,
            "mesh_resolution": int(cfg.mesh_resolution),
            "mesh_trim": float(cfg.mesh_trim),
            "trimmed_faces": int(trimmed),
        }
        if self.preset.field.encoding == "hashgrid":
            result["grid_max_resolution"] = int(self.preset.field.encoding_options.get("max_resolution", 2048))
        result.update(mesh_metrics(mesh, s.points, s.normals, self.opts.seed))
        result.update({"steps": int(steps), "seconds": round(seconds, 3), "seed": self.opts.seed})
        plot_curve(out / "curve.png", history, f"{self.preset.name} on {Path(s.path).name}",
                   label="mean |SDF| on the input (input units)")
        return result

    @staticmethod
    def summary(r: Dict[str, Any]) -> str:
        nc = f", normal consistency {r['normal_consistency']:.4f}" if "normal_consistency" in r else ""
        return (f"{r['preset']}: mesh of {r['mesh_faces']:,} faces ({'watertight' if r['watertight'] else 'open'}); "
                f"to the input: Chamfer-L1 {r['chamfer_l1']:.5g}, F-score {r['fscore']:.4f}{nc}; "
                f"{r['steps']} steps in {r['seconds']:.1f} s")


def mesh_of(module, resolution: int, level: float = 0.0):
    """The trimesh of the field's zero level set (or of f = level, in field units: an offset
    surface) over its box, in the input's units."""
    import trimesh

    from ..render.extract import sdf_lattice, zero_level_mesh

    values, mask = sdf_lattice(lambda x: module.sdf_eval(x) - level, resolution, device=module.device)
    verts, faces = zero_level_mesh(values, mask)
    verts = module.to_world(torch.from_numpy(verts).double()).numpy()
    return trimesh.Trimesh(verts, faces, process=False)  # welded by marching cubes; merging near-coincident vertices can pinch edges


def trim_mesh(mesh, module, resolution: int, points: np.ndarray, trim: float):
    """(mesh without its patches of faces farther than `trim` units from `points` (the input's,
    in its units) and larger than TRIM_PATCH_AREA square units, the number of faces dropped);
    the unit is the larger of the points' median spacing and the mesh lattice's cell
    (`inr.sdf.trim_to_points`). trim 0: the mesh as it is."""
    import trimesh

    from ..sdf import TRIM_PATCH_AREA, median_spacing, trim_to_points

    if trim <= 0:
        return mesh, 0
    unit = max(median_spacing(points), 2.0 / (resolution - 1) / float(module.frame["scale"]))
    verts, faces = trim_to_points(np.asarray(mesh.vertices), np.asarray(mesh.faces), points, trim * unit,
                                  TRIM_PATCH_AREA * unit**2)
    if len(faces) == 0:
        raise ValueError(f"every face lies in a large patch farther than {trim:g} units from the input "
                         "(--set train.mesh_trim=0 keeps the whole level set)")
    return trimesh.Trimesh(verts, faces, process=False), len(mesh.faces) - len(faces)


def mesh_metrics(mesh, points: np.ndarray, normals: Optional[np.ndarray], seed: int = 0) -> Dict[str, Any]:
    """Chamfer-L1, F-score at 1 % of the bounding-box diagonal and normal consistency between
    points sampled on the mesh and the reference points (at most METRIC_POINTS of each)."""
    import trimesh

    from ..data.surfaces import surface_metrics

    rng = np.random.default_rng(seed)
    if len(points) > METRIC_POINTS:
        keep = rng.choice(len(points), METRIC_POINTS, replace=False)
        points, normals = points[keep], None if normals is None else normals[keep]
    samples, faces = trimesh.sample.sample_surface(mesh, min(len(points), METRIC_POINTS), seed=seed)
    diag = float(np.linalg.norm(points.max(0) - points.min(0)))
    m = surface_metrics(np.asarray(samples), mesh.face_normals[faces], points, normals, F_SCORE_SHARE * diag)
    keys = ("chamfer_l1", "chamfer_l2", "hausdorff", "fscore", "precision", "recall", "threshold", "normal_consistency")
    return {k: m[k] for k in keys if k in m}


@torch.no_grad()
def sdf_slice(module, size: int = 256, z: float = 0.0) -> torch.Tensor:
    """(size, size, 3) image of the field on the plane z of its box (x right, y up): blue
    inside, orange outside, darker bands every 0.05 field units, the zero level in black."""
    axis = torch.linspace(-1, 1, size, device=module.device)
    yy, xx = torch.meshgrid(axis.flip(0), axis, indexing="ij")
    pts = torch.stack([xx, yy, torch.full_like(xx, z)], -1).reshape(-1, 3)
    f = module.sdf_eval(pts).view(size, size).float().cpu()
    inside = torch.tensor([0.25, 0.45, 0.85], device=f.device)
    outside = torch.tensor([0.95, 0.6, 0.25], device=f.device)
    base = torch.where((f < 0)[..., None], inside, outside)
    bands = 0.8 + 0.2 * torch.cos(f * (2 * torch.pi / 0.05))[..., None]
    edge = (f.abs() < 2.0 / size)[..., None]
    return torch.where(edge, torch.zeros_like(base), base * bands).clamp(0, 1)


def run_input(config: Dict[str, Any]) -> Optional[str]:
    """The input file a run recorded (it may since be gone), or None."""
    return (config.get("run") or {}).get("input") or None


def run_input_surface(config: Dict[str, Any]):
    """The Surface a fit-sdf run fitted (its input read again as the run read it: the same count
    and seed, so trimming finds the same spacing; a cloud's colours; no normals), or None when
    the input file is gone."""
    from ..data.surfaces import read_surface

    run = config.get("run") or {}
    source = run_input(config)
    if not source or not Path(source).is_file():
        return None
    mesh_points = (run.get("task_options") or {}).get("mesh_points") or SdfOptions.mesh_points
    return read_surface(source, int(mesh_points), int(run.get("seed") or 0), normals=False)


def extract_run_mesh(run_dir: Path, out: Optional[Path], resolution: int, device: str = "auto",
                     trim: Optional[float] = None) -> Dict[str, Any]:
    """`inr extract-mesh`: the zero level set of a fit-sdf run at `resolution`, written to `out`
    (default DIR/mesh-R.ply), trimmed to the run's input as its mesh.ply was (`trim`: None, the
    run's train.mesh_trim; 0: untrimmed)."""
    from .run import load_run
    from .sdf_fit import SdfFitModule

    if resolution < 8:
        raise InputError(None, f"--resolution must be >= 8, got {resolution}")
    if trim is not None and not trim >= 0:
        raise InputError(None, f"--trim must be >= 0, got {trim}")
    out = Path(out) if out else Path(run_dir) / f"mesh-{resolution}.ply"
    check_suffix(out, MESH_FORMATS, "mesh")
    module, config = load_run(Path(run_dir), "sdf", SdfFitModule, device)
    trim = float(module.train_cfg.mesh_trim) if trim is None else trim
    surface = run_input_surface(config)  # for trimming, and a coloured cloud's colours
    if trim > 0 and surface is None:
        raise InputError(run_dir, f"the run's input ({run_input(config)}) is gone, so the "
                         "mesh cannot be trimmed to it (--trim 0: the whole level set)")
    try:
        mesh, _ = trim_mesh(mesh_of(module, resolution), module, resolution,
                            None if surface is None else surface.points, trim)
    except ValueError as exc:
        raise InputError(run_dir, f"cannot extract a mesh: {exc}") from None
    coloured = surface is not None and surface.colors is not None
    if coloured:
        from .outputs import paint_mesh

        paint_mesh(mesh, surface.points, surface.colors)
    write_mesh(out, mesh)
    return {"out": str(out), "vertices": len(mesh.vertices), "faces": len(mesh.faces), "watertight": bool(mesh.is_watertight),
            "coloured": coloured}
