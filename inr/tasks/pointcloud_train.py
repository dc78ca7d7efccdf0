"""Training the point-cloud reconstruction network on shapes made on the fly.

Each step takes one shape: a random synthetic one (`inr.pointcloud.shapes`) or, a
`train.mesh_share` of the time, a randomly rotated mesh from --meshes (sometimes cut open),
samples `dense_points` clean points on its surface (the target), corrupts a copy (the input), or
a `train.scan_share` of the time range-scans it (the target: the surface the scan's cameras
see), and minimises occupancy BCE (every hourglass) + Chamfer (stage 2). A network that reads
the noise level (`field.noise_input`) gets it as `reconstruct` would give it, read from the pair's
input by the network itself (no gradient; or with `train.noise_given` 'truth', measured against
the clean points and scaled by a random factor), or, NOISE_UNKNOWN_SHARE of the steps, none, as
the first pass at inference gets none.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..errors import InputError
from ..pointcloud.network import ReconstructionConfig, VoxelNet
from ..pointcloud.reconstruct import (LEGACY_NOISE_DENSITY, LEGACY_NOISE_VOXEL, Reconstructor, make_frame,
                                      plane_sigma)
from ..pointcloud.weights import load_weights, read_weights
from ..pointcloud.shapes import Corruption, _rotation, corrupt, fragment_cut, open_cut, random_shape, sample_surface, scan_pair, sdf_mesh
from ..presets import PointCloudTrainConfig
from .optim import adam_with_decay, check_loss, retarget_learning_rate

NOISE_UNKNOWN_SHARE = 0.25
"""Share of the steps of a noise-reading network (`field.noise_input`) that give it no noise
level: its first pass at inference, which reads the level, runs without one."""
TRUTH_JITTER = (math.log(0.75), math.log(1.3))
"""train.noise_given = 'truth': the true level is scaled by a factor log-uniform in this range
(the base-voxel reading of the CGAL clouds over their true sigma: 0.76-1.28)."""
TRUTH_NEIGHBOURS = 16


def load_meshes(folder: Path) -> List[Any]:
    """Every mesh file under `folder`, read as fit-sdf reads meshes (`read_mesh`: bad files,
    NaN vertices and faceless files are InputErrors naming the file)."""
    from ..data.surfaces import MESH_FORMATS, read_mesh

    if not folder.is_dir():
        raise InputError(folder, "no such folder")
    meshes = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in MESH_FORMATS):
        mesh = read_mesh(path)
        if mesh is None:  # a PLY point cloud
            raise InputError(path, "holds no faces (a point cloud); training needs meshes")
        meshes.append(mesh)
    if not meshes:
        raise InputError(folder, f"holds no mesh files ({', '.join(MESH_FORMATS)})")
    return meshes


def true_noise(noisy: torch.Tensor, clean: torch.Tensor, voxel: float) -> float:
    """The input's noise in voxels of side `voxel`, measured against its clean surface as
    `noise_level` measures it against the network's output (`plane_sigma`)."""
    return plane_sigma(noisy, clean, TRUTH_NEIGHBOURS) / voxel


