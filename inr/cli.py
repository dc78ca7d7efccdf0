"""The `inr` command: parse arguments, call the task layer, report errors as one line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import InputError

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3


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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _add_run_options(p: argparse.ArgumentParser, default_steps: str, default_out: str) -> None:
    """--steps, --time-budget, --out, --resume, --overwrite of the training commands."""
    p.add_argument("--steps", type=_positive_int, help=f"optimizer steps (default: {default_steps}; with only --time-budget, unbounded)")
    p.add_argument("--time-budget", type=_positive_float, metavar="SECONDS",
                   help="stop after this many training seconds (compile included, evaluation excluded)")
    p.add_argument("--out", metavar="DIR", help=f"output folder (default: {default_out})")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")


def _add_fit_options(p: argparse.ArgumentParser, kind: Optional[str]) -> None:
    p.add_argument("--steps", type=_positive_int, help="optimizer steps (default: the preset's; with only "
                   "--time-budget, unbounded)")
    p.add_argument("--time-budget", type=_positive_float, metavar="SECONDS",
                   help="stop after this many training seconds (compile included, evaluation excluded)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--holdout", choices=["none", "even-odd"], default="none",
                   help="'none': fit and score every sample; 'even-odd': train on even-index samples, score "
                   "the odd ones (Tancik et al.'s generalisation protocol)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                   help="override a preset entry, e.g. --set train.lr=3e-3 --set field.network_options.hidden=128")
    p.add_argument("--precision", choices=["32", "bf16"], help="fp32, or bf16 autocast (about 2x faster on CPUs "
                   "with AVX-512 bf16; default: the preset's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if kind != "audio":
        p.add_argument("--alpha", choices=["fit", "composite"], default="fit",
                       help="RGBA images: fit all 4 channels (default) or composite onto white and fit RGB")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inr",
        description="Implicit neural representations: fit images and audio with coordinate networks on CPU or GPU.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("presets", help="list the bundled presets", description="List the bundled presets of each task.")
    p.add_argument("--task", choices=["image", "audio", "nerf"], help="only this task's presets")

    for kind in ("image", "audio"):
        p = sub.add_parser(
            f"fit-{kind}",
            help=f"fit a field to an {kind} file",
            description=f"Fit a field (encoding + network) to one {kind} and write DIR/metrics.json, "
            + ("reconstruction.png, error.png, curve.png" if kind == "image" else "reconstruction.wav, audio.png, curve.png")
            + ", config.yaml and a checkpoint. Kill it any time and continue with --resume DIR.",
        )
        p.add_argument(kind.upper(), nargs="?", help=f"{kind} file (default: the bundled "
                       + ("512x512 astronaut photo" if kind == "image" else "5 s 16 kHz speech clip") + ")")
        p.add_argument("--preset", default="hashgrid", help="preset name (see `inr presets`) or a YAML file (default: hashgrid)")
        p.add_argument("--out", metavar="DIR", help="output folder (default: runs/<kind>-<preset>-<time>)")
        p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
        p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
        _add_fit_options(p, kind)

    p = sub.add_parser("render-image", help="render a fitted image at any resolution",
                       description="Render the image field of a fit-image run at SCALE times its size, in chunks.")
    p.add_argument("run", metavar="DIR", help="a fit-image run folder")
    p.add_argument("--scale", type=_positive_float, default=1.0, help="output size / training image size (default 1)")
    p.add_argument("--out", metavar="FILE", required=True, help="output image file (.png, .jpg, ...)")
    p.add_argument("--level", type=int, help="PINs fields: render this level only (0 = coarsest)")

    p = sub.add_parser("compare", help="fit several presets to one signal and compare them",
                       description="Run each preset on the same image or audio file with the same options; write "
                       "DIR/compare.json, compare.md (the table) and compare.png (quality vs wall time).")
    p.add_argument("signal", metavar="SIGNAL", help="an image or audio file")
    p.add_argument("--presets", required=True, help="comma-separated preset names, e.g. relu,fourier,hashgrid")
    p.add_argument("--out", metavar="DIR", required=True, help="output folder (one sub-folder per preset)")
    p.add_argument("--overwrite", action="store_true", help="replace runs already in DIR")
    _add_fit_options(p, None)
    nerf = sub.add_parser("nerf", help="NeRF on scene folders (train, eval, render, export)",
                          description="Radiance fields on Blender, instant-ngp/nerfstudio or LLFF scene folders.")
    nsub = nerf.add_subparsers(dest="nerf_command", metavar="ACTION", required=True)
    p = nsub.add_parser("train", help="train a radiance field on a scene",
                        description="Train on the scene's train split, then render and score every test view: "
                        "DIR/metrics.json (test_psnr, test_ssim, per view, steps, seconds, rays_per_second), "
                        "DIR/renders/, curve.png, config.yaml, checkpoints/last.ckpt.")
    p.add_argument("scene", metavar="SCENE", nargs="?", help="scene folder (default: the bundled scenes/tabletop)")
    p.add_argument("--preset", default="ngp", help="ngp (default), nerf, or a YAML file")
    _add_run_options(p, "the preset's", "runs/nerf-<preset>-<time>")
    p.add_argument("--downscale", type=_positive_int, default=1, help="divide image sizes by this factor")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--devices", type=_positive_int, default=1,
                   help="train with DDP over N processes (N GPUs with CUDA, else N CPU processes; default 1)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets", help="override a preset entry")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = nsub.add_parser("eval", help="score a trained run on its test split",
                        description="Render every test view of a nerf train run; per-view and mean PSNR/SSIM to DIR/eval.json.")
    p.add_argument("run", metavar="DIR")
    p = nsub.add_parser("render", help="render a video of a trained run",
                        description="Render frames on a circle around the scene (axis: the training cameras' mean up "
                        "vector; centre: where their optical axes meet; radius and height: theirs) into a video.")
    p.add_argument("run", metavar="DIR")
    p.add_argument("--orbit", action="store_true", help="an orbit around the scene (the default and only path)")
    p.add_argument("--frames", type=_positive_int, default=120, help="number of frames (default 120)")
    p.add_argument("--fps", type=_positive_int, default=30, help="frames per second (default 30)")
    p.add_argument("--out", metavar="FILE", required=True, help="video file: .mp4 or .gif")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = nsub.add_parser("export", help="export a mesh or a point cloud of a trained run",
                        description="--mesh: marching cubes on the density over the scene box (cells the occupancy "
                        "grid marks empty count as empty), vertex colours from the field. --points: the expected "
                        "surface points of rays through random training pixels, with their colours.")
    p.add_argument("run", metavar="DIR")
    p.add_argument("--mesh", metavar="FILE", help="mesh file: .ply, .obj or .glb")
    p.add_argument("--resolution", type=_positive_int, default=256, help="marching-cubes lattice per side (default 256)")
    p.add_argument("--threshold", type=_positive_float,
                   help="density level of the surface (default: ln 2 / marching step, where a step is half opaque)")
    p.add_argument("--points", metavar="FILE", help="point cloud file: .ply, .pcd or .xyz")
    p.add_argument("--num-points", type=_positive_int, default=200_000, help="rays cast for --points (default 200000)")
    pc = sub.add_parser("pointcloud", help="point clouds (denoise, densify, reconstruct, eval, train)",
                        description="Point-cloud tools. Files: PLY (ascii/binary), PCD, XYZ, NPY.")
    psub = pc.add_subparsers(dest="pointcloud_command", metavar="ACTION", required=True)
    p = psub.add_parser("eval", help="distances between a predicted and a ground-truth cloud",
                        description="Chamfer distance in two forms (chamfer_l2: sum of the two mean squared "
                        "nearest-neighbour distances; chamfer_l1: average of the two mean distances), Hausdorff "
                        "distance, F-score at a threshold, and point counts, as JSON.")
    p.add_argument("pred", metavar="PRED")
    p.add_argument("gt", metavar="GT")
    p.add_argument("--threshold", type=_positive_float,
                   help="F-score distance threshold (default: 0.01 x the ground truth's bounding-box diagonal)")
    p.add_argument("--out", metavar="FILE", help="also write the JSON here")
    p.add_argument("--drop-duplicates", action="store_true", help="drop exact duplicate points instead of refusing the file")
    for name, what in (("denoise", "remove noise and outliers (as many points out as in)"),
                       ("densify", "add points on the surface (--factor times as many)"),
                       ("reconstruct", "denoise and densify at once")):
        p = psub.add_parser(name, help=what, description=f"{what[0].upper() + what[1:]}, with the trained "
                            "two-stage network (the shipped weights, or --weights).")
        p.add_argument("inp", metavar="IN")
        p.add_argument("out", metavar="OUT")
        p.add_argument("--weights", metavar="FILE", help="model.pt of `inr pointcloud train` (default: the shipped weights)")
        p.add_argument("--drop-duplicates", action="store_true", help="drop exact duplicate points instead of refusing the file")
        p.add_argument("--voxel-size", type=_positive_float, metavar="SIZE",
                       help="voxel side in the cloud's units (default: the bounding-box diagonal / the model's voxels "
                       "per diagonal, 56 for the shipped weights; smaller for dense scans, so that an occupied voxel holds "
                       "no more input points on average than the densest training input)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar (shown when a cloud needs several tiles)")
        if name != "denoise":
            p.add_argument("--factor", type=_positive_float, default=4.0, help="output points per input point (default 4)")
        else:
            p.add_argument("--baseline", choices=["open3d"], help="Open3D statistical outlier removal "
                           "(20 neighbours, 2 standard deviations) instead of the network, to compare")
    p = psub.add_parser("train", help="train the reconstruction network on generated or given shapes",
                        description="Train the two-stage network (sparse stacked hourglass + transformer) on pairs "
                        "made on the fly: clean dense surface samples as targets, copies with noise, sparsity, "
                        "outliers and holes as inputs. Writes DIR/model.pt (the weights), metrics.json, checkpoints.")
    p.add_argument("--meshes", metavar="DIR", help="train on these meshes (.ply/.obj/.off/.stl/.glb) instead of synthetic shapes")
    _add_run_options(p, "4000", "runs/pointcloud")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=_positive_int, default=200, help="steps between validation measurements")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets", help="train.KEY=VALUE or model.KEY=VALUE")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def cmd_pointcloud(args: argparse.Namespace) -> int:
    import json

    if args.pointcloud_command == "train":
        from .tasks.pointcloud_train import PointCloudTrainOptions, run_pointcloud_train

        opts = PointCloudTrainOptions(meshes=args.meshes, out=args.out, steps=args.steps, time_budget=args.time_budget,
                                      seed=args.seed, overrides=_parse_sets(args.sets), progress=not args.no_progress,
                                      overwrite=args.overwrite, eval_every=args.eval_every)
        r = run_pointcloud_train(opts, resume=Path(args.resume) if args.resume else None)
        print(f"trained {r['steps']} steps in {r['seconds']:.1f} s; validation Chamfer output/input "
              f"{r['validation_chamfer_ratio']:.3f}; weights {r['weights']}")
        return 0

    from .tasks.outputs import write_json
    from .tasks.pointcloud import evaluate_files

    if args.pointcloud_command in ("denoise", "densify", "reconstruct"):
        from .tasks.pointcloud import process_file

        r = process_file(args.pointcloud_command, Path(args.inp), Path(args.out), args.weights, getattr(args, "factor", 4.0),
                         getattr(args, "baseline", None), args.drop_duplicates, voxel=args.voxel_size,
                         progress=not args.no_progress)
        print(f"wrote {args.out}: {r['output_points']:,} points from {r['input_points']:,} ({r['method']})")
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
        from .tasks.nerf_fit import NerfOptions, run_nerf

        opts = NerfOptions(scene=args.scene, preset=args.preset, out=args.out, steps=args.steps, time_budget=args.time_budget,
                           seed=args.seed, downscale=args.downscale, overrides=_parse_sets(args.sets),
                           progress=not args.no_progress, overwrite=args.overwrite, devices=args.devices)
        r = run_nerf(opts, resume=Path(args.resume) if args.resume else None)
        if "test_psnr" not in r:  # a DDP process other than the first: the first one reports
            return 0
        print(f"{r['preset']}: test PSNR {r['test_psnr']:.2f} dB, SSIM {r['test_ssim']:.4f} after {r['steps']} steps in "
              f"{r['seconds']:.1f} s ({r['rays_per_second']:,.0f} rays/s), {r['params']:,} parameters")
        print(f"outputs in {r['out']}")
        return 0
    if args.nerf_command == "render":
        from .tasks.nerf_export import render_orbit

        r = render_orbit(Path(args.run), Path(args.out), args.frames, args.fps, progress=not args.no_progress)
        print(f"wrote {args.out} ({r['frames']} frames, {r['width']}x{r['height']}, {r['fps']} fps)")
        return 0
    if args.nerf_command == "export":
        from .tasks.nerf_export import MESH_FORMATS, POINT_FORMATS, _check_suffix, export_mesh, export_points
        from .tasks.nerf_fit import load_nerf_run

        if not args.mesh and not args.points:
            raise InputError(None, "nerf export needs --mesh FILE and/or --points FILE")
        for path, formats, what in ((args.mesh, MESH_FORMATS, "mesh"), (args.points, POINT_FORMATS, "point cloud")):
            if path:
                _check_suffix(Path(path), formats, what)
        loaded = load_nerf_run(Path(args.run))  # once for both exports (loading compiles the field)
        if args.mesh:
            r = export_mesh(Path(args.run), Path(args.mesh), args.resolution, args.threshold, loaded)
            print(f"wrote {args.mesh} ({r['vertices']:,} vertices, {r['faces']:,} faces, density level {r['threshold']:.3g}, "
                  f"{'watertight' if r['watertight'] else 'not watertight'})")
        if args.points:
            r = export_points(Path(args.run), Path(args.points), args.num_points, loaded=loaded)
            print(f"wrote {args.points} ({r['points']:,} points from {r['rays']:,} rays)")
        return 0
    from .tasks.nerf_fit import eval_run

    r = eval_run(Path(args.run))
    for v in r["per_view"]:
        print(f"{v['view']}: PSNR {v['psnr']:.2f} dB, SSIM {v['ssim']:.4f}")
    print(f"mean: PSNR {r['test_psnr']:.2f} dB, SSIM {r['test_ssim']:.4f} (written to {Path(args.run) / 'eval.json'})")
    return 0


def _fit_options(args: argparse.Namespace, kind: str, signal: Optional[str], preset: Optional[str], out: Optional[str]):
    from .tasks.fit import FitOptions

    return FitOptions(
        kind=kind, signal=signal, preset=preset, out=out, steps=args.steps, time_budget=args.time_budget,
        seed=args.seed, holdout=args.holdout, alpha=getattr(args, "alpha", "fit"),
        overrides={**_parse_sets(args.sets), **({"train.precision": args.precision} if args.precision else {})},
        progress=not args.no_progress, overwrite=getattr(args, "overwrite", False),
    )


def cmd_presets(args: argparse.Namespace) -> int:
    from .presets import ALL_TASKS, available_presets, describe_preset

    for task in [args.task] if args.task else ALL_TASKS:
        print(f"{task}:")
        for name in available_presets(task):
            print(f"  {name:18s} {describe_preset(name, task)}")
    return 0


def cmd_fit(args: argparse.Namespace, kind: str) -> int:
    from .tasks.fit import run_fit

    opts = _fit_options(args, kind, getattr(args, kind.upper()), args.preset, args.out)
    result = run_fit(opts, resume=Path(args.resume) if args.resume else None)
    quality = f"PSNR {result['psnr']:.2f} dB" + (f", SSIM {result['ssim']:.4f}" if "ssim" in result else f", SNR {result['snr_db']:.2f} dB")
    print(f"{result['preset']}: {quality} ({result['holdout']}) after {result['steps']} steps in {result['seconds']:.1f} s, "
          f"{result['params']:,} parameters")
    print(f"outputs in {result['out']}")
    return 0


def cmd_render_image(args: argparse.Namespace) -> int:
    from .tasks.render import render_image

    shape = render_image(Path(args.run), args.scale, Path(args.out), level=args.level)
    print(f"wrote {args.out} ({shape[1]}x{shape[0]})")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .tasks.compare import run_compare
    from .tasks.fit import kind_of

    names = [n.strip() for n in args.presets.split(",") if n.strip()]
    if not names:
        raise InputError(None, "--presets is empty")
    kind = kind_of(args.signal)
    opts = _fit_options(args, kind, args.signal, None, args.out)
    table = run_compare(opts, names)
    print(table)
    print(f"outputs in {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "presets":
            return cmd_presets(args)
        if args.command in ("fit-image", "fit-audio"):
            return cmd_fit(args, args.command.split("-")[1])
        if args.command == "render-image":
            return cmd_render_image(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "nerf":
            return cmd_nerf(args)
        if args.command == "pointcloud":
            return cmd_pointcloud(args)
    except InputError as exc:
        print(f"inr: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        print(f"inr: {exc or 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as exc:
        from .tasks.signal_fit import TrainingDiverged

        if isinstance(exc, TrainingDiverged):
            print(f"inr: error: {exc}", file=sys.stderr)
            return EXIT_DIVERGED
        raise
    return 1


if __name__ == "__main__":
    sys.exit(main())
