"""`inr nerf train|eval`: train a radiance field on a scene folder, evaluate its test split."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
import yaml

from .. import metrics
from .._resources import data_dir
from ..data.scenes import Scene, load_scene
from ..errors import InputError
from ..networks import count_parameters
from ..presets import NerfPreset, load_nerf_preset
from .fit import (UNBOUNDED_STEPS, _quiet_lightning, fit_or_stop, load_checkpoint_module, make_trainer,
                  save_checkpoint_atomically)
from .nerf import BACKGROUNDS, NerfModule, SceneData, eval_target, render_split_view
from .outputs import plot_curve, write_image, write_json
from .signal_fit import TrainingDiverged

DEFAULT_SCENE = "tabletop"


@dataclass
class NerfOptions:
    scene: Optional[str] = None
    preset: str = "ngp"
    out: Optional[str] = None
    steps: Optional[int] = None
    time_budget: Optional[float] = None
    seed: int = 0
    downscale: int = 1
    overrides: Dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    overwrite: bool = False
    devices: int = 1


def default_scene() -> str:
    return str(data_dir("scenes") / DEFAULT_SCENE)


def _evaluate(module: NerfModule, scene: Scene, views: Optional[int], background: float, stride: int = 1) -> List[Dict[str, float]]:
    split = scene.splits["test"]
    n = len(split) if views is None else min(views, len(split))
    out = []
    for k in range(n):
        pred = render_split_view(module, split, k, background, stride)
        target = eval_target(split.images[k, ::stride, ::stride], background)
        out.append({"view": split.names[k], "psnr": metrics.psnr(pred, target), "ssim": metrics.ssim(pred, target), "image": pred})
    return out


def run_nerf(opts: NerfOptions, resume: Optional[Path] = None, callbacks: Sequence[Any] = ()) -> Dict[str, Any]:
    """Train (or resume), evaluate every test view, write the run folder; returns metrics."""
    import lightning as L

    from .callbacks import RunMonitor

    _quiet_lightning()
    preset_data = None
    if resume is not None:
        opts, preset_data = _load_config(Path(resume), opts)
    if opts.steps is not None and opts.steps < 1:
        raise InputError(None, "--steps must be >= 1")
    preset = (NerfPreset.from_dict(preset_data["name"], {k: v for k, v in preset_data.items() if k != "name"})
              if preset_data else load_nerf_preset(opts.preset, opts.overrides))
    scene = load_scene(opts.scene or default_scene(), opts.downscale)
    out = Path(opts.out) if opts.out else Path("runs") / f"nerf-{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    ckpt = out / "checkpoints" / "last.ckpt"
    # DDP: Lightning re-runs this command for ranks 1..N-1 (LOCAL_RANK set); they train, the
    # first process alone prepares the folder and writes results
    child = int(os.environ.get("LOCAL_RANK", "0")) > 0
    if resume is None and not child:
        if ckpt.exists() and not opts.overwrite:
            raise InputError(out, "already holds a run: use --resume to continue it, --overwrite to replace it, or another --out")
        if opts.overwrite and out.exists():
            shutil.rmtree(out)
    if opts.devices < 1:
        raise InputError(None, f"--devices must be >= 1, got {opts.devices}")
    if not child:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(yaml.safe_dump({"options": asdict(opts), "preset": preset.to_dict()}, sort_keys=False))

    L.seed_everything(opts.seed, verbose=False)
    cfg = preset.train
    module = NerfModule(preset.field.to_dict(), asdict(cfg), scene.aabb.tolist(), near=scene.near)
    bg = BACKGROUNDS.get(cfg.eval_background, 1.0)

    def curve_psnr(m: NerfModule) -> float:
        return float(sum(r["psnr"] for r in _evaluate(m, scene, cfg.eval_views, bg, cfg.eval_stride)) / max(1, min(cfg.eval_views, len(scene.splits["test"]))))

    monitor = RunMonitor(curve_psnr, cfg.eval_every, opts.time_budget)
    max_steps = opts.steps or (UNBOUNDED_STEPS if opts.time_budget else cfg.steps)
    trainer = make_trainer(out, max_steps, cfg.precision, 50, cfg.checkpoint_every, opts.progress, [monitor, *callbacks],
                           devices=opts.devices)
    data = SceneData(scene.splits["train"], cfg.rays_per_batch, seed=opts.seed)
    try:
        fit_or_stop(trainer, module, data, ckpt, out, resume is not None)
    except TrainingDiverged as exc:
        raise TrainingDiverged(f"{exc}; training stopped. The last good checkpoint is {ckpt}") from None
    seconds = monitor.seconds()
    rays = float(trainer.strategy.reduce(torch.tensor(float(module.rays_seen)), reduce_op="sum"))  # over all processes
    save_checkpoint_atomically(trainer, ckpt)
    if not trainer.is_global_zero:
        return {"rank": trainer.global_rank}
    result = _write_eval(out, module, scene, bg)
    result.update({"preset": preset.name, "scene": scene.path, "steps": int(trainer.global_step), "seconds": round(seconds, 3),
                   "rays_per_second": round(rays / max(seconds, 1e-9), 1), "devices": trainer.world_size,
                   "params": count_parameters(module.field), "curve": monitor.history})
    plot_curve(out / "curve.png", monitor.history, f"{preset.name} on {Path(scene.path).name}",
               label=f"test PSNR (dB), {cfg.eval_views} views, every {cfg.eval_stride}th pixel")
    write_json(out / "metrics.json", result)
    return {**result, "out": str(out)}


def _write_eval(out: Path, module: NerfModule, scene: Scene, background: float) -> Dict[str, Any]:
    (out / "renders").mkdir(exist_ok=True)
    per_view = _evaluate(module, scene, None, background)
    for k, r in enumerate(per_view):
        write_image(out / "renders" / f"test_{k:03d}.png", r.pop("image"))
        r["psnr"], r["ssim"] = round(r["psnr"], 4), round(r["ssim"], 5)
    return {
        "test_psnr": round(sum(r["psnr"] for r in per_view) / len(per_view), 4),
        "test_ssim": round(sum(r["ssim"] for r in per_view) / len(per_view), 5),
        "per_view": per_view,
    }


def _load_config(run_dir: Path, given: NerfOptions):
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file() or not (run_dir / "checkpoints" / "last.ckpt").is_file():
        raise InputError(run_dir, "is not a NeRF run folder with a checkpoint (config.yaml, checkpoints/last.ckpt)")
    data = yaml.safe_load(cfg_path.read_text())
    if data.get("preset", {}).get("task") != "nerf":
        raise InputError(run_dir, "is not a NeRF run folder")
    opts = NerfOptions(**data["options"])
    opts.out, opts.progress = str(run_dir), given.progress
    opts.steps = given.steps if given.steps is not None else opts.steps
    opts.time_budget = given.time_budget if given.time_budget is not None else opts.time_budget
    opts.devices = given.devices  # the processes of this invocation
    return opts, data["preset"]


def load_nerf_run(run_dir: Path):
    """(module, scene, config) of a finished run; the checkpoint is read with weights_only=True."""
    cfg_path, ckpt_path = run_dir / "config.yaml", run_dir / "checkpoints" / "last.ckpt"
    if not cfg_path.is_file() or not ckpt_path.is_file():
        raise InputError(run_dir, "is not a NeRF run folder (needs config.yaml and checkpoints/last.ckpt)")
    config = yaml.safe_load(cfg_path.read_text())
    if config.get("preset", {}).get("task") != "nerf":
        raise InputError(run_dir, "is not a NeRF run folder")
    module = load_checkpoint_module(ckpt_path, NerfModule)
    module.configure_model()  # compiled callables when the preset asks for them
    opts = config["options"]
    scene = load_scene(opts.get("scene") or default_scene(), int(opts.get("downscale", 1)))
    return module, scene, config


def eval_run(run_dir: Path) -> Dict[str, Any]:
    """Re-evaluate a run's test split: per-view and mean PSNR/SSIM, written to DIR/eval.json."""
    module, scene, config = load_nerf_run(run_dir)
    bg_name = config["preset"]["train"].get("eval_background", "white")
    result = _write_eval(run_dir, module, scene, BACKGROUNDS.get(bg_name, 1.0))
    write_json(run_dir / "eval.json", result)
    return result
