"""`inr pointcloud ...`: orchestration of point-cloud commands (files in, files/JSON out), and the
`pointcloud` training task (its Lightning module lives in pointcloud_train.py, imported when a
run starts, so that the command line starts without Lightning)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from ..data.pointclouds import read_cloud
from ..errors import InputError
from ..pointcloud.metrics import compare
from .base import Task, register_task

if TYPE_CHECKING:
    from ..pointcloud.bands import Stages

DEFAULT_THRESHOLD_SHARE = 0.01
"""F-score threshold when none is given: this share of the ground truth's bounding-box diagonal."""


def evaluate_files(pred: Path, gt: Path, threshold: Optional[float] = None, drop_duplicates: bool = False) -> Dict[str, Any]:
    """Chamfer (both forms), Hausdorff, F-score and counts of PRED against GT."""
    policy = "drop" if drop_duplicates else "error"
    p, _ = read_cloud(pred, policy)
    g, _ = read_cloud(gt, policy)
    diag = float(np.linalg.norm(g.max(0) - g.min(0)))
    if threshold is None:
        threshold, rule = DEFAULT_THRESHOLD_SHARE * diag, f"{DEFAULT_THRESHOLD_SHARE:g} x the ground truth's bounding-box diagonal"
    elif threshold <= 0:
        raise InputError(None, f"--threshold must be > 0, got {threshold}")
    else:
        rule = "given"
    out: Dict[str, Any] = {"pred": str(pred), "gt": str(gt)}
    out.update(compare(p, g, threshold))
    out.update({
        "threshold_rule": rule,
        "gt_bbox_diagonal": diag,
        "chamfer_l2_form": "mean_p min_g |p-g|^2 + mean_g min_p |g-p|^2",
        "chamfer_l1_form": "(mean_p min_g |p-g| + mean_g min_p |g-p|) / 2",
    })
    return out


STATISTICAL_OUTLIER = {"nb_neighbors": 20, "std_ratio": 2.0}
"""The --baseline open3d parameters: a point is dropped when its mean distance to its 20 nearest
neighbours exceeds the cloud's mean of that distance by more than 2 standard deviations."""

DEFAULT_WEIGHTS = "pointcloud.pt"
MAX_VOXELS_PER_AXIS = 30_000
"""Packed voxel keys hold coordinates in [-2^15, 2^15); this leaves room for the candidates."""


BASELINES = ("open3d", "mls")
DENSITIES = ("even", "scan")
"""How the network's output points spread over the surface: evenly, or as densely as the scan's in
each region (`network_denoise`)."""
FOLLOWED = ", as dense as the input in each region"


SPREAD_TRAINED, SPREAD_WARN = 2.5, 4.0
"""A cloud whose point spacing varies more than SPREAD_WARN (`spacing_spread`: the 90th over the 10th
percentile) goes band by band of like spacing in the network's commands (`inr.pointcloud.bands`), or,
with a voxel given, gets a warning. The training stream's inputs (150 clouds, evenly spread and
range scans, generator shapes and training meshes: a one-off script, 2026-12-06, session 51) spread
1.49-2.47x (median 1.62; SPREAD_TRAINED, rounded); terrestrial laser scans of `heldout.lidar_scene`
13-15x, where `denoise` at one voxel left the points less accurate than they came in (README, "Laser
scans"). Chosen from the training figures alone."""


def _check_density(density: str) -> None:
    if density not in DENSITIES:
        raise InputError(None, f"--density must be one of {', '.join(DENSITIES)}, got {density!r}")


def spacing_warning(spread: float, inp: Path, instead: str) -> Optional[str]:
    """The warning for a cloud whose spacing varies past SPREAD_WARN (None for others) that the network
    runs on at one given voxel; `instead`: what the command offers in its place."""
    if not spread > SPREAD_WARN:
        return None
    return (f"{inp}: the point spacing varies {spread:.0f}x over this cloud (10th to 90th percentile; the network "
            f"trained on clouds up to {SPREAD_TRAINED:g}x), as a terrestrial laser scan's does: with --voxel-size the "
            f"network runs at one voxel for all of it, and on such scans that left the points less accurate than they "
            f"came in, where {instead} did better; without it the cloud goes by spacing band (README, \"Laser scans\")")


