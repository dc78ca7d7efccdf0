"""Calibrates a point-cloud network's noise-adaptive voxel (its weights' `voxel_rule` and
`share_rule`; see `inr.pointcloud.reconstruct.VOXEL_RULE`, and the voxel its noise is read at,
`noise_voxel`) on the training generator's shapes or the training meshes (never on the held-out
meshes).

    .venv/bin/python scripts/calibrate_voxel.py [--shapes 4] [--weights FILE] [--out calibration.json] [--records A.json [B.json ...]] [--reading V] [--write]
    .venv/bin/python scripts/calibrate_voxel.py --mesh-dir data/training-meshes --meshes a,b --sigmas 0.0025,0.01 --counts 5000,50000 --out F

For synthetic shapes at known noise levels and point counts (points spread evenly with noise
per coordinate, and range scans with noise along the rays) it records (1) the noise residual
(`Reconstructor.noise_level`: the median distance of the input points to the planes of the
network's output at a coarser voxel, in base voxels) and (2) the output/input Chamfer-L1 of the
network's points (4x the input's count, as `reconstruct` writes them: `mls_fill`; records made
before 2026-12-03's fill used the plain even subset) at several voxel scales. It then fits
the rule's knots (the residuals where the scale is 0.5, 0.75 and 1; linear between, held beyond)
by a grid search for the lowest mean score over the records (a score between two tried scales
is interpolated linearly), apart for the records whose noise was read on the whole cloud
(`voxel_rule`) and those read on a share of a dense one (`share_rule`; with no such records, the
whole-read rule serves both), and prints for each the fitted rule's mean score beside the base
voxel's (scale 1), the rule the weights carry and the best scale per record (the floor).
--records refits saved records; --write stores the fitted rules, with the reading voxel they
were fitted on and the density the records were read at (`Reconstructor.noise_density`; records
without one: the whole cloud), in the weights file (--weights, default the shipped one).

--mesh-dir takes the shapes from meshes (the training meshes: never the held-out ones) instead
of the generator, with --sigmas and --counts in place of SIGMAS and COUNTS (no range scans; a
count above the 100,000 truth points samples the surface that densely).
Each record also keeps the noise read from first passes at READING_VOXELS base voxels (the
weights' reading is the one at their `noise_voxel`), and --reading V fits the rule on one of
them. Records of several runs fit together when --records names several files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import table  # noqa: E402

from inr.pointcloud.metrics import compare  # noqa: E402
from inr.pointcloud.reconstruct import LEGACY_NOISE_DENSITY, voxel_scale  # noqa: E402
from inr.pointcloud.shapes import Corruption, add_outliers, corrupt, range_scan, sample_surface  # noqa: E402
from inr.pointcloud.mls import mls_fill  # noqa: E402
from inr.presets import PointCloudTrainConfig  # noqa: E402
from inr.tasks.pointcloud import default_weights  # noqa: E402
from inr.tasks.pointcloud_train import ShapeStream, load_weights, store_voxel_rule  # noqa: E402

SIGMAS = (0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025)
COUNTS = (2500, 5000, 10000)
SCAN_VIEWS, SCAN_COUNT = 6, 5000
"""Range scans (`range_scan`, 0-2 % outliers) at each sigma, besides the evenly spread points."""
SCALES = (0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25)
"""Voxel scales each record is scored at. The rule stops at 1; the coarser two (since
2026-12-03) are for a rule that goes past the base voxel at high noise (see the README's lead)."""
SCALE_KNOTS = (0.5, 0.75, 1.0)
"""The rule's scales; its noise knots are fitted."""
MIN_KNOT_GAP = 0.3
"""Fitted noise knots lie at least this far apart (base voxels): a rule fitted without it (0.02,
the grid's step) climbed from 0.5 to 0.75 between 0.60 and 0.64, a cliff that sends clouds of
nearly the same noise to voxels far apart. Scored on the training records' shapes left out of
the fit (4 folds by shape, 5 draws, two rules), the mean output/input Chamfer-L1 was 0.4954 at
0.02, 0.4952 at 0.2, 0.4943 at 0.3, 0.4932 at 0.35, 0.4957 at 0.4 and 0.5003 at 0.45."""
EMPTY_SCORE = 100.0
"""The score of a scale at which the network keeps nothing of the cloud (`reconstruct` returns no
point; the CLI stops with an error there): far above any real score, so that no fitted rule picks
that scale (a network reading the noise level, told of noise of two voxels at half the base
voxel, kept nothing of a sparse generator cloud)."""
READING_VOXELS = (1.5, 1.0, 0.75)
"""First-pass voxels (in base voxels) whose noise readings every record keeps, to compare readings."""


def score_at(record, scale: float) -> float:
    """The record's score at any scale, linear between the tried scales (held beyond them)."""
    tried = sorted((float(k), v) for k, v in record["scores"].items())
    return float(np.interp(scale, [k for k, _ in tried], [v for _, v in tried]))


def reading_of(record, voxel: float) -> float:
    """The record's noise read at `voxel` base voxels (saved records key their readings by text;
    records from before readings were kept hold only the one at 1.5)."""
    readings = {float(k): v for k, v in record.get("readings", {1.5: record["residual"]}).items()}
    if voxel not in readings:
        raise SystemExit(f"a record has no noise reading at {voxel:g} base voxels (it has {sorted(readings)})")
    return readings[voxel]


def fit(records):
    """(the lowest mean score, its knots) over knot triples on a 0.02 grid from 0.2 to 1.3, each
    knot at least MIN_KNOT_GAP above the one before; the first of equal triples (in grid order)
    wins. All triples at once: each record's scale for every triple, then its score there."""
    grid = np.round(np.arange(0.20, 1.31, 0.02), 2)
    knots = np.array([t for t in itertools.combinations(grid, 3) if min(t[1] - t[0], t[2] - t[1]) >= MIN_KNOT_GAP - 1e-9])
    total = np.zeros(len(knots))
    for r in records:
        x = r["residual"]
        if x != x:  # NaN: the base voxel (`voxel_scale`)
            scale = np.ones(len(knots))
        else:
            (x0, x1, x2), (s0, s1, s2) = knots.T, SCALE_KNOTS
            scale = np.where(x <= x0, s0, np.where(x <= x1, s0 + (s1 - s0) * (x - x0) / (x1 - x0),
                                                   np.where(x <= x2, s1 + (s2 - s1) * (x - x1) / (x2 - x1), s2)))
        tried = sorted((float(k), v) for k, v in r["scores"].items())
        total += np.interp(scale, [k for k, _ in tried], [v for _, v in tried])
    best = int(np.argmin(total))
    return float(total[best] / len(records)), tuple(float(v) for v in knots[best])


def read_whole(record) -> bool:
    """Whether the record's noise was read on all its points (records from before the flag was
    kept were read whole when they carry no reading density: weights then read every cloud whole)."""
    if "whole_read" in record:
        return bool(record["whole_read"])
    if float(record.get("noise_density", LEGACY_NOISE_DENSITY)) != LEGACY_NOISE_DENSITY:
        raise SystemExit("a record read at a density of points per voxel does not say whether it was read whole: measure it again")
    return True


def report(records, carried) -> tuple:
    """Prints the fitted rule beside the others; returns its knots as (noise, scale) pairs."""
    m, knots = fit(records)
    rows = [{"voxel": "base (scale 1)", "mean output/input Chamfer-L1": float(np.mean([score_at(r, 1.0) for r in records]))},
            {"voxel": f"the weights' rule {carried} (on this reading)", "mean output/input Chamfer-L1":
             float(np.mean([score_at(r, voxel_scale(r["residual"], carried)) for r in records]))},
            {"voxel": f"fitted rule, knots {knots}", "mean output/input Chamfer-L1": m},
            {"voxel": "best tried scale per record (floor)", "mean output/input Chamfer-L1":
             float(np.mean([min(r["scores"].values()) for r in records]))}]
    print(table(rows, list(rows[0])))
    return tuple(zip(knots, SCALE_KNOTS))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=321)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--records", type=Path, nargs="+", default=None, help="refit the rule on saved records (no network runs)")
    ap.add_argument("--weights", type=Path, default=None, help="the network to calibrate for (default: the shipped weights)")
    ap.add_argument("--write", action="store_true", help="store the fitted rule in the weights file")
    ap.add_argument("--mesh-dir", type=Path, default=None, help="shapes from these meshes (.off/.ply/.obj) instead of the generator")
    ap.add_argument("--meshes", default=None, help="with --mesh-dir: a comma-separated subset (file stems)")
    ap.add_argument("--sigmas", default=None, help="with --mesh-dir: comma-separated noise levels (diagonal shares)")
    ap.add_argument("--counts", default=None, help="with --mesh-dir: comma-separated point counts")
    ap.add_argument("--reading", type=float, default=None,
                    help="fit on the noise read at this first-pass voxel (one of READING_VOXELS; default: the weights' noise_voxel)")
    args = ap.parse_args()
    weights = args.weights or default_weights()
    model = load_weights(weights)
    if args.records:
        records = [r for f in args.records for r in json.loads(f.read_text())["records"]]
    else:
        records = measure(model, args)
    reading = float(model.noise_voxel) if args.reading is None else args.reading
    records = [{**r, "residual": reading_of(r, reading)} for r in records]
    flags = [read_whole(r) for r in records]
    whole, share = [r for r, w in zip(records, flags) if w], [r for r, w in zip(records, flags) if not w]
    print(f"noise read at {reading:g} base voxels: {len(whole)} records read whole")
    rule = report(whole, model.rule_for(True)) if whole else None
    print(f"{len(share)} records read on a share")
    share_rule = report(share, model.rule_for(False)) if share else rule
    rule = rule or share_rule
    if args.write:
        densities = {float(r.get("noise_density", LEGACY_NOISE_DENSITY)) for r in records}
        if len(densities) > 1:
            raise SystemExit(f"the records were read at different densities ({sorted(densities)} points per voxel): refit them apart")
        density = densities.pop()
        store_voxel_rule(weights, rule, share_rule, reading, density)
        print(f"stored the rules {rule} (read whole) and {share_rule} (read on a share), read at {reading:g} base voxels "
              f"and {density:g} points per voxel, in {weights}")


