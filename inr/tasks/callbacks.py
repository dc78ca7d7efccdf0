"""Callbacks: a training clock with a PSNR curve and time budget, safe checkpoints, a step bar."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar


class RunMonitor(L.Callback):
    """Counts training seconds (evaluation excluded, compile and framework time included), records
    (step, seconds, test PSNR) every `every` steps, and stops at `time_budget` seconds.

    Its state (seconds so far and the curve) is saved in checkpoints, so a resumed run continues
    its clock, its budget and its curve.
    """

    def __init__(self, evaluate: Callable[[L.LightningModule], float], every: int, time_budget: Optional[float],
                 on_record: Optional[Callable[[int, float, float], None]] = None) -> None:
        self.evaluate, self.every, self.time_budget, self.on_record = evaluate, int(every), time_budget, on_record
        self.history: List[List[float]] = []
        self.before = 0.0
        self._t0 = time.perf_counter()
        self._paused = 0.0
        self.run_seconds = 0.0
        """Training seconds at the end of the last step, the same on every DDP process (the
        learning-rate decay of a time-budget run reads it)."""

    def seconds(self) -> float:
        return self.before + (time.perf_counter() - self._t0 - self._paused)

    def _record(self, trainer: "L.Trainer", module: L.LightningModule) -> None:
        start = time.perf_counter()
        seconds = self.seconds()
        value = self.evaluate(module)
        self.history.append([int(trainer.global_step), round(seconds, 4), float(value)])
        if self.on_record is not None and trainer.is_global_zero:
            self.on_record(*self.history[-1])
        self._paused += time.perf_counter() - start

    def on_train_start(self, trainer: "L.Trainer", module: L.LightningModule) -> None:
        self._t0, self._paused = time.perf_counter(), 0.0
        if not self.history:
            self._record(trainer, module)

    def on_train_batch_end(self, trainer: "L.Trainer", module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = trainer.global_step
        seconds = self.seconds()
        if self.time_budget is not None and trainer.world_size > 1:
            # every process takes the slowest clock: the same learning rate, and the same last step
            seconds = float(trainer.strategy.reduce(torch.tensor(seconds, device=module.device), reduce_op="max"))
        self.run_seconds = seconds
        over_budget = self.time_budget is not None and seconds >= self.time_budget
        if over_budget:
            trainer.should_stop = True
        if step % self.every == 0 or step >= trainer.max_steps or over_budget:
            self._record(trainer, module)

    def on_train_end(self, trainer: "L.Trainer", module: L.LightningModule) -> None:
        if not self.history or self.history[-1][0] != trainer.global_step:
            self._record(trainer, module)

    def state_dict(self) -> Dict[str, Any]:
        return {"seconds": self.seconds(), "history": [list(h) for h in self.history]}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.before = self.run_seconds = float(state["seconds"])
        self.history = [list(h) for h in state["history"]]


class SafeCheckpoint(ModelCheckpoint):
    """Writes `last.ckpt` every n steps, atomically (a kill mid-write leaves the previous one
    whole), and never a checkpoint whose parameters are not all finite: when training diverges,
    the last checkpoint on disk is the last good state."""

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        tmp = f"{filepath}.tmp"
        super()._save_checkpoint(trainer, tmp)
        if trainer.is_global_zero:
            os.replace(tmp, filepath)
        self._last_checkpoint_saved = filepath

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % max(self._every_n_train_steps, 1) == 0:
            if not all(bool(torch.isfinite(p).all()) for p in pl_module.parameters()):
                return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


class StepBar(TQDMProgressBar):
    """Lightning's tqdm bar counting optimizer steps towards max_steps (so it shows an ETA),
    instead of batches of an endless epoch. With a time budget (`clock` = the run's RunMonitor
    with time_budget set) it counts training seconds towards the budget instead, with the step
    in its postfix: the budget is when the run ends, so its ETA is the run's."""

    TIME_FORMAT = "{desc}{percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]"

    def __init__(self, refresh_rate: int = 1, clock: Optional[RunMonitor] = None) -> None:
        super().__init__(refresh_rate=refresh_rate)
        self.clock = clock if clock is not None and clock.time_budget else None

    @property
    def total_train_batches(self):
        total = self.trainer.max_steps
        if self.clock is not None:
            return self.clock.time_budget
        return total if 0 < total < 10**9 else None

    def init_train_tqdm(self):
        bar = super().init_train_tqdm()
        if self.clock is not None:
            bar.total, bar.bar_format = self.clock.time_budget, self.TIME_FORMAT
        return bar

    def on_train_epoch_start(self, trainer, *_: Any) -> None:
        super().on_train_epoch_start(trainer)
        bar = self.train_progress_bar
        bar.set_description("fit")
        if self.clock is not None:
            bar.initial = min(self.clock.seconds(), self.clock.time_budget)
        else:
            bar.initial = trainer.global_step  # a resumed run starts where it left

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.clock is None:
            return super().on_train_batch_end(trainer, pl_module, outputs, batch, trainer.global_step - 1)
        bar = self.train_progress_bar
        if bar is None or bar.disable or trainer.global_step % self.refresh_rate:
            return
        bar.n = min(self.clock.seconds(), self.clock.time_budget)
        bar.set_postfix({"step": trainer.global_step, **self.get_metrics(trainer, pl_module)}, refresh=False)
        bar.refresh()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self.clock is None:
            return super().on_train_epoch_end(trainer, pl_module)
        bar = self.train_progress_bar
        if not bar.disable:
            bar.n = min(self.clock.seconds(), self.clock.time_budget)
            bar.set_postfix({"step": trainer.global_step, **self.get_metrics(trainer, pl_module)})
        if self._leave:
            bar.close()