def statistical_outlier_baseline(points: np.ndarray) -> np.ndarray:
    """The points Open3D's remove_statistical_outlier(STATISTICAL_OUTLIER) keeps."""
    from ..data.pointclouds import _open3d

    o3d = _open3d(None, "--baseline open3d needs open3d")
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    _, kept = cloud.remove_statistical_outlier(**STATISTICAL_OUTLIER)
    return points[np.asarray(kept, dtype=np.int64)]


def default_weights() -> Path:
    from .._resources import data_dir

    return data_dir("assets") / DEFAULT_WEIGHTS


def network_points(points: np.ndarray, weights: Optional[Path] = None, voxel: Optional[float] = None,
                   device: str = "auto", progress: bool = False, precision: str = "32"):
    """(every point the reconstruction network outputs for the cloud (M, 3) float64, the weights' path,
    whether its native kernels ran their products in bfloat16: precision 'bf16' where the CPU has
    them, `pointcloud.network.use_bf16`)."""
    run, path, bf16 = _network(weights, voxel, device, progress, precision)
    return run(points), path, bf16


def _network(weights: Optional[Path], voxel: Optional[float], device: str, progress: bool, precision: str,
             tiles=None):
    """(a function: cloud (M, 3) float64 -> the network's points for it, float64; the weights' path;
    whether its products run in bfloat16). tiles: where its tiles are kept (`Reconstructor.keep_tiles`)."""
    import torch

    from ..devices import resolve_device
    from ..pointcloud.network import use_bf16
    from ..pointcloud.weights import load_weights

    path = Path(weights) if weights else default_weights()
    if not weights and not path.is_file():
        raise InputError(path, "no trained weights are shipped yet; pass --weights DIR/model.pt from `inr pointcloud train`")
    model = load_weights(path).to(resolve_device(device))
    bf16 = precision == "bf16" and next(model.parameters()).device.type == "cpu" and use_bf16(model)
    model.keep_tiles = tiles

    def run(points: np.ndarray) -> np.ndarray:
        pts, _ = model.reconstruct(torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64)), voxel=voxel,
                                   progress=progress)  # float64 in and out
        return pts.double().cpu().numpy()

    return run, path, bf16


class Denoised(NamedTuple):
    points: np.ndarray  # (want, 3) float64
    method: str  # in words, for the command's report
    warning: Optional[str]
    bands: Optional[str]  # where the cloud went band by band: which route took how many points
    groups: Optional[np.ndarray] = None  # each output point's spacing band, where the cloud went band by band


def network_denoise(points: np.ndarray, want: int, inp: Path, instead: str, weights: Optional[Path] = None,
                    voxel: Optional[float] = None, device: str = "auto", progress: bool = False,
                    precision: str = "32", seed: int = 0, stages: Optional[Stages] = None,
                    density: str = "even") -> Denoised:
    """want points of the cloud's surface by the network (`Denoised`). A cloud whose spacing varies
    past SPREAD_WARN is denoised band by band of like spacing (`inr.pointcloud.bands`), unless a
    voxel is given: then the network runs at it on the whole cloud, with `spacing_warning`
    (`instead`: what the command offers in its place). Outliers scattered through the volume in
    larger numbers than the network trained with are left out before it runs on a whole cloud
    (`inr.pointcloud.strays.scattered`). stages: the steps' arrays go through it (`inr.pointcloud.bands.Stages`,
    as `network_stages` makes them), so that a run killed part way reuses those it finished.
    density: 'even' (the points spread evenly over the surface) or 'scan' (as dense as the
    input's points in each region: `inr.pointcloud.voxel.density_subsample`)."""
    from ..pointcloud.bands import compute_all, denoise_by_band, describe
    from ..pointcloud.knn import spacing_spread
    from ..pointcloud.mls import mls_fill
    from ..pointcloud.strays import scattered

    _check_density(density)
    run, path, bf16 = _network(weights, voxel, device, progress, precision, getattr(stages, "tile", None))
    method = f"network {path}"
    if precision == "bf16":
        method += " in bf16" if bf16 else " in float32: bf16 products need the native kernels on a CPU with AVX512-BF16"
    follow = density == "scan"
    stages = stages or compute_all
    spread = spacing_spread(points)
    if voxel is None and spread > SPREAD_WARN:
        done = denoise_by_band(points, run, want / len(points), seed, stages, follow)
        by_band = describe(done.bands)
        off = int((~done.kept).sum())
        if off:
            by_band = f"{off:,} points off the surface ({off / len(points):.1%}) left out first, {by_band}"
        return Denoised(done.points, f"{method}{FOLLOWED * follow}, {by_band}", None, by_band, done.groups)
    warning = spacing_warning(spread, inp, instead)
    far = scattered(points, seed)
    if far.any():
        method += f", {int(far.sum()):,} outliers scattered through the volume ({far.mean():.0%}) left out before it"
    kept = points[~far] if far.any() else points
    pts = stages("network", lambda: {"points": run(kept)})["points"]
    if len(pts) < want:  # the network gives at most points_per_voxel per occupied voxel
        method += f" ({len(pts):,} points, filled in between on their MLS surface)"
    return Denoised(mls_fill(pts, want, seed, like=kept if follow else None), method + FOLLOWED * follow, warning, None)


