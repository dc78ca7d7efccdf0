"""Fitting a signed distance field to oriented points: data module and Lightning module."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, Optional, Tuple

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..fields import Field, FieldConfig
from ..presets import SdfTrainConfig
from ..sdf import LossWeights, analytic_gradient, numerical_gradient, lookup_side, sdf_loss_terms, side_lattice
from .optim import adam_with_decay, check_loss, retarget_learning_rate


class _Batches(IterableDataset):
    """Endless (surface points, normals, space points) batches; the first round((1 - near_share)
    x space_batch) space points are uniform in [-1, 1]^3, the rest near the surface."""

    def __init__(self, points: torch.Tensor, normals: torch.Tensor, cfg: SdfTrainConfig, seed: int,
                 sides: Optional[torch.Tensor] = None) -> None:
        self.points, self.normals, self.cfg, self.seed, self.sides = points, normals, cfg, seed, sides

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        gen = torch.Generator().manual_seed(self.seed)
        cfg, n, sides = self.cfg, self.points.shape[0], self.sides
        n_near = int(round(cfg.near_share * cfg.space_batch))
        while True:
            idx = torch.randint(0, n, (cfg.surface_batch,), generator=gen)
            uniform = torch.rand(cfg.space_batch - n_near, 3, generator=gen) * 2 - 1
            near_idx = torch.randint(0, n, (n_near,), generator=gen)
            near = self.points[near_idx] + cfg.near_std * torch.randn(n_near, 3, generator=gen)
            space = torch.cat([uniform, near])
            if sides is not None:
                yield self.points[idx], self.normals[idx], space, lookup_side(sides, space)
            else:
                yield self.points[idx], self.normals[idx], space


class SdfData(L.LightningDataModule):
    def __init__(self, points: torch.Tensor, normals: torch.Tensor, cfg: SdfTrainConfig, seed: int = 0) -> None:
        super().__init__()
        self.points, self.normals, self.cfg, self.seed = points, normals, cfg, seed
        self.sides = None  # the sign term's side lattice: computed once, on first use

    def _batches(self, rank: int = 0) -> _Batches:
        if self.cfg.w_sign > 0 and self.sides is None:
            self.sides = side_lattice(self.points.numpy().astype(np.float64), self.normals.numpy().astype(np.float64),
                                      self.cfg.sign_margin, votes=self.cfg.sign_votes)
        return _Batches(self.points, self.normals, self.cfg, self.seed + 1000 * rank, self.sides)

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if getattr(self, "trainer", None) is not None else 0  # DDP: other samples per process
        return DataLoader(self._batches(rank), batch_size=None, num_workers=0)


class SdfFitModule(L.LightningModule):
    """f(x) = field(x) [+ |x| - sphere_prior], fitted with SIREN's SDF loss.

    Args:
        field: a FieldConfig as a dict (3 inputs, 1 output).
        train: an SdfTrainConfig as a dict.
        placement: {'centre': [x, y, z], 'scale': s}: field coordinates are (x - centre) * s
            (an `inr.sdf.Frame`; not named 'frame', which Lightning's save_hyperparameters skips).
    """

    def __init__(self, field: Dict[str, Any], train: Dict[str, Any], placement: Dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.train_cfg = SdfTrainConfig.from_dict(dict(train))
        self.field = Field(3, 1, FieldConfig.from_dict(dict(field)))
        self.frame = dict(placement)
        c = self.train_cfg
        self.weights = LossWeights(c.w_sdf, c.w_normal, c.w_eikonal, c.w_off_surface, c.off_surface_alpha, c.w_sign)

    def sdf(self, x: torch.Tensor) -> torch.Tensor:
        """(N,) signed distances (field units) at (N, 3) field coordinates."""
        f = self.field(x).reshape(-1).float()
        if self.train_cfg.sphere_prior > 0:
            f = f + x.norm(dim=-1) - self.train_cfg.sphere_prior
        return f

    def grad_step(self) -> float:
        """The numerical-gradient step now: geometric from grad_step[0] to grad_step[1] over the run."""
        start, end = self.train_cfg.grad_step
        horizon = getattr(self, "decay_horizon", None)
        done = horizon.progress(self.global_step) if horizon is not None else min(self.global_step / self.train_cfg.steps, 1.0)
        return float(math.exp(math.log(start) + done * (math.log(end) - math.log(start))))

    def values_and_gradients(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.train_cfg.gradient == "numerical":
            return numerical_gradient(self.sdf, x, self.grad_step())
        return analytic_gradient(self.sdf, x)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        surface, normals, space = batch[:3]
        n = surface.shape[0]
        f, g = self.values_and_gradients(torch.cat([surface, space]))
        n_uniform = space.shape[0] - int(round(self.train_cfg.near_share * self.train_cfg.space_batch))
        terms = sdf_loss_terms(f[:n], g[:n], normals, f[n:], g[n:], n_uniform, self.weights,
                               space_sign=batch[3] if len(batch) > 3 else None)
        loss = torch.stack(list(terms.values())).sum()
        check_loss(loss, self.global_step)
        if self.global_step % self.train_cfg.eval_every == 0:
            self.log("loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
            for name, value in terms.items():
                self.log(f"loss_{name}", value.detach(), on_step=True, on_epoch=False, batch_size=n)
        return loss

    def configure_optimizers(self):
        return adam_with_decay(self.field.parameters(), self.train_cfg, getattr(self, "decay_horizon", None))

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        retarget_learning_rate(checkpoint, float(self.train_cfg.lr))

    @torch.no_grad()
    def sdf_eval(self, x: torch.Tensor, chunk: int = 1 << 16) -> torch.Tensor:
        """sdf(x) in chunks, without gradients, in eval mode, on the module's device."""
        was = self.training
        self.eval()
        try:
            return torch.cat([self.sdf(c.to(self.device)) for c in torch.split(x, chunk)]) if len(x) else x.new_zeros(0)
        finally:
            self.train(was)

    def to_field(self, x: torch.Tensor) -> torch.Tensor:
        centre = torch.tensor(self.frame["centre"], dtype=x.dtype, device=x.device)
        return (x - centre) * self.frame["scale"]

    def to_world(self, x: torch.Tensor) -> torch.Tensor:
        centre = torch.tensor(self.frame["centre"], dtype=x.dtype, device=x.device)
        return x / self.frame["scale"] + centre

