"""The `inr` command: parse arguments, call the task layer, report errors as one line.

Every training command (fit-image, fit-audio, fit-video, nerf train, pointcloud train) is
generated from the task registry with the same run options; `--out` names the output of every
command (a folder for runs, a file otherwise)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import InputError
from .tasks.base import positive_float, positive_int

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


def _parse_sets(items: Optional[List[str]]) -> Dict[str, Any]:
    import yaml

    out: Dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(None, f"--set takes KEY=VALUE (e.g. train.lr=1e-3), got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise InputError(None, f"--set {key}: cannot parse value {value!r}") from None
    return out


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", help="auto (default: the first GPU when there is one), cpu, cuda or cuda:N")


def add_run_options(p: argparse.ArgumentParser, default_preset: str, with_preset: bool = True) -> None:
    """The run options of every training command, defined once."""
    if with_preset:
        p.add_argument("--preset", help=f"preset name (see `inr presets`) or a YAML file (default: {default_preset})")
    p.add_argument("--steps", type=positive_int, help="optimizer steps (default: the preset's; with only --time-budget, unbounded)")
    p.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                   help="stop after this many training seconds (compile included, evaluation excluded)")
    p.add_argument("--out", metavar="DIR", help="run folder (default: runs/<task>-<preset>-<time>)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                   help="override a preset entry, e.g. --set train.lr=3e-3 (with --resume: train.lr, train.steps, ...)")
    _add_device(p)
    p.add_argument("--devices", type=positive_int, default=1, help="DDP over N processes per node (N GPUs, or N CPU processes)")
    p.add_argument("--num-nodes", type=positive_int, default=1, help="DDP over this many machines (Lightning's cluster environment)")
    p.add_argument("--precision", choices=["32", "bf16"], help="fp32, or bf16 autocast (default: the preset's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--logger", choices=["csv", "tensorboard", "wandb"], default="csv",
                   help="experiment tracker beside the CSV logs: TensorBoard (DIR/tensorboard) or W&B (DIR/wandb, "
                   "offline unless WANDB_MODE=online); scalars, the curve and sample renders (default csv)")


TRAIN_COMMANDS = {  # command -> (task, input argument, what)
    "fit-image": ("image", "IMAGE", "fit a field to an image"),
    "fit-audio": ("audio", "AUDIO", "fit a field to an audio clip"),
    "fit-video": ("video", "VIDEO", "fit a field over (t, y, x) to a video"),
    "fit-sdf": ("sdf", "INPUT", "fit a signed distance field to a mesh or an oriented point cloud; its zero level as a mesh"),
}


def _add_train_command(sub, name: str, task: str, input_name: Optional[str], what: str, input_flag: Optional[str] = None):
    from .tasks.base import get_task

    cls = get_task(task)
    p = sub.add_parser(name, help=what, description=f"{what[0].upper() + what[1:]}; writes DIR/metrics.json, "
                       f"{cls.outputs_help}, config.yaml and checkpoints. Kill it any time and continue with --resume DIR.")
    if input_flag:
        p.add_argument(input_flag, dest="input", metavar="DIR", help=cls.input_help)
    elif input_name:
        # optional on the command line for all: a resumed run knows its input, and a task without
        # a bundled default says it needs one (one line, exit 2)
        p.add_argument("input", metavar=input_name, nargs="?", help=cls.input_help)
    add_run_options(p, cls.default_preset)
    cls.add_arguments(p)
    p.set_defaults(task=task)
    return p


KEEP_MIXED_HELP = ("keep the mixed pixels of a scan whose scanner stations are known (E57, PTX, a PCD with its "
                   "viewpoint): by default the returns that blend two surfaces at a depth edge, off every surface, are "
                   "left out first")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inr", description="Implicit neural representations: fit images, audio, video, "
                                     "radiance fields and point clouds with coordinate networks, on CPU or GPU.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("presets", help="list the bundled presets", description="List the bundled presets of each task.")
    p.add_argument("--task", choices=["image", "audio", "video", "sdf", "nerf", "pointcloud"], help="only this task's presets")
    p = sub.add_parser("view", help="a web viewer for a NeRF run, an SDF/image/audio/video fit, or point clouds and meshes",
                       description="Open a local web viewer (viser) on PATH: a nerf run folder (progressive renders "
                       "from any camera, RGB/depth/accumulation, training cameras, crop box, orbit video and mesh/point "
                       "export from the page), an image/audio/video run folder (reconstruction, error, curve, the field "
                       "at any zoom), a fit-sdf run folder (the zero level set re-extracted at any resolution or "
                       "level, the input points, a slice of the field on a movable plane), or one or more point-cloud/mesh files (several are shown side by side: "
                       "inr view noisy.ply denoised.ply). Serves until Ctrl-C.")
    p.add_argument("paths", metavar="PATH", nargs="+")
    p.add_argument("--port", type=positive_int, default=8080, help="port (default 8080)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only; "
                   "0.0.0.0 shares it with the network, with a warning)")
    _add_device(p)
    p = sub.add_parser("runs", help="list run folders: task, preset, status, steps, seconds, main metric",
                       description="List the run folders at or under DIR (default: runs) as a table: task, preset, "
                       "status (running, finished, stopped, diverged, failed, killed), steps, training seconds and "
                       "the main metric (the last evaluation's value for an unfinished run).")
    p.add_argument("dir", metavar="DIR", nargs="?", default="runs")
    sub.add_parser("doctor", help="what this machine gives inr: devices, backends and why, versions",
                   description="Print torch/CUDA and the devices, which backend each component uses here and why, and versions.")

    for name, (task, input_name, what) in TRAIN_COMMANDS.items():
        _add_train_command(sub, name, task, input_name, what)

    p = sub.add_parser("render-image", help="render a fitted image at any resolution",
                       description="Render the image field of a fit-image run at SCALE times its size, in chunks.")
    p.add_argument("run", metavar="DIR", help="a fit-image run folder")
    p.add_argument("--scale", type=positive_float, default=1.0, help="output size / training image size (default 1)")
    p.add_argument("--out", metavar="FILE", required=True, help="output image file (.png, .jpg, ...)")
    p.add_argument("--level", type=int, help="PINs fields: render this level only (0 = coarsest)")
    _add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("extract-mesh", help="the zero-level mesh of a fit-sdf run at any resolution",
                       description="Marching cubes on the signed distance field of a fit-sdf run (evaluated only "
                       "near the surface), in the input's units.")
    p.add_argument("run", metavar="DIR", help="a fit-sdf run folder")
    p.add_argument("--resolution", type=positive_int, default=512, help="lattice points per side (default 512; "
                   "rounded up to an even number of cells)")
    p.add_argument("--out", metavar="FILE", help="mesh file: .ply, .obj or .glb (default DIR/mesh-R.ply)")
    p.add_argument("--trim", type=float, metavar="K", help="drop the large patches of faces farther than K units from the "
                   "run's input (the unit: its median point spacing or the lattice cell, whichever is larger; default: "
                   "the run's train.mesh_trim; 0: the whole, closed level set)")
    _add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("render-video", help="render a fitted video at any size and frame rate",
                       description="Render the field of a fit-video run at SCALE times its frame size (spatial "
                       "super-resolution) and FPS frames per second (more than the source's: temporal super-resolution).")
    p.add_argument("run", metavar="DIR", help="a fit-video run folder")
    p.add_argument("--scale", type=positive_float, default=1.0, help="output frame size / training frame size (default 1)")
    p.add_argument("--fps", type=positive_float, help="frames per second (default: the source's)")
    p.add_argument("--out", metavar="FILE", required=True, help="video file: .mp4 or .gif")
    _add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("compare", help="fit several presets to one signal and compare them",
                       description="Run each preset on the same image or audio file with the same options; write "
                       "DIR/compare.json, compare.md (the table) and compare.png (quality vs wall time).")
    p.add_argument("input", metavar="SIGNAL", help="an image or audio file")
    p.add_argument("--presets", required=True, help="comma-separated preset names, e.g. relu,fourier,hashgrid")
    add_run_options(p, "", with_preset=False)
    p.add_argument("--holdout", choices=["none", "even-odd"], help="see fit-image")

    nerf = sub.add_parser("nerf", help="NeRF on scene folders (process, train, eval, render, export)",
                          description="Radiance fields on Blender, instant-ngp/nerfstudio, COLMAP or LLFF scene folders, and "
                          "scene folders made from photos or a video (process).")
    nsub = nerf.add_subparsers(dest="nerf_command", metavar="ACTION", required=True)
    p = _add_train_command(nsub, "train", "nerf", "SCENE", "train a radiance field on a scene")
    p.add_argument("--viewer", action="store_true", help="a live web viewer of the field while it trains (at most "
                   "10 %% of the training time goes to its renders)")
    p.add_argument("--viewer-port", type=positive_int, default=8080, help="its port (default 8080)")
    p.add_argument("--viewer-host", default="127.0.0.1", help="its address (default 127.0.0.1: this machine only)")
    p = nsub.add_parser("process", help="photos or a video -> a posed scene folder (structure from motion)",
                        description="Recover camera poses of photos (a folder) or of frames of a video with pycolmap "
                        "(SIFT, matching, incremental mapping) and write a scene folder: transforms.json (nerfstudio's "
                        "convention), images/ and images_2/4/8, sparse/0 (the COLMAP model), sparse_pc.ply.")
    p.add_argument("input", metavar="INPUT", help="a folder of photos or a video file")
    p.add_argument("out", metavar="OUT_SCENE", help="the scene folder to write")
    p.add_argument("--fps", type=positive_float, help="video: frames kept per second (default: about --num-frames in all)")
    p.add_argument("--num-frames", type=positive_int, default=100, help="video: about this many frames (default 100)")
    p.add_argument("--matcher", choices=["auto", "exhaustive", "sequential"], default="auto",
                   help="feature matching: exhaustive for photos and up to 120 frames, sequential for longer videos (auto)")
    p.add_argument("--camera-model", default="SIMPLE_RADIAL",
                   choices=["SIMPLE_RADIAL", "OPENCV", "PINHOLE", "SIMPLE_PINHOLE", "RADIAL", "OPENCV_FISHEYE"],
                   help="COLMAP camera model shared by all images (default SIMPLE_RADIAL)")
    p.add_argument("--max-size", type=positive_int, default=1600, help="longest image side for SIFT (default 1600)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT_SCENE if it exists")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p = nsub.add_parser("eval", help="score a trained run on its test split",
                        description="Render every test view of a nerf train run; per-view and mean PSNR/SSIM to DIR/eval.json.")
    p.add_argument("run", metavar="DIR")
    _add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = nsub.add_parser("render", help="render a video of a trained run",
                        description="Render a camera path into a video: an orbit (axis: the training cameras' mean up "
                        "vector; centre: where their optical axes meet; radius and height: theirs), LLFF's spiral in front "
                        "of forward-facing cameras, or a nerfstudio camera_path JSON (cameras, or keyframes interpolated).")
    p.add_argument("run", metavar="DIR")
    p.add_argument("--path", default="orbit", help="orbit (default), spiral (forward-facing scenes) or a nerfstudio "
                   "camera_path .json file (its size, field of view and fps)")
    p.add_argument("--orbit", action="store_true", help="the same as --path orbit")
    p.add_argument("--path-frame", help="nerfstudio's dataparser_transforms.json of the run a camera_path .json was "
                   "made in: its poses are mapped from that run's frame to this scene's")
    p.add_argument("--frames", type=positive_int, default=120, help="number of frames of orbit and spiral (default 120)")
    p.add_argument("--fps", type=positive_int, help="frames per second (default: the path file's, else 30)")
    p.add_argument("--out", metavar="FILE", required=True, help="video file: .mp4 or .gif")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_device(p)
    p = nsub.add_parser("export", help="export a mesh or a point cloud of a trained run",
                        description="--mesh: marching cubes on the density over the scene box (cells the occupancy "
                        "grid marks empty count as empty), vertex colours from the field. --points: the expected "
                        "surface points of rays through random training pixels, with their colours.")
    p.add_argument("run", metavar="DIR")
    p.add_argument("--mesh", metavar="FILE", help="mesh file: .ply, .obj or .glb")
    p.add_argument("--resolution", type=positive_int, default=256, help="marching-cubes lattice per side (default 256)")
    p.add_argument("--threshold", type=positive_float,
                   help="density level of the surface (default: ln 2 / marching step, where a step is half opaque)")
    p.add_argument("--points", metavar="FILE", help="point cloud file: .ply, .pcd, .xyz, .txt, .asc, .csv, .las or .laz")
    p.add_argument("--num-points", type=positive_int, default=200_000, help="rays cast for --points (default 200000)")
    _add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    pc = sub.add_parser("pointcloud", help="point clouds (denoise, densify, reconstruct, mesh, eval, train)",
                        description="Point-cloud tools. Files: PLY (ascii/binary), PCD, NPY, LAS, LAZ, E57, PTX (read only), and text: XYZ, TXT, ASC, CSV, PTS (read only).")
    psub = pc.add_subparsers(dest="pointcloud_command", metavar="ACTION", required=True)
    p = psub.add_parser("eval", help="distances between a predicted and a ground-truth cloud",
                        description="Chamfer distance in two forms (chamfer_l2: sum of the two mean squared "
                        "nearest-neighbour distances; chamfer_l1: average of the two mean distances), Hausdorff "
                        "distance, F-score at a threshold, and point counts, as JSON.")
    p.add_argument("pred", metavar="PRED")
    p.add_argument("gt", metavar="GT")
    p.add_argument("--threshold", type=positive_float,
                   help="F-score distance threshold (default: 0.01 x the ground truth's bounding-box diagonal)")
    p.add_argument("--out", metavar="FILE", help="also write the JSON here")
    p.add_argument("--drop-duplicates", action="store_true", help="drop exact duplicate points instead of refusing the file")
    for name, what in (("denoise", "remove noise and outliers (as many points out as in)"),
                       ("densify", "add points on the surface (--factor times as many)"),
                       ("reconstruct", "denoise and densify at once")):
        p = psub.add_parser(name, help=what, description=f"{what[0].upper() + what[1:]}, with the trained "
                            "two-stage network (the shipped weights, or --weights). Colours and intensities of the input, if any "
                            "(and a LAS file's point records, to LAS; an E57 or PTX scan's stations, to E57), "
                            "go to each output point from its nearest input point. Of a LAS file, the points classed as "
                            "noise (7, 18) are left out first, and those classed as vegetation or wires (3-5, 13-16), "
                            "which no surface holds, are written as measured, less the isolated. Finished stages are kept in "
                            "OUT.partial until OUT is written: the same command run again after a kill resumes there.")
        p.add_argument("inp", metavar="IN")
        p.add_argument("out_positional", metavar="OUT", nargs="?", help="output file (or --out FILE)")
        p.add_argument("--out", metavar="FILE", help="output file: .ply, .pcd, .npy, .las, .laz, .e57, .xyz, .txt, .asc or .csv")
        p.add_argument("--weights", metavar="FILE", help="model.pt of `inr pointcloud train` (default: the shipped weights)")
        p.add_argument("--drop-duplicates", action="store_true", help="drop exact duplicate points instead of refusing the file")
        p.add_argument("--voxel-size", type=positive_float, metavar="SIZE",
                       help="voxel side in the cloud's units (default: the bounding-box diagonal / the model's voxels "
                       "per diagonal, 56 for the shipped weights; smaller for dense scans, so that an occupied voxel holds "
                       "no more input points on average than the densest training input)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar (shown when a cloud needs several tiles)")
        p.add_argument("--normals", action=argparse.BooleanOptionalAction, default=None,
                       help="write the output's normals, estimated (PCA, 30 neighbours; from 40,000 points also over a wider "
                       "subset, taken where flatter) and oriented consistently and outwards, or to the side the input "
                       "says: its normals (where known), an E57/PTX scan's stations, an organized PCD's viewpoint, LAS's up "
                       "(default: yes for .ply, .pcd, .las, .laz, .e57, .txt, .asc and .csv, no for .npy; .xyz has no place for them)")
        p.add_argument("--keep-mixed-pixels", action="store_true", help=KEEP_MIXED_HELP)
        p.add_argument("--density", choices=["even", "scan"], default="even",
                       help="how the network's output points spread over the surface: even (default; what a surface's "
                       "Chamfer distance rewards) or scan (as dense as the input's points in each region: an airborne "
                       "scan's ground keeps its share of points under the canopy)")
        _add_device(p)
        p.add_argument("--precision", choices=["32", "bf16"], default="32",
                       help="the network's products on the CPU: float32 (default), or bfloat16 with float32 sums where "
                       "the CPU has AVX512-BF16 (faster on large clouds, outputs within a few %% of a voxel)")
        if name != "denoise":
            p.add_argument("--factor", type=positive_float, default=4.0, help="output points per input point (default 4)")
        else:
            p.add_argument("--baseline", choices=["open3d", "mls"], help="instead of the network, to compare: open3d = "
                           "Open3D statistical outlier removal (20 neighbours, 2 standard deviations); mls = moving-least-"
                           "squares projection onto quadrics (30 neighbours, two passes)")
            p.add_argument("--keep-points", action="store_true",
                           help="write the input's own points as measured (with their colours, intensities and LAS "
                           "records), less the outliers: those farther off the network's denoised surface than 3.5 noise "
                           "levels, the noise read from the points' own offsets (per spacing band on a scan whose spacing "
                           "varies), or beyond the surface's edge. Of a LAS file, the points classed as noise (7, 18) "
                           "go too, and those classed as vegetation or wires (3-5, 13-16), which no surface holds, go "
                           "only where isolated")
            p.add_argument("--keep-sigmas", type=positive_float, metavar="T",
                           help="with --keep-points: how many noise levels off the surface a point may lie (default "
                           "3.5; more keeps more, e.g. more of an unclassified canopy's returns)")
    p = psub.add_parser("mesh", help="a surface mesh of a scan: denoise, orient, then a fitted SDF or Poisson",
                        description="Points to a mesh in one command: denoise the cloud (the network, MLS or not at all), "
                        "estimate and orient normals (kept from the file when nothing moved the points), then mesh it: "
                        "sdf (default) fits a signed distance field (fit-sdf; its run folder OUT-run and the oriented "
                        "cloud OUT-oriented.ply are kept beside OUT), poisson is Open3D's screened Poisson, ball-pivoting "
                        "Open3D's ball pivoting. The network's denoising keeps its finished stages in OUT.partial: the same "
                        "command run again after a kill resumes there.")
    p.add_argument("inp", metavar="IN")
    p.add_argument("out", metavar="OUT", help="mesh file: .ply, .obj or .glb")
    p.add_argument("--method", choices=["sdf", "poisson", "ball-pivoting"], default="sdf", help="default sdf")
    p.add_argument("--denoise", choices=["network", "mls", "none"], default="network",
                   help="network (default: the shipped weights or --weights), mls, or none")
    p.add_argument("--weights", metavar="FILE", help="model.pt of `inr pointcloud train` for --denoise network")
    p.add_argument("--voxel-size", type=positive_float, metavar="SIZE", help="the network's voxel side (see denoise)")
    p.add_argument("--preset", help="sdf: the fit-sdf preset (default hashgrid_sdf)")
    p.add_argument("--time-budget", type=positive_float, default=120.0, metavar="SECONDS",
                   help="sdf: training seconds (default 120)")
    p.add_argument("--steps", type=positive_int, help="sdf: optimizer steps (default: the budget decides)")
    p.add_argument("--resolution", type=positive_int, help="sdf: marching-cubes lattice points per side (default 256)")
    p.add_argument("--trim", type=float, metavar="K", help="sdf: drop the large patches of faces farther than K units "
                   "(the larger of the points' median spacing and the lattice cell) from every point (default: the "
                   "preset's, 1; 0: the whole, closed level set, watertight, for a closed object scanned all round)")
    p.add_argument("--poisson-depth", type=positive_int, default=8, help="poisson: octree depth (default 8)")
    p.add_argument("--poisson-trim", type=float, default=0.0, metavar="Q",
                   help="poisson: remove the vertices whose Poisson density (the points' support) is below this "
                   "quantile, the surface Poisson invents where there are no points: holes and open borders stay "
                   "open (default 0: the closed surface)")
    p.add_argument("--overwrite", action="store_true", help="sdf: replace the run folder OUT-run if it exists")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--keep-mixed-pixels", action="store_true", help=KEEP_MIXED_HELP)
    _add_device(p)
    p = _add_train_command(psub, "train", "pointcloud", None, "train the reconstruction network on generated or given shapes",
                           input_flag="--meshes")
    p.add_argument("--eval-every", type=positive_int, help="steps between validation measurements (= --set train.eval_every)")
    return parser


def run_options(args: argparse.Namespace):
    """RunOptions of a training command's arguments."""
    from .tasks.base import get_task
    from .tasks.run import RunOptions

    overrides = _parse_sets(args.sets)
    if getattr(args, "precision", None):
        overrides["train.precision"] = args.precision
    if getattr(args, "eval_every", None):
        overrides["train.eval_every"] = args.eval_every
    task = get_task(args.task)
    if args.task == "pointcloud":  # the old spelling of the model's settings
        overrides = {("field." + k[len("model."):] if k.startswith("model.") else k): v for k, v in overrides.items()}
    return RunOptions(task=args.task, input=getattr(args, "input", None), preset=getattr(args, "preset", None),
                      out=args.out, steps=args.steps, time_budget=args.time_budget, seed=args.seed, overrides=overrides,
                      device=args.device, devices=args.devices, num_nodes=args.num_nodes, progress=not args.no_progress,
                      logger=args.logger,
                      viewer=f"{args.viewer_host}:{args.viewer_port}" if getattr(args, "viewer", False) else None,
                      overwrite=args.overwrite, task_options=task.options_from_args(args))


