"""Everything the GPU check runs (see gpu_check.sh); one JSON report, each part timed and
allowed to fail on its own so that one broken part does not hide the others."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INR = [sys.executable, "-m", "inr"]


REPORT = None  # the report is rewritten after every part, so a killed check still returns what it did


def save(report):
    if REPORT is not None:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps(report, indent=2))


def run(name, cmd, report, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        entry = {"rc": p.returncode, "tail": (p.stdout + p.stderr)[-3000:]}
    except subprocess.TimeoutExpired:
        entry = {"rc": "timeout"}
    entry["seconds"] = round(time.time() - t0, 1)
    report[name] = entry
    print(f"[{entry['seconds']:7.1f} s] {name}: rc={entry['rc']}", flush=True)
    save(report)
    return entry


def hashgrid_speed(report):
    import torch

    from inr.encodings.hashgrid import HashGrid

    out = {}
    for backend in ("torch", "tcnn"):
        try:
            g = HashGrid(3, log2_table=19, backend=backend).cuda()
            x = torch.rand(1 << 20, 3, device="cuda") * 2 - 1
            for _ in range(3):
                g(x).sum().backward()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(10):
                g(x).sum().backward()
            torch.cuda.synchronize()
            out[backend] = round(10 * (1 << 20) / (time.perf_counter() - t0))
        except Exception as exc:  # tcnn missing: say so in the report
            out[backend] = f"{type(exc).__name__}: {exc}"[:300]
    report["hashgrid_fwd_bwd_points_per_second_2^20"] = out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", default="gpu_report.json")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script on a machine without a GPU")
    ap.add_argument("--nerf-seconds", type=int, default=60)
    ap.add_argument("--skip-presets", action="store_true", help="leave out the 2-step run of every preset")
    ap.add_argument("--jobs", type=int, default=1, help="2-step preset runs at once (GPU machines have many cores)")
    args = ap.parse_args()
    global REPORT
    REPORT = Path(args.report)
    report = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    tmp = ROOT / "gpu-check-runs"
    tmp.mkdir(exist_ok=True)
    run("doctor", INR + ["doctor"], report, 300)  # builds nerfacc's CUDA code on first use
    run("gpu_tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_encodings.py",
                      "tests/test_nerfacc_parity.py", "tests/test_device.py", "tests/test_cuda_runs.py", "tests/test_render.py", "tests/test_unbounded.py", "-rs"], report, 600)
    dev = args.device
    sets = ["--steps", "2", "--device", dev, "--no-progress", "--overwrite", "--set", "train.eval_every=1"]
    from inr.presets import available_presets
    from tests.helpers import smooth_image, tone

    img, wav = smooth_image(tmp / "img.png", 32), tone(tmp / "tone.wav")
    clip = tmp / "clip"
    clip.mkdir(exist_ok=True)
    for k in range(4):
        smooth_image(clip / f"f{k}.png", 32)
    import numpy as np

    rng = np.random.default_rng(0)
    p = rng.normal(size=(5000, 3))
    p = p / np.linalg.norm(p, axis=1, keepdims=True)
    np.save(tmp / "oriented.npy", np.concatenate([p, np.zeros_like(p), p], 1).astype(np.float32))  # xyz, rgb, normals
    inputs = {"image": ["fit-image", str(img)], "audio": ["fit-audio", str(wav)], "video": ["fit-video", str(clip)],
              "sdf": ["fit-sdf", str(tmp / "oriented.npy"), "--set", "train.mesh_resolution=64"],
              "nerf": ["nerf", "train", "--downscale", "4"], "pointcloud": ["pointcloud", "train", "--set", "train.dense_points=4000"]}
    jobs = [(f"2 steps {task}/{preset}", INR + head + ["--preset", preset, "--out", str(tmp / f"{task}-{preset}")] + sets)
            for task, head in inputs.items() for preset in available_presets(task)]
    if args.skip_presets:
        jobs = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(lambda job: run(*job, report), jobs))
    nerf = run(f"nerf train {args.nerf_seconds} s", INR + ["nerf", "train", "--time-budget", str(args.nerf_seconds), "--device", dev, "--out", str(tmp / "nerf60"),
                                         "--overwrite", "--no-progress"], report, 600)
    if nerf["rc"] == 0:
        m = json.loads((tmp / "nerf60" / "metrics.json").read_text())
        report["nerf60"] = {k: m[k] for k in ("test_psnr", "test_ssim", "steps", "seconds", "rays_per_second", "device")}
    run("nerf render", INR + ["nerf", "render", str(tmp / "nerf60"), "--frames", "8", "--out", str(tmp / "orbit.gif"),
                              "--device", dev, "--no-progress"], report)
    p = p + 0.01 * rng.normal(size=(5000, 3))
    np.save(tmp / "sphere.npy", p.astype(np.float32))
    run("pointcloud reconstruct", INR + ["pointcloud", "reconstruct", str(tmp / "sphere.npy"), "--out", str(tmp / "sphere_out.npy"),
                                         "--device", dev, "--no-progress"], report)
    run("pointcloud mesh (sdf, 20 s)", INR + ["pointcloud", "mesh", str(tmp / "sphere.npy"), str(tmp / "sphere_mesh.ply"),
                                              "--time-budget", "20", "--resolution", "128", "--overwrite", "--device", dev,
                                              "--no-progress"], report)
    try:
        if dev != "cpu":
            hashgrid_speed(report)
    except Exception as exc:
        report["hashgrid_fwd_bwd_points_per_second_2^20"] = f"{type(exc).__name__}: {exc}"
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    save(report)
    failed = [k for k, v in report.items() if isinstance(v, dict) and v.get("rc") not in (0, None)]
    print(f"report: {args.report}; failed parts: {failed or 'none'}")


if __name__ == "__main__":
    main()
