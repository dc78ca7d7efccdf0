"""Point clouds to surfaces on held-out real meshes (CGAL's data set: `make meshes`).

    make meshes
    .venv/bin/python scripts/bench_surface.py [--only reconstruct|sdf|noisy|normals|densenormals|lownoise|depthnoise|lidar|lidarsite|outliers|mixed] [--normals-backend open3d|plain] [--budget 105] [--meshes a,b] [--mesh-dir DIR] [--factors 8,16]

reconstruct: 5,000 surface points with Gaussian noise (sigma = 1 % or 2 % of the bounding-box
  diagonal per coordinate, or 1 % plus 5 % outliers uniform in the box), and a range scan (6
  views, 1 % noise along the rays, 5,000 of the hits: `range_scan`), scored by Chamfer-L1 to
  100,000 clean surface points, as output/input ratios: the network (`pointcloud denoise`), MLS
  (`--baseline mls`) and Open3D's statistical outlier removal (`--baseline open3d`); also
  `reconstruct` (20,000 points: --factor 4), a perfect denoiser (5,000 points on the true
  surface: the floor of the ratio at this count), and the network at the base voxel (no noise
  adaptation). Every mesh. `--factors 8,16`: also `reconstruct --factor 8` and 16 from the same
  network output.
sdf: clean dense scans (100,000 points with the mesh's face normals) to meshes: `fit-sdf`
  (hashgrid_sdf, --budget seconds), screened Poisson (depth 8 and 9; 9 also with its vertices
  of the lowest 1 % and 5 % density removed, `--poisson-trim`) and ball pivoting on the
  same points; Chamfer-L1 from 100,000 points sampled on each mesh to 100,000 on the truth, as
  a share of the diagonal, and seconds. Four meshes (SDF_MESHES).
noisy: the 1 %-noise 5,000-point scans, denoised by the network, normals estimated (open3d),
  then the same three methods (`pointcloud mesh --method sdf|poisson|ball-pivoting`).
normals: the normals that `denoise`/`reconstruct` write (estimated and oriented on the output),
  on the reconstruct section's scans, against the true face normal at each point's nearest true
  surface point: mean angle between the lines (orientation aside), and the share of points whose
  normal points into the shape (an angle over 90 degrees; on an open mesh, against the side most
  points chose; none on a mesh whose faces are wound inconsistently), for the network's `denoise` and
  `reconstruct` outputs, MLS's output, and the noisy input itself. Every mesh. Also the flipped
  share of `denoise`'s and `reconstruct`'s normals when the input carries a scanner's normals
  (here the true normal at each scan point's nearest true point), which then give the sides, the
  same with them known on a random quarter of the scan points only (a file whose other normals are
  zero), the same with rough ones (the input's own PCA normals on the truth's side, 5 % of them
  then flipped: a scanner's local estimate and its mistakes), and on range scans when it names each point's station (the camera that saw it, as E57 and PTX do). `--normals-backend
  plain`: the estimate a machine without open3d makes (`plain_normals`: PCA and a spanning tree,
  no visibility check); the rest of the bench still uses open3d.
densenormals: normals of denser clouds (DENSE_POINTS evenly spread points, noise 1 % and 2 %),
  raw and after `denoise` (the network, as many points out), with the shipped estimate (two
  scales, `inr.data.surfaces.WIDER`) and with the own scale only (MIN_WIDE raised: the estimate
  before session 42); the same two figures as normals. Not in the default run (16 minutes).
lownoise: dense scans with little noise, as most real scanners give: 50,000 surface points with
  noise sigma = 0, 0.25 % and 0.5 % of the diagonal (LOW_NOISE), `denoise` (the network, 50,000
  points out) and MLS as output/input Chamfer-L1 ratios (above 1: the output is worse than its
  input), the noise the network reads and the voxel scale it picks. Not in the default run.
depthnoise: range scans whose noise grows with the square of the depth, as depth cameras' does,
  beside the same scans with constant noise (`depthnoise`'s docstring). Not in the default run.
lidar: laser scans of a site (`inr.pointcloud.heldout.lidar_scene`: ground, buildings, poles, a
  thin wall; 100 m across), whose noise is far below their point spacing: a terrestrial scan from
  one station (density falling as the distance squared, shadows behind buildings) and an
  airborne one (a vertical ray every 0.25 m), and the terrestrial one again with stray returns
  (`stray_returns`). `denoise`, MLS and Open3D scored two ways: accuracy
  (the points' mean distance to the true surface, output / input) and Chamfer-L1 to the same
  scan without noise at 4x the rays (what the scanner could see), output / input. Not in the
  default run.
outliers: the reconstruct section's 1 %-noise scans with 10, 20 and 30 % of their points replaced by
  outliers uniform in the box (the tables: 5 %; the network trained with up to 5 %): `denoise` and
  `reconstruct` as the CLI runs them (scattered outliers left out first) and with the network
  on every point, MLS and Open3D. Every mesh (`--mesh-dir data/training-meshes`: the training
  meshes). Not in the default run.
lidarsite: terrestrial scans (two stations, range noise 2, 5 and 10 mm) of a site made of
  training meshes (`training_site`), where `inr.pointcloud.bands`'s thresholds were chosen:
  `denoise` (by spacing band), the network on the whole cloud at one voxel, and MLS, scored as
  lidar's. Not in the default run (~8 minutes).
mixed: the lidar scene's terrestrial scan and a training-site scan with mixed pixels (a beam
  straddling a depth edge returns a blend of the two ranges: `laser_scan`'s footprint), on an
  even grid and one 3 times coarser in azimuth, and how `inr.pointcloud.mixed` finds them (from
  directions alone and from the scan's grid); `denoise` and MLS with and without them (`mixed`'s
  docstring). Not in the default run (~12 minutes).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import save, table  # noqa: E402

from inr import progress  # noqa: E402
from inr.pointcloud.metrics import compare  # noqa: E402
from inr.pointcloud.shapes import range_scan  # noqa: E402
from inr.pointcloud.strays import without_scattered  # noqa: E402

MESH_DIR = Path("data/heldout-meshes")
SDF_MESHES = ("bunny00", "armadillo", "fandisk", "camel")
TRUTH_POINTS = 100_000
SCAN_POINTS = 5_000
SCANNER_VIEWS, SCANNER_PIXELS = 6, 200
DENSE_POINTS = 100_000
CASES = {"noise 1%": (0.01, 0.0, 0), "noise 2%": (0.02, 0.0, 0), "noise 1% + 5% outliers": (0.01, 0.05, 0),
         "scanner 1%": (0.01, 0.0, SCANNER_VIEWS)}
"""case: (sigma as a share of the diagonal, outlier share, scanner views: 0 for points spread
evenly over the surface with noise per coordinate, else a range scan from that many views)."""


def load_meshes(names=None, mesh_dir=MESH_DIR):
    import trimesh

    paths = sorted(Path(mesh_dir).glob("*.off"))
    if not paths:
        raise SystemExit(f"no meshes in {mesh_dir}: run `make meshes` first")
    out = {}
    for p in paths:
        if names and p.stem not in names:
            continue
        m = trimesh.load(p, process=True)
        out[p.stem] = m
    return out


def truth(mesh, seed=1):
    import trimesh

    pts, _ = trimesh.sample.sample_surface(mesh, TRUTH_POINTS, seed=seed)
    return np.asarray(pts)


def scan(mesh, sigma, outliers, seed, views=0, stations=False, power=0.0):
    """SCAN_POINTS noisy points (and the outlier share replaced by uniform points in the box):
    sampled evenly on the surface with Gaussian noise per coordinate, or with `views` a range
    scan (`range_scan`). stations: also each point's unit direction towards the camera that saw
    it (a range scan's; None for evenly spread points), as a scanner's file gives its stations.
    power: a range scan's noise grows as the depth to that power (`range_scan`)."""
    import trimesh

    rng = np.random.default_rng(seed)
    diag = float(np.linalg.norm(mesh.extents))
    towards = None
    if views:
        pts, cameras, seen_by = range_scan(mesh, views, sigma * diag, SCAN_POINTS, rng, SCANNER_PIXELS, which=True,
                                           power=power)
        from inr.data.orientation import towards_station

        towards = towards_station(pts, cameras[seen_by])
        if len(pts) < SCAN_POINTS:
            raise SystemExit(f"the range scan made {len(pts)} points, fewer than {SCAN_POINTS}")
    else:
        pts, _ = trimesh.sample.sample_surface(mesh, SCAN_POINTS, seed=seed)
        pts = np.asarray(pts) + rng.normal(scale=sigma * diag, size=(SCAN_POINTS, 3))
    n_out = int(round(outliers * SCAN_POINTS))
    if n_out:
        lo, hi = mesh.bounds
        pts[rng.choice(SCAN_POINTS, n_out, replace=False)] = rng.uniform(lo, hi, size=(n_out, 3))
    return (pts, towards) if stations else pts


def scan_seed(name: str) -> int:
    """The scan's seed: from the mesh's name, so a mesh gets the same scan in any subset."""
    return 40_000 + zlib.crc32(name.encode()) % 10_000


def cl1(points, ref):
    return compare(points, ref, 1.0)["chamfer_l1"]


def mesh_cl1(mesh, ref, diag):
    import trimesh

    if len(mesh.faces) == 0:
        return float("nan")
    pts, _ = trimesh.sample.sample_surface(mesh, TRUTH_POINTS, seed=2)
    return cl1(np.asarray(pts), ref) / diag


_NETWORK = {}


def network_output(model, name: str, case: str, noisy):
    """The network's whole output for a scan (adaptive voxel) and its seconds, computed once per
    scan (the reconstruct and normals sections share it; one model per run)."""
    import torch

    key = (name, case)
    if key not in _NETWORK:
        t = time.perf_counter()
        full = model.reconstruct(torch.from_numpy(without_scattered(noisy)).float())[0].double().numpy()  # as the CLI
        _NETWORK[key] = (full, time.perf_counter() - t)
    return _NETWORK[key]


def load_model(weights=None):
    from inr.tasks.pointcloud import default_weights
    from inr.pointcloud.weights import load_weights

    return load_weights(Path(weights) if weights else default_weights())


def depthnoise(meshes, model):
    """Range scans (the scanner case's 6 cameras, 5,000 points) whose noise grows with the square
    of the depth, as a depth camera's does (sigma 1 % of the diagonal at the cameras' distance to
    the centre, 1.5 diagonals: 0.44-1.8 % over the nearest and farthest parts), beside the same
    scans with constant sigma (the reconstruct section's scanner case, the same draws): `denoise`,
    MLS and `reconstruct` as output / input Chamfer-L1, and the noise the network reads."""
    from inr.pointcloud.mls import mls_fill, mls_project

    rows = []
    for name, mesh in meshes.items():
        ref = truth(mesh)
        row = {"mesh": name}
        for label, power in (("constant", 0.0), ("depth^2", 2.0)):
            noisy = scan(mesh, 0.01, 0.0, seed=scan_seed(name), views=6, power=power)
            c_in = cl1(noisy, ref)
            full, _ = network_output(model, name, "scanner 1%" + (" depth^2" if power else ""), noisy)
            row[f"{label}: denoise / input"] = cl1(mls_fill(full, len(noisy), 0), ref) / c_in
            row[f"{label}: MLS / input"] = cl1(mls_project(noisy), ref) / c_in
            row[f"{label}: reconstruct / input"] = cl1(mls_fill(full, 4 * len(noisy), 0), ref) / c_in
            row[f"{label}: input CL1 / diag"] = c_in / float(np.linalg.norm(mesh.extents))
        rows.append(row)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def reconstruct(meshes, model, factors=()):
    """Per case and mesh: the network as the CLI runs it (noise-adaptive voxel; `denoise` keeps
    the input's count, `reconstruct` 4x it, both evenly subsampled), the same at the base voxel
    (the rule before the adaptive voxel: an A/B in one run), MLS, Open3D and the ideal; with
    `factors`, also `reconstruct --factor F` for each F (the same network output, more or fewer
    points kept)."""
    import torch

    from inr.pointcloud.mls import mls_fill, mls_project
    from inr.pointcloud.reconstruct import make_frame
    from inr.tasks.pointcloud import statistical_outlier_baseline

    rows = []
    for case, (sigma, outliers, views) in CASES.items():
        for name, mesh in meshes.items():
            ref = truth(mesh)
            noisy = scan(mesh, sigma, outliers, seed=scan_seed(name), views=views)
            x = torch.from_numpy(without_scattered(noisy)).float()  # what the network gets
            diag = float(np.linalg.norm(mesh.extents))
            c_in = cl1(noisy, ref)
            full, t_net = network_output(model, name, case, noisy)
            net, rec = mls_fill(full, len(noisy), 0), mls_fill(full, 4 * len(noisy), 0)
            base_full = model.reconstruct(x, adaptive=False)[0].double().numpy()
            base = make_frame(x, model.voxels_per_diagonal, float(model.max_density)).voxel
            level, scale = model.voxel_reading(x)
            t = time.perf_counter()
            mls = mls_project(noisy)
            t_mls = time.perf_counter() - t
            o3d = statistical_outlier_baseline(noisy)
            ideal = truth(mesh, seed=7)[: len(noisy)]  # a perfect denoiser: as many points, on the surface
            row = {"case": case, "mesh": name, "network / input": cl1(net, ref) / c_in, "MLS / input": cl1(mls, ref) / c_in,
                   "open3d / input": cl1(o3d, ref) / c_in, "reconstruct / input": cl1(rec, ref) / c_in,
                   "ideal / input": cl1(ideal, ref) / c_in,
                   "base voxel: network / input": cl1(mls_fill(base_full, len(noisy), 0), ref) / c_in,
                   "base voxel: reconstruct / input": cl1(mls_fill(base_full, 4 * len(noisy), 0), ref) / c_in,
                   "noise estimate / sigma": level * base / (sigma * diag), "voxel scale": scale,
                   "network points": len(full), "network s": t_net, "MLS s": t_mls}
            row["network <= MLS"] = "yes" if row["network / input"] <= row["MLS / input"] else "NO"
            for f in factors:
                row[f"reconstruct x{f:g} / input"] = cl1(mls_fill(full, int(f * len(noisy)), 0), ref) / c_in
            rows.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def mesh_sides(mesh, ref_normals):
    """(sides, the face normals turned outwards): which side is outside. A closed mesh's outward
    normals (a negative volume: wound inwards); an open one has no outside, so a normal is
    flipped against the majority side; with inconsistent winding the faces say nothing."""
    sides = "none" if not mesh.is_winding_consistent else "outward" if mesh.is_watertight else "majority"
    return sides, (-ref_normals if sides == "outward" and mesh.volume < 0 else ref_normals)


def score_normals(est, pts, tree, ref_normals, sides):
    """(mean angle in degrees between the lines, flipped share in %) of estimated normals `est` at
    `pts` against the truth's normal at the nearest truth point (`tree` over the truth points)."""
    cos = np.sum(est * ref_normals[tree.query(pts)[1]], axis=1)
    flipped = float(100 * np.mean(cos < 0))
    return (float(np.degrees(np.arccos(np.clip(np.abs(cos), 0, 1))).mean()),
            {"outward": flipped, "majority": min(flipped, 100 - flipped)}.get(sides, float("nan")))


def normals(meshes, model, backend: str = "open3d"):
    """Per case and mesh: the written normals' angle error and flipped share (module docstring)."""
    import trimesh
    from scipy.spatial import cKDTree

    from inr.data.surfaces import estimate_normals, plain_normals

    estimate = plain_normals if backend == "plain" else estimate_normals
    from inr.pointcloud.mls import mls_fill, mls_project

    rows = []
    for case, (sigma, outliers, views) in CASES.items():
        for name, mesh in meshes.items():
            ref, faces = trimesh.sample.sample_surface(mesh, TRUTH_POINTS, seed=1)
            tree, ref_normals = cKDTree(np.asarray(ref)), mesh.face_normals[faces]
            sides, ref_normals = mesh_sides(mesh, ref_normals)
            noisy, towards = scan(mesh, sigma, outliers, seed=scan_seed(name), views=views, stations=True)
            given = ref_normals[tree.query(noisy)[1]]  # a scanner's normals, as good as can be: the truth's
            quarter = np.where((np.random.default_rng(scan_seed(name)).random(len(noisy)) < 0.25)[:, None], given, np.nan)
            # a real scanner's normals: its own local estimate (the input's PCA) on the side it saw, 5 % of them wrong
            rough = estimate(noisy)
            rough *= np.where((rough * given).sum(1) < 0, -1.0, 1.0)[:, None]
            rough[np.random.default_rng(scan_seed(name) + 1).random(len(noisy)) < 0.05] *= -1
            full, _ = network_output(model, name, case, noisy)
            row = {"case": case, "mesh": name, "sides": sides}
            for label, pts in (("input", noisy), ("MLS", mls_project(noisy)), ("denoise", mls_fill(full, len(noisy), 0)),
                               ("reconstruct", mls_fill(full, 4 * len(noisy), 0))):
                t = time.perf_counter()
                est = estimate(pts)
                row[f"{label}: s"] = time.perf_counter() - t
                row[f"{label}: angle (deg)"], row[f"{label}: flipped %"] = score_normals(est, pts, tree, ref_normals, sides)
                if label in ("denoise", "reconstruct"):
                    est = estimate(pts, sides_from=(noisy, given))
                    row[f"{label}, sides from the input's: flipped %"] = score_normals(est, pts, tree, ref_normals, sides)[1]
                    est = estimate(pts, sides_from=(noisy, quarter))  # known on a quarter of the points, the others not
                    row[f"{label}, sides from a quarter of the input's: flipped %"] = score_normals(est, pts, tree, ref_normals, sides)[1]
                    est = estimate(pts, sides_from=(noisy, rough))
                    row[f"{label}, sides from rough input normals: flipped %"] = score_normals(est, pts, tree, ref_normals, sides)[1]
                    row[f"{label}, sides from the stations: flipped %"] = float("nan") if towards is None else score_normals(
                        estimate(pts, towards=(noisy, towards)), pts, tree, ref_normals, sides)[1]
            rows.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def fit_sdf(points, normals, budget, work: Path, name: str, overrides=None):
    from inr.data.pointclouds import write_cloud
    from inr.tasks.run import RunOptions, train

    import trimesh

    cloud = work / f"{name}.ply"
    write_cloud(cloud, points, normals=normals)
    t = time.perf_counter()
    r = train(RunOptions(task="sdf", input=str(cloud), out=str(work / f"{name}-run"), time_budget=budget,
                         progress=False, overwrite=True, overrides=dict(overrides or {})))
    secs = time.perf_counter() - t
    from inr.tasks.sdf import extract_run_mesh

    whole = extract_run_mesh(work / f"{name}-run", work / f"{name}-whole.ply", 256, trim=0)["out"]
    return (trimesh.load(work / f"{name}-run" / "mesh.ply", process=False), secs, r["steps"],
            trimesh.load(whole, process=False))


def classical(points, normals):
    from inr.pointcloud import classical as cl

    out = {}
    for label, fn in (("poisson 8", lambda: cl.poisson(points, normals, 8)), ("poisson 9", lambda: cl.poisson(points, normals, 9)),
                      ("poisson 9 trim 0.01", lambda: cl.poisson(points, normals, 9, 0.01)),
                      ("poisson 9 trim 0.05", lambda: cl.poisson(points, normals, 9, 0.05)),
                      ("ball pivoting", lambda: cl.ball_pivoting(points, normals))):
        t = time.perf_counter()
        mesh = fn()
        out[label] = (mesh, time.perf_counter() - t)
    return out


def surfaces(meshes, budget, noisy: bool, weights=None, overrides=None, names=SDF_MESHES):
    import trimesh

    from inr.data.surfaces import estimate_normals
    from inr.tasks.pointcloud_mesh import denoise

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, mesh in meshes.items():
            if name not in names:
                continue
            ref = truth(mesh)
            diag = float(np.linalg.norm(mesh.extents))
            t = time.perf_counter()
            if noisy:
                pts, _, _ = denoise(scan(mesh, 0.01, 0.0, seed=scan_seed(name)), "network", weights)  # as `pointcloud mesh` does
                normals = estimate_normals(pts)
            else:
                pts, faces = trimesh.sample.sample_surface(mesh, TRUTH_POINTS, seed=5)
                pts, normals = np.asarray(pts), mesh.face_normals[faces]
            prep = time.perf_counter() - t
            sdf_mesh, secs, steps, whole = fit_sdf(pts, normals, budget, Path(tmp), name, overrides)
            row = {"mesh": name, "input": "noisy 5k, denoised" if noisy else "clean 100k",
                   "fit-sdf CL1 (1e-3 diag)": 1e3 * mesh_cl1(sdf_mesh, ref, diag), "fit-sdf s": secs, "steps": steps,
                   "untrimmed CL1 (1e-3 diag)": 1e3 * mesh_cl1(whole, ref, diag),
                   "trimmed faces %": 100 * (1 - len(sdf_mesh.faces) / len(whole.faces))}
            for label, (cm, s) in classical(pts, normals).items():
                row[f"{label} CL1 (1e-3 diag)"] = 1e3 * mesh_cl1(cm, ref, diag)
                row[f"{label} s"] = s
            row["prepare s"] = prep
            row["sdf / poisson 9"] = row["fit-sdf CL1 (1e-3 diag)"] / row["poisson 9 CL1 (1e-3 diag)"]
            row["sdf / best poisson 9"] = row["fit-sdf CL1 (1e-3 diag)"] / min(
                row[f"poisson 9{t} CL1 (1e-3 diag)"] for t in ("", " trim 0.01", " trim 0.05"))
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


LOW_NOISE, LOW_NOISE_POINTS = (0.0, 0.0025, 0.005), 50_000


def densenormals(meshes, model):
    """Per noise and mesh: normals of a DENSE_POINTS scan and of its `denoise` output, two scales
    against the own scale only (see the docstring)."""
    import torch
    import trimesh
    from scipy.spatial import cKDTree

    from inr.data import surfaces
    from inr.pointcloud.mls import mls_fill

    shipped, rows = surfaces.MIN_WIDE, []
    for sigma in (0.01, 0.02):
        for name, mesh in meshes.items():
            ref, faces = trimesh.sample.sample_surface(mesh, TRUTH_POINTS, seed=1)
            tree = cKDTree(np.asarray(ref))
            sides, ref_normals = mesh_sides(mesh, mesh.face_normals[faces])
            seed = scan_seed(name) + DENSE_POINTS
            pts, _ = trimesh.sample.sample_surface(mesh, DENSE_POINTS, seed=seed)
            diag = float(np.linalg.norm(mesh.extents))
            noisy = np.asarray(pts) + np.random.default_rng(seed).normal(scale=sigma * diag, size=(DENSE_POINTS, 3))
            with torch.no_grad():
                out = mls_fill(model.reconstruct(torch.from_numpy(without_scattered(noisy)))[0].double().numpy(), DENSE_POINTS, 0)  # as `denoise`
            row = {"sigma": sigma, "mesh": name, "sides": sides}
            for label, cloud in (("input", noisy), ("denoise", out)):
                for scales, floor in (("two scales", shipped), ("own scale", 10**12)):
                    surfaces.MIN_WIDE = floor
                    try:
                        t = time.perf_counter()
                        est = surfaces.estimate_normals(cloud)
                    finally:
                        surfaces.MIN_WIDE = shipped
                    row[f"{label} {scales}: s"] = time.perf_counter() - t
                    row[f"{label} {scales}: angle (deg)"], row[f"{label} {scales}: flipped %"] = score_normals(
                        est, cloud, tree, ref_normals, sides)
            rows.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


HEAVY_OUTLIERS = (0.1, 0.2, 0.3)


def outliers(meshes, model):
    """Scans with more outliers than the network trained with (5,000 points, sigma = 1 %, 10-30 %
    of them replaced by points uniform in the box): `denoise` and `reconstruct` as the CLI runs
    them (the scattered outliers left out first, `inr.pointcloud.strays.scattered`), the network
    on every point (before 2026-12-07), MLS and Open3D, as output / input Chamfer-L1."""
    import torch

    from inr.pointcloud.mls import mls_fill, mls_project
    from inr.pointcloud.strays import scattered
    from inr.tasks.pointcloud import statistical_outlier_baseline

    rows = []
    for share in HEAVY_OUTLIERS:
        for name, mesh in meshes.items():
            ref = truth(mesh)
            noisy = scan(mesh, 0.01, share, seed=scan_seed(name))
            c_in = cl1(noisy, ref)
            far = scattered(noisy)
            row = {"outliers": share, "mesh": name, "left out %": 100 * float(far.mean())}
            with torch.no_grad():
                for label, cloud in (("CLI", noisy[~far]), ("all points", noisy)):
                    full = model.reconstruct(torch.from_numpy(cloud).float())[0].double().numpy()
                    row[f"{label}: denoise"] = cl1(mls_fill(full, len(noisy), 0), ref) / c_in
                    row[f"{label}: reconstruct"] = cl1(mls_fill(full, 4 * len(noisy), 0), ref) / c_in
            row["MLS"] = cl1(mls_project(noisy), ref) / c_in
            row["Open3D"] = cl1(statistical_outlier_baseline(noisy), ref) / c_in
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def lownoise(meshes, model):
    """Per sigma and mesh: `denoise` and MLS on a dense, nearly clean scan (see the docstring)."""
    import torch
    import trimesh

    from inr.pointcloud.mls import mls_fill, mls_project
    from inr.pointcloud.reconstruct import make_frame

    rows = []
    for sigma in LOW_NOISE:
        for name, mesh in meshes.items():
            ref = truth(mesh)
            seed = scan_seed(name) + LOW_NOISE_POINTS
            pts, _ = trimesh.sample.sample_surface(mesh, LOW_NOISE_POINTS, seed=seed)
            diag = float(np.linalg.norm(mesh.extents))
            noisy = np.asarray(pts) + np.random.default_rng(seed).normal(scale=sigma * diag, size=(LOW_NOISE_POINTS, 3))
            x = torch.from_numpy(without_scattered(noisy)).float()  # what the network gets
            c_in = cl1(noisy, ref)
            t = time.perf_counter()
            with torch.no_grad():
                net = mls_fill(model.reconstruct(x)[0].double().numpy(), LOW_NOISE_POINTS, 0)
                level, scale = model.voxel_reading(x)
            t_net = time.perf_counter() - t
            base = make_frame(x, model.voxels_per_diagonal, float(model.max_density)).voxel
            row = {"sigma": sigma, "mesh": name, "network / input": cl1(net, ref) / c_in,
                   "MLS / input": cl1(mls_project(noisy), ref) / c_in,
                   "noise read (diagonal share)": level * base / diag, "voxel scale": scale,
                   "network s": t_net}
            row["network <= MLS"] = "yes" if row["network / input"] <= row["MLS / input"] else "NO"
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


LIDAR_CASES = {"terrestrial": 0.005, "airborne": 0.03}
"""case: the range noise's sigma along each ray, metres (a terrestrial scanner's few mm, an
airborne one's few cm)."""
STRAY_SHARE, STRAY_ERROR = 0.02, (0.1, 2.0)
"""`stray_returns`: the share of a terrestrial scan's returns moved along their ray, and by how
far either way (m): a multipath echo, a beam's edge."""


def stray_returns(points, origin, rng, share=STRAY_SHARE):
    """(the scan with `share` of its returns moved along their ray from `origin` by STRAY_ERROR
    either way, the mask of those moved)."""
    pts = np.array(points, dtype=np.float64)
    ray = (pts - origin) / np.linalg.norm(pts - origin, axis=1, keepdims=True)
    out = rng.choice(len(pts), int(round(share * len(pts))), replace=False)
    pts[out] += ray[out] * (rng.uniform(*STRAY_ERROR, len(out)) * rng.choice([-1.0, 1.0], len(out)))[:, None]
    moved = np.zeros(len(pts), bool)
    moved[out] = True
    return pts, moved


STEP_DEGREES = 0.25
BEAM_RAYS = 7
"""A beam of `laser_scan`'s footprint: its centre and 6 rays around it at 0.7 of its radius."""


def _elevations(density: int) -> np.ndarray:
    """The terrestrial grid's elevations in degrees (its rows), -60 to +30."""
    return np.arange(-60, 30, STEP_DEGREES / density)


def laser_rays(case: str, rng, density: int = 1, station=None, columns: int = 1):
    """(origins, unit directions) of a `case` scan of the lidar scene, `density` x as many rays
    per axis: terrestrial, one station (default: 1.7 m over the ground near the centre), 0.25
    degrees apart in azimuth (times `columns`) and elevation (-60 to +30 degrees), a column (an
    azimuth) at a time; airborne, straight down from 200 m on a grid 0.25 m apart, each ray
    jittered by up to half a cell."""
    from inr.pointcloud.heldout import _ground_height

    if case == "terrestrial":
        az = np.radians(np.arange(0, 360, columns * STEP_DEGREES / density))
        el = np.radians(_elevations(density))
        a, e = np.meshgrid(az, el, indexing="ij")
        d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1).reshape(-1, 3)
        if station is None:
            station = np.array([46.0, 47.0, _ground_height(46.0, 47.0) + 1.7])
        return np.broadcast_to(station, d.shape), d
    step = 0.25 / density
    g = np.arange(step / 2, 100, step)
    x, y = np.meshgrid(g, g, indexing="ij")
    xy = np.stack([x.ravel(), y.ravel()], -1) + rng.uniform(-step / 2, step / 2, (x.size, 2))
    o = np.concatenate([xy, np.full((len(xy), 1), 200.0)], 1)
    return o, np.broadcast_to(np.array([0.0, 0.0, -1.0]), o.shape)