def process_file(mode: str, inp: Path, out: Path, weights: Optional[Path] = None, factor: float = 4.0,
                 baseline: Optional[str] = None, drop_duplicates: bool = False, seed: int = 0,
                 voxel: Optional[float] = None, progress: bool = False, device: str = "auto",
                 normals: Optional[bool] = None, precision: str = "32", keep_mixed: bool = False,
                 density: str = "even", keep_points: bool = False, keep_sigmas: Optional[float] = None) -> Dict[str, Any]:
    """denoise (as many points out as in), densify (factor x as many), reconstruct (both at once:
    the network always denoises) a cloud file into another; or a baseline for denoise: 'open3d'
    (statistical outlier removal) or 'mls' (moving-least-squares projection, `inr.pointcloud.mls`).
    voxel: the network's voxel side in the cloud's units (default: `Reconstructor.reconstruct`'s rule).
    The input's colours and intensities, if any, go to every output point from its nearest input
    point (intensities where the output's format holds them: `write_cloud`); from a LAS/LAZ file to
    another, the nearest input point's whole record (classification, returns, GPS time, ...); of
    the points the network or MLS moved, the nearest not classed as noise (`_carrying_rows`).
    normals: write the output's normals, estimated and oriented (`inr.data.surfaces.estimate_normals`;
    where the input has normals, a scanner's, they give the sides; an E57 or PTX scan's stations,
    or an organized PCD's viewpoint, give them too: `read_scan`); None: where the format holds them
    (all but XYZ and NPY). The input's normals are not needed: zero or NaN ones (unknown, as some
    writers leave them) are passed over. precision: '32', or 'bf16' (the native kernels' products
    in bfloat16 where the CPU has them; the method then says so). A scan whose stations are known
    loses its mixed pixels first, for every method (`data.pointclouds.without_mixed`), unless keep_mixed.
    density: the network's output points 'even' over the surface or as dense as the 'scan''s in each
    region (`network_denoise`; the baselines keep one point per input point, so the scan's).
    keep_points (denoise with the network): the input's own points are written, as measured and
    with all they carry, less those off the network's surface (`inr.pointcloud.keep.on_surface`;
    the noise read per spacing band where the cloud went band by band; keep_sigmas: its threshold
    in noise levels, default `KEEP_SIGMAS`). With the network, a LAS file's classes count
    (`split_by_class`): its points classed as noise are left out first, and those classed as
    vegetation or wires are not given to the network but written as measured, less the isolated
    (`inr.pointcloud.strays.isolated`; `factor` multiplies the other points alone)."""
    from ..data.pointclouds import (E57_FORMATS, INTENSITY_FORMATS, LAS_FORMATS, check_write_format, read_scan, without_mixed,
                                    write_cloud)

    check_write_format(out)  # before the network runs
    if not out.parent.is_dir():
        raise InputError(out.parent, "no such folder")
    if factor <= 0:
        raise InputError(None, f"--factor must be > 0, got {factor}")
    if voxel is not None and voxel <= 0:
        raise InputError(None, f"--voxel-size must be > 0, got {voxel}")
    _check_density(density)
    if keep_points and (mode != "denoise" or baseline is not None):
        raise InputError(None, "--keep-points is for denoise with the network (not a baseline)")
    if keep_sigmas is not None and not keep_points:
        raise InputError(None, "--keep-sigmas is for --keep-points")
    if keep_sigmas is not None and keep_sigmas <= 0:
        raise InputError(None, f"--keep-sigmas must be > 0, got {keep_sigmas}")
    if keep_points and density != "even":
        raise InputError(None, "--keep-points writes the input's own points; --density is for the network's")
    normals = _wants_normals(out, normals)
    las_out = out.suffix.lower() in LAS_FORMATS  # a LAS file's point records go to a LAS output
    # the network's commands read a LAS file's classes whatever they write (`split_by_class`)
    with_records = las_out or (baseline is None and inp.suffix.lower() in LAS_FORMATS)
    scan, mixed = without_mixed(read_scan(inp, "drop" if drop_duplicates else "error", records=with_records), keep_mixed)
    classes = None if scan.records is None else np.asarray(scan.records.points.classification)
    if not las_out:
        scan = scan._replace(records=None)  # the classes alone: the records hold 20-60 bytes a point
    noise_out, loose = 0, None
    if baseline is None and classes is not None:  # the network's commands go by a LAS file's classes
        scan, classes, noise_out, loose = split_by_class(inp, scan, classes)
    points, colors = scan.points, scan.colors
    if voxel is not None and float(np.ptp(points, axis=0).max()) / voxel > MAX_VOXELS_PER_AXIS:
        raise InputError(inp, f"--voxel-size {voxel:g} makes more than {MAX_VOXELS_PER_AXIS} voxels along an axis of this cloud; use a larger one")
    if baseline is not None and (baseline not in BASELINES or mode != "denoise"):
        raise InputError(None, f"--baseline {' or '.join(BASELINES)} is only for denoise")
    want = len(points) if mode == "denoise" else int(round(factor * len(points)))
    # the network runs on the surfaces: of a LAS file, not on the points classed as vegetation or wires
    net_scan = scan if loose is None else scan.subset(~loose)
    net_want = want if loose is None else len(net_scan.points) if mode == "denoise" else int(round(factor * len(net_scan.points)))
    warning, stages = None, None
    if baseline is None:  # the network's run is long on a large scan: resumable after a kill (`OUT.partial`)
        # keep-points writes other points (and normals) from the same network stages: its own key
        keep = {"keep_sigmas": keep_sigmas or 0.0} if keep_points else {}
        stages = network_stages(out, net_scan, net_want, weights, voxel, device, precision, seed, {"density": density, **keep})
    # a Ctrl-C from here on says that the same command resumes from OUT.partial; bad input removes it
    with nullcontext() if stages is None else stages.guarded():
        if baseline == "mls":
            from ..pointcloud.mls import MLS_NEIGHBOURS, MLS_PASSES, mls_project

            result = mls_project(points)
            method = f"MLS projection (quadric jets, k = {MLS_NEIGHBOURS}, {MLS_PASSES} passes)"
        elif baseline == "open3d":
            result = statistical_outlier_baseline(points)
            method = f"open3d remove_statistical_outlier({STATISTICAL_OUTLIER})"
        else:
            denoised = network_denoise(net_scan.points, net_want, inp, "`--baseline mls`", weights, voxel, device, progress,
                                       precision, seed, stages, density)
            result, method, warning = denoised.points, denoised.method, denoised.warning
        own = None  # the rows of the input points written, where they are written as they came
        passed = None  # of a LAS file, the rows of its vegetation and wires written as they came beside the network's
        if keep_points:
            own, said = _keep_points(points, result, denoised.groups, keep_sigmas, loose)
            result = points[own]
            method += said
        elif loose is not None:
            from ..pointcloud.strays import isolated

            alone = isolated(points, loose)
            passed = np.flatnonzero(loose & ~alone)
            result = np.concatenate([result, points[passed]])
            method += (f"; its {int(loose.sum()):,} points classed as vegetation or wires (not surfaces) written as "
                       f"measured, less the {int(alone.sum()):,} isolated among them")
        if noise_out:
            method += f"; {noise_out:,} points classed as noise left out first"
        if len(result) == 0:
            raise InputError(inp, "nothing of the cloud was kept (is it a surface scan?)")
        records = scan.records
        stations = scan.stations if out.suffix.lower() in E57_FORMATS else None
        carried = None
        if colors is not None or scan.intensity is not None or records is not None or stations is not None:
            if own is not None:
                carried = own
            elif passed is not None:  # the network's points carry the nearest surface point's row, the others their own
                from .outputs import nearest_rows

                surface = np.flatnonzero(~loose)
                moved = result[:len(result) - len(passed)]
                carried = np.concatenate([surface[nearest_rows(moved, points[surface])], passed])
            else:
                carried = _carrying_rows(result, points, records, baseline != "open3d")
        out_colors = None if colors is None else colors[carried]
        out_intensity = None if scan.intensity is None else scan.intensity[carried]
        out_records = None if records is None else records[carried]
        shift = losses = None
        if classes is not None and keep_points:
            from ..data.las import class_losses

            losses = class_losses(classes, classes[own])
        elif records is not None and baseline is None and density == "even":
            from ..data.las import class_shift

            shift = class_shift(np.asarray(records.points.classification), np.asarray(out_records.points.classification))
        out_stations = None if stations is None else stations[carried]
        out_normals = None
        normals_kept = normals and own is not None and scan.normals is not None and not np.isnan(scan.normals[own]).any()
        if normals_kept:
            out_normals = scan.normals[own]  # the input's own points with the scanner's normals, as they came
        elif normals:
            from ..data.surfaces import scan_normals

            out_normals = (scan_normals(result, scan) if stages is None
                           else stages("normals", lambda: {"normals": scan_normals(result, scan)})["normals"])
        write_cloud(out, result, out_colors, out_normals, out_intensity, out_records, out_stations)
    if stages is not None:
        stages.finish()
    sides_from = None
    if normals_kept:
        sides_from = "the input's, kept as they came"
    elif normals and scan.normals is not None:
        known = int((~np.isnan(scan.normals[:, 0])).sum())
        sides_from = "the input's normals" + ("" if known == len(points) else f", known on {known:,} of {len(points):,} points")
    elif normals and scan.towards is not None:
        sides_from = "the scanner stations"
    intensity = None if scan.intensity is None else out.suffix.lower() in INTENSITY_FORMATS
    return {"input_points": int(len(points)) + mixed + scan.withheld + noise_out, "mixed_left_out": mixed,
            "withheld_left_out": scan.withheld, "output_points": int(len(result)),
            "method": method, "normals": normals, "intensity": intensity, "records": records is not None,
            "sides_from": sides_from, "warning": warning, "resumed": [] if stages is None else stages.reused,
            "class_shift": shift, "keep_points": keep_points, "class_losses": losses}


