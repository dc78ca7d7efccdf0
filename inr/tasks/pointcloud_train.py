"""Training the point-cloud reconstruction network on shapes made on the fly.

Each step takes one shape: a random synthetic one (`inr.pointcloud.shapes`) or a mesh from
--meshes, samples `dense_points` clean points on its surface (the target), corrupts a copy
(the input), and minimises occupancy BCE (every hourglass) + Chamfer (stage 2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from .._config import from_dict_strict
from ..errors import InputError
from ..pointcloud.network import ReconstructionConfig
from ..pointcloud.reconstruct import Reconstructor
from ..pointcloud.shapes import corrupt, random_shape, sample_surface, sdf_mesh
from .signal_fit import TrainingDiverged, adam_with_decay

MESH_SUFFIXES = (".ply", ".obj", ".off", ".stl", ".glb", ".gltf")


@dataclass
class PointCloudTrainConfig:
    steps: int = 4000
    lr: float = 2e-3
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_final_factor: float = 0.1
    dense_points: int = 20000
    voxels_per_diagonal: float = 56.0
    shape_pool: int = 64
    """Synthetic shapes kept and re-corrupted (a new one replaces a random old one every step)."""
    checkpoint_every: int = 200
    stage2_on_predicted: bool = True
    """Stage 2 also learns on the voxels stage 1 wrongly predicts (False: the true voxels only)."""
    model: Dict[str, Any] = field(default_factory=dict)
    """ReconstructionConfig fields."""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "PointCloudTrainConfig":
        cfg = from_dict_strict(cls, data, "train", floats=("lr", "eps", "lr_final_factor", "voxels_per_diagonal"))
        cfg.betas = tuple(float(b) for b in cfg.betas)  # type: ignore[assignment]
        from_dict_strict(ReconstructionConfig, cfg.model, "model")  # typos fail here
        return cfg


def load_meshes(folder: Path) -> List[Any]:
    import trimesh

    if not folder.is_dir():
        raise InputError(folder, "no such folder")
    meshes = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in MESH_SUFFIXES):
        try:
            mesh = trimesh.load(path, force="mesh", process=True)
        except Exception as exc:  # trimesh raises many types for bad files
            raise InputError(path, f"cannot be read as a mesh ({exc})") from None
        if len(mesh.faces) == 0 or mesh.area <= 0:
            raise InputError(path, "has no surface (no faces)")
        meshes.append(mesh)
    if not meshes:
        raise InputError(folder, f"holds no mesh files ({', '.join(MESH_SUFFIXES)})")
    return meshes


class ShapeStream(IterableDataset):
    """Endless (noisy (N, 3), clean (M, 3)) float32 pairs."""

    def __init__(self, cfg: PointCloudTrainConfig, meshes: Optional[List[Any]], seed: int) -> None:
        self.cfg, self.meshes, self.seed = cfg, meshes, seed

    def _new_mesh(self, rng: np.random.Generator):
        if self.meshes:
            return self.meshes[int(rng.integers(len(self.meshes)))]
        while True:
            try:
                return sdf_mesh(random_shape(rng))
            except ValueError:  # a shape with no surface in the box: draw again
                continue

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        rng = np.random.default_rng(self.seed)
        pool = [self._new_mesh(rng) for _ in range(min(4, self.cfg.shape_pool))]
        while True:
            if len(pool) < self.cfg.shape_pool:
                pool.append(self._new_mesh(rng))
            elif rng.random() < 0.5:
                pool[int(rng.integers(len(pool)))] = self._new_mesh(rng)
            mesh = pool[int(rng.integers(len(pool)))]
            clean = sample_surface(mesh, self.cfg.dense_points, rng)
            noisy = corrupt(clean, rng)
            yield torch.from_numpy(noisy).float(), torch.from_numpy(clean).float()


class PointCloudModule(L.LightningModule):
    def __init__(self, train: Dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.cfg = PointCloudTrainConfig.from_dict(dict(train))
        self.model = Reconstructor(ReconstructionConfig(**self.cfg.model), self.cfg.voxels_per_diagonal)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        noisy, clean = batch
        out = self.model(noisy, clean, self.cfg.stage2_on_predicted)
        if not torch.isfinite(out["loss"]):
            raise TrainingDiverged(f"the loss became {out['loss'].item()} at step {self.global_step}")
        for k, v in out.items():
            self.log(k, v.detach() if k == "loss" else v, prog_bar=k in ("loss", "accuracy"), on_step=True, on_epoch=False, batch_size=1)
        return out["loss"]

    def configure_optimizers(self):
        return adam_with_decay(self.model.parameters(), self.cfg)


def shape_data(cfg: PointCloudTrainConfig, meshes, seed: int) -> DataLoader:
    return DataLoader(ShapeStream(cfg, meshes, seed), batch_size=None, num_workers=0)


def export_weights(module: PointCloudModule, path: Path) -> None:
    """The model alone (config + state dict), small enough to ship; read with weights_only."""
    import os

    tmp = path.with_name(f".tmp-{path.name}")
    torch.save({"config": module.model.cfg.to_dict(), "voxels_per_diagonal": module.model.voxels_per_diagonal,
                "state_dict": module.model.state_dict(), "train": asdict(module.cfg)}, tmp)
    os.replace(tmp, path)


def load_weights(path: Path) -> Reconstructor:
    if not path.is_file():
        raise InputError(path, "no such weights file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
        model = Reconstructor(ReconstructionConfig(**data["config"]), data["voxels_per_diagonal"])
        state = data["state_dict"]
        state.setdefault("max_density", torch.tensor(0.0))  # weights from before it was recorded: the default
        model.load_state_dict(state)
    except Exception as exc:  # pickle/zip/key errors all mean "not our weights"
        raise InputError(path, f"is not a point-cloud weights file ({exc.__class__.__name__})") from None
    return model.eval()


@dataclass
class PointCloudTrainOptions:
    meshes: Optional[str] = None
    out: Optional[str] = None
    steps: Optional[int] = None
    time_budget: Optional[float] = None
    seed: int = 0
    overrides: Dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    overwrite: bool = False
    eval_every: int = 200


def validation_pairs(n: int = 4, seed: int = 10_000) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Fixed (noisy, clean) pairs of synthetic shapes the training stream does not draw (seed)."""
    rng = np.random.default_rng(seed)
    stream = ShapeStream(PointCloudTrainConfig(), None, seed)
    pairs = []
    while len(pairs) < n:
        mesh = stream._new_mesh(rng)
        clean = sample_surface(mesh, 20000, rng)
        pairs.append((corrupt(clean, rng), clean))
    return pairs