def cmd_train(args: argparse.Namespace) -> int:
    from .tasks.base import get_task
    from .tasks.run import train

    opts = run_options(args)
    if args.resume and args.overwrite:
        raise InputError(None, "--resume and --overwrite contradict each other")
    result = train(opts, resume=Path(args.resume) if args.resume else None)
    if "rank" in result:  # a DDP process other than the first: the first one reports
        return 0
    print(get_task(args.task).summary(result))
    print(f"outputs in {result['out']}")
    return 0


def _print_warning(result: dict) -> None:
    if result.get("warning"):
        print(f"inr: warning: {result['warning']}", file=sys.stderr)


def _mixed_note(r) -> str:
    n, held = r["mixed_left_out"], r.get("withheld_left_out", 0)
    note = f"; {n:,} mixed pixels (returns between two surfaces at depth edges) left out first" if n else ""
    note += f"; {held:,} points the file marks withheld (not to be processed) left out" if held else ""
    classed = r.get("class_left_out", 0)
    return note + (f"; {classed:,} points classed as noise, vegetation or wires (LAS classes 7, 18, 3-5, 13-16: "
                   "no surface) left out first" if classed else "")


def _resumed_note(r) -> str:
    done = r.get("resumed") or []
    return f"; resumed: {len(done)} stage{'s' * (len(done) > 1)} ({', '.join(done)}) kept from a run that stopped" if done else ""


