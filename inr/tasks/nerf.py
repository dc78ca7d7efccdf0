"""NeRF training on a scene: ray batches, the Lightning module, rendering whole views."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, Tuple

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..data.scenes import SceneSplit
from ..presets import NerfTrainConfig
from ..render.occupancy import OccupancyGrid, march
from ..render.radiance import RadianceField, RadianceFieldConfig
from ..render.rays import Rays, pinhole_rays
from ..render.volume import accumulate, render_weights
from .signal_fit import TrainingDiverged

BACKGROUNDS = {"white": 1.0, "black": 0.0}


def split_rays(split: SceneSplit, image: int) -> Rays:
    """All rays of one view, row-major."""
    h, w = split.images.shape[1:3]
    ii, jj = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    fx, fy, cx, cy = split.intrinsics[image].tolist()
    return pinhole_rays(split.c2w[image], fx, fy, cx, cy, torch.stack([ii, jj], -1).reshape(-1, 2))


class _RayBatches(IterableDataset):
    """Endless batches of (origins, directions, rgba) for random pixels of random training views."""

    def __init__(self, split: SceneSplit, rays_per_batch: int, seed: int) -> None:
        self.split, self.n, self.seed = split, rays_per_batch, seed

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        s = self.split
        n_img, h, w, c = s.images.shape
        gen = torch.Generator().manual_seed(self.seed)
        while True:
            img = torch.randint(0, n_img, (self.n,), generator=gen)
            ii = torch.randint(0, h, (self.n,), generator=gen)
            jj = torch.randint(0, w, (self.n,), generator=gen)
            fx, fy, cx, cy = s.intrinsics[img].unbind(-1)
            rays = pinhole_rays(s.c2w[img], fx, fy, cx, cy, torch.stack([ii, jj], -1))
            rgba = s.images[img, ii, jj]
            if c == 3:
                rgba = torch.cat([rgba, torch.ones(self.n, 1)], -1)
            elif c == 1:
                rgba = torch.cat([rgba.expand(-1, 3), torch.ones(self.n, 1)], -1)
            yield rays.origins, rays.directions, rgba[:, :4]


class SceneData(L.LightningDataModule):
    def __init__(self, train: SceneSplit, rays_per_batch: int, seed: int = 0) -> None:
        super().__init__()
        self.train, self.rays_per_batch, self.seed = train, rays_per_batch, seed

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_RayBatches(self.train, self.rays_per_batch, self.seed), batch_size=None, num_workers=0)


class NerfModule(L.LightningModule):
    """A radiance field + occupancy grid trained by photometric MSE on random rays."""

    def __init__(self, field: Dict[str, Any], train: Dict[str, Any], aabb, near: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.cfg = NerfTrainConfig.from_dict(dict(train))
        self.field = RadianceField(RadianceFieldConfig.from_dict(dict(field)), aabb)
        self.grid = OccupancyGrid(aabb, resolution=self.cfg.grid_resolution, threshold=self.cfg.grid_threshold,
                                  warmup_steps=self.cfg.grid_warmup_steps)
        self.near = float(near)
        self.rays_seen = 0
        self._fast: Dict[str, Any] = {}  # compiled callables, kept out of the state dict

    def configure_model(self) -> None:
        if self.cfg.compile and not self._fast:
            torch.compiler.reset()  # see SignalFitModule.configure_model
            # sample counts change every step: compile for a symbolic batch size
            self._fast["field"] = torch.compile(self.field, dynamic=True)
            self._fast["density"] = torch.compile(self.field.density, dynamic=True)

    # ---- rendering -------------------------------------------------------------------------
    def render(self, rays: Rays, background: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, int]:
        """(rgb (N, 3), opacity (N, 1), number of samples) of rays over `background` (N, 3)."""
        o, d = rays.origins, rays.directions

        density = self._fast.get("density", self.field.density)
        field = self._fast.get("field", self.field)

        def sigma_fn(t0, t1, ri):
            return density(o[ri] + d[ri] * ((t0 + t1) * 0.5)[:, None])

        ri, t0, t1 = march(rays, self.grid, self.cfg.render_step_size, near=self.near, sigma_fn=sigma_fn,
                           early_stop_eps=self.cfg.early_stop_eps, alpha_thre=self.cfg.alpha_thre)
        mids = (t0 + t1) * 0.5
        sigma, rgb = field(o[ri] + d[ri] * mids[:, None], d[ri])
        w, _, _ = render_weights(t0, t1, sigma, ri)
        color = accumulate(w, ri, len(rays), rgb)
        opacity = accumulate(w, ri, len(rays))
        return color + (1.0 - opacity) * background, opacity, int(ri.numel())

    @torch.no_grad()
    def render_view(self, rays: Rays, background: float, chunk: int = 8192) -> torch.Tensor:
        """(N, 3) colours of many rays, in chunks (bounded memory)."""
        out = []
        for k in range(0, len(rays), chunk):
            part = rays[k : k + chunk]
            bg = torch.full((len(part), 3), background)
            out.append(self.render(part, bg)[0])
        return torch.cat(out).clamp(0, 1)

    # ---- training --------------------------------------------------------------------------
    def _update_grid(self) -> None:
        step = self.global_step
        if step % self.cfg.grid_update_every == 0:
            density = self._fast.get("density", self.field.density)
            self.grid.update(step, lambda p: density(p) * self.cfg.render_step_size)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        origins, dirs, rgba = batch
        self._update_grid()
        n = origins.shape[0]
        if self.cfg.train_background == "random":
            bg = torch.rand(n, 3, device=origins.device)
        else:
            bg = torch.full((n, 3), BACKGROUNDS[self.cfg.train_background], device=origins.device)
        target = rgba[:, :3] * rgba[:, 3:] + bg * (1.0 - rgba[:, 3:])
        color, _, n_samples = self.render(Rays(origins, dirs), bg)
        loss = torch.nn.functional.mse_loss(color, target)
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"the loss became {loss.item()} at step {self.global_step}")
        self.rays_seen += n
        if self.global_step % 50 == 0:
            self.log("loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
            self.log("samples_per_ray", n_samples / n, prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
        return loss

    def configure_optimizers(self):
        cfg = self.cfg
        opt = torch.optim.Adam(self.field.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
        gamma = math.log(cfg.lr_final_factor) / cfg.steps
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: math.exp(gamma * min(s, cfg.steps)))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        checkpoint["rays_seen"] = self.rays_seen

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        self.rays_seen = int(checkpoint.get("rays_seen", 0))


def eval_target(img: torch.Tensor, background: float) -> torch.Tensor:
    """(H, W, C) image composited on a constant background -> (H, W, 3)."""
    if img.shape[-1] == 4:
        return img[..., :3] * img[..., 3:] + background * (1.0 - img[..., 3:])
    return img[..., :3] if img.shape[-1] >= 3 else img.expand(*img.shape[:2], 3)


def render_split_view(module: NerfModule, split: SceneSplit, image: int, background: float) -> torch.Tensor:
    h, w = split.images.shape[1:3]
    return module.render_view(split_rays(split, image), background).view(h, w, 3)