def record(model, noisy: np.ndarray, clean: np.ndarray, about: dict) -> dict:
    """`about` with the noise residuals (at each of READING_VOXELS, and at the weights' own reading
    voxel as "residual") and the score at each of SCALES for this input."""
    x = torch.from_numpy(noisy).float()
    c_in = compare(noisy, clean, 1.0)["chamfer_l1"]
    local, frame = model._framed(model._local(x)[0])  # the cloud and base frame `reconstruct` reads the noise on
    base = frame.voxel
    with torch.no_grad():  # the reading at the weights' noise_voxel is `noise_level`'s
        passes = {v: model._read_noise(local, frame, v)[1:] for v in {*READING_VOXELS, float(model.noise_voxel)}}  # (level, whole)
    readings = {v: level for v, (level, _) in passes.items()}
    r, whole = passes[float(model.noise_voxel)]
    scores = {}
    for s in SCALES:
        pts = model.reconstruct(x, voxel=base * s, noise=r * base if r == r else None)[0].double().numpy()  # the noise, for weights that read it
        scores[s] = compare(mls_fill(pts, 4 * len(noisy)), clean, 1.0)["chamfer_l1"] / c_in if len(pts) else EMPTY_SCORE
    print(f"{about}: residual {r:.3f} voxels, " + " ".join(f"{s}:{v:.3f}" for s, v in scores.items()), flush=True)
    return {**about, "residual": r, "readings": readings, "noise_density": float(model.noise_density), "whole_read": whole,
            "scores": scores}