def cmd_pointcloud(args: argparse.Namespace) -> int:
    import json

    if args.pointcloud_command == "train":
        return cmd_train(args)
    from .tasks.outputs import write_json
    from .tasks.pointcloud import evaluate_files

    if args.pointcloud_command == "mesh":
        from .tasks.pointcloud_mesh import mesh_file

        r = mesh_file(Path(args.inp), Path(args.out), args.method, args.denoise, args.weights, args.preset, args.time_budget,
                      args.steps, args.resolution, args.poisson_depth, args.overwrite, args.device, not args.no_progress,
                      args.seed, args.voxel_size, args.poisson_trim, args.trim, args.keep_mixed_pixels)
        print(f"wrote {r['out']}: {r['faces']:,} faces" + (" with the scan's colours" if r["coloured"] else "")
              + f" from {r['input_points']:,} points (denoise {r['denoise']}, normals {r['normals']}, "
              f"{r['method']}) in {r['seconds']:.1f} s" + (f"; the SDF run is {r['run']}" if "run" in r else "")
              + (f"; {r['strays_left_out']:,} stray points far from the rest left out" if r["strays_left_out"] else "")
              + _mixed_note(r) + _resumed_note(r))
        _print_warning(r)
        return 0
    if args.pointcloud_command in ("denoise", "densify", "reconstruct"):
        from .tasks.pointcloud import process_file

        out = args.out or args.out_positional
        if not out:
            raise InputError(None, f"pointcloud {args.pointcloud_command} needs an output file (OUT or --out FILE)")
        if args.out and args.out_positional and args.out != args.out_positional:
            raise InputError(None, f"two outputs given: {args.out_positional} and --out {args.out}")
        r = process_file(args.pointcloud_command, Path(args.inp), Path(out), args.weights, getattr(args, "factor", 4.0),
                         getattr(args, "baseline", None), args.drop_duplicates, voxel=args.voxel_size,
                         progress=not args.no_progress, device=args.device, normals=args.normals,
                         precision=args.precision, keep_mixed=args.keep_mixed_pixels, density=args.density,
                         keep_points=getattr(args, "keep_points", False), keep_sigmas=getattr(args, "keep_sigmas", None))
        normals = (" with normals" + (f" (sides from {r['sides_from']})" if r["sides_from"] else "")) if r["normals"] else ""
        carried = [what for what, on in (("intensities", r["intensity"]), ("LAS records", r["records"])) if on]
        shine = f"; {' and '.join(carried)} {'kept' if r['keep_points'] else 'from the nearest input points'}" if carried else ""
        if r["intensity"] is False:
            shine += f"; the input's intensities left out ({Path(out).suffix} files have no place for them)"
        if r["class_shift"]:
            shine += f"; {r['class_shift']} (spread evenly over the surface; --density scan keeps the scan's shares)"
        if r["class_losses"]:
            shine += f"; left out by class: {r['class_losses']}"
        print(f"wrote {out}: {r['output_points']:,} points{normals} from {r['input_points']:,} ({r['method']})" + _mixed_note(r)
              + _resumed_note(r) + shine)
        _print_warning(r)
        return 0
    r = evaluate_files(Path(args.pred), Path(args.gt), args.threshold, args.drop_duplicates)
    if args.out:
        if not Path(args.out).parent.is_dir():
            raise InputError(Path(args.out).parent, "no such folder")
        write_json(Path(args.out), r)
    print(json.dumps(r, indent=2))
    return 0


