"""NeRF training on a scene: ray batches, the Lightning module, rendering whole views."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Tuple

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..data.scenes import SceneSplit
from ..presets import NerfTrainConfig
from ..render.occupancy import OccupancyGrid
from ..render.radiance import RadianceField, RadianceFieldConfig
from ..render.rays import Rays, pinhole_rays
from ..render.renderer import RenderOut, RenderSettings, render_rays, render_rays_chunked, without_grad_in_chunks
from .optim import adam_with_decay, check_loss, retarget_learning_rate

BACKGROUNDS = {"white": 1.0, "black": 0.0}


def split_rays(split: SceneSplit, image: int, stride: int = 1) -> Rays:
    """The rays of one view's pixels (every stride-th row and column), row-major."""
    h, w = split.images.shape[1:3]
    dev = split.c2w.device
    ii, jj = torch.meshgrid(torch.arange(0, h, stride, device=dev), torch.arange(0, w, stride, device=dev), indexing="ij")
    fx, fy, cx, cy = split.intrinsics[image].tolist()
    return pinhole_rays(split.c2w[image], fx, fy, cx, cy, torch.stack([ii, jj], -1).reshape(-1, 2))


class _RayBatches(IterableDataset):
    """Endless batches of (origins, directions, rgba, image index) for random pixels of random
    training views."""

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
                rgba = torch.cat([rgba, torch.ones(self.n, 1, device=rgba.device)], -1)
            elif c == 1:
                rgba = torch.cat([rgba.expand(-1, 3), torch.ones(self.n, 1, device=rgba.device)], -1)
            yield rays.origins, rays.directions, rgba[:, :4], img


class SceneData(L.LightningDataModule):
    def __init__(self, train: SceneSplit, rays_per_batch: int, seed: int = 0) -> None:
        super().__init__()
        self.train, self.rays_per_batch, self.seed = train, rays_per_batch, seed

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if self.trainer is not None else 0  # DDP: other rays on every process
        return DataLoader(_RayBatches(self.train, self.rays_per_batch, self.seed + 1000 * rank), batch_size=None, num_workers=0)