def measure_meshes(model, args) -> list:
    """Records of meshes from --mesh-dir at --sigmas x --counts, evenly spread points, no outliers."""
    import trimesh

    sigmas = [float(v) for v in args.sigmas.split(",")] if args.sigmas else list(SIGMAS)
    counts = [int(v) for v in args.counts.split(",")] if args.counts else list(COUNTS)
    names = args.meshes.split(",") if args.meshes else None
    paths = sorted(p for p in args.mesh_dir.iterdir() if p.suffix in (".off", ".ply", ".obj") and (not names or p.stem in names))
    rng = np.random.default_rng(args.seed)
    records = []
    for path in paths:
        mesh = trimesh.load(path, process=True)
        clean = sample_surface(mesh, 100_000, rng)
        for sigma in sigmas:
            for n in counts:
                c = Corruption(noise=(sigma, sigma), sparsity=(max(1.0, len(clean) / n),) * 2, outliers=(0.0, 0.0), holes=(0, 0))
                # more points than the truth's: a denser sample of the surface, scored against the same truth
                points = clean if n <= len(clean) else sample_surface(mesh, n, rng)
                records.append(record(model, corrupt(points, rng, c), clean, {"shape": path.stem, "sigma": sigma, "points": n, "kind": "mesh"}))
    return records


def measure(model, args) -> list:
    torch.set_num_threads(2)
    if args.mesh_dir:
        records = measure_meshes(model, args)
        if args.out:
            args.out.write_text(json.dumps({"records": records}, indent=1))
        return records
    rng = np.random.default_rng(args.seed)
    stream = ShapeStream(PointCloudTrainConfig(), None, args.seed)
    records = []
    for i in range(args.shapes):
        mesh = stream._new_mesh(rng)
        clean = sample_surface(mesh, 100_000, rng)
        diag = float(np.linalg.norm(mesh.extents))
        for sigma in SIGMAS:
            for n in COUNTS:
                c = Corruption(noise=(sigma, sigma), sparsity=(len(clean) / n,) * 2, outliers=(0.0, 0.02), holes=(0, 0))
                records.append(record(model, corrupt(clean, rng, c), clean, {"shape": i, "sigma": sigma, "points": n, "kind": "even"}))
            scan = add_outliers(range_scan(mesh, SCAN_VIEWS, sigma * diag, SCAN_COUNT, rng)[0], float(rng.uniform(0.0, 0.02)), *mesh.bounds, rng)
            records.append(record(model, scan, clean, {"shape": i, "sigma": sigma, "points": SCAN_COUNT, "kind": "scan"}))
    rows = []
    for sigma, kind in [(s, k) for k in ("even", "scan") for s in SIGMAS]:
        recs = [r for r in records if r["sigma"] == sigma and r["kind"] == kind]
        mean = {s: float(np.mean([r["scores"][s] for r in recs])) for s in SCALES}
        rows.append({"input": kind, "sigma (diagonal share)": sigma, "residual median (base voxels)": float(np.median([r["residual"] for r in recs])),
                     "residual range": f"{min(r['residual'] for r in recs):.2f}-{max(r['residual'] for r in recs):.2f}",
                     **{f"scale {s}": mean[s] for s in SCALES}, "best scale": min(mean, key=mean.get)})
    print(table(rows, list(rows[0])))
    if args.out:
        args.out.write_text(json.dumps({"records": records, "summary": rows}, indent=1))
    return records


if __name__ == "__main__":
    main()
