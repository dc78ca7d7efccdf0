"""The optimizer of every task (one OptimConfig, see presets.py), the NaN guard, and the
learning-rate change of a resumed run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import torch


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def check_loss(loss: torch.Tensor, step: int) -> None:
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the loss became {loss.item()} at step {step}")


@dataclass
class DecayHorizon:
    """Where the learning-rate decay ends: at the run's end. `steps` (None: no step limit) and/or
    `seconds` of training read from `clock` (None: no time budget); with both, whichever comes
    first."""

    steps: Optional[int] = None
    seconds: Optional[float] = None
    clock: Optional[Callable[[], float]] = None

    def progress(self, step: int) -> float:
        """The fraction of the run done, in [0, 1]."""
        done = 0.0
        if self.steps:
            done = step / self.steps
        if self.seconds and self.clock is not None:
            done = max(done, self.clock() / self.seconds)
        return min(done, 1.0)


def adam_with_decay(params, cfg, horizon: Optional[DecayHorizon] = None) -> Dict[str, Any]:
    """Adam (the fused kernel: on CPU 6 ms instead of 32 ms per step for a 12M-parameter hash
    table) with an exponential decay from cfg.lr to cfg.lr * cfg.lr_final_factor over the run
    (`horizon`: its steps and/or its time budget; default cfg.steps steps), for Lightning's
    configure_optimizers."""
    opt = torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=True)
    horizon = horizon or DecayHorizon(steps=cfg.steps)
    log_final = math.log(cfg.lr_final_factor)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: math.exp(log_final * horizon.progress(step)))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def retarget_learning_rate(checkpoint: Dict[str, Any], lr: float) -> None:
    """A checkpoint restores the optimizer's learning rate; a resumed run given another
    `train.lr` continues its decay schedule from the new base rate instead."""
    for state in checkpoint.get("optimizer_states", []):
        for group in state.get("param_groups", []):
            if "initial_lr" in group and group["initial_lr"] > 0:
                group["lr"] = group["lr"] * lr / group["initial_lr"]
            group["initial_lr"] = lr
    for sched in checkpoint.get("lr_schedulers", []):
        if "base_lrs" in sched:
            old = sched["base_lrs"]
            sched["base_lrs"] = [lr for _ in old]
            if "_last_lr" in sched and old and old[0] > 0:
                sched["_last_lr"] = [v * lr / old[0] for v in sched["_last_lr"]]
