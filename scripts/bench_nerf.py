"""NeRF quality within a training-time budget on the bundled scene (200x200, 60 train views).

    .venv/bin/python scripts/bench_nerf.py                 # every section (~35 min)
    .venv/bin/python scripts/bench_nerf.py --only ngp3     # one section

Sections (each run is `inr nerf train` in a subprocess, as a user runs it; seconds are training
seconds, compile included, evaluation excluded; PSNR/SSIM are the mean over all 10 test views):
- ngp3 / ngp10: the ngp preset with a 3- and a 10-minute budget.
- native: ngp 3 minutes with torch only (the hash grid's twin, torch's MLP layers), with the native
  hash grid and torch's MLPs, and with every native kernel (grid, march, fused MLPs: the default).
- cqnir: ngp against ngp_quantized (CQ-NIR coordinates), 3 minutes each.
- plain: the issue's calibration, a plain PyTorch NeRF loop with no occupancy grid (the same hash
  grid and MLPs, 96 uniform samples per ray inside the box, 1024 rays per step, Adam 1e-2,
  torch.compile), 3 minutes, so that the ratio to ngp3 comes from one machine state.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import RESULTS, save, table  # noqa: E402

OUT = RESULTS / "nerf"


def train(preset: str, budget: float, name: str, sets=()) -> dict:
    out = OUT / name
    cmd = [sys.executable, "-m", "inr", "nerf", "train", "--preset", preset, "--time-budget", str(budget),
           "--out", str(out), "--overwrite", "--no-progress"] + [a for kv in sets for a in ("--set", kv)]
    print("$", " ".join(cmd[2:]), flush=True)
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t
    m = json.loads((out / "metrics.json").read_text())
    spr = _samples_per_ray(out)
    return {"run": name, "preset": preset, "budget s": budget, "test PSNR": m["test_psnr"], "test SSIM": m["test_ssim"],
            "steps": m["steps"], "train s": m["seconds"], "rays/s": m["rays_per_second"],
            "samples/ray (end)": spr, "wall s (incl. eval)": round(wall, 1)}


def _samples_per_ray(out: Path) -> float:
    import csv

    rows = [r for f in sorted((out / "logs").glob("*/metrics.csv")) for r in csv.DictReader(f.open()) if r.get("samples_per_ray")]
    return round(float(rows[-1]["samples_per_ray"]), 1) if rows else float("nan")


def section_ngp3():
    rows = [train("ngp", 180, "ngp-180s")]
    print(table(rows, list(rows[0])), flush=True)
    save("nerf_ngp3", rows)


def section_ngp10():
    rows = [train("ngp", 600, "ngp-600s")]
    print(table(rows, list(rows[0])), flush=True)
    save("nerf_ngp10", rows)


def section_native():
    """The native CPU kernels against torch, one at a time, 3 minutes each."""
    torch_mlps = ["field.density_options.backend=torch", "field.color_options.backend=torch"]
    rows = [train("ngp", 180, "ngp-180s-twin", ["field.encoding_options.backend=torch", *torch_mlps]),
            train("ngp", 180, "ngp-180s-native-grid", torch_mlps), train("ngp", 180, "ngp-180s-native")]
    rows[0]["run"] += " (grid twin, torch MLPs)"
    rows[1]["run"] += " (native grid, torch MLPs)"
    rows[2]["run"] += " (native grid and MLPs)"
    print(table(rows, list(rows[0])), flush=True)
    save("nerf_native", rows)


def section_cqnir():
    rows = [train("ngp", 180, "cqnir-ngp"), train("ngp_quantized", 180, "cqnir-quantized")]
    print(table(rows, list(rows[0])), flush=True)
    save("nerf_cqnir", rows)


def plain_nerf(budget: float, n_samples: int = 96, n_rays: int = 1024, seed: int = 0) -> dict:
    """The calibration loop: no occupancy grid, no early termination, dense uniform samples."""
    from inr.data.scenes import load_scene
    from inr.metrics import psnr, ssim
    from inr.render.occupancy import ray_aabb
    from inr.render.radiance import RadianceField, RadianceFieldConfig
    from inr.render.rays import Rays
    from inr.tasks.nerf import _RayBatches, eval_target, split_rays
    from inr.tasks.nerf_fit import default_scene

    torch.manual_seed(seed)
    scene = load_scene(default_scene())
    field = RadianceField(RadianceFieldConfig(), scene.aabb)
    opt = torch.optim.Adam(field.parameters(), lr=1e-2, betas=(0.9, 0.99), eps=1e-15, fused=True)

    def render(o, d, bg, jitter: bool):
        t0, t1 = ray_aabb(Rays(o, d), scene.aabb)
        t0 = t0.clamp(min=scene.near)
        hit = (t1 > t0).float()[:, None]
        u = (torch.arange(n_samples, dtype=torch.float32) + (torch.rand(len(o), n_samples) if jitter else 0.5)) / n_samples
        t = t0[:, None] + (t1 - t0).clamp(min=0)[:, None] * u
        dt = (t1 - t0).clamp(min=0)[:, None] / n_samples * hit
        pts = o[:, None] + d[:, None] * t[..., None]
        sigma, rgb = field(pts.reshape(-1, 3), d[:, None].expand(-1, n_samples, -1).reshape(-1, 3))
        alpha = 1 - torch.exp(-sigma.view(-1, n_samples) * dt)
        trans = torch.cumprod(torch.cat([torch.ones(len(o), 1), 1 - alpha + 1e-10], 1), 1)[:, :-1]
        w = alpha * trans
        color = (w[..., None] * rgb.view(-1, n_samples, 3)).sum(1)
        return color + (1 - w.sum(1, keepdim=True)) * bg

    fast = torch.compile(render)

    def step(o, d, rgba):
        bg = torch.rand(len(o), 3)
        target = rgba[:, :3] * rgba[:, 3:] + bg * (1 - rgba[:, 3:])
        loss = torch.nn.functional.mse_loss(fast(o, d, bg, True), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    batches = iter(_RayBatches(scene.splits["train"], n_rays, seed))
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < budget:
        step(*next(batches)[:3])
        steps += 1
    seconds = time.perf_counter() - start
    test = scene.splits["test"]
    scores = []
    for k in range(len(test)):  # grad mode + detach: the fast compiled graph (see render.renderer.without_grad_in_chunks)
        rays = split_rays(test, k)
        pred = torch.cat([fast(rays.origins[i : i + n_rays], rays.directions[i : i + n_rays], torch.ones(1, 3), False).detach()
                          for i in range(0, len(rays), n_rays)]).clamp(0, 1).view(*test.images.shape[1:3], 3)
        target = eval_target(test.images[k], 1.0)
        scores.append((psnr(pred, target), ssim(pred, target)))
    return {"run": "plain-180s", "preset": "plain loop, 96 uniform samples", "budget s": budget,
            "test PSNR": round(sum(s[0] for s in scores) / len(scores), 4), "test SSIM": round(sum(s[1] for s in scores) / len(scores), 5),
            "steps": steps, "train s": round(seconds, 1), "rays/s": round(steps * n_rays / seconds, 1),
            "samples/ray (end)": float(n_samples), "wall s (incl. eval)": math.nan}


def section_plain():
    rows = [plain_nerf(180)]
    print(table(rows, list(rows[0])), flush=True)
    save("nerf_plain", rows)


SECTIONS = {"ngp3": section_ngp3, "ngp10": section_ngp10, "native": section_native, "cqnir": section_cqnir, "plain": section_plain}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(SECTIONS), action="append", help="run only these sections (default: all)")
    args = ap.parse_args()
    for name in args.only or list(SECTIONS):
        print(f"## {name}", flush=True)
        SECTIONS[name]()


if __name__ == "__main__":
    main()