def chamfer_ratio(model: Reconstructor, pairs) -> float:
    """Mean over pairs of chamfer_l1(output, clean) / chamfer_l1(input, clean): < 1 is better than the input."""
    from ..pointcloud.metrics import compare

    ratios = []
    for noisy, clean in pairs:
        pts, _ = model.reconstruct(torch.from_numpy(noisy).float())
        if len(pts) == 0:
            ratios.append(float("inf"))
            continue
        ratios.append(compare(pts.double().numpy(), clean, 0.01)["chamfer_l1"] / compare(noisy, clean, 0.01)["chamfer_l1"])
    return float(np.mean(ratios))


def run_pointcloud_train(opts: PointCloudTrainOptions, resume: Optional[Path] = None) -> Dict[str, Any]:
    import shutil

    import yaml

    from .callbacks import RunMonitor
    from .fit import UNBOUNDED_STEPS, _quiet_lightning, fit_or_stop, make_trainer, save_checkpoint_atomically
    from .outputs import write_json

    _quiet_lightning()
    out = Path(resume) if resume is not None else Path(opts.out) if opts.out else Path("runs") / "pointcloud"
    ckpt = out / "checkpoints" / "last.ckpt"
    if resume is not None:
        saved = yaml.safe_load((Path(resume) / "config.yaml").read_text()) if (Path(resume) / "config.yaml").is_file() else None
        if saved is None or not ckpt.is_file():
            raise InputError(resume, "is not a point-cloud training run with a checkpoint")
        train = saved["train"]
    else:
        if ckpt.exists() and not opts.overwrite:
            raise InputError(out, "already holds a run: use --resume to continue it, --overwrite to replace it, or another --out")
        try:
            train = asdict(PointCloudTrainConfig.from_dict(_apply(opts.overrides)))
        except (TypeError, ValueError) as exc:
            raise InputError(None, f"--set: {exc}") from None
    meshes = load_meshes(Path(opts.meshes)) if opts.meshes else None
    if resume is None:
        if opts.overwrite and out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(yaml.safe_dump({"options": asdict(opts), "train": train}, sort_keys=False))
    L.seed_everything(opts.seed, verbose=False)
    module = PointCloudModule(train)
    cfg = module.cfg
    pairs = validation_pairs()
    monitor = RunMonitor(lambda m: chamfer_ratio(m.model, pairs), opts.eval_every, opts.time_budget)
    max_steps = opts.steps or (UNBOUNDED_STEPS if opts.time_budget else cfg.steps)
    trainer = make_trainer(out, max_steps, "32", 20, cfg.checkpoint_every, opts.progress, [monitor])
    fit_or_stop(trainer, module, _DataModule(cfg, meshes, opts.seed), ckpt, out, resume is not None)
    save_checkpoint_atomically(trainer, ckpt)
    export_weights(module, out / "model.pt")
    result = {"steps": int(trainer.global_step), "seconds": round(monitor.seconds(), 3),
              "validation_chamfer_ratio": monitor.history[-1][2] if monitor.history else None,
              "curve": monitor.history, "weights": str(out / "model.pt")}
    write_json(out / "metrics.json", result)
    return {**result, "out": str(out)}


def _apply(overrides: Dict[str, Any]) -> Dict[str, Any]:
    """--set train.KEY=VALUE / model.KEY=VALUE -> a PointCloudTrainConfig dict."""
    data: Dict[str, Any] = {"model": {}}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if head == "model" and rest:
            data["model"][rest] = value
        elif head == "train" and rest:
            data[rest] = value
        else:
            raise InputError(None, f"--set {key}: expected train.KEY or model.KEY")
    return data


class _DataModule(L.LightningDataModule):
    def __init__(self, cfg: PointCloudTrainConfig, meshes, seed: int) -> None:
        super().__init__()
        self.cfg, self.meshes, self.seed = cfg, meshes, seed

    def train_dataloader(self) -> DataLoader:
        return shape_data(self.cfg, self.meshes, self.seed)
