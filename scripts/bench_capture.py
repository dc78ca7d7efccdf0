"""Captures: `inr nerf process` on photos and on a video of a scene with known cameras, and the
memory of loading large photos.

process: a walk around a textured cube in a textured room (`inr/data/testscenes.py`, ray cast;
  every face a different picture), N photos of 640x480 (4:3 JPEG, quality 92) on a wobbling
  circle, and a video of the same walk (MP4, 4x as many frames, `--num-frames N`). The tool gets
  the images only; its cameras are compared with the truth after the best similarity
  (rotation and position errors), with the registered count, reprojection error and seconds.
memory: `load_scene` of K photos of 4032x3024 (JPEG) at `--downscale 8` in a fresh process: the
  growth of its peak resident memory (VmHWM) while loading, against the float32 size of one
  original and of the scaled set.

    .venv/bin/python scripts/bench_capture.py [--photos 100] [--memory-images 200] [--only process|memory]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inr import progress  # noqa: E402
from inr.data.cameras import pose_errors  # noqa: E402
from inr.data.testscenes import ring_poses, write_photos, write_video  # noqa: E402
from inr.tasks.nerf_process import process  # noqa: E402

SIZE, FOCAL = (640, 480), 560.0


def errors_of(out: Path, truth: np.ndarray, index_of) -> dict:
    data = json.loads((out / "transforms.json").read_text())
    est = np.stack([np.array(f["transform_matrix"]) for f in data["frames"]])
    idx = [index_of(f["file_path"]) for f in data["frames"]]
    return pose_errors(est, truth[idx])


def bench_process(tmp: Path, n: int) -> list:
    rows = []
    truth = ring_poses(n)
    t = time.perf_counter()
    write_photos(tmp / "photos", truth, size=SIZE, focal=FOCAL)
    print(f"rendered {n} photos in {time.perf_counter() - t:.0f} s", flush=True)
    r = process(tmp / "photos", tmp / "scene-photos")
    e = errors_of(tmp / "scene-photos", truth, lambda p: int(p[-7:-4]))
    rows.append({"input": f"{n} photos {SIZE[0]}x{SIZE[1]}", **{k: r[k] for k in ("registered", "images", "reprojection_error_px",
                                                                                  "matcher", "seconds")}, **e})
    frames = ring_poses(4 * n)
    t = time.perf_counter()
    write_video(tmp / "walk.mp4", frames, size=SIZE, focal=FOCAL, fps=24)
    print(f"rendered a {4 * n}-frame video in {time.perf_counter() - t:.0f} s", flush=True)
    r = process(tmp / "walk.mp4", tmp / "scene-video", num_frames=n)
    e = errors_of(tmp / "scene-video", frames, lambda p: int(p[-9:-4]) - 1)  # frame_NNNNN: its number in the video
    rows.append({"input": f"video {4 * n} frames -> {r['frames']}", **{k: r[k] for k in ("registered", "images",
                                                                                         "reprojection_error_px", "matcher",
                                                                                         "seconds")}, **e})
    return rows


PROBE = """
import json, sys
from pathlib import Path
from inr.data.scenes import load_scene

def status(key):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key + ":"))
    return int(line.split()[1]) / 1024

load_scene(sys.argv[2])
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")
scene = load_scene(sys.argv[1], downscale=8)
print(json.dumps({"peak_growth_mb": status("VmHWM") - before, "shape": list(scene.splits["train"].images.shape),
                  "test": len(scene.splits["test"])}))
"""


def bench_memory(tmp: Path, n: int) -> dict:
    import imageio.v3 as iio

    from inr.data.testscenes import render

    w, h = 4032, 3024
    root = tmp / "large"
    (root / "images").mkdir(parents=True)
    small = tmp / "small"
    (small / "images").mkdir(parents=True)
    img = (render(ring_poses(1)[0], (w // 4, h // 4), FOCAL / 4 * 6.3, samples=1) * 255).astype(np.uint8).repeat(4, 0).repeat(4, 1)
    iio.imwrite(root / "images" / "0000.jpg", img, quality=90)
    data = (root / "images" / "0000.jpg").read_bytes()
    frames = []
    for k in range(n):  # one JPEG, n copies: decoding cost and memory are the same as n photos
        (root / "images" / f"{k:04d}.jpg").write_bytes(data)
        frames.append({"file_path": f"images/{k:04d}.jpg", "transform_matrix": np.eye(4).tolist()})
    (root / "transforms.json").write_text(json.dumps({"fl_x": 3000.0, "frames": frames}))
    iio.imwrite(small / "images" / "0.jpg", np.zeros((8, 8, 3), np.uint8))
    (small / "transforms.json").write_text(json.dumps({"fl_x": 8.0, "frames": [{"file_path": "images/0.jpg",
                                                                               "transform_matrix": np.eye(4).tolist()}]}))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE, str(root), str(small)], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r.update({"images": n, "seconds": round(time.perf_counter() - t, 1), "one_original_float32_mb": w * h * 3 * 4 / 2**20,
              "scaled_set_float32_mb": n * (w // 8) * (h // 8) * 3 * 4 / 2**20, "all_originals_float32_mb": n * w * h * 3 * 4 / 2**20})
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--photos", type=int, default=100)
    ap.add_argument("--memory-images", type=int, default=200)
    ap.add_argument("--only", action="append", choices=["process", "memory"])
    args = ap.parse_args()
    progress.set_enabled(False)
    sections = args.only or ["process", "memory"]
    out_dir = ROOT / "bench-results"
    out_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "process" in sections:
            rows = bench_process(tmp, args.photos)
            (out_dir / "capture_process.json").write_text(json.dumps(rows, indent=2))
            cols = ["input", "registered", "images", "reprojection_error_px", "rotation_deg_mean", "rotation_deg_max",
                    "position_max_share", "seconds"]
            print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
            for r in rows:
                print("| " + " | ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
        if "memory" in sections:
            r = bench_memory(tmp, args.memory_images)
            (out_dir / "capture_memory.json").write_text(json.dumps(r, indent=2))
            print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