class ShapeStream(IterableDataset):
    """Endless (noisy (N, 3), clean (M, 3)) float32 pairs."""

    def __init__(self, cfg: PointCloudTrainConfig, meshes: Optional[List[Any]], seed: int) -> None:
        self.cfg, self.meshes, self.seed = cfg, meshes, seed

    def _new_mesh(self, rng: np.random.Generator):
        if self.meshes and rng.random() < self.cfg.mesh_share:
            mesh = self.meshes[int(rng.integers(len(self.meshes)))].copy()
            rotation = np.eye(4)
            rotation[:3, :3] = _rotation(rng)
            mesh.apply_transform(rotation)
        else:
            while True:
                try:
                    mesh = sdf_mesh(random_shape(rng, weights=self.cfg.family_weights), self.cfg.shape_resolution)
                    break
                except ValueError:  # a shape with no surface in the box: draw again
                    continue
        mesh = open_cut(mesh, rng) if rng.random() < self.cfg.open_share else mesh
        if self.cfg.fragment_share and rng.random() < self.cfg.fragment_share:  # no draw at 0: the stream of earlier runs
            mesh = fragment_cut(mesh, rng)
        return mesh

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        rng = np.random.default_rng(self.seed)
        pool = [self._new_mesh(rng) for _ in range(min(4, self.cfg.shape_pool))]
        while True:
            if len(pool) < self.cfg.shape_pool:
                pool.append(self._new_mesh(rng))
            elif rng.random() < 0.5:
                pool[int(rng.integers(len(pool)))] = self._new_mesh(rng)
            mesh = pool[int(rng.integers(len(pool)))]
            pair = None
            if self.cfg.scan_share and rng.random() < self.cfg.scan_share:  # no draw at 0: the stream of earlier runs
                pair = scan_pair(mesh, self.cfg.dense_points, int(self.cfg.dense_points / rng.uniform(*Corruption().sparsity)), rng)
            if pair is None:  # evenly spread points, or a scan that saw too little
                clean = sample_surface(mesh, self.cfg.dense_points, rng)
                pair = corrupt(clean, rng), clean
            noisy, clean = pair
            yield torch.from_numpy(noisy).float(), torch.from_numpy(clean).float()


