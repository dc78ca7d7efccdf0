"""`--density scan` against the default even output (`inr.pointcloud.voxel.density_subsample`).

    make meshes
    .venv/bin/python scripts/bench_density.py [--mesh-dir DIR] [--meshes a,b] [--las FILE ...]

Meshes (default: the held-out CGAL meshes): 5,000 points with 1 % noise, evenly spread and a
6-camera range scan (as bench_surface.py's reconstruct section makes them), through `denoise` (as
many points out) and `reconstruct` (4x) as the CLI runs them (`network_denoise`; the network's
points computed once per scan), each with `--density even` and `scan`: the output/input Chamfer-L1
to 100,000 clean surface points, and how far the output's spread is from the input's: the total
variation distance between the shares of the input's and the output's points in cubic cells
holding ~50 input points on average (0: the same shares; 1: no cell in common).
LAS files (`--las`): `inr pointcloud denoise` and `reconstruct` to LAS with each density; the
output's points per class (each output point carries its nearest input point's record), against
the input's (x 4 for reconstruct), and the seconds of each run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_surface as bs  # noqa: E402

from inr.tasks.pointcloud import network_denoise  # noqa: E402


def spread_distance(a: np.ndarray, b: np.ndarray, per_cell: int = 50) -> float:
    """Total variation distance between the shares of a's and b's points per cubic cell (cells
    holding ~per_cell of a's points on average, if a were spread evenly over a surface)."""
    cell = float(np.linalg.norm(np.ptp(a, axis=0))) / np.sqrt(len(a) / per_cell) / 1.5
    lo = np.minimum(a.min(0), b.min(0))
    cells = np.floor((np.r_[a, b] - lo) / cell).astype(np.int64)
    _, which = np.unique(cells, axis=0, return_inverse=True)
    which = which.reshape(-1)
    ha = np.bincount(which[:len(a)], minlength=which.max() + 1) / len(a)
    hb = np.bincount(which[len(a):], minlength=which.max() + 1) / len(b)
    return 0.5 * float(np.abs(ha - hb).sum())


def meshes_part(mesh_dir: str, names) -> None:
    meshes = bs.load_meshes(names, mesh_dir)
    print(f"meshes of {mesh_dir}: output/input Chamfer-L1, spread distance to the input (even / scan)")
    print("| mesh | scan | denoise even | denoise scan | reconstruct even | reconstruct scan |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name, mesh in meshes.items():
        ref = bs.truth(mesh)
        for case, views in (("1 %", 0), ("range 1 %", 6)):
            noisy = bs.scan(mesh, 0.01, 0.0, seed=bs.scan_seed(name), views=views)
            c_in = bs.cl1(noisy, ref)
            kept = {}

            def once(stage, compute):  # the network's points once per scan; the rest each time
                if stage != "network":
                    return compute()
                if stage not in kept:
                    kept[stage] = compute()
                return kept[stage]

            row = []
            for factor in (1, 4):
                for density in ("even", "scan"):
                    out = network_denoise(noisy, factor * len(noisy), Path(name), "", seed=0, stages=once,
                                          density=density).points
                    row += [bs.cl1(out, ref) / c_in, spread_distance(noisy, out)]
            rows.append(row)
            print(f"| {name} | {case} | " + " | ".join(f"{row[i]:.3f} / {row[i + 1]:.3f}" for i in range(0, 8, 2)) + " |",
                  flush=True)
    mean = np.mean(rows, 0)
    print("| mean | | " + " | ".join(f"{mean[i]:.3f} / {mean[i + 1]:.3f}" for i in range(0, 8, 2)) + " |")


def las_part(files) -> None:
    import laspy

    from inr.cli import main

    print("\n| file | points | command | input classes (x factor) | even | scan | spread distance even / scan | s even / scan |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            las = laspy.read(f)
            classes, xyz = np.asarray(las.classification), np.stack([las.x, las.y, las.z], 1)
            for command, factor in (("denoise", 1), ("reconstruct", 4)):
                counts, seconds, spread = {}, {}, {}
                for density in ("even", "scan"):
                    out = Path(tmp) / f"{density}.las"
                    t = time.perf_counter()
                    with contextlib.redirect_stdout(io.StringIO()):
                        assert main(["pointcloud", command, str(f), str(out), "--no-progress", "--drop-duplicates",
                                     "--density", density]) == 0
                    seconds[density] = time.perf_counter() - t
                    got = laspy.read(out)
                    counts[density] = np.bincount(np.asarray(got.classification), minlength=256)
                    spread[density] = spread_distance(xyz, np.stack([got.x, got.y, got.z], 1))
                want = np.bincount(classes, minlength=256) * factor
                shown = [c for c in np.flatnonzero(want + counts["even"] + counts["scan"])]
                fmt = lambda c: ", ".join(f"{k}: {int(c[k]):,}" for k in shown)
                print(f"| {Path(f).name} | {len(classes):,} | {command} | {fmt(want)} | {fmt(counts['even'])} | "
                      f"{fmt(counts['scan'])} | {spread['even']:.3f} / {spread['scan']:.3f} | "
                      f"{seconds['even']:.1f} / {seconds['scan']:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mesh-dir", default=str(bs.MESH_DIR))
    ap.add_argument("--meshes", help="comma-separated names (default: all in --mesh-dir)")
    ap.add_argument("--las", nargs="*", default=[], help="LAS/LAZ files with classes")
    ap.add_argument("--no-meshes", action="store_true", help="the LAS files only")
    args = ap.parse_args()
    if not args.no_meshes:
        meshes_part(args.mesh_dir, args.meshes.split(",") if args.meshes else None)
    if args.las:
        las_part(args.las)


if __name__ == "__main__":
    main()
