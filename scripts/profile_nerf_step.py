"""Where one NeRF training step spends its time on CPU, on the bundled scene.

    .venv/bin/python scripts/profile_nerf_step.py [--run DIR] [--rays N]

Without --run: a fresh `ngp` field (every grid cell occupied, the worst case). With --run: the
trained field and grid of a `nerf train` run folder (e.g. bench-results/nerf/ngp-180s). The
field is compiled as in training; each part is the median of 5 after 2 warm-ups:
marching (grid lookups), the optional density pre-pass (off in `ngp`), the field's forward and
backward on the marched samples, the fused Adam step, and the grid refresh divided by how often
it runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import median_seconds, table  # noqa: E402

from inr.data.scenes import load_scene  # noqa: E402
from inr.presets import load_nerf_preset  # noqa: E402
from inr.render.occupancy import march  # noqa: E402
from inr.render.rays import Rays  # noqa: E402
from inr.tasks.nerf import NerfModule, _RayBatches  # noqa: E402
from inr.tasks.nerf_fit import default_scene, load_nerf_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a nerf train run folder (default: a fresh ngp field)")
    ap.add_argument("--rays", type=int, help="rays per step (default: the preset's target_samples / samples per ray)")
    args = ap.parse_args()
    from inr.devices import keep_freed_memory

    keep_freed_memory()  # as training runs do
    if args.run:
        m, scene, _ = load_nerf_run(Path(args.run))
    else:
        scene = load_scene(default_scene())
        p = load_nerf_preset("ngp")
        m = NerfModule(p.field.to_dict(), asdict(p.train), scene.aabb.tolist(), near=scene.near)
        m.configure_model()
    cfg = m.cfg
    probe = next(iter(_RayBatches(scene.splits["train"], 4096, 1)))
    spr = len(march(Rays(probe[0], probe[1]), m.grid, m.step_size, near=m.near)[0]) / 4096
    n = args.rays or int(min(max(cfg.target_samples / max(spr, 1e-9), 64), cfg.rays_per_batch))
    o, d, *_ = next(iter(_RayBatches(scene.splits["train"], n, 0)))
    rays = Rays(o, d)
    ri, t0, t1 = march(rays, m.grid, m.step_size, near=m.near)
    pts, dirs = o[ri] + d[ri] * ((t0 + t1) / 2)[:, None], d[ri]
    field = m._fast.get("field", m.field)
    opt = torch.optim.Adam(m.field.parameters(), lr=1e-9, fused=True)

    def sigma_fn(a, b, r):
        return m.density(o[r] + d[r] * ((a + b) / 2)[:, None])

    def fwd_bwd():
        opt.zero_grad(set_to_none=True)
        sigma, rgb = field(pts, dirs)
        (sigma.sum() + rgb.sum()).backward()

    fwd_bwd()
    parts = {
        "march (grid lookups)": median_seconds(lambda: march(rays, m.grid, m.step_size, near=m.near)),
        "field forward+backward": median_seconds(fwd_bwd),
        "Adam step (fused)": median_seconds(opt.step),
        f"grid refresh / {cfg.grid_update_every}": median_seconds(
            lambda: m.grid.update(10**6, lambda q: m.density(q) * m.step_size), repeats=3, warmup=1) / cfg.grid_update_every,
    }
    prepass = median_seconds(lambda: march(rays, m.grid, m.step_size, near=m.near, sigma_fn=sigma_fn), repeats=3) - parts["march (grid lookups)"]
    total = sum(parts.values())
    rows = [{"part": k, "ms": round(v * 1000, 1), "share": f"{100 * v / total:.0f} %"} for k, v in parts.items()]
    rows.append({"part": "sum (one step)", "ms": round(total * 1000, 1), "share": "100 %"})
    print(f"{n} rays, {len(ri):,} samples ({len(ri) / n:.1f} per ray), grid {100 * float(m.grid.binaries.float().mean()):.1f} % "
          f"occupied; {n / total:,.0f} rays/s from these parts")
    print(table(rows, ["part", "ms", "share"]))
    print(f"(not in the step with prepass: false) density pre-pass for early termination: {prepass * 1000:.1f} ms")


if __name__ == "__main__":
    main()
