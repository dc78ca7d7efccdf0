"""fit-video on a 48-frame clip: the default hash grid beside SIREN's video setting.

    .venv/bin/python scripts/bench_video.py [--budget 300]

The clip is made here from a photo the presets never saw (scikit-image's `coffee`): a camera
pan with a slow zoom, 48 frames of 128x128 at 24 fps, like a hand-held shot of a still scene.
Each preset gets the same training-time budget (compile included); PSNR/SSIM are over every
pixel of every frame (`--holdout even-odd`: trained on the even (t, y, x) samples, PSNR on the
odd ones, which the fit never saw). Results: bench-results/video/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

OUT = Path("bench-results/video")


def make_clip(path: Path, frames: int = 48, size: int = 128) -> Path:
    """A pan and zoom across the coffee photo (bilinear sampling, no repeated frames)."""
    import imageio.v3 as iio
    import skimage.data
    from scipy.ndimage import map_coordinates

    img = skimage.data.coffee().astype(np.float64) / 255.0  # 400 x 600
    h, w = img.shape[:2]
    path.mkdir(parents=True, exist_ok=True)
    for k in range(frames):
        s = k / (frames - 1)
        side = 300 * (1.0 - 0.35 * s)  # zoom in
        cy, cx = 200 + 30 * np.sin(2 * np.pi * s), 150 + 300 * s  # pan right, bob
        y0, x0 = cy - side / 2, cx - side / 2
        yy, xx = np.meshgrid(y0 + (np.arange(size) + 0.5) * side / size, x0 + (np.arange(size) + 0.5) * side / size, indexing="ij")
        yy, xx = np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)
        frame = np.stack([map_coordinates(img[..., c], [yy, xx], order=1) for c in range(3)], -1)
        iio.imwrite(path / f"f{k:03d}.png", (np.clip(frame, 0, 1) * 255 + 0.5).astype(np.uint8))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=300.0, help="training seconds per preset")
    ap.add_argument("--presets", default="hashgrid,hashgrid:T16,siren")
    ap.add_argument("--holdout", default="none", choices=["none", "even-odd"],
                    help="even-odd: train on even (t, y, x) samples, score the odd ones")
    args = ap.parse_args()
    clip = make_clip(OUT / "clip")
    rows = []
    for entry in args.presets.split(","):
        # "hashgrid:T16": the hash grid with a 2^16 table (fewer parameters than SIREN's setting)
        preset, _, variant = entry.partition(":")
        sets = ["--set", f"field.encoding_options.log2_table={variant[1:]}"] if variant.startswith("T") else []
        run = OUT / (entry.replace(":", "-") + ("-even-odd" if args.holdout == "even-odd" else ""))
        cmd = [sys.executable, "-m", "inr", "fit-video", str(clip), "--preset", preset, "--time-budget", str(args.budget),
               "--out", str(run), "--overwrite", "--no-progress", "--device", "cpu", "--holdout", args.holdout, *sets]
        subprocess.run(cmd, check=True)
        m = json.loads((run / "metrics.json").read_text())
        rows.append({k: m[k] for k in ("preset", "psnr", "ssim", "steps", "seconds", "params")} | {"preset": entry, "holdout": args.holdout}
                    | {"worst_frame_psnr": min(m["frame_psnr"]), "best_frame_psnr": max(m["frame_psnr"])})
        print(rows[-1], flush=True)
    (OUT / f"results-{args.holdout}-{args.presets.replace(',', '_').replace(':', '-')}.json").write_text(json.dumps(rows, indent=2))
    print("| preset | PSNR | SSIM | frame PSNR min-max | steps | seconds | params |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['preset']} | {r['psnr']:.2f} | {r['ssim']:.4f} | {r['worst_frame_psnr']:.1f}-{r['best_frame_psnr']:.1f} | "
              f"{r['steps']} | {r['seconds']:.0f} | {r['params']:,} |")


if __name__ == "__main__":
    main()