def split_by_class(inp: Path, scan, classes: np.ndarray):
    """(the scan less a LAS file's points classed as noise (`inr.data.las.NOISE_CLASSES`), its classes,
    how many were left out, the mask of the rest classed as things no surface holds
    (`NOT_SURFACE_CLASSES`: vegetation, wires) or None where there are none): what the network's
    commands (`process_file`) and `pointcloud mesh` do by class."""
    from ..data.las import NOISE_CLASSES, NOT_SURFACE_CLASSES

    noise = np.isin(classes, NOISE_CLASSES)
    if noise.all():
        raise InputError(inp, f"all {len(classes):,} of its points are classed as noise (LAS classes 7 and 18)")
    if noise.any():
        scan, classes = scan.subset(~noise), classes[~noise]
    loose = np.isin(classes, NOT_SURFACE_CLASSES)
    if loose.all():
        raise InputError(inp, "all its points are classed as vegetation or wires (LAS classes 3-5, 13-16): no surface")
    return scan, classes, int(noise.sum()), loose if loose.any() else None


def _keep_points(points: np.ndarray, surface: np.ndarray, groups: Optional[np.ndarray], keep_sigmas: Optional[float],
                 loose: Optional[np.ndarray]) -> Tuple[np.ndarray, str]:
    """(the rows of the input points `denoise --keep-points` writes, what the method adds): those on
    the denoised surface (`inr.pointcloud.keep.on_surface`; the noise read per band where `groups`);
    of `loose`, a LAS file's points classed as vegetation or wires (not surfaces:
    `inr.data.las.NOT_SURFACE_CLASSES`), those not isolated (`strays.isolated`)."""
    from ..pointcloud.keep import KEEP_SIGMAS, on_surface

    sigmas = KEEP_SIGMAS if keep_sigmas is None else keep_sigmas
    kept = on_surface(points, surface, groups, sigmas, not_surface=loose)
    per = " (read per spacing band)" if groups is not None else ""
    said = f"those off its surface (over {sigmas:g} noise levels{per}, or beyond its edge)"
    if loose is not None:
        said += (f", of its {int(loose.sum()):,} classed as vegetation or wires (not surfaces) the "
                 f"{int((loose & ~kept).sum()):,} isolated among them instead")
    own = np.flatnonzero(kept)
    return own, f"; the input's own points kept, less {len(points) - len(own):,} ({1 - len(own) / len(points):.1%}): {said}"