class NerfModule(L.LightningModule):
    """A radiance field + occupancy grid trained by photometric MSE on random rays."""

    def __init__(self, field: Dict[str, Any], train: Dict[str, Any], aabb, near: float = 0.0, n_images: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.cfg = NerfTrainConfig.from_dict(dict(train))
        self.field = RadianceField(RadianceFieldConfig.from_dict(dict(field)), aabb, n_images)
        self.grid = OccupancyGrid(aabb, resolution=self.cfg.grid_resolution, threshold=self.cfg.grid_threshold,
                                  ema_decay=self.cfg.grid_ema_decay, warmup_steps=self.cfg.grid_warmup_steps,
                                  contracted=self.field.config.contraction)
        self.near = float(near)
        box = torch.as_tensor(aabb, dtype=torch.float32).reshape(6)
        self.step_size = float(self.cfg.render_step_size or (box[3:] - box[:3]).norm() / 256)
        # a contracted grid's rays end far out (1000 knee distances: S(far) is within 0.1 % of its limit)
        self.far = float(self.cfg.far or (1000.0 * self.grid.knee if self.grid.contracted else 1e4))
        self.rays_seen = 0
        self.n_rays = min(self.cfg.rays_per_batch, 1024)  # rays in the next step (follows target_samples)
        self._fast: Dict[str, Any] = {}  # compiled callables, kept out of the state dict
        self._grid_gen: Optional[torch.Generator] = None

    def configure_model(self) -> None:
        if self.cfg.compile and not self._fast:
            torch.compiler.reset()  # see SignalFitModule.configure_model
            # sample counts change every step: compile for a symbolic batch size
            self._fast["field"] = torch.compile(self.field, dynamic=True)
            self._fast["density"] = torch.compile(self.field.density, dynamic=True)

    @property
    def render_settings(self) -> RenderSettings:
        c = self.cfg
        return RenderSettings(self.step_size, self.near, self.far, c.early_stop_eps, c.alpha_thre, c.stratified, c.prepass)

    def query(self, name: str, *inputs: torch.Tensor, chunk: int = 1 << 16):
        """The field ('field': points, dirs -> (sigma, rgb)) or its density ('density': points
        -> sigma) of many inputs without gradient, in chunks, compiled when the preset compiles
        (see `without_grad_in_chunks` for why compiled callables run in grad mode)."""
        fast = self._fast.get(name)
        fn = fast if fast is not None else (self.field.density if name == "density" else self.field)
        return without_grad_in_chunks(fn, *inputs, chunk=chunk, compiled=fast is not None)

    def density(self, points: torch.Tensor) -> torch.Tensor:
        """Densities (N,) without gradient, for the marcher's pre-pass and the grid refresh."""
        return self.query("density", points)

    def _field_fn(self):
        if torch.is_grad_enabled():
            return self._fast.get("field", self.field)
        return lambda p, d: self.query("field", p, d)

    # ---- rendering (the functional renderer of inr.render with this module's field and grid)
    def render(self, rays: Rays, background: torch.Tensor, images: Optional[torch.Tensor] = None) -> RenderOut:
        """Colours of rays over `background` (N, 3), their opacity and depth; differentiable in grad mode.
        images: (N,) the training image of each ray, for its appearance code (None: the mean code)."""
        codes = self.field.appearance_codes(images, len(rays), rays.origins.device) if images is not None else None
        return render_rays(self._field_fn(), self.grid, rays, background, self.render_settings, self.density, codes)

    @torch.no_grad()
    def render_view(self, rays: Rays, background: float, chunk: int = 8192) -> torch.Tensor:
        """(N, 3) colours of many rays, in chunks (bounded memory)."""
        return self.render_many(rays, background, chunk).color.clamp(0, 1)

    @torch.no_grad()
    def render_many(self, rays: Rays, background: float, chunk: int = 8192) -> RenderOut:
        """render() of many rays on any device, in chunks, without gradient (see render_rays_chunked)."""
        return render_rays_chunked(self._field_fn(), self.grid, rays, background, self.render_settings, self.density, chunk)

    # ---- training --------------------------------------------------------------------------
    def _update_grid(self) -> None:
        step = self.global_step
        if step % self.cfg.grid_update_every == 0:
            # the same random cells and jitter on every DDP process: their fields are equal, so
            # their grids stay equal
            if self._grid_gen is None:
                self._grid_gen = torch.Generator(device=self.grid.occs.device).manual_seed(12345 + step)
            self.grid.update(step, lambda p: self.density(p) * self.step_size, generator=self._grid_gen)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        origins, dirs, rgba = (x[: self.n_rays] for x in batch[:3])
        images = batch[3][: self.n_rays] if len(batch) > 3 and self.field.appearance is not None else None
        self._update_grid()
        n = origins.shape[0]
        if self.cfg.train_background == "random":
            bg = torch.rand(n, 3, device=origins.device)
        else:
            bg = torch.full((n, 3), BACKGROUNDS[self.cfg.train_background], device=origins.device)
        target = rgba[:, :3] * rgba[:, 3:] + bg * (1.0 - rgba[:, 3:])
        color, _, _, n_samples = self.render(Rays(origins, dirs), bg, images)
        loss = torch.nn.functional.mse_loss(color, target)
        check_loss(loss, self.global_step)
        self.rays_seen += n
        # next step's ray count: aim at target_samples samples (nerfacc's dynamic batch size)
        want = n * self.cfg.target_samples / max(n_samples, 1)
        self.n_rays = int(min(max(want, 64), self.cfg.rays_per_batch))
        if self.global_step % 50 == 0:
            self.log("loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
            self.log("samples_per_ray", n_samples / n, prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
        return loss

    def configure_optimizers(self):
        return adam_with_decay(self.field.parameters(), self.cfg, getattr(self, "decay_horizon", None))

    def on_save_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        checkpoint["rays_seen"] = self.rays_seen
        checkpoint["n_rays"] = self.n_rays

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        retarget_learning_rate(checkpoint, float(self.cfg.lr))
        self.rays_seen = int(checkpoint.get("rays_seen", 0))
        self.n_rays = int(checkpoint.get("n_rays", self.n_rays))


def eval_target(img: torch.Tensor, background: float) -> torch.Tensor:
    """(H, W, C) image composited on a constant background -> (H, W, 3)."""
    if img.shape[-1] == 4:
        return img[..., :3] * img[..., 3:] + background * (1.0 - img[..., 3:])
    return img[..., :3] if img.shape[-1] >= 3 else img.expand(*img.shape[:2], 3)


def render_split_view(module: NerfModule, split: SceneSplit, image: int, background: float, stride: int = 1) -> torch.Tensor:
    """(H', W', 3) render of a view's pixels, every stride-th row and column."""
    h, w = split.images.shape[1:3]
    return module.render_view(split_rays(split, image, stride), background).view(-(-h // stride), -(-w // stride), 3)