class PointCloudModule(L.LightningModule):
    """The reconstruction network trained on (noisy, clean) pairs. model: ReconstructionConfig
    fields; train: PointCloudTrainConfig fields."""

    def __init__(self, model: Dict[str, Any], train: Dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.cfg = PointCloudTrainConfig.from_dict(dict(train))
        self.model = Reconstructor(ReconstructionConfig(**model), self.cfg.voxels_per_diagonal)
        if self.cfg.init_weights:
            seed_weights(self.model, load_weights(Path(self.cfg.init_weights)), self.cfg.init_weights)

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        retarget_learning_rate(checkpoint, float(self.cfg.lr))  # a resumed run may change train.lr
        # checkpoints from before the model recorded max_density / carried its voxel_rule,
        # share_rule, noise_voxel and noise_density: the values this module starts with (its seed
        # weights' or the defaults), so they resume; a rule without its reading was read the
        # legacy way, and served shares too
        state, own = checkpoint.get("state_dict", {}), self.model.state_dict()
        if "model.voxel_rule" in state:
            state.setdefault("model.share_rule", state["model.voxel_rule"].clone())
            state.setdefault("model.noise_voxel", torch.tensor(LEGACY_NOISE_VOXEL))
            state.setdefault("model.noise_density", torch.tensor(LEGACY_NOISE_DENSITY))
        for name in ("max_density", "voxel_rule", "share_rule", "noise_voxel", "noise_density"):
            state.setdefault(f"model.{name}", own[name].clone())

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        noisy, clean = batch
        noise = None
        if self.model.cfg.noise_input and float(torch.rand(())) >= NOISE_UNKNOWN_SHARE:
            voxel = make_frame(noisy, self.model.voxels_per_diagonal).voxel
            if self.cfg.noise_given == "truth":
                noise = true_noise(noisy, clean, voxel) * math.exp(float(torch.empty(()).uniform_(*TRUTH_JITTER)))
            else:  # read in the training frame's voxels, as `reconstruct` reads it (a first pass)
                noise = self.model.noise_level(noisy, voxel)
            noise = noise if noise == noise else None  # NaN: that pass found no surface
        out = self.model(noisy, clean, self.cfg.stage2_on_predicted, noise)
        check_loss(out["loss"], self.global_step)
        for k, v in out.items():
            self.log(k, v.detach() if k == "loss" else v, prog_bar=k in ("loss", "accuracy"), on_step=True, on_epoch=False, batch_size=1)
        return out["loss"]

    def configure_optimizers(self):
        return adam_with_decay(self.model.parameters(), self.cfg, getattr(self, "decay_horizon", None))


def _input_blocks(cfg: ReconstructionConfig) -> Dict[str, slice]:
    """Where each group of stage 1's input channels lies, for these settings."""
    widths = {"points": VoxelNet.IN_FEATURES, "moments": VoxelNet.MOMENT_FEATURES * cfg.moments,
              "noise": VoxelNet.NOISE_FEATURES * cfg.noise_input}
    blocks, at = {}, 0
    for name, width in widths.items():
        blocks[name], at = slice(at, at + width), at + width
    return blocks


def seed_weights(model: Reconstructor, start: Reconstructor, source: str) -> None:
    """Copy `start`'s weights into `model` (fine-tuning). The settings must match, except that
    weights without the moment features or the noise level may seed a model with them (their
    input channels start at zero weight, so the model starts as the one it came from), and stage
    2's view (how many input points it reads, and how far) may differ: it does not change the
    parameters."""
    state = start.state_dict()
    same = {"neighbours": model.cfg.neighbours, "reach": model.cfg.reach,
            "moments": model.cfg.moments, "noise_input": model.cfg.noise_input}
    if replace(start.cfg, **same) != model.cfg or (start.cfg.moments and not model.cfg.moments) \
            or (start.cfg.noise_input and not model.cfg.noise_input):
        raise InputError(source, "holds a model of other settings than the preset's field")
    w = state["stage1.stem.conv.weight"]  # (kernel, in, out)
    grown = w.new_zeros(w.shape[0], model.stage1.in_features, w.shape[2])
    old, new = _input_blocks(start.cfg), _input_blocks(model.cfg)
    for name, where in old.items():
        if where.stop > where.start:  # a group the start weights read
            grown[:, new[name]] = w[:, where]
    state["stage1.stem.conv.weight"] = grown
    model.load_state_dict(state)


def shape_data(cfg: PointCloudTrainConfig, meshes, seed: int) -> DataLoader:
    return DataLoader(ShapeStream(cfg, meshes, seed), batch_size=None, num_workers=0)


def _save_atomic(data: Dict[str, Any], path: Path) -> None:
    import os

    tmp = path.with_name(f".tmp-{path.name}")
    torch.save(data, tmp)
    os.replace(tmp, path)


def export_weights(module: PointCloudModule, path: Path) -> None:
    """The model alone (config + state dict), small enough to ship; read with weights_only."""
    _save_atomic({"config": module.model.cfg.to_dict(), "voxels_per_diagonal": module.model.voxels_per_diagonal,
                  "state_dict": {k: v.cpu() for k, v in module.model.state_dict().items()}, "train": module.cfg.to_dict()}, path)


def store_voxel_rule(path: Path, rule, share_rule, noise_voxel: float, noise_density: float) -> None:
    """Write (noise, scale) knots into a weights file as its voxel rules (`Reconstructor.voxel_rule`
    for clouds read whole, `share_rule` for those read on a share), with the voxel (in base voxels)
    their noise is read at (`Reconstructor.noise_voxel`) and the density it is read at
    (`Reconstructor.noise_density`), replacing the file atomically; the rest of the file is kept
    as it is."""
    data, _ = read_weights(path)  # a clear error for a file that is not point-cloud weights
    data["state_dict"]["voxel_rule"] = torch.tensor([[float(x), float(y)] for x, y in rule])
    data["state_dict"]["share_rule"] = torch.tensor([[float(x), float(y)] for x, y in share_rule])
    data["state_dict"]["noise_voxel"] = torch.tensor(float(noise_voxel))
    data["state_dict"]["noise_density"] = torch.tensor(float(noise_density))
    _save_atomic(data, path)


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
        pts, _ = model.reconstruct(torch.from_numpy(noisy).float(), adaptive=False)  # the training frame; on the model's device, back on the CPU
        if len(pts) == 0:
            ratios.append(float("inf"))
            continue
        ratios.append(compare(pts.double().numpy(), clean, 0.01)["chamfer_l1"] / compare(noisy, clean, 0.01)["chamfer_l1"])
    return float(np.mean(ratios))


class ShapeData(L.LightningDataModule):
    """Training pairs for `PointCloudModule`; each DDP process draws its own shapes."""

    def __init__(self, cfg: PointCloudTrainConfig, meshes, seed: int) -> None:
        super().__init__()
        self.cfg, self.meshes, self.seed = cfg, meshes, seed

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if self.trainer is not None else 0  # DDP: other shapes on every process
        return shape_data(self.cfg, self.meshes, self.seed + 1000 * rank)
