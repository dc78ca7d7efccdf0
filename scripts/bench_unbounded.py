"""The held-out unbounded capture (`scripts/make_capture_scene.py`, Mitsuba): `inr nerf process` on
its photos and on its video, camera errors against the truth, then `inr nerf train` on the
processed photos with the preset it picks by itself (ngp_unbounded) and with the bounded `ngp`,
each for the same time budget, and `inr nerf eval` timed. Every 8th image is a test view (the
Mip-NeRF 360 protocol); PSNR/SSIM on all of them at the training resolution.

    make capture-scene   # once: renders data/heldout-capture (~12 min)
    .venv/bin/python scripts/bench_unbounded.py data/heldout-capture --out /work/unbounded-bench \
        [--budget 600] [--downscale 2] [--only process|train|video-train]

Everything goes through the command line a user would type (subprocesses), so the first line of
`nerf train` (the preset it picked) is checked too. Results: OUT/results.json and a table.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_capture import errors_of  # noqa: E402  (scripts/, beside this file)

INR = [sys.executable, "-m", "inr"]


def run(cmd, log: Path) -> tuple:
    start = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        f.write(p.stdout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({p.returncode}); see {log}")
    return p.stdout, time.perf_counter() - start


def camera_errors(scene: Path, truth: np.ndarray, index_of) -> dict:
    info = json.loads((scene / "transforms.json").read_text())["inr_process"]
    return {"registered": info["registered"], "given": info.get("images", info.get("given")),
            "reprojection_error_px": info.get("reprojection_error_px"), "process_seconds": info.get("seconds"),
            **{k: round(v, 5) for k, v in errors_of(scene, truth, index_of).items()}}


def process(src: Path, out: Path, logs: Path, name: str, extra=()) -> float:
    if (out / "transforms.json").is_file():
        return float("nan")
    _, seconds = run([*INR, "nerf", "process", str(src), str(out), "--no-progress", *extra], logs / f"process-{name}.log")
    return seconds


def train(scene: Path, out: Path, logs: Path, preset, budget: float, downscale: int) -> dict:
    name = out.name  # run-auto, run-ngp, run-video-auto
    cmd = [*INR, "nerf", "train", str(scene), "--time-budget", str(budget), "--downscale", str(downscale),
           "--out", str(out), "--no-progress", "--overwrite"]
    if preset:
        cmd += ["--preset", preset]
    text, wall = run(cmd, logs / f"train-{name}.log")
    first = text.strip().splitlines()[0] if text.strip() else ""
    metrics = json.loads((out / "metrics.json").read_text())
    _, eval_seconds = run([*INR, "nerf", "eval", str(out), "--no-progress"], logs / f"eval-{name}.log")
    views = len(metrics["per_view"])
    return {"preset": metrics["preset"], "first_line": first if first.startswith("inr: preset") else None,
            "test_psnr": metrics["test_psnr"], "test_ssim": metrics["test_ssim"], "test_views": views,
            "steps": metrics["steps"], "train_seconds": metrics["seconds"], "rays_per_second": metrics["rays_per_second"],
            "eval_seconds": round(eval_seconds, 1), "eval_seconds_per_view": round(eval_seconds / views, 2),
            "curve": metrics.get("curve")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--downscale", type=int, default=2)
    ap.add_argument("--video-frames", type=int, default=100)
    ap.add_argument("--only", action="append", choices=["process", "train", "video-train", "report"])
    args = ap.parse_args()
    only = set(args.only or ["process", "train", "video-train"])
    out, logs = args.out, args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    truth = json.loads((args.capture / "truth.json").read_text())
    photos_truth = np.array(list(truth["photos"].values()))
    names = list(truth["photos"])
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}

    photos, video = out / "scene-photos", out / "scene-video"
    if "process" in only:
        process(args.capture / "photos", photos, logs, "photos")
        results["photos"] = camera_errors(photos, photos_truth, lambda p: names.index(Path(p).name))
        process(args.capture / "walk.mp4", video, logs, "video", ["--num-frames", str(args.video_frames)])
        frames = np.array(truth["video_frames"])
        results["video"] = camera_errors(video, frames, lambda p: int(re.search(r"(\d+)\.\w+$", p).group(1)) - 1)  # frame_NNNNN: 1-based
        results_path.write_text(json.dumps(results, indent=1))
        print(json.dumps({k: results[k] for k in ("photos", "video")}, indent=1), flush=True)
    if "train" in only:
        for preset in (None, "ngp"):
            r = train(photos, out / f"run-{preset or 'auto'}", logs, preset, args.budget, args.downscale)
            results[f"photos/{r['preset']}"] = r
            results_path.write_text(json.dumps(results, indent=1))
            print({k: v for k, v in r.items() if k != "curve"}, flush=True)
    if "video-train" in only:
        r = train(video, out / "run-video-auto", logs, None, args.budget, args.downscale)
        results[f"video/{r['preset']}"] = r
        results_path.write_text(json.dumps(results, indent=1))
        print({k: v for k, v in r.items() if k != "curve"}, flush=True)
    report(results, out)


def report(results: dict, out: Path) -> None:
    """The table, the time-to-PSNR points, and OUT/time_to_psnr.png."""
    from inr.tasks.outputs import _plt

    print("\n| scene | preset | steps | held-out PSNR | SSIM | views | eval s/view |\n|---|---|---|---|---|---|---|")
    for key, r in results.items():
        if "/" in key:
            print(f"| {key.split('/')[0]} | {r['preset']} | {r['steps']} | {r['test_psnr']:.2f} | {r['test_ssim']:.4f} | "
                  f"{r['test_views']} | {r['eval_seconds_per_view']} |")
    for key, r in results.items():
        if "/" in key and r.get("curve"):
            points = ", ".join(f"{s:.0f} s: {v:.1f}" for _, s, v in r["curve"])
            print(f"time to PSNR, {key}: {points}")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for key, r in results.items():
        if "/" in key and r.get("curve"):
            h = np.asarray(r["curve"], float)
            ax.plot(h[:, 1], h[:, 2], marker=".", label=f"{key} (final, all views: {r['test_psnr']:.2f} dB)")
    ax.set_xlabel("training seconds (2 cores)")
    ax.set_ylabel("held-out PSNR (dB), 2 views, every 4th pixel")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "time_to_psnr.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