def cmd_nerf(args: argparse.Namespace) -> int:
    if args.nerf_command == "train":
        return cmd_train(args)
    if args.nerf_command == "process":
        from .tasks.nerf_process import process

        r = process(Path(args.input), Path(args.out), fps=args.fps, num_frames=args.num_frames, matcher=args.matcher,
                    camera_model=args.camera_model, max_size=args.max_size, overwrite=args.overwrite)
        print(f"registered {r['registered']} / {r['images']} images, mean reprojection error {r['reprojection_error_px']:.2f} px, "
              f"{r['points']:,} points, {r['seconds']:.1f} s ({r['matcher']} matching); scene in {args.out}")
        return 0
    if args.nerf_command == "render":
        from .tasks.nerf_export import render_path

        r = render_path(Path(args.run), Path(args.out), "orbit" if args.orbit else args.path, args.frames, args.fps,
                        path_frame=Path(args.path_frame) if args.path_frame else None,
                        device=args.device)
        print(f"wrote {args.out} ({r['frames']} frames, {r['width']}x{r['height']}, {r['fps']} fps)")
        return 0
    if args.nerf_command == "export":
        from .tasks.nerf_export import MESH_FORMATS, POINT_FORMATS, check_suffix, export_mesh, export_points
        from .tasks.nerf_fit import load_nerf_run

        if not args.mesh and not args.points:
            raise InputError(None, "nerf export needs --mesh FILE and/or --points FILE")
        for path, formats, what in ((args.mesh, MESH_FORMATS, "mesh"), (args.points, POINT_FORMATS, "point cloud")):
            if path:
                check_suffix(Path(path), formats, what)
        loaded = load_nerf_run(Path(args.run), args.device)  # once for both exports (loading compiles the field)
        if args.mesh:
            r = export_mesh(Path(args.run), Path(args.mesh), args.resolution, args.threshold, loaded)
            print(f"wrote {args.mesh} ({r['vertices']:,} vertices, {r['faces']:,} faces, density level {r['threshold']:.3g}, "
                  f"{'watertight' if r['watertight'] else 'not watertight'})")
        if args.points:
            r = export_points(Path(args.run), Path(args.points), args.num_points, loaded=loaded)
            print(f"wrote {args.points} ({r['points']:,} points from {r['rays']:,} rays)")
        return 0
    from .tasks.nerf_fit import eval_run

    r = eval_run(Path(args.run), args.device)
    for v in r["per_view"]:
        print(f"{v['view']}: PSNR {v['psnr']:.2f} dB, SSIM {v['ssim']:.4f}")
    print(f"mean: PSNR {r['test_psnr']:.2f} dB, SSIM {r['test_ssim']:.4f}, {r['eval_seconds_per_view']:.2f} s per view "
          f"(written to {Path(args.run) / 'eval.json'})")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from .presets import ALL_TASKS, available_presets, describe_preset

    for task in [args.task] if args.task else ALL_TASKS:
        print(f"{task}:")
        for name in available_presets(task):
            print(f"  {name:18s} {describe_preset(name, task)}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .tasks.compare import run_compare

    names = [n.strip() for n in args.presets.split(",") if n.strip()]
    if not names:
        raise InputError(None, "--presets is empty")
    if args.resume:
        raise InputError(None, "compare cannot resume; resume each run with fit-image/fit-audio --resume DIR/<preset>")
    if not args.out:
        raise InputError(None, "compare needs --out DIR (one sub-folder per preset)")
    args.task = "audio" if Path(args.input).suffix.lower() in (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif") else "image"
    opts = run_options(args)
    table = run_compare(opts, names)
    if table:
        print(table)
        print(f"outputs in {args.out}")
    return 0


def cmd_runs(args) -> int:
    from .tasks.status import format_table, runs_table

    root = Path(args.dir)
    if not root.is_dir():
        raise InputError(root, "no such folder")
    rows = runs_table(root)
    print(format_table(rows) if rows else f"no runs in {root}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from . import progress
    from ._external import MissingBackend

    progress.set_enabled(not getattr(args, "no_progress", False))
    from .tasks.optim import TrainingDiverged
    from .tasks.run import RunStopped

    try:
        if args.command == "presets":
            return cmd_presets(args)
        if args.command == "runs":
            return cmd_runs(args)
        if args.command == "view":
            from .viewer import serve

            serve(args.paths, args.host, args.port, args.device)
            return 0
        if args.command == "doctor":
            from .doctor import report

            print("\n".join(report()))
            return 0
        if args.command in TRAIN_COMMANDS:
            return cmd_train(args)
        if args.command == "render-image":
            from .tasks.render import render_image

            h, w = render_image(Path(args.run), args.scale, Path(args.out), level=args.level, device=args.device)
            print(f"wrote {args.out} ({w}x{h})")
            return 0
        if args.command == "render-video":
            from .tasks.render import render_video

            n, h, w, fps = render_video(Path(args.run), Path(args.out), args.scale, args.fps, device=args.device)
            print(f"wrote {args.out} ({n} frames, {w}x{h}, {fps:g} fps)")
            return 0
        if args.command == "extract-mesh":
            from .tasks.sdf import extract_run_mesh

            r = extract_run_mesh(Path(args.run), args.out, args.resolution, device=args.device, trim=args.trim)
            print(f"wrote {r['out']} ({r['vertices']:,} vertices, {r['faces']:,} faces, "
                  f"{'watertight' if r['watertight'] else 'open'})")
            return 0
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "nerf":
            return cmd_nerf(args)
        if args.command == "pointcloud":
            return cmd_pointcloud(args)
    except (InputError, MissingBackend) as exc:
        print(f"inr: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RunStopped as exc:
        print(f"inr: {exc}", file=sys.stderr)
        return EXIT_SIGTERM if exc.signal == "SIGTERM" else EXIT_SIGINT
    except KeyboardInterrupt as exc:  # Ctrl-C, or a SIGTERM where a command keeps its work (`errors.Terminated`)
        print(f"inr: {str(exc) or 'interrupted'}", file=sys.stderr)
        return EXIT_SIGTERM if getattr(exc, "signal", None) == "SIGTERM" else EXIT_SIGINT
    except TrainingDiverged as exc:
        print(f"inr: error: {exc}", file=sys.stderr)
        return EXIT_DIVERGED
    return 1


if __name__ == "__main__":
    sys.exit(main())