def _carrying_rows(result: np.ndarray, points: np.ndarray, records, moved: bool) -> np.ndarray:
    """Each output point's input row, whose colour, intensity, record and station it carries: the
    nearest input point's; for points moved onto the surface (the network's, MLS's) from a LAS file
    whose records class some points as noise (`inr.data.las.NOISE_CLASSES`), the nearest of the others."""
    from .outputs import nearest_rows

    if moved and records is not None:
        from ..data.las import NOISE_CLASSES

        clean = np.flatnonzero(~np.isin(np.asarray(records.points.classification), NOISE_CLASSES))
        if 0 < len(clean) < len(points):
            return clean[nearest_rows(result, points[clean])]
    return nearest_rows(result, points)


def network_stages(out: Path, scan, want: int, weights: Optional[Path], voxel: Optional[float], device: str,
                   precision: str, seed: int, more: Optional[Dict[str, Any]] = None):
    """The resumable stages (`inr.tasks.stages`) of the network's run on `scan` for a command writing
    `out` (`more`: its other settings that change what it writes): kept in `OUT.partial` as they
    finish, reused by the same command run again after a kill (which it says on stderr)."""
    import sys

    from .stages import file_identity, resumable

    path = Path(weights) if weights else default_weights()
    stages = resumable(out, scan, {"want": want, "weights": file_identity(path) if path.is_file() else str(path),
                                   "voxel": voxel, "device": device, "precision": precision, "seed": seed,
                                   **(more or {})})
    held, tiles = stages.held(), stages.held_tiles()
    if held or tiles:
        done = [f"{len(held)} finished stage{'s' * (len(held) > 1)}: {', '.join(held)}"] if held else []
        done += [f"{tiles} tile{'s' * (tiles > 1)} of the stage under way"] if tiles else []
        print(f"inr: resuming from {stages.folder} ({'; '.join(done)})", file=sys.stderr)
    return stages


