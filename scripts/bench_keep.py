"""`denoise --keep-points` (the input's own points, less those off the network's surface:
`inr.pointcloud.keep`) against Open3D's statistical outlier removal (`--baseline open3d`).

    make meshes
    .venv/bin/python scripts/bench_keep.py [--mesh-dir DIR] [--meshes a,b] [--only meshes|lidar|airborne]

meshes (default: the held-out CGAL meshes): 5,000 points, evenly spread with noise sigma = 1 %
of the diagonal per coordinate and 5 % or 20 % of them replaced by points uniform in the box;
sigma = 2 % with 5 %; a 6-camera range scan with 1 % and 5 % (as bench_surface.py makes them,
the outliers drawn apart). Per method: the share of the inliers kept, of the outliers lying over
4 sigma from the true surface removed (those nearer cannot be told from the noise), and the kept
points' Chamfer-L1 to 100,000 clean surface points over the input's; the seconds per cloud.
lidar: the held-out lidar scene's terrestrial scan (`inr.pointcloud.heldout.lidar_scene`,
5 mm range noise) and a scan of the training site (`bench_surface.training_site`), each with
2 % of the returns moved along their ray by 0.1-2 m either way (multipath, a beam's edge): the
same shares (far: over 4 sigma from the true surface) and seconds; the cloud goes band by band.
airborne: the held-out lidar scene's airborne scan (3 cm noise) with tree crowns added (returns
through ellipsoids 4-8 m across over open ground, as dense per square metre as the scan, LAS
class 5), a few returns 20-40 m up, alone (class 1: birds, unflagged) and low-noise returns 0.1-5 m
under the ground (class 7), the scan's own points class 1: keep-points with the classes (as from
a LAS file), without them (as from a PLY file), and Open3D: the scan's points kept, the crowns
kept, the lone and low-noise returns removed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_surface as bs  # noqa: E402
from benchlib import save, table  # noqa: E402

from inr.pointcloud.keep import on_surface  # noqa: E402
from inr.tasks.pointcloud import network_denoise, statistical_outlier_baseline  # noqa: E402

CASES = {"1% + 5%": (0.01, 0.05, 0), "1% + 20%": (0.01, 0.2, 0), "2% + 5%": (0.02, 0.05, 0),
         "range scan 1% + 5%": (0.01, 0.05, bs.SCANNER_VIEWS)}
FAR_SIGMAS = 4.0


def _methods(points: np.ndarray, name: str):
    """{method: (kept mask, seconds)}: keep-points (the network's denoise as the CLI runs it, then
    the filter) and Open3D's statistical removal."""
    from scipy.spatial import cKDTree

    t = time.perf_counter()
    den = network_denoise(points, len(points), Path(name), "")
    keep = on_surface(points, den.points, den.groups)
    out = {"keep-points": (keep, time.perf_counter() - t)}
    t = time.perf_counter()
    sor = statistical_outlier_baseline(points)
    mask = np.zeros(len(points), bool)
    mask[cKDTree(points).query(sor)[1]] = True
    out["open3d"] = (mask, time.perf_counter() - t)
    return out


def _score(row, kept, inlier, far, cl=None):
    for method, (mask, seconds) in kept.items():
        row[f"{method}: inliers kept"] = float(mask[inlier].mean())
        row[f"{method}: far outliers removed"] = float(1 - mask[far].mean()) if far.any() else float("nan")
        if cl is not None:
            row[f"{method}: CL1 / input"] = cl(mask)
        row[f"{method} s"] = seconds


def meshes_part(mesh_dir: str, names):
    from scipy.spatial import cKDTree

    rows = []
    for case, (sigma, share, views) in CASES.items():
        for name, mesh in bs.load_meshes(names, mesh_dir).items():
            seed = bs.scan_seed(name)
            rng = np.random.default_rng(seed + 11)
            diag = float(np.linalg.norm(mesh.extents))
            pts = np.array(bs.scan(mesh, sigma, 0.0, seed, views=views))
            out = rng.choice(len(pts), int(round(share * len(pts))), replace=False)
            pts[out] = rng.uniform(*mesh.bounds, size=(len(out), 3))
            inlier = np.ones(len(pts), bool)
            inlier[out] = False
            ref = bs.truth(mesh)
            far = ~inlier & (cKDTree(ref).query(pts)[0] > FAR_SIGMAS * sigma * diag)
            c_in = bs.cl1(pts, ref)
            row = {"case": case, "mesh": name, "far outliers": int(far.sum()), "outliers": len(out)}
            _score(row, _methods(pts, name), inlier, far, lambda m: bs.cl1(pts[m], ref) / c_in)
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def lidar_part():
    import open3d as o3d

    from inr.pointcloud.heldout import lidar_scene

    rows = []
    sigma = bs.LIDAR_CASES["terrestrial"]
    station = np.array([38.0, 41.0, bs._site_ground(38.0, 41.0) + 1.7])
    for label, mesh, at in (("lidar scene (held out)", lidar_scene(), None), ("training site", bs.training_site(), station)):
        rng = np.random.default_rng(21)
        pts, scene = bs.laser_scan(mesh, "terrestrial", sigma, rng, station=at)
        pts, moved = bs.stray_returns(pts, bs.laser_rays("terrestrial", rng, station=at)[0][0], rng)
        inlier = ~moved
        off = scene.compute_distance(o3d.core.Tensor(pts.astype(np.float32))).numpy()
        far = ~inlier & (off > FAR_SIGMAS * sigma)
        row = {"scan": label, "points": len(pts), "far outliers": int(far.sum()), "outliers": int(moved.sum())}
        _score(row, _methods(pts, label), inlier, far)
        rows.append(row)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


