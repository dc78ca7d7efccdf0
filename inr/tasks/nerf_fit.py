"""`inr nerf train|eval`: a radiance field trained on a scene folder; its test split scored."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import torch

from .. import metrics, progress
from .._resources import data_dir
from ..data.scenes import Scene, load_scene
from ..networks import count_parameters
from .base import Task, TaskOptions, positive_int, register_task
from .outputs import plot_curve, write_image, write_json
from .run import load_run

if TYPE_CHECKING:  # the Lightning module is imported where it is used, so the CLI starts without Lightning
    from .nerf import NerfModule, SceneData

DEFAULT_SCENE = "tabletop"


@dataclass
class NerfOptions(TaskOptions):
    downscale: int = 1
    """Divide image sizes by this factor."""
    poses: Optional[str] = None
    """transforms.json / COLMAP poses: "normalise" (default) or "keep"."""


def default_scene() -> str:
    return str(data_dir("scenes") / DEFAULT_SCENE)


def _evaluate(module: NerfModule, scene: Scene, views: Optional[int], background: float, stride: int = 1,
              show: bool = False) -> List[Dict[str, Any]]:
    from .nerf import eval_target, render_split_view

    split = scene.splits["test"]
    n = len(split) if views is None else min(views, len(split))
    out = []
    for k in progress.bar(range(n), "test views", unit="view") if show else range(n):
        pred = render_split_view(module, split, k, background, stride)
        target = eval_target(split.images[k, ::stride, ::stride], background)
        out.append({"view": split.names[k], "psnr": metrics.psnr(pred, target), "ssim": metrics.ssim(pred, target), "image": pred,
                    "target": target})
    return out


def write_eval(out: Path, module: NerfModule, scene: Scene, background: float) -> Dict[str, Any]:
    (out / "renders").mkdir(exist_ok=True)
    start = time.perf_counter()
    per_view = _evaluate(module, scene, None, background, show=True)
    seconds = time.perf_counter() - start
    for k, r in enumerate(per_view):
        pred, target = r.pop("image"), r.pop("target")
        write_image(out / "renders" / f"test_{k:03d}.png", pred)
        write_image(out / "renders" / f"test_{k:03d}_truth_render.png", torch.cat([target, pred], dim=1))
        r["psnr"], r["ssim"] = round(r["psnr"], 4), round(r["ssim"], 5)
    return {
        "test_psnr": round(sum(r["psnr"] for r in per_view) / len(per_view), 4),
        "test_ssim": round(sum(r["ssim"] for r in per_view) / len(per_view), 5),
        "eval_seconds_per_view": round(seconds / max(1, len(per_view)), 3),
        "per_view": per_view,
    }


@register_task("nerf")
class NerfTask(Task):
    default_preset = "ngp"
    Options = NerfOptions
    main_metric, curve_name = "test_psnr", "test PSNR"
    input_help = "scene folder (default: the bundled scenes/tabletop)"
    outputs_help = ("metrics.json (test_psnr, test_ssim, per view, rays_per_second), renders/ (test views, and each beside "
                    "its ground truth), curve.png")

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--downscale", type=positive_int, help="divide image sizes by this factor (default 1)")
        parser.add_argument("--poses", choices=["normalise", "keep"],
                            help="transforms.json / COLMAP poses: orient, centre and scale them as nerfstudio does "
                                 "(normalise, the default) or keep them as given")

    @classmethod
    def options_from_args(cls, args) -> Dict[str, Any]:
        return {"downscale": args.downscale, "poses": args.poses}

    def default_input(self) -> Optional[str]:
        return default_scene()

    @classmethod
    def auto_preset(cls, input: Optional[str]):
        from ..data.scenes import capture_kind

        why = capture_kind(input) if input else None
        return ("ngp_unbounded", f"{why}: unbounded, contracted space, per-image appearance codes") if why else None

    def load(self) -> None:
        self.scene = load_scene(self.opts.input or default_scene(), self.options.downscale, self.options.poses)
        from .nerf import BACKGROUNDS

        self.background = BACKGROUNDS.get(self.preset.train.eval_background, 1.0)

    def build_module(self) -> NerfModule:
        from .nerf import NerfModule

        return NerfModule(self.preset.field.to_dict(), asdict(self.preset.train), self.scene.aabb.tolist(), near=self.scene.near,
                          n_images=len(self.scene.splits["train"]))

    def build_data(self) -> SceneData:
        from .nerf import SceneData

        return SceneData(self.scene.splits["train"], self.preset.train.rays_per_batch, seed=self.opts.seed)

    def measure(self, module: NerfModule) -> float:
        cfg = self.preset.train
        views = _evaluate(module, self.scene, cfg.eval_views, self.background, cfg.eval_stride)
        return float(sum(r["psnr"] for r in views) / max(1, len(views)))

    def callbacks(self) -> list:
        if not self.opts.viewer:
            return []
        from ..viewer import check_host
        from ..viewer.live import LiveViewer

        host, _, port = self.opts.viewer.rpartition(":")
        check_host(host)
        return [LiveViewer(self.scene, self.background, host, int(port))]

    def sample_render(self, module: NerfModule):
        from .nerf import render_split_view

        split = self.scene.splits["test"] if len(self.scene.splits["test"]) else self.scene.splits["train"]
        with torch.no_grad():
            return render_split_view(module, split, 0, self.background, self.preset.train.eval_stride)

    def gather(self, module: NerfModule) -> None:
        rays = torch.tensor(float(module.rays_seen), device=module.device)
        self.rays_total = float(module.trainer.strategy.reduce(rays, reduce_op="sum"))  # over all processes

    def write_outputs(self, out: Path, module: NerfModule, steps: int, seconds: float, history) -> Dict[str, Any]:
        rays = self.rays_total
        result = write_eval(out, module, self.scene, self.background)
        cfg = self.preset.train
        result.update({"scene": self.scene.path, "steps": steps, "seconds": round(seconds, 3),
                       "rays_per_second": round(rays / max(seconds, 1e-9), 1), "params": count_parameters(module.field)})
        plot_curve(out / "curve.png", history, f"{self.preset.name} on {Path(self.scene.path).name}",
                   label=f"test PSNR (dB), {cfg.eval_views} views, every {cfg.eval_stride}th pixel")
        return result

    @staticmethod
    def summary(r: Dict[str, Any]) -> str:
        return (f"{r['preset']}: test PSNR {r['test_psnr']:.2f} dB, SSIM {r['test_ssim']:.4f} after {r['steps']} steps in "
                f"{r['seconds']:.1f} s ({r['rays_per_second']:,.0f} rays/s), {r['params']:,} parameters")


def load_nerf_run(run_dir: Path, device: str = "auto"):
    """(module on `device`, scene, config) of a trained run."""
    from .nerf import NerfModule

    module, config = load_run(Path(run_dir), "nerf", NerfModule, device)
    module.configure_model()  # compiled callables when the preset asks for them
    run = config["run"]
    options = run.get("task_options") or {}
    scene = load_scene(run.get("input") or default_scene(), int(options.get("downscale") or 1), options.get("poses"))
    return module, scene, config


def eval_run(run_dir: Path, device: str = "auto") -> Dict[str, Any]:
    """Re-evaluate a run's test split: per-view and mean PSNR/SSIM, written to DIR/eval.json."""
    from .nerf import BACKGROUNDS

    module, scene, config = load_nerf_run(run_dir, device)
    bg = BACKGROUNDS.get(config["preset"]["train"].get("eval_background", "white"), 1.0)
    result = write_eval(Path(run_dir), module, scene, bg)
    write_json(Path(run_dir) / "eval.json", result)
    return result
