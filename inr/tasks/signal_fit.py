"""Fitting one sampled signal (image or audio) with a field: data module and Lightning module."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..data.signal import HOLDOUTS, split_holdout  # noqa: F401  (HOLDOUTS: re-exported)
from ..fields import Field, FieldConfig, evaluate
from ..presets import TrainConfig
from .optim import adam_with_decay, check_loss, retarget_learning_rate

class _Batches(IterableDataset):
    """Endless (coords, targets) batches: the whole set, or `batch_size` random samples."""

    def __init__(self, coords: torch.Tensor, targets: torch.Tensor, batch_size: Optional[int], seed: int) -> None:
        self.coords, self.targets, self.batch_size, self.seed = coords, targets, batch_size, seed

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        n = self.coords.shape[0]
        if self.batch_size is None or self.batch_size >= n:
            while True:
                yield self.coords, self.targets
        gen = torch.Generator().manual_seed(self.seed)
        while True:
            idx = torch.randint(0, n, (self.batch_size,), generator=gen)
            yield self.coords[idx], self.targets[idx]


class SignalData(L.LightningDataModule):
    """Train/test split of a regular-grid signal; targets mapped to the training value range."""

    def __init__(self, values: torch.Tensor, holdout: str, batch_size: Optional[int], native_range, value_range, seed: int = 0) -> None:
        super().__init__()
        self.values, self.holdout, self.batch_size, self.seed = values, holdout, batch_size, seed
        self.native_range, self.value_range = tuple(native_range), tuple(value_range)

    def setup(self, stage: Optional[str] = None) -> None:
        self.train_coords, train_v, self.test_coords, self.test_values = split_holdout(self.values, self.holdout)
        self.train_targets = to_range(train_v, self.native_range, self.value_range)

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if self.trainer is not None else 0  # DDP: other samples on every process
        return DataLoader(_Batches(self.train_coords, self.train_targets, self.batch_size, self.seed + 1000 * rank),
                          batch_size=None, num_workers=0)


def to_range(v: torch.Tensor, src, dst) -> torch.Tensor:
    """Affine map of values from range src = (lo, hi) to dst."""
    if tuple(src) == tuple(dst):
        return v
    return (v - src[0]) / (src[1] - src[0]) * (dst[1] - dst[0]) + dst[0]


class SignalFitModule(L.LightningModule):
    """MSE fit of a field to (coords, targets) batches.

    Args:
        in_dim, out_dim: coordinate and value dimensions of the signal.
        field: a FieldConfig as a dict.
        train: a TrainConfig as a dict.
    """

    def __init__(self, in_dim: int, out_dim: int, field: Dict[str, Any], train: Dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.train_cfg = TrainConfig.from_dict(dict(train))
        self.field = Field(in_dim, out_dim, FieldConfig.from_dict(dict(field)))
        self._fast: Dict[str, Any] = {}  # the compiled field, kept out of the state dict

    def configure_model(self) -> None:
        if self.train_cfg.compile and "field" not in self._fast:
            # Dynamo caches compiled code per code object (Field.forward), shared by every field
            # of the process; after 8 differently shaped fields (compare, benchmarks, tests) it
            # would silently fall back to eager. Each fit starts from a clean cache instead
            # (the on-disk inductor cache keeps recompiles cheap).
            torch.compiler.reset()
            self._fast["field"] = torch.compile(self._train_forward)

    def _train_forward(self, coords: torch.Tensor) -> List[torch.Tensor]:
        """The outputs the loss sees: every level's when supervise_levels, else the field's."""
        if self.train_cfg.supervise_levels:
            return self.field.all_levels(coords)
        return [self.field(coords)]

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        coords, targets = batch
        preds = self._fast.get("field", self._train_forward)(coords)
        loss = torch.stack([torch.nn.functional.mse_loss(p.float(), targets) for p in preds]).mean()
        check_loss(loss, self.global_step)
        if self.global_step % self.train_cfg.eval_every == 0:
            self.log("loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False, batch_size=coords.shape[0])
        return loss

    def configure_optimizers(self):
        return adam_with_decay(self.field.parameters(), self.train_cfg, getattr(self, "decay_horizon", None))

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        retarget_learning_rate(checkpoint, float(self.train_cfg.lr))  # a resumed run may change train.lr

    @torch.no_grad()
    def predict_values(self, coords: torch.Tensor, value_range, native_range, level: Optional[int] = None) -> torch.Tensor:
        """Field values at coords, mapped back to the signal's native range and clamped to it."""
        out = evaluate(self.field, coords, level=level)
        out = to_range(out, value_range, native_range)
        return out.clamp(min(native_range), max(native_range))