def laser_scan(mesh, case: str, sigma: float, rng, density: int = 1, station=None, footprint: float = 0.0,
               columns: int = 1, cells: bool = False):
    """(the hits of `laser_rays`, each moved along its ray by Gaussian noise of sigma; the mesh's
    ray-casting scene[; with cells, each hit's scan (0), row and column in the terrestrial grid]).
    footprint (terrestrial only): the beam's width as a share of the elevation step
    (`laser_rays`' columns: the azimuth step's multiple of it); a beam whose rays next to a depth edge (a neighbour in the grid over 5 % nearer or
    farther, or missing) reads the ranges of BEAM_RAYS rays across its width and returns their
    blend weighted by 1 / range^2 (the light each returns), as a phase-shift scanner does: a mixed
    pixel, off every surface; under half of them hitting, no return."""
    import open3d as o3d

    from inr.pointcloud.shapes import raycasting_scene

    scene = raycasting_scene(mesh)
    o, d = laser_rays(case, rng, density, station, columns)

    def cast(origins, directions):
        rays = np.concatenate([origins, directions], 1).astype(np.float32)
        return scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy().astype(np.float64)

    t = cast(o, d)
    if footprint and case == "terrestrial":
        t = _blend_beams(t, d, o[0], cast, footprint * np.radians(STEP_DEGREES / density) / 2, len(_elevations(density)))
    hit = np.isfinite(t)
    t = t[hit] + rng.normal(scale=sigma, size=int(hit.sum())) if sigma else t[hit]
    if not cells:
        return o[hit] + t[:, None] * d[hit], scene
    at, rows = np.flatnonzero(hit), len(_elevations(density))
    return o[hit] + t[:, None] * d[hit], scene, np.stack([np.zeros_like(at), at % rows, at // rows], 1)


def _blend_beams(t, d, station, cast, radius, rows):
    """`laser_scan`'s ranges t (rays on laser_rays' terrestrial grid) with the beams of angular
    radius `radius` next to a depth edge blended; rows: the grid's elevations per azimuth."""
    el = np.arcsin(np.clip(d[:, 2], -1, 1))
    grid = np.where(np.isfinite(t), t, 1e6).reshape(-1, rows)
    edge = np.zeros(grid.shape, bool)
    for axis in (0, 1):
        a, b = np.moveaxis(grid, axis, 0)[:-1], np.moveaxis(grid, axis, 0)[1:]
        jump = np.abs(a - b) > 0.05 * np.minimum(a, b)
        e = np.moveaxis(edge, axis, 0)
        e[:-1] |= jump
        e[1:] |= jump
    at = np.flatnonzero(edge.reshape(-1))
    az = np.arctan2(d[at, 1], d[at, 0])
    turn = np.arange(BEAM_RAYS - 1) * 2 * np.pi / (BEAM_RAYS - 1)
    offsets = np.concatenate([[[0.0, 0.0]], 0.7 * radius * np.stack([np.cos(turn), np.sin(turn)], 1)])
    ranges = []
    for da, de in offsets:
        a, e = az + da / np.cos(el[at]), el[at] + de
        ranges.append(cast(np.broadcast_to(station, (len(at), 3)), np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1)))
    ranges = np.stack(ranges, 1)
    hit = np.isfinite(ranges)
    weight = np.where(hit, 1 / np.where(hit, ranges, 1.0) ** 2, 0.0)
    blend = (weight * np.where(hit, ranges, 0.0)).sum(1) / np.maximum(weight.sum(1), 1e-300)
    t = t.copy()
    t[at] = np.where(hit.mean(1) >= 0.5, blend, np.inf)
    return t


def lidar(weights=None):
    """Per laser-scan case: the input's spacing and noise, and `denoise` (the network as the CLI
    runs it: by spacing band where the spacing varies widely), MLS and Open3D as output / input
    accuracy and Chamfer-L1 (see the docstring)."""
    import open3d as o3d
    import torch

    from inr.pointcloud.heldout import lidar_scene
    from inr.pointcloud.knn import knn, spacing_spread
    from inr.pointcloud.mls import mls_project
    from inr.tasks.pointcloud import network_denoise, statistical_outlier_baseline

    mesh = lidar_scene()
    rows = []
    for case, sigma in (*LIDAR_CASES.items(), ("terrestrial", LIDAR_CASES["terrestrial"])):
        stray = len(rows) == len(LIDAR_CASES)  # the terrestrial scan again, with stray returns
        rng = np.random.default_rng(7)
        noisy, scene = laser_scan(mesh, case, sigma, rng)
        if stray:
            noisy = stray_returns(noisy, laser_rays(case, rng)[0][0], rng)[0]
        ref, _ = laser_scan(mesh, case, 0.0, np.random.default_rng(8), density=2)
        to_surface = lambda p: scene.compute_distance(o3d.core.Tensor(np.asarray(p, np.float32))).numpy()  # noqa: E731
        _, d2 = knn(torch.from_numpy(noisy), torch.from_numpy(noisy), 2)
        spacing = float(np.median(np.sqrt(d2[:, 1].double().numpy())))
        a_in, c_in = float(to_surface(noisy).mean()), cl1(noisy, ref)
        t = time.perf_counter()
        net, method = network_denoise(noisy, len(noisy), Path(case), "", weights)[:2]
        t_net = time.perf_counter() - t
        row = {"case": case + f" + {STRAY_SHARE:.0%} stray returns" * stray, "points": len(noisy), "spacing (m)": spacing,
               "sigma / spacing": sigma / spacing,
               "spread": spacing_spread(noisy), "input accuracy (mm)": 1000 * a_in, "network s": t_net,
               "network method": method}
        for label, out in (("network", net), ("MLS", mls_project(noisy)), ("open3d", statistical_outlier_baseline(noisy))):
            row[f"{label}: accuracy / input"] = float(to_surface(out).mean()) / a_in
            row[f"{label}: CL1 / input"] = cl1(out, ref) / c_in
        rows.append(row)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


SITE_MESHES = ("bull", "pig", "turbine", "rotor", "elephant", "cactus", "helmet", "anchor", "pinion", "bear")
SITE_STATIONS = ((38.0, 41.0), (20.0, 60.0))
SITE_SIGMAS = (0.002, 0.005, 0.01)


def _site_ground(x, y):
    return np.cos(x / 11 + 0.5) * np.sin(y / 19) + 0.3 * np.cos(x / 4 - y / 6)


def training_site(mesh_dir=Path("data/training-meshes"), seed: int = 1, grid: int = 160):
    """A site 80 m across made of training meshes (SITE_MESHES, each scaled to 3-10 m across and set
    on rolling ground): terrestrial scans to choose settings on, beside the held-out lidar scene."""
    import trimesh

    from inr.pointcloud.heldout import _grid_faces

    rng = np.random.default_rng(seed)
    x, y = np.meshgrid(np.linspace(0, 80, grid), np.linspace(0, 80, grid), indexing="ij")
    parts = [trimesh.Trimesh(np.stack([x, y, _site_ground(x, y)], -1).reshape(-1, 3), _grid_faces(grid, grid, wrap_cols=False))]
    for name in SITE_MESHES:
        m = trimesh.load(Path(mesh_dir) / f"{name}.off", process=True)
        m.apply_translation(-m.bounds.mean(0))
        m.apply_scale(rng.uniform(3, 10) / np.linalg.norm(np.ptp(m.vertices, 0)))
        px, py = rng.uniform(8, 72, 2)
        m.apply_translation((px, py, _site_ground(px, py) - m.bounds[0, 2] - 0.2))
        parts.append(m)
    return trimesh.util.concatenate(parts)


def lidar_site(weights=None):
    """Terrestrial scans of `training_site` (SITE_STATIONS x SITE_SIGMAS): `denoise` (by band, as
    the CLI runs such a scan), the network on the whole cloud at one voxel (as before 2026-12-07),
    and MLS, as output / input accuracy and Chamfer-L1; what `inr.pointcloud.bands`'s thresholds
    were chosen on."""
    import open3d as o3d

    from inr.pointcloud.knn import spacing_spread
    from inr.pointcloud.mls import mls_fill, mls_project
    from inr.tasks.pointcloud import network_denoise, network_points

    mesh = training_site()
    rows = []
    for sx, sy in SITE_STATIONS:
        station = np.array([sx, sy, _site_ground(sx, sy) + 1.7])
        ref, scene = laser_scan(mesh, "terrestrial", 0.0, np.random.default_rng(4), density=2, station=station)
        to_surface = lambda p: scene.compute_distance(o3d.core.Tensor(np.asarray(p, np.float32))).numpy()  # noqa: E731
        for sigma in SITE_SIGMAS:
            noisy, _ = laser_scan(mesh, "terrestrial", sigma, np.random.default_rng(3), station=station)
            a_in, c_in = float(to_surface(noisy).mean()), cl1(noisy, ref)
            t = time.perf_counter()
            banded, method = network_denoise(noisy, len(noisy), Path("site"), "", weights)[:2]
            t_band = time.perf_counter() - t
            t = time.perf_counter()
            whole = mls_fill(network_points(noisy, weights)[0], len(noisy), 0)
            t_whole = time.perf_counter() - t
            row = {"station": f"{sx:g},{sy:g}", "sigma (mm)": 1000 * sigma, "points": len(noisy), "spread": spacing_spread(noisy),
                   "input accuracy (mm)": 1000 * a_in, "denoise s": t_band, "one voxel s": t_whole, "denoise method": method}
            for label, out in (("denoise", banded), ("one voxel", whole), ("MLS", mls_project(noisy))):
                row[f"{label}: accuracy / input"] = float(to_surface(out).mean()) / a_in
                row[f"{label}: CL1 / input"] = cl1(out, ref) / c_in
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


MIXED_FOOTPRINTS = (0.8, 1.2)
MIXED_COLUMNS = (1, 3)
"""`mixed`: grids with azimuth steps 1 and 3 times the elevation step (many scanners store finer
rows than columns: the real scan of README's pump room, 3.3 times)."""
MIXED_OFF = 0.05
"""`mixed`: a return farther than this (m) from every surface is counted as a mixed pixel."""


def mixed(weights=None):
    """Terrestrial scans with mixed pixels (`laser_scan`'s footprint: 0.8 and 1.2 of the elevation
    step, and none; MIXED_COLUMNS' grids): the held-out lidar scene (sigma 5 mm, its station) and
    the training site (sigma 2 and 5 mm, SITE_STATIONS' first), where `inr.pointcloud.mixed`'s
    settings were chosen (on the even grid, from directions alone). Per scan: the returns over
    MIXED_OFF from every surface, how many `mixed_pixels` takes of them and of the others from
    the directions alone (as for a scan stored without its grid) and from the scan's grid (as
    the CLI reads a PTX, an E57 with rows and columns); `denoise` (by band, as the CLI runs a
    scan) and MLS on the scan as read and without what the grid's run takes, as output / input
    (the scan as read) accuracy and Chamfer-L1."""
    import open3d as o3d

    from inr.pointcloud.heldout import _ground_height, lidar_scene
    from inr.pointcloud.mixed import mixed_pixels
    from inr.pointcloud.mls import mls_project
    from inr.tasks.pointcloud import network_denoise

    sites = [("held-out scene", lidar_scene(), np.array([46.0, 47.0, _ground_height(46.0, 47.0) + 1.7]), (0.005,))]
    sx, sy = SITE_STATIONS[0]
    sites.append(("training site", training_site(), np.array([sx, sy, _site_ground(sx, sy) + 1.7]), (0.002, 0.005)))
    rows = []
    for name, mesh, station, sigmas in sites:
        ref, scene = laser_scan(mesh, "terrestrial", 0.0, np.random.default_rng(4), density=2, station=station)
        to_surface = lambda p: scene.compute_distance(o3d.core.Tensor(np.asarray(p, np.float32))).numpy()  # noqa: E731
        for columns in MIXED_COLUMNS:
            for sigma in sigmas:
                for footprint in (0.0,) + MIXED_FOOTPRINTS:
                    noisy, _, cells = laser_scan(mesh, "terrestrial", sigma, np.random.default_rng(3), station=station,
                                                 footprint=footprint, columns=columns, cells=True)
                    dist = to_surface(noisy)
                    off = dist > MIXED_OFF
                    t = time.perf_counter()
                    by_directions = mixed_pixels(noisy, station)
                    t_directions = time.perf_counter() - t
                    t = time.perf_counter()
                    taken = mixed_pixels(noisy, station, cells)
                    t_grid = time.perf_counter() - t
                    a_in, c_in = float(dist.mean()), cl1(noisy, ref)
                    row = {"scan": name, "azimuth step / elevation step": columns, "sigma (mm)": 1000 * sigma,
                           "footprint": footprint, "points": len(noisy), "off surfaces": int(off.sum()),
                           "directions: taken of them": int((by_directions & off).sum()),
                           "directions: others taken": int((by_directions & ~off).sum()),
                           "grid: taken of them": int((taken & off).sum()), "grid: others taken": int((taken & ~off).sum()),
                           "directions s": t_directions, "grid s": t_grid, "input accuracy (mm)": 1000 * a_in,
                           "without taken: accuracy / input": float(dist[~taken].mean()) / a_in}
                    for label, run in (("denoise", lambda p: network_denoise(p, len(p), Path(name), "", weights).points),
                                       ("MLS", mls_project)):
                        for how, cloud in (("as read", noisy), ("without taken", noisy[~taken])):
                            out = run(cloud)
                            row[f"{label} {how}: accuracy / input"] = float(to_surface(out).mean()) / a_in
                            row[f"{label} {how}: CL1 / input"] = cl1(out, ref) / c_in
                    rows.append(row)
                    print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=["reconstruct", "sdf", "noisy", "normals", "densenormals", "lownoise", "depthnoise", "lidar", "lidarsite", "outliers", "mixed"])
    ap.add_argument("--normals-backend", choices=["open3d", "plain"], default="open3d",
                    help="normals: open3d's estimate (as installed by make setup) or the twin without open3d")
    ap.add_argument("--budget", type=float, default=105.0, help="fit-sdf training seconds per shape (105: with loading, the sign lattice and the mesh, under 120 s on this 2-core machine)")
    ap.add_argument("--meshes", help="comma-separated subset of the meshes (sdf and noisy: instead of SDF_MESHES)")
    ap.add_argument("--mesh-dir", default=str(MESH_DIR),
                    help="where the meshes are (data/training-meshes: to choose a setting without the held-out ones)")
    ap.add_argument("--weights", help="reconstruction weights (default: the shipped ones)")
    ap.add_argument("--factors", default="", help="reconstruct: also `reconstruct --factor F` for these (comma-separated, e.g. 8,16)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="fit-sdf preset overrides (train.w_sign=100)")
    ap.add_argument("--precision", choices=["32", "bf16"], default="32",
                    help="the reconstruction network's products (as `pointcloud denoise --precision`)")
    args = ap.parse_args()
    progress.set_enabled(False)
    names = args.meshes.split(",") if args.meshes else None
    meshes = load_meshes(names, args.mesh_dir)
    sections = args.only or ["reconstruct", "normals", "sdf", "noisy"]
    model = load_model(args.weights) if {"reconstruct", "normals", "densenormals", "lownoise", "depthnoise", "outliers"} & set(sections) else None
    if model is not None and args.precision == "bf16":
        from inr.pointcloud.network import use_bf16

        if not use_bf16(model):
            raise SystemExit("--precision bf16: this CPU has no bfloat16 dot products")
    if "reconstruct" in sections:
        factors = [float(f) for f in args.factors.split(",") if f]
        rows = reconstruct(meshes, model, factors)
        save("surface_reconstruct", rows)
        print(table(rows, ["case", "mesh", "network / input", "MLS / input", "open3d / input", "network <= MLS",
                           "reconstruct / input", "ideal / input", "base voxel: network / input",
                           "base voxel: reconstruct / input", "noise estimate / sigma", "voxel scale", "network points",
                           "network s", "MLS s"] + [f"reconstruct x{f:g} / input" for f in factors]))
    if "normals" in sections:
        rows = normals(meshes, model, args.normals_backend)
        save("surface_normals" + ("_plain" if args.normals_backend == "plain" else ""), rows)
        print(table(rows, ["case", "mesh", "sides"] + [f"{m}: {c}" for m in ("input", "MLS", "denoise", "reconstruct")
                                              for c in ("angle (deg)", "flipped %", "s")]
                    + [f"{m}, sides from {w}: flipped %" for w in ("the input's", "the stations", "a quarter of the input's", "rough input normals") for m in ("denoise", "reconstruct")]))
    if "depthnoise" in sections:
        rows = depthnoise(meshes, model)
        save("surface_depthnoise", rows)
        print(table(rows, ["mesh"] + [f"{w}: {c}" for w in ("constant", "depth^2")
                                      for c in ("input CL1 / diag", "denoise / input", "MLS / input", "reconstruct / input")]))
    if "densenormals" in sections:
        rows = densenormals(meshes, model)
        save("surface_densenormals", rows)
        print(table(rows, ["sigma", "mesh", "sides"] + [f"{w} {s}: {c}" for w in ("input", "denoise")
                                                         for s in ("two scales", "own scale")
                                                         for c in ("angle (deg)", "flipped %", "s")]))
    if "lidar" in sections:
        rows = lidar(args.weights)
        save("surface_lidar", rows)
        print(table(rows, ["case", "points", "spacing (m)", "sigma / spacing", "spread", "input accuracy (mm)"]
                    + [f"{m}: {c}" for m in ("network", "MLS", "open3d") for c in ("accuracy / input", "CL1 / input")]
                    + ["network s"]))
    if "outliers" in sections:
        rows = outliers(meshes, model)
        save("surface_outliers", rows)
        print(table(rows, ["outliers", "mesh", "left out %"] + [f"{w}: {c}" for w in ("CLI", "all points") for c in ("denoise", "reconstruct")]
                    + ["MLS", "Open3D"]))
    if "lidarsite" in sections:
        rows = lidar_site(args.weights)
        save("surface_lidarsite", rows)
        print(table(rows, ["station", "sigma (mm)", "points", "spread", "input accuracy (mm)"]
                    + [f"{m}: {c}" for m in ("denoise", "one voxel", "MLS") for c in ("accuracy / input", "CL1 / input")]
                    + ["denoise s", "one voxel s"]))
    if "mixed" in sections:
        rows = mixed(args.weights)
        save("surface_mixed", rows)
        print(table(rows, ["scan", "azimuth step / elevation step", "sigma (mm)", "footprint", "points", "off surfaces",
                           "directions: taken of them", "directions: others taken", "grid: taken of them",
                           "grid: others taken", "input accuracy (mm)", "without taken: accuracy / input"]
                    + [f"{m} {h}: {c}" for m in ("denoise", "MLS") for h in ("as read", "without taken")
                       for c in ("accuracy / input", "CL1 / input")] + ["directions s", "grid s"]))
    if "lownoise" in sections:
        rows = lownoise(meshes, model)
        save("surface_lownoise", rows)
        print(table(rows, ["sigma", "mesh", "network / input", "MLS / input", "network <= MLS", "noise read (diagonal share)",
                           "voxel scale", "network s"]))
    for section in ("sdf", "noisy"):
        if section in sections:
            overrides = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
            rows = surfaces(meshes, args.budget, noisy=section == "noisy", weights=args.weights, overrides=overrides,
                            names=names or SDF_MESHES)
            save(f"surface_{section}", rows)
            cols = ["mesh", "input", "fit-sdf CL1 (1e-3 diag)", "untrimmed CL1 (1e-3 diag)", "trimmed faces %", "poisson 8 CL1 (1e-3 diag)", "poisson 9 CL1 (1e-3 diag)",
                    "poisson 9 trim 0.01 CL1 (1e-3 diag)", "poisson 9 trim 0.05 CL1 (1e-3 diag)",
                    "ball pivoting CL1 (1e-3 diag)", "sdf / poisson 9", "sdf / best poisson 9", "fit-sdf s", "steps", "poisson 9 s", "ball pivoting s"]
            print(table(rows, cols))


if __name__ == "__main__":
    main()