CROWNS, BIRDS, LOW_NOISE = 12, 20, 100


def _write_las(path: Path, points: np.ndarray, classes: np.ndarray) -> Path:
    import laspy

    header = laspy.LasHeader(point_format=1, version="1.2")
    header.offsets, header.scales = np.floor(points.min(0)), [0.001] * 3
    las = laspy.LasData(header)
    las.x, las.y, las.z = points.T
    las.classification = classes.astype(np.uint8)
    las.write(path)
    return path


def airborne_part():
    from scipy.spatial import cKDTree

    from inr.data.pointclouds import read_cloud, write_cloud
    from inr.pointcloud.heldout import _ground_height, lidar_scene
    from inr.tasks.pointcloud import process_file

    rng = np.random.default_rng(31)
    scan, scene = bs.laser_scan(lidar_scene(), "airborne", bs.LIDAR_CASES["airborne"], rng)
    density = len(scan) / 100.0 ** 2  # returns per square metre
    crowns = []
    while len(crowns) < CROWNS:  # over open ground: the scan there at the ground's height
        cx, cy = rng.uniform(5, 95, 2)
        near = np.linalg.norm(scan[:, :2] - (cx, cy), axis=1) < 4
        ground = _ground_height(cx, cy)
        if not near.any() or np.abs(scan[near, 2] - ground).max() > 0.5:
            continue
        r, h, z = rng.uniform(2, 4), rng.uniform(1.5, 3), ground + rng.uniform(5, 10)
        n = int(density * np.pi * r * r)
        u = rng.normal(size=(n, 3))
        u *= (rng.uniform(size=n) ** (1 / 3) / np.linalg.norm(u, axis=1))[:, None]  # even in the unit ball
        crowns.append(u * (r, r, h) + (cx, cy, z))
    crowns = np.concatenate(crowns)
    xy = rng.uniform(5, 95, (BIRDS, 2))
    birds = np.c_[xy, _ground_height(xy[:, 0], xy[:, 1]) + rng.uniform(20, 40, BIRDS)]
    xy = rng.uniform(5, 95, (LOW_NOISE, 2))
    low = np.c_[xy, _ground_height(xy[:, 0], xy[:, 1]) - rng.uniform(0.1, 5, LOW_NOISE)]
    pts = np.r_[scan, crowns, birds, low]
    part = np.repeat(np.arange(4), [len(scan), len(crowns), len(birds), len(low)])
    masks = {}
    with tempfile.TemporaryDirectory() as tmp:  # as the command runs: from a LAS file with the classes, a PLY without
        files = {"keep-points, LAS classes": _write_las(Path(tmp) / "in.las", pts, np.array([1, 5, 1, 7])[part]),
                 "keep-points, no classes": Path(tmp) / "in.ply"}
        write_cloud(files["keep-points, no classes"], pts)
        for label, path in files.items():
            t = time.perf_counter()
            process_file("denoise", path, Path(tmp) / "out.ply", keep_points=True, normals=False)
            seconds = time.perf_counter() - t
            dist, rows = cKDTree(pts).query(read_cloud(Path(tmp) / "out.ply")[0])
            assert dist.max() < 1e-3  # the input's own points (LAS stores millimetres)
            masks[label] = (np.isin(np.arange(len(pts)), rows), seconds)
    t = time.perf_counter()
    sor = statistical_outlier_baseline(pts)
    mask = np.zeros(len(pts), bool)
    mask[cKDTree(pts).query(sor)[1]] = True
    masks["open3d"] = (mask, time.perf_counter() - t)
    out = []
    for label, (mask, seconds) in masks.items():
        row = {"method": label, "points": len(pts), "scan kept": float(mask[part == 0].mean()),
               "crowns kept": float(mask[part == 1].mean()), "lone returns removed": float(1 - mask[part == 2].mean()),
               "low noise removed": float(1 - mask[part == 3].mean()), "s": seconds}
        out.append(row)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mesh-dir", default=str(bs.MESH_DIR))
    ap.add_argument("--meshes", help="comma-separated names (default: every mesh in the folder)")
    ap.add_argument("--only", choices=["meshes", "lidar", "airborne"])
    args = ap.parse_args()
    names = args.meshes.split(",") if args.meshes else None
    metrics = ("inliers kept", "far outliers removed", "CL1 / input")
    if args.only in (None, "meshes"):
        rows = meshes_part(args.mesh_dir, names)
        save("keep_meshes", rows)
        means = []
        for case in CASES:
            mine = [r for r in rows if r["case"] == case]
            mean = {"case": case, "clouds": len(mine)}
            for m in ("keep-points", "open3d"):
                for what in metrics:
                    mean[f"{m}: {what}"] = float(np.nanmean([r[f"{m}: {what}"] for r in mine]))
                mean[f"{m}: worst inliers kept"] = float(min(r[f"{m}: inliers kept"] for r in mine))
                mean[f"{m} s"] = float(np.median([r[f"{m} s"] for r in mine]))
            means.append(mean)
        print(table(means, list(means[0])))
    if args.only in (None, "lidar"):
        rows = lidar_part()
        save("keep_lidar", rows)
        print(table(rows, list(rows[0])))
    if args.only in (None, "airborne"):
        rows = airborne_part()
        save("keep_airborne", rows)
        print(table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