def _wants_normals(out: Path, asked: Optional[bool]) -> bool:
    """Whether the output gets normals: as asked, or by default where its format holds them
    (estimated by open3d, or without it by `plain_normals`). XYZ has no place for them."""
    suffix = out.suffix.lower()
    if asked is None:
        return suffix not in (".xyz", ".npy")
    if asked and suffix == ".xyz":
        raise InputError(out, "XYZ files have no place for normals; write .ply, .pcd, .npy, .las, .laz, .e57, .txt, .asc "
                         "or .csv, or leave out --normals")
    return asked


@register_task("pointcloud")
class PointCloudTask(Task):
    """Train the reconstruction network; the input (optional) is a folder of meshes to train on
    instead of synthetic shapes."""

    default_preset = "default"
    main_metric, curve_name = "validation_chamfer_ratio", "Chamfer ratio"
    input_help = "a folder of meshes (.ply/.obj/.off/.stl/.glb) to train on (default: synthetic shapes made on the fly)"
    outputs_help = "model.pt (the weights), metrics.json, checkpoints"
    log_every = 20

    def load(self) -> None:
        from .pointcloud_train import load_meshes, validation_pairs

        self.meshes = load_meshes(Path(self.opts.input)) if self.opts.input else None
        self.pairs = validation_pairs()

    def build_module(self):
        from dataclasses import asdict

        from .pointcloud_train import PointCloudModule

        return PointCloudModule(asdict(self.preset.field), asdict(self.preset.train))

    def build_data(self):
        from .pointcloud_train import ShapeData

        return ShapeData(self.preset.train, self.meshes, self.opts.seed)

    def measure(self, module) -> float:
        from .pointcloud_train import chamfer_ratio

        return chamfer_ratio(module.model, self.pairs)

    def write_outputs(self, out: Path, module, steps: int, seconds: float, history) -> Dict[str, Any]:
        from .pointcloud_train import export_weights

        export_weights(module, out / "model.pt")
        return {"validation_chamfer_ratio": history[-1][2] if history else None, "weights": str(out / "model.pt")}

    @staticmethod
    def summary(r: Dict[str, Any]) -> str:
        return (f"trained {r['steps']} steps in {r['seconds']:.1f} s; validation Chamfer output/input "
                f"{r['validation_chamfer_ratio']:.3f}; weights {r['weights']}")
