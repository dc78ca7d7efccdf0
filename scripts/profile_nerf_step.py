"""Where one NeRF training step spends its time on CPU (eager), on the bundled scene.

    .venv/bin/python scripts/profile_nerf_step.py [--downscale 2] [--step-size 0.02] [--rays 1024]

Times (mean of 2 after a warm-up): marching without and with the density pre-pass, the field's
forward+backward on the marched samples, and a full occupancy-grid refresh.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

import torch

from inr.data.scenes import load_scene
from inr.presets import load_nerf_preset
from inr.render.occupancy import march
from inr.render.rays import Rays
from inr.tasks.nerf import NerfModule, _RayBatches
from inr.tasks.nerf_fit import default_scene


def timed(fn, n: int = 2) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--downscale", type=int, default=2)
    ap.add_argument("--step-size", type=float, default=0.02)
    ap.add_argument("--rays", type=int, default=1024)
    args = ap.parse_args()
    scene = load_scene(default_scene(), args.downscale)
    preset = load_nerf_preset("ngp", {"train.render_step_size": args.step_size, "train.compile": False})
    m = NerfModule(preset.field.to_dict(), asdict(preset.train), scene.aabb.tolist())
    o, d, _ = next(iter(_RayBatches(scene.splits["train"], args.rays, 0)))
    rays = Rays(o, d)

    def sigma_fn(t0, t1, ri):
        return m.field.density(o[ri] + d[ri] * ((t0 + t1) / 2)[:, None])

    print(f"march, grid lookups only: {timed(lambda: march(rays, m.grid, args.step_size)):.3f} s")
    with torch.no_grad():
        print(f"march + density pre-pass: {timed(lambda: march(rays, m.grid, args.step_size, sigma_fn=sigma_fn)):.3f} s")
        ri, t0, t1 = march(rays, m.grid, args.step_size, sigma_fn=sigma_fn)
    pts = o[ri] + d[ri] * ((t0 + t1) / 2)[:, None]

    def fwd_bwd():
        sigma, rgb = m.field(pts, d[ri])
        (sigma.sum() + rgb.sum()).backward()

    print(f"field forward+backward on {len(ri):,} samples ({len(ri) / len(rays):.1f} per ray): {timed(fwd_bwd):.3f} s")
    with torch.no_grad():
        refresh = timed(lambda: m.grid.update(0, lambda q: m.field.density(q) * args.step_size), 1)
    print(f"occupancy grid refresh ({m.grid.resolution}^3 cells): {refresh:.3f} s")


if __name__ == "__main__":
    main()
