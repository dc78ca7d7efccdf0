"""`inr pointcloud mesh IN OUT`: a scan to a surface in one command. The cloud is denoised (the
network, MLS, or not at all), oriented (the file's normals where nothing moved the points; else
normals estimated on the denoised points, their sides from the file's normals when it has them, or
facing the scanner stations of an E57 or PTX scan, or an organized PCD's viewpoint), then meshed: a signed distance field fitted with
`fit-sdf` (a resumable run folder beside OUT), screened Poisson or ball pivoting. A coloured scan
gives a coloured mesh (each vertex takes its nearest input point's colour). The finished steps (the
network's denoising, the normals, the fit's start) are kept in `OUT.partial` (`inr.tasks.stages`):
the same command run again after a kill goes on from there, a stopped fit from its checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from ..errors import InputError
from .outputs import MESH_FORMATS, check_suffix, write_mesh
from .stages import partial_folder

METHODS = ("sdf", "poisson", "ball-pivoting")
DENOISERS = ("network", "mls", "none")
MIN_POINTS = 10
"""The fewest points a surface is meshed from (the input, and what denoising leaves)."""


def denoise(points: np.ndarray, how: str, weights: Optional[str] = None, voxel: Optional[float] = None,
            device: str = "auto", progress: bool = False, seed: int = 0, inp: Optional[Path] = None, stages=None):
    """(the cloud denoised by the network (as many points out as in, spread evenly; a cloud of widely
    varying spacing band by band, `network_denoise`, its steps through `stages` where given), by MLS
    projection, or unchanged ('none'); `how` in words; the network's warning or None)."""
    if how == "none":
        return points, how, None
    if how == "mls":
        from ..pointcloud.mls import mls_project

        return mls_project(points), how, None
    from .pointcloud import network_denoise

    out = network_denoise(points, len(points), inp or Path("the cloud"), "`--denoise mls` (or `--denoise none`)",
                          weights, voxel, device, progress, seed=seed, stages=stages)
    return out.points, how + (f", {out.bands}" if out.bands else ""), out.warning


def mesh_file(inp: Path, out: Path, method: str = "sdf", denoiser: str = "network", weights: Optional[str] = None,
              preset: Optional[str] = None, time_budget: Optional[float] = 120.0, steps: Optional[int] = None,
              resolution: Optional[int] = None, poisson_depth: int = 8, overwrite: bool = False, device: str = "auto",
              progress: bool = True, seed: int = 0, voxel: Optional[float] = None,
              poisson_trim: float = 0.0, trim: Optional[float] = None, keep_mixed: bool = False) -> Dict[str, Any]:
    """trim: sdf's reach (the fit's train.mesh_trim; None: the preset's, 0: the whole, closed level set).
    A scan whose stations are known loses its mixed pixels first (`data.pointclouds.without_mixed`), unless keep_mixed;
    a LAS file its points classed as noise and as things no surface holds (vegetation, wires: as the
    network's commands, `pointcloud.split_by_class`)."""
    from ..data.pointclouds import LAS_FORMATS, read_scan, without_mixed, write_cloud
    from ..data.surfaces import scan_normals
    from ..pointcloud.strays import strays
    from .outputs import nearest_colours, paint_mesh

    check_suffix(out, MESH_FORMATS, "mesh")
    if method not in METHODS:
        raise InputError(None, f"--method must be one of {', '.join(METHODS)}")
    if denoiser not in DENOISERS:
        raise InputError(None, f"--denoise must be one of {', '.join(DENOISERS)}")
    if not 0.0 <= poisson_trim < 1.0:
        raise InputError(None, f"--poisson-trim is a quantile in [0, 1), got {poisson_trim:g}")
    if poisson_trim and method != "poisson":
        raise InputError(None, f"--poisson-trim trims Poisson's surface: it needs --method poisson (got {method})")
    if trim is not None and (trim < 0 or method != "sdf"):
        raise InputError(None, f"--trim trims the fitted SDF's mesh: it needs --method sdf and a reach >= 0 (got "
                         f"{trim:g} with --method {method}; Poisson's surface: --poisson-trim)")
    if method != "sdf":  # before the network runs
        from .. import _external

        try:
            _external.open3d()
        except _external.MissingBackend as exc:
            raise InputError(None, f"--method {method} is Open3D's: {exc} (the default, --method sdf, "
                             "needs no open3d)") from None
    run_dir = out.with_name(f"{out.stem}-run")
    oriented = out.with_name(f"{out.stem}-oriented.ply")
    fitted = method == "sdf" and (run_dir / "checkpoints" / "last.ckpt").exists() and not overwrite
    if fitted and not partial_folder(out).is_dir():  # no run of this command to resume: before reading the scan
        raise InputError(run_dir, "already holds a run: --overwrite to replace it (or resume it with "
                         f"inr fit-sdf --resume {run_dir})")
    las = inp.suffix.lower() in LAS_FORMATS
    scan, mixed = without_mixed(read_scan(inp, "drop", records=las), keep_mixed)  # zero or NaN normals: unknown (NaN)
    by_class = 0  # a LAS file's points classed as noise or as things no surface holds (vegetation, wires)
    if las:
        from .pointcloud import split_by_class

        scan, _, noise, loose = split_by_class(inp, scan, np.asarray(scan.records.points.classification))
        by_class = noise + (0 if loose is None else int(loose.sum()))
        scan = (scan if loose is None else scan.subset(~loose))._replace(records=None)
    points, colors, normals, towards = scan.points, scan.colors, scan.normals, scan.towards
    if len(points) < MIN_POINTS:
        raise InputError(inp, f"holds {len(points)} points; a surface needs at least {MIN_POINTS}")
    start = time.perf_counter()
    # resumable after a kill (`OUT.partial`): the denoising (long on a large scan), the normals, the fit
    from .pointcloud import network_stages

    stages = network_stages(out, scan, len(points), Path(weights) if weights else None, voxel, device, "32", seed,
                            {"denoise": denoiser, "method": method, "preset": preset, "resolution": resolution,
                             "trim": trim, "poisson_depth": poisson_depth, "poisson_trim": poisson_trim})
    resume_fit = fitted and "oriented" in stages.held() and oriented.is_file()
    if fitted and not resume_fit:
        raise InputError(run_dir, "already holds a run of another input or settings: --overwrite to replace it (or "
                         f"resume it with inr fit-sdf --resume {run_dir})")
    # a Ctrl-C (or a stopped fit) from here on says that the same command resumes from OUT.partial; bad
    # input removes it
    with stages.guarded(sigterm=False):  # its SDF fit takes SIGTERM itself (Lightning)
        cleaned, denoised_by, warning = denoise(points, denoiser, weights, voxel, device, progress, seed, inp, stages)
        far = strays(cleaned)  # the network leaves none; MLS moves them along, 'none' keeps them
        given = scan.complete_normals if denoiser == "none" else None  # the file's normals of the points meshed
        if far.any():
            cleaned = cleaned[~far]
            given = None if given is None else given[~far]
        if len(cleaned) < MIN_POINTS:  # the network keeps no surface of a few scattered points
            raise InputError(inp, f"{len(cleaned)} points are left after denoising ({denoiser}); a surface needs at least "
                             f"{MIN_POINTS} (is it a surface scan? --denoise none keeps them all)")
        if given is not None:
            how, normals = "the file's", given
        else:  # estimated on the denoised points; a scanner's normals, or its stations (E57, PTX, PCD viewpoint), give their sides
            how = "estimated" + (", their sides from the file's" if normals is not None
                                 else ", facing the scanner stations" if towards is not None else "")
            normals = stages("normals", lambda: {"normals": scan_normals(cleaned, scan)})["normals"]
        prepared = time.perf_counter() - start
        result: Dict[str, Any] = {"input_points": len(points) + mixed + scan.withheld + by_class, "mixed_left_out": mixed,
                                  "withheld_left_out": scan.withheld, "class_left_out": by_class, "denoise": denoised_by,
                                  "method": method,
                                  "normals": how,
                                  "strays_left_out": int(far.sum()), "warning": warning,
                                  "resumed": stages.reused}
        if method == "sdf":
            from .run import RunOptions, RunStopped, train

            if resume_fit:  # this command's fit, stopped: it goes on from its checkpoint, as it was started
                opts = RunOptions(task="sdf", out=str(run_dir), steps=steps, time_budget=time_budget, device=device,
                                  progress=progress)
            else:
                write_cloud(oriented, cleaned, None if colors is None else nearest_colours(cleaned, points, colors), normals)
                stages("oriented", dict)  # the fit's input is written: the same command resumes the fit from here
                overrides = {"train.mesh_resolution": resolution} if resolution else {}
                if trim is not None:
                    overrides["train.mesh_trim"] = trim
                opts = RunOptions(task="sdf", input=str(oriented), preset=preset, out=str(run_dir), steps=steps,
                                  time_budget=time_budget, seed=seed, overrides=overrides, device=device,
                                  progress=progress, overwrite=overwrite)
            try:
                r = train(opts, resume=run_dir if resume_fit else None)
            except RunStopped as exc:  # the fit's own advice (fit-sdf --resume) gives way to this command's
                exc.args = (str(exc).split(";")[0],)
                raise
            import trimesh

            mesh = trimesh.load(run_dir / "mesh.ply", process=False)
            result.update({"run": str(run_dir), "oriented": str(oriented), "fit_seconds": r["seconds"], "steps": r["steps"]})
        else:
            from ..pointcloud import classical

            mesh = (classical.poisson(cleaned, normals, poisson_depth, poisson_trim) if method == "poisson"
                    else classical.ball_pivoting(cleaned, normals))
            if len(mesh.faces) == 0:
                raise InputError(inp, f"{method} made no faces from this cloud")
        if colors is not None:  # a coloured scan gives a coloured mesh: each vertex its nearest point's colour
            paint_mesh(mesh, points, colors)
        write_mesh(out, mesh)
    stages.finish()
    result.update({"coloured": colors is not None, "out": str(out), "vertices": int(len(mesh.vertices)), "faces": int(len(mesh.faces)),
                   "prepare_seconds": round(prepared, 3), "seconds": round(time.perf_counter() - start, 3)})
    return result
