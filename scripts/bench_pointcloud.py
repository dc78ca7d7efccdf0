"""Point-cloud reconstruction: quality on held-out shapes, the stage-2 PE ablation, speed.

    .venv/bin/python scripts/bench_pointcloud.py [--weights FILE] [--sections quality,ablation,speed,convs,stage2,mls,neighbours]

quality: the network against the noisy input and Open3D's statistical-outlier baseline on the
  six held-out meshes of `inr.pointcloud.heldout` (families the training generator never makes),
  two draws each. Per draw: 20,000 clean dense surface points; 5,000 input points with 1 % noise,
  2 % noise (sigma as a share of the bounding-box diagonal), or 1 % noise + 5 % outliers.
  Metric: chamfer_l1 (average of the two mean nearest-neighbour distances) to the clean dense
  points, as the mean ratio to the input's and to the baseline's (lower is better). "denoise"
  keeps as many points as the input, spread evenly (`inr pointcloud denoise`), "reconstruct" 4x
  as many (`inr pointcloud reconstruct`'s default --factor 4). "ideal denoise" is a perfect
  denoiser: as many points as the input, sampled on the true surface. "base voxel": the same
  at the base voxel (no noise adaptation), an A/B in the same run.
ablation: stage 2 retrained from scratch with amplified, plain sinusoidal and no PE, on the same
  frozen stage 1, the same training pairs (seed) and the same number of steps (--ablation-steps);
  then the quality metric (denoise, 1 % and 2 % noise).
speed: `process_file` (read, network, normals, write PLY) on 100,000 and 1,000,000 input points of a held-out
  mesh (trefoil) with 1 % noise and clean (a dense scan with no noise, where the voxel runs finest): seconds (and the normals' share, timed again alone) and peak resident memory, each in a fresh process, and
  the output's chamfer_l1 to 2n clean surface points as a ratio to the input's. Run it with
  INR_NATIVE=0 too for the torch path of the sparse convolutions (an A/B of the whole command).
convs (not in the default run): the sparse layers alone, forward without gradients, the torch path
  against the native kernel (`inr/native/sparse_conv.cpp`), on the voxels of sphere shells of
  radius 40 and 110 voxels (36,000 and 273,000 sites in a layer 1.8 voxels thick, 16.7 of 27 neighbours
  active per site), widths
  32 / 64 / 96 (the network's hourglass levels), medians of 5 calls with the kernel maps built
  (as the network shares them between a resolution's layers); building those maps (the
  torch lookups against the native table) for a 3x3x3 kernel; and a submanifold layer's weight
  gradient from its table (per-offset gathers and matmuls in torch against native.gather_wgrad).
stage2 (not in the default run): the network's stage 2 alone (the shipped weights' PointNet), forward
  without gradients on 8,192 voxels of 32 neighbours each (30 % of them padding), medians of 12
  interleaved calls: the torch path in blocks of 1,024 voxels (its block before 2026-12-06) and
  of 256, against the native transformer (`inr/native/encoder.cpp`) in blocks of 256 and 1,024.
mls (not in the default run): the MLS projections, NumPy path against the native one
  (`inr/native/mls.cpp`), medians of 3: one projection of 1,000,000 points of a noisy unit sphere
  (σ = 1 % of the diagonal) onto the jets of their k = 30 nearest (`--baseline mls` runs two), the
  neighbour search given (the projection alone) and with it; and `mls_fill` from 55,000 points of
  the sphere to 1,000,000 (the 1 % trefoil's row of the speed section fills as much).
neighbours (not in the default run): the k-nearest-neighbour search of every point of a noisy unit
  sphere (1,000,000 points, σ = 0.25 % of the diagonal) among them, open3d's KD-tree against the
  native grid (`inr/native/knn.cpp`), k = 1, 16, 30, 64; and the PCA normals over 30 neighbours
  (open3d's covariances and NumPy's eigendecomposition against the grid and `native.pca_normals`),
  medians of 3.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import RESULTS, median_seconds, save, table  # noqa: E402

from inr.pointcloud.heldout import heldout_meshes  # noqa: E402
from inr.pointcloud.metrics import compare  # noqa: E402
from inr.pointcloud.strays import without_scattered  # noqa: E402
from inr.pointcloud.shapes import Corruption, corrupt, sample_surface  # noqa: E402
from inr.pointcloud.mls import mls_fill  # noqa: E402
from inr.tasks.pointcloud import default_weights  # noqa: E402
from inr.tasks.pointcloud import statistical_outlier_baseline as baseline  # noqa: E402
from inr.pointcloud.weights import load_weights  # noqa: E402

CASES = {
    "noise 1%": Corruption(noise=(0.01, 0.01), sparsity=(4, 4), outliers=(0, 0), holes=(0, 0)),
    "noise 2%": Corruption(noise=(0.02, 0.02), sparsity=(4, 4), outliers=(0, 0), holes=(0, 0)),
    "noise 1% + 5% outliers": Corruption(noise=(0.01, 0.01), sparsity=(4, 4), outliers=(0.05, 0.05), holes=(0, 0)),
}
DRAWS = 2


def clouds(case: Corruption):
    """(name, noisy, clean, mesh) for every held-out mesh and draw, reproducibly."""
    for m, (name, mesh) in enumerate(heldout_meshes().items()):
        for d in range(DRAWS):
            rng = np.random.default_rng(30_000 + 10 * m + d)
            clean = sample_surface(mesh, 20_000, rng)
            yield name, corrupt(clean, rng, case), clean, mesh


def chamfer(p: np.ndarray, clean: np.ndarray) -> float:
    return compare(p, clean, 0.01)["chamfer_l1"]


def denoised(model, noisy: np.ndarray, adaptive: bool = True):
    """(denoise output, reconstruct output (4x the input's count, as the CLI's default), the
    network's point count, seconds)."""
    t = time.perf_counter()
    out, _ = model.reconstruct(torch.from_numpy(without_scattered(noisy)).float(), adaptive=adaptive)  # as the CLI
    secs = time.perf_counter() - t
    out = out.double().numpy()
    return mls_fill(out, len(noisy)), mls_fill(out, 4 * len(noisy)), len(out), secs


def quality(model) -> list:
    rows = []
    for case_name, case in CASES.items():
        acc = {k: [] for k in ("d_in", "d_base", "r_in", "r_base", "secs", "worst", "ideal", "count", "d_fixed", "r_fixed")}
        for name, noisy, clean, mesh in clouds(case):
            few, full, count, secs = denoised(model, noisy)
            few_fixed, full_fixed, _, _ = denoised(model, noisy, adaptive=False)
            acc["d_fixed"].append(chamfer(few_fixed, clean) / chamfer(noisy, clean))
            acc["r_fixed"].append(chamfer(full_fixed, clean) / chamfer(noisy, clean))
            c_in, c_base, c_few = chamfer(noisy, clean), chamfer(baseline(noisy), clean), chamfer(few, clean)
            ideal = sample_surface(mesh, len(noisy), np.random.default_rng(1))  # a perfect denoiser's output
            acc["ideal"].append(chamfer(ideal, clean) / c_in)
            acc["count"].append(count / len(noisy))
            acc["d_in"].append(c_few / c_in)
            acc["d_base"].append(c_few / c_base)
            acc["r_in"].append(chamfer(full, clean) / c_in)
            acc["r_base"].append(chamfer(full, clean) / c_base)
            acc["secs"].append(secs)
            acc["worst"].append((c_few / c_in, name))
        worst = max(acc["worst"])
        rows.append({"corruption": case_name, "clouds": len(acc["secs"]),
                     "denoise / input": round(float(np.mean(acc["d_in"])), 3),
                     "denoise / open3d": round(float(np.mean(acc["d_base"])), 3),
                     "reconstruct / input": round(float(np.mean(acc["r_in"])), 3),
                     "reconstruct / open3d": round(float(np.mean(acc["r_base"])), 3),
                     "network points / input": round(float(np.mean(acc["count"])), 1),
                     "base voxel: denoise / input": round(float(np.mean(acc["d_fixed"])), 3),
                     "base voxel: reconstruct / input": round(float(np.mean(acc["r_fixed"])), 3),
                     "worst denoise / input": f"{worst[0]:.3f} ({worst[1]})",
                     "ideal denoise / input": round(float(np.mean(acc["ideal"])), 3),
                     "s per cloud": round(float(np.median(acc["secs"])), 2)})
        print(rows[-1], flush=True)
    return rows


def ablation(weights: Path, steps: int) -> list:
    from inr.pointcloud.network import ReconstructionConfig
    from inr.pointcloud.reconstruct import Reconstructor
    from inr.presets import PointCloudTrainConfig
    from inr.tasks.pointcloud_train import ShapeStream

    base = load_weights(weights)
    rows = []
    for pe in ("amplified", "sinusoidal", "none"):
        torch.manual_seed(0)
        cfg = ReconstructionConfig(**{**base.cfg.to_dict(), "pe": pe})
        model = Reconstructor(cfg, base.voxels_per_diagonal)
        model.stage1.load_state_dict(base.stage1.state_dict())
        model.stage1.requires_grad_(False)
        opt = torch.optim.Adam(model.stage2.parameters(), 1e-3)
        stream = iter(ShapeStream(PointCloudTrainConfig(), None, seed=0))
        t = time.perf_counter()
        for _ in range(steps):
            noisy, clean = next(stream)
            loss = model(noisy, clean)["loss"]  # BCE + Chamfer; stage 1 is frozen, so only Chamfer trains
            opt.zero_grad()
            loss.backward()
            opt.step()
        train_s = time.perf_counter() - t
        model.eval()
        row = {"stage-2 PE": pe, "steps": steps, "train s": round(train_s)}
        for case_name in ("noise 1%", "noise 2%"):
            ratios = [chamfer(denoised(model, noisy)[0], clean) / chamfer(noisy, clean) for _, noisy, clean, _ in clouds(CASES[case_name])]
            row[f"denoise / input, {case_name}"] = round(float(np.mean(ratios)), 3)
        rows.append(row)
        print(row, flush=True)
    return rows


def _speed_child(n: int, weights: str, sigma: float = 0.01, precision: str = "32") -> None:
    import resource
    import tempfile

    from inr.data.pointclouds import read_cloud, write_cloud
    from inr.tasks.pointcloud import process_file

    rng = np.random.default_rng(1)
    clean = sample_surface(heldout_meshes()["trefoil"], n, rng)
    diag = np.linalg.norm(np.ptp(clean, axis=0))
    noisy = clean + rng.normal(scale=sigma * diag, size=clean.shape)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.ply", Path(tmp) / "out.ply"
        write_cloud(src, noisy)
        t = time.perf_counter()
        r = process_file("denoise", src, dst, Path(weights), progress=False, precision=precision)
        secs = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out, _ = read_cloud(dst)
        from inr.data.surfaces import estimate_normals

        t = time.perf_counter()
        estimate_normals(out)  # the part of `seconds` that writing normals costs, timed again alone
        normals_secs = time.perf_counter() - t
    ref = sample_surface(heldout_meshes()["trefoil"], 2 * n, rng)  # the clean surface, densely
    ratio = chamfer(out, ref) / chamfer(noisy, ref)
    print(json.dumps({"input points": n, "noise %": 100 * sigma, "precision": "bf16" if " in bf16" in r["method"] else "32",
                      "seconds": round(secs, 1), "of which normals s": round(normals_secs, 1),
                      "peak RSS MiB": round(rss),
                      "output points": r["output_points"], "denoise / input": round(ratio, 3)}))


def speed(weights: Path, cases=((0.01, 100_000), (0.01, 1_000_000), (0.0, 100_000), (0.0, 1_000_000))) -> list:
    """`denoise` of each (noise, points) case in its own process, in float32 and, where the CPU has
    bfloat16 dot products, in bf16 (`--precision bf16`) right after it."""
    from inr import native

    precisions = ["32"] + (["bf16"] if native.bf16_products() else [])
    rows = []
    for sigma, n in cases:
        for precision in precisions:
            out = subprocess.run([sys.executable, __file__, "--speed-child", str(n), "--speed-sigma", str(sigma),
                                  "--speed-precision", precision, "--weights", str(weights)],
                                 capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    return rows


def _shell(radius: int) -> torch.Tensor:
    """The voxels within 0.9 of a sphere of `radius` voxels: a closed surface 1.8 voxels thick."""
    r = torch.arange(-radius - 2, radius + 3)
    g = torch.stack(torch.meshgrid(r, r, r, indexing="ij"), -1).view(-1, 3)
    return g[(g.float().norm(dim=1) - radius).abs() < 0.9]


def convs(repeats: int = 5) -> list:
    from inr import native
    from inr.pointcloud.sparse_conv import DownConv3d, SparseTensor, SubmanifoldConv3d, UpConv3d, _down_map, kernel_offsets

    def median(f) -> float:
        return median_seconds(f, repeats, warmup=0)

    def torch_table(x):
        for off in kernel_offsets(3):
            x.lookup(x.coords + off, x.batch)

    rows = []
    for radius in (40, 110):
        coords = _shell(radius)
        fresh = lambda: SparseTensor(coords, torch.zeros(len(coords), 1))  # noqa: E731
        t_torch = median(lambda: torch_table(fresh()))
        t_native = median(lambda: native.submanifold_table(fresh().keys, 3))
        rows.append({"what": "neighbour table (3x3x3)", "width": "", "voxels": len(coords), "torch s": round(t_torch, 4),
                     "native s": round(t_native, 4), "speed-up": round(t_torch / t_native, 1), "native bf16 s": "",
                     "bf16 speed-up": ""})
        for width in (32, 64, 96):
            x = SparseTensor(coords, torch.randn(len(coords), width, generator=torch.Generator().manual_seed(0)))
            coarse = _down_map(x)[0]
            coarse = coarse.replace(torch.randn(len(coarse), width, generator=torch.Generator().manual_seed(1)))
            for cls in (SubmanifoldConv3d, DownConv3d, UpConv3d):
                out = {}
                for backend, bf16 in (("torch", False), ("native", False)) + ((("native", True),) if native.bf16_products() else ()):
                    layer = cls(width, width, backend=backend)
                    layer.bf16 = bf16
                    call = (lambda: layer(coarse, x)) if cls is UpConv3d else (lambda: layer(x))
                    with torch.no_grad():
                        call()  # builds the maps this layer's path caches (a network builds them once per resolution)
                        out[backend + " bf16" * bf16] = median(call)
                rows.append({"what": cls.__name__, "width": width, "voxels": len(coords), "torch s": round(out["torch"], 4),
                             "native s": round(out["native"], 4), "speed-up": round(out["torch"] / out["native"], 1),
                             "native bf16 s": round(out.get("native bf16", float("nan")), 4),
                             "bf16 speed-up": round(out["native"] / out.get("native bf16", float("nan")), 2)})
                print(rows[-1], flush=True)
            # the weight gradient of a submanifold layer from its table: per-offset gathers and
            # matmuls in torch (the training path before session 47) against native.gather_wgrad
            table = native.submanifold_table(x.keys, 3)
            grad = torch.randn(len(coords), width, generator=torch.Generator().manual_seed(2))

            def per_offset():
                out = torch.zeros(table.shape[1], width, width)
                for o in range(table.shape[1]):
                    rows_o = (table[:, o] >= 0).nonzero()[:, 0]
                    out[o] = x.feats[table[rows_o, o].long()].t() @ grad[rows_o]
                return out

            t_torch, t_native = median(per_offset), median(lambda: native.gather_wgrad(x.feats, table, grad))
            rows.append({"what": "weight gradient (submanifold)", "width": width, "voxels": len(coords),
                         "torch s": round(t_torch, 4), "native s": round(t_native, 4), "speed-up": round(t_torch / t_native, 1),
                         "native bf16 s": "", "bf16 speed-up": ""})
            print(rows[-1], flush=True)
    return rows


def stage2(weights: Path, repeats: int = 12) -> list:
    from inr import native
    from inr.pointcloud.network import PointNet

    net = load_weights(weights).stage2
    cfg, chunks = net.cfg, (PointNet.CHUNK, PointNet.NATIVE_CHUNK)
    g = torch.Generator().manual_seed(0)
    V = 8192
    feats = torch.randn(V, cfg.width, generator=g)
    rel = torch.rand(V, cfg.neighbours, 3, generator=g) * 4 - 2
    mask = torch.rand(V, cfg.neighbours, generator=g) < 0.3
    runs = [("torch", 1024), ("torch", 256), ("native", 256), ("native", 1024)]
    runs += [("native bf16", 1024)] if native.bf16_products() else []
    times, outs = {r: [] for r in runs}, {}
    try:
        with torch.no_grad():
            for _ in range(repeats):
                for backend, block in runs:
                    net.backend, net.bf16 = backend.split()[0], backend.endswith("bf16")
                    PointNet.CHUNK, PointNet.NATIVE_CHUNK = block, block
                    t = time.perf_counter()
                    outs[backend, block] = net(feats, rel, mask)
                    times[backend, block].append(time.perf_counter() - t)
    finally:
        PointNet.CHUNK, PointNet.NATIVE_CHUNK = chunks
    base = float(np.median(times[runs[0]]))
    return [{"path": backend, "voxels per block": block, "voxels": V, "median s": round(float(np.median(times[backend, block])), 4),
             "speed-up": round(base / float(np.median(times[backend, block])), 2),
             "max abs difference": float((outs[backend, block] - outs[runs[0]]).abs().max())} for backend, block in runs]


def mls_speed(repeats: int = 3) -> list:
    from inr import native
    from inr.pointcloud import mls
    from inr.pointcloud.knn import knn

    rng = np.random.default_rng(0)

    def sphere(n):
        p = rng.normal(size=(n, 3))
        return p / np.linalg.norm(p, axis=1, keepdims=True) + rng.normal(scale=0.01 * 2 * np.sqrt(3), size=(n, 3))

    def median(f) -> float:
        return median_seconds(f, repeats, warmup=0)

    x, few = sphere(1_000_000), sphere(55_000)
    idx, d2 = knn(torch.from_numpy(x), torch.from_numpy(x), 30)
    xt, d2d = torch.from_numpy(x), d2.double()
    rows = []
    runs = {
        "projection alone, k = 30": (lambda: [mls._project_chunk(x[i:i + mls.PROJECT_CHUNK], x, idx[i:i + mls.PROJECT_CHUNK].numpy(),
                                                                   d2[i:i + mls.PROJECT_CHUNK].numpy())
                                              for i in range(0, len(x), mls.PROJECT_CHUNK)],
                                     lambda: native.mls_project(xt, xt, idx, d2d)),
        "projection with the neighbour search, k = 30": (lambda: mls._project_once(x, 30, backend="numpy"),
                                                         lambda: mls._project_once(x, 30, backend="native")),
    }
    for what, (slow, fast) in runs.items():
        t_numpy, t_native = median(slow), median(fast)
        rows.append({"what": what, "points": len(x), "numpy s": round(t_numpy, 2), "native s": round(t_native, 2),
                     "speed-up": round(t_numpy / t_native, 1)})
        print(rows[-1], flush=True)
    times = {backend: median(lambda: mls.mls_fill(few, len(x), backend=backend)) for backend in ("numpy", "native")}
    rows.append({"what": "mls_fill 55,000 -> 1,000,000", "points": len(x), "numpy s": round(times["numpy"], 2),
                 "native s": round(times["native"], 2), "speed-up": round(times["numpy"] / times["native"], 1)})
    return rows


def neighbours(repeats: int = 3) -> list:
    """The k-NN search and the PCA normals: the KD-tree (open3d's) and open3d's covariances with
    NumPy's eigendecomposition, against the native grid search and PCA (medians of `repeats`)."""
    from inr import _external
    from inr.data import surfaces
    from inr.pointcloud.knn import knn

    rng = np.random.default_rng(0)
    p = rng.normal(size=(1_000_000, 3))
    x = p / np.linalg.norm(p, axis=1, keepdims=True) + rng.normal(scale=0.0025 * 2 * np.sqrt(3), size=p.shape)
    xt, o3d = torch.from_numpy(x), _external.open3d()
    rows = []
    runs = {f"k-NN of every point, k = {k}": (lambda k=k: knn(xt, xt, k, backend="kdtree"),
                                              lambda k=k: knn(xt, xt, k, backend="native")) for k in (1, 16, 30, 64)}
    runs["PCA normals, 30 neighbours"] = (lambda: surfaces._pca(x, o3d, backend="numpy"), lambda: surfaces._pca(x, o3d))
    for what, (slow, fast) in runs.items():
        t_slow, t_fast = median_seconds(slow, repeats, warmup=0), median_seconds(fast, repeats, warmup=0)
        rows.append({"what": what, "points": len(x), "open3d s": round(t_slow, 2), "native s": round(t_fast, 2),
                     "speed-up": round(t_slow / t_fast, 1)})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default=str(default_weights()))
    ap.add_argument("--sections", default="quality,ablation,speed")
    ap.add_argument("--ablation-steps", type=int, default=300)
    ap.add_argument("--speed-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--speed-sigma", type=float, default=0.01, help=argparse.SUPPRESS)
    ap.add_argument("--speed-precision", default="32", help=argparse.SUPPRESS)
    ap.add_argument("--speed-cases", help="the speed section's cases, NOISE:POINTS,... (default: 0.01:100000,"
                    "0.01:1000000,0:100000,0:1000000)")
    args = ap.parse_args()
    if args.speed_child:
        return _speed_child(args.speed_child, args.weights, args.speed_sigma, args.speed_precision)
    torch.set_num_threads(2)
    weights = Path(args.weights)
    sections = args.sections.split(",")
    RESULTS.mkdir(exist_ok=True)
    runs = {  # section: (what it measures, the results file's name)
        "quality": (lambda: quality(load_weights(weights)), "pointcloud_quality"),
        "ablation": (lambda: ablation(weights, args.ablation_steps), "pointcloud_pe_ablation"),
        "speed": (lambda: speed(weights, *([[(float(c.split(":")[0]), int(c.split(":")[1])) for c in args.speed_cases.split(",")]]
                                           if args.speed_cases else [])), "pointcloud_speed"),
        "convs": (convs, "pointcloud_convs"),
        "stage2": (lambda: stage2(weights), "pointcloud_stage2"),
        "mls": (mls_speed, "pointcloud_mls"),
        "neighbours": (neighbours, "pointcloud_neighbours"),
    }
    for name, (run, results) in runs.items():
        if name in sections:
            rows = run()
            print(table(rows, list(rows[0])))
            save(results, rows)

if __name__ == "__main__":
    main()
